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


# Development-log language a user cannot act on: issue numbers, commit hashes
# (7+ hex digits with a letter and a digit, so plain numbers and words pass),
# and session or release framing.
DEV_LOG = re.compile(
    r"\bissues?\s+#?\d+|(?<![\w&])#\d+\b"
    r"|\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b"
    r"|previous stop|this session|this release|flat[- ]API|have not been re-run"
    r"|measured before issue|re-measured at",
    re.IGNORECASE)


def _user_docs():
    root = DOCS.parent
    skip = {"_build", "auto_examples", "generated"}
    paths = [root / "README.md", *DOCS.rglob("*.rst"), *DOCS.glob("*.py"),
             *(root / "examples").rglob("*.py"), *(root / "examples").rglob("*.rst")]
    return sorted(p for p in paths if not skip & set(p.relative_to(root).parts))


def test_docs_have_no_development_log_language():
    """Check that the README, the docs and the gallery speak of the package as
    it is: no issue numbers, commit hashes, "previous stop" or "this session"."""
    root = DOCS.parent
    found = [f"{path.relative_to(root)}:{number}: {match.group(0)!r}"
             for path in _user_docs()
             for number, line in enumerate(path.read_text(encoding="utf-8")
                                           .splitlines(), 1)
             for match in DEV_LOG.finditer(line)]
    assert not found, "development-log language:\n" + "\n".join(found)


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
