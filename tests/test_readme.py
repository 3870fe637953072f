"""Tests that every Python code block of README.md runs as written.

Each block defines its own data (the digits the package and scikit-learn
ship) and runs in a fresh namespace, with the estimators' defaults
(``verbose``, ``device="auto"``), so the README cannot rot. The README's grid
search is also checked to search axes that each move its score.
"""

import itertools
import re
from pathlib import Path

import numpy as np
import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)
_RUN = {}


def _blocks():
    return BLOCK.findall(README.read_text(encoding="utf-8"))


def _run(index):
    """Run README block ``index`` once in a fresh namespace; return the namespace."""
    if index not in _RUN:
        namespace = {"__name__": f"readme_block_{index}"}
        exec(compile(_blocks()[index], f"README.md[python block {index}]", "exec"),
             namespace)
        _RUN[index] = namespace
    return _RUN[index]


def test_readme_has_python_blocks():
    """Check that the README still shows Python usage to test."""
    assert len(_blocks()) >= 2


@pytest.mark.parametrize("index", range(len(_blocks())))
def test_readme_block_runs(index):
    """Check that README Python block ``index`` runs as written, on its own data."""
    _run(index)


def test_readme_grid_axes_each_change_the_score():
    """Check that every axis of the README's grid moves the cross-validated
    score: for each axis, with the other axes fixed at any of their values,
    its values do not all give the same mean test score."""
    index = next(i for i, block in enumerate(_blocks()) if "GridSearchCV(" in block)
    search = _run(index)["search"]
    results = search.cv_results_
    grid = search.param_grid
    assert len(grid) >= 2
    for axis, values in grid.items():
        others = [name for name in grid if name != axis]
        for fixed in itertools.product(*(grid[name] for name in others)):
            scores = [
                results["mean_test_score"][i]
                for i, params in enumerate(results["params"])
                if all(params[name] == value
                       for name, value in zip(others, fixed, strict=True))
            ]
            assert len(scores) == len(values)
            assert np.ptp(scores) > 1e-9, (
                f"{axis} leaves the score at {scores} with "
                f"{dict(zip(others, fixed, strict=True))}")
