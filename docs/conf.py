"""Sphinx configuration: numpydoc, autosummary and sphinx-gallery over examples/."""

import sklearn_flowr

project = "sklearn_flowr"
release = version = sklearn_flowr.__version__
extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.intersphinx",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]
autosummary_generate = True
numpydoc_show_class_members = False
exclude_patterns = ["_build", "auto_examples/*.ipynb"]
html_theme = "pydata_sphinx_theme"
intersphinx_mapping = {
    "python": ("https://docs.python.org/3", None),
    "numpy": ("https://numpy.org/doc/stable", None),
    "sklearn": ("https://scikit-learn.org/stable", None),
}
sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
}
