"""Tests of the documentation: API coverage and a warning-free Sphinx build."""

import importlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
PUBLIC_MODULES = ["sklearn_flowr", "sklearn_flowr.metrics",
                  "sklearn_flowr.model_selection", "sklearn_flowr.encoders",
                  "sklearn_flowr.training", "sklearn_flowr.protocol",
                  "sklearn_flowr.baselines", "sklearn_flowr.datasets",
                  "sklearn_flowr.cli"]


def test_api_reference_lists_every_public_name():
    """Check that every public callable of every public module is in api.rst."""
    listed = set(re.findall(r"^   (\w+)$", (DOCS / "api.rst").read_text(), re.M))
    missing = [f"{name}.{attr}" for name in PUBLIC_MODULES
               for attr in importlib.import_module(name).__all__
               if callable(getattr(importlib.import_module(name), attr))
               and attr not in listed]
    assert not missing, f"not in docs/api.rst: {missing}"


# Minutes of Sphinx and gallery: run as its own CI step (.ci/run),
# `pytest -m docs tests/test_docs.py`, not in the default `pytest`.
@pytest.mark.docs
@pytest.mark.slow
def test_docs_build_without_warnings(tmp_path):
    """Check that Sphinx builds the user guide, the API reference and the
    executed examples gallery with warnings turned into errors."""
    for module in ("sphinx", "numpydoc", "sphinx_gallery", "pydata_sphinx_theme"):
        pytest.importorskip(module)
    source = tmp_path / "docs"
    # Build from a copy: the gallery writes auto_examples/ and generated/ next
    # to the sources, and the examples live one level up.
    shutil.copytree(DOCS, source, ignore=shutil.ignore_patterns(
        "_build", "auto_examples", "generated"))
    shutil.copytree(DOCS.parent / "examples", tmp_path / "examples")
    result = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
         str(source), str(tmp_path / "html")],
        capture_output=True, text=True, env={**os.environ, "MPLBACKEND": "agg"},
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-8000:]
    html = tmp_path / "html"
    assert (html / "user_guide.html").exists()
    assert (html / "generated" / "sklearn_flowr.FLOWRClassifier.html").exists()
    gallery = html / "auto_examples"
    examples = sorted(p.stem for p in (DOCS.parent / "examples").glob("plot_*.py"))
    assert all((gallery / f"{name}.html").exists() for name in examples)
    assert list((html / "_images").glob("sphx_glr_plot_*_001.png"))
