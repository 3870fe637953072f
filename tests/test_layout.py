"""Check that the package keeps the layout it is held to (tools/layout_figures.py)."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def figures():
    spec = importlib.util.spec_from_file_location(
        "layout_figures", ROOT / "tools" / "layout_figures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.measure(ROOT)


def test_root_holds_few_modules(figures):
    """Check that at most 8 modules sit at the package root."""
    assert len(figures["root_modules"]) <= 8, figures["root_modules"]


def test_no_module_is_long(figures):
    """Check that no module passes 500 lines."""
    assert figures["long_modules"] == []


def test_no_private_imports_across_subpackages(figures):
    """Check that no module imports a private module of another subpackage."""
    assert figures["private_imports"] == [], figures["private_imports"]


def test_no_module_writes_another_objects_private_attributes(figures):
    """Check that no module assigns to another object's underscore attributes."""
    assert figures["foreign_writes"] == []


def test_sigma_is_documented_once(figures):
    """Check that one numpydoc entry documents ``sigma`` (the head's)."""
    assert len(figures["sigma_docs"]) <= 2, figures["sigma_docs"]


def test_no_config_class_redeclares_parameters(figures):
    """Check that no ``*Config`` class re-declares the stages' parameters."""
    assert figures["config_classes"] == []
