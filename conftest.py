"""Doctest collection for the package's modules (``pytest`` collects them with
``--doctest-modules``; this file is not part of the installed package)."""

import importlib.metadata

import pytest

# Modules whose examples need an optional extra, by the distribution they need.
_EXTRAS = {"sklearn_flowr/datasets/_kanji.py": "kanjivg"}


def _installed(distribution):
    try:
        importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def pytest_collection_modifyitems(config, items):
    """Skip a module's doctests where the extra its examples read is missing."""
    for item in items:
        if not isinstance(item, pytest.DoctestItem):
            continue
        path = item.path.as_posix()
        for module, distribution in _EXTRAS.items():
            if path.endswith(module) and not _installed(distribution):
                item.add_marker(pytest.mark.skip(
                    reason=f"the example needs the optional {distribution!r} package"))
