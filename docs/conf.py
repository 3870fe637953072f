"""Sphinx configuration: numpydoc, autosummary and sphinx-gallery over examples/.

Builds offline (no intersphinx inventories are fetched) and warning-free;
``tests/test_docs.py`` builds it with ``-W``.
"""

import sklearn_flowr

project = "sklearn_flowr"
author = "sklearn_flowr developers"
release = version = sklearn_flowr.__version__
extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]
autosummary_generate = True
templates_path = ["_templates"]
autodoc_default_options = {"inherited-members": False}
numpydoc_show_class_members = False
numpydoc_xref_param_type = False
exclude_patterns = ["_build", "auto_examples/*.ipynb", "auto_examples/*.py",
                    "auto_examples/*.zip"]
html_theme = "pydata_sphinx_theme"
html_static_path = []
html_theme_options = {"navigation_with_keys": False}
sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "download_all_examples": False,
    "remove_config_comments": True,
    # Every example must finish well within CI's budget.
    "abort_on_example_error": True,
    # Backreferences feed the "Examples using ..." lists of the API pages.
    "doc_module": ("sklearn_flowr",),
    "backreferences_dir": "generated/backreferences",
    "reference_url": {"sklearn_flowr": None},
}


def _skip_metadata_request_setters(app, what, name, obj, skip, options):
    # scikit-learn generates set_<method>_request on every estimator; their
    # docstrings point into scikit-learn's own docs.
    if name.startswith("set_") and name.endswith("_request"):
        return True
    return None


def setup(app):
    app.connect("autodoc-skip-member", _skip_metadata_request_setters)
