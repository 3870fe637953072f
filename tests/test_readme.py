"""Tests that every Python code block of README.md runs, on small data.

The README's snippets name their data (``X_known``, ``images``, ...) without
defining it; the test binds those names to small slices of scikit-learn's
digits and runs each block as written, with the estimators' defaults
(``verbose``, ``device="auto"``), so the README cannot rot.
"""

import re
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_digits

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


def _blocks():
    return BLOCK.findall(README.read_text(encoding="utf-8"))


def _data():
    """The README's data names, bound to small digits slices."""
    X, y = load_digits(return_X_y=True)
    images = (X.reshape(-1, 8, 8) / 16.0).astype(np.float32)
    rng = np.random.default_rng(0)

    def rows(classes, per_class):
        return np.concatenate([rng.permutation(np.flatnonzero(y == c))[:per_class]
                               for c in classes])

    known, new, stream = rows(range(6), 30), rows([6, 7], 3), rows(range(10), 4)
    stream = rng.permutation(stream)
    support, query = rows([8, 9], 3), rows([8, 9, 0], 4)
    return {
        # The head on feature vectors.
        "X_known": X[known], "y_known": y[known], "X": X[stream],
        "X_new": X[new], "y_new": y[new],
        "X_stream": X[stream], "y_stream": y[stream],
        # FLOWRClassifier on images.
        "images": images[known], "labels": y[known],
        "new_images": images[stream], "new_labels": y[stream],
        "train_images": images[known], "train_labels": y[known],
        "support_images": images[support], "support_labels": y[support],
        "query_images": images[query],
    }


def test_readme_has_python_blocks():
    """Check that the README still shows Python usage to test."""
    assert len(_blocks()) >= 2


@pytest.mark.parametrize("index", range(len(_blocks())))
def test_readme_block_runs(index):
    """Check that README Python block ``index`` runs as written on small data."""
    namespace = _data()
    exec(compile(_blocks()[index], f"README.md[python block {index}]", "exec"),
         namespace)
