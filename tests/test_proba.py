"""Tests of the open-world predict_proba array (``sklearn_flowr.head.OpenWorldProba``)
and ``sklearn_flowr.validation.novel_rows``."""

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklearn_flowr import CRPGaussianClassifier
from sklearn_flowr.head import OpenWorldProba
from sklearn_flowr.validation import novel_rows


@pytest.fixture
def head_and_rows(blobs):
    """The head fitted on classes 0-2 of the blobs, and all the rows."""
    X, y = blobs
    return CRPGaussianClassifier().fit(X[y < 3], y[y < 3]), X


@pytest.fixture
def proba():
    """A small open-world output: classes "a", "b", then novel."""
    return OpenWorldProba(
        [[0.7, 0.2, 0.1], [0.1, 0.1, 0.8], [0.3, 0.3, 0.4]], ["a", "b"]
    )


@pytest.mark.parametrize("method, is_log", [("predict_proba", False),
                                            ("predict_log_proba", True)])
def test_head_returns_open_world_proba(head_and_rows, method, is_log):
    """Check that the head's probabilities carry its classes and their kind."""
    head, X = head_and_rows
    out = getattr(head, method)(X)
    assert isinstance(out, OpenWorldProba)
    assert_array_equal(out.known_classes, head.classes_)
    assert out.is_log_proba is is_log


def test_pipeline_passes_open_world_proba_through(blobs):
    """Check that a Pipeline ending in the head returns the carrying array."""
    X, y = blobs
    pipe = make_pipeline(StandardScaler(), CRPGaussianClassifier()).fit(X, y)
    assert_array_equal(pipe.predict_proba(X).known_classes, [0, 1, 2, 3])


def test_known_classes_are_those_at_prediction_time(head_and_rows, blobs):
    """Check that a later partial_fit does not change an earlier output's classes."""
    head, X = head_and_rows
    _, y = blobs
    before = head.predict_proba(X)
    head.partial_fit(X[y == 3], y[y == 3])
    assert_array_equal(before.known_classes, [0, 1, 2])
    assert_array_equal(head.predict_proba(X).known_classes, [0, 1, 2, 3])


def test_asarray_gives_the_plain_values(head_and_rows):
    """Check that np.asarray gives an ndarray with the same values."""
    head, X = head_and_rows
    out = head.predict_proba(X)
    plain = np.asarray(out)
    assert type(plain) is np.ndarray
    assert_array_equal(plain, out)


@pytest.mark.parametrize(
    "select",
    [lambda p: p[1:], lambda p: p[[0, 2]], lambda p: p[np.array([1, 0, 1], bool)],
     lambda p: p[:, :], lambda p: p.copy(), lambda p: p.view()],
    ids=["slice", "fancy", "mask", "full", "copy", "view"],
)
def test_rows_and_copies_keep_known_classes(proba, select):
    """Check that row selections, copies and views keep the classes."""
    assert_array_equal(select(proba).known_classes, ["a", "b"])


@pytest.mark.parametrize(
    "select",
    [lambda p: p[:, -1], lambda p: p[:, :2], lambda p: p[:, ::-1], lambda p: p[0],
     lambda p: p.T, lambda p: p.reshape(-1), lambda p: np.sort(p, axis=1),
     lambda p: np.exp(p), lambda p: 1 - p, lambda p: p.round(2)],
    ids=["novel-column", "known-columns", "reversed-columns", "one-row",
         "transpose", "reshape", "sort", "ufunc", "arithmetic", "round"],
)
def test_other_results_drop_known_classes(proba, select):
    """Check that columns, reshapes, ufuncs and functions lose the classes."""
    assert getattr(select(proba), "known_classes", None) is None


def test_novel_column_is_a_plain_array(proba):
    """Check that a P(novel) column slice is an ordinary 1-D ndarray."""
    column = proba[:, -1]
    assert type(column) is np.ndarray
    assert_array_equal(column, [0.1, 0.8, 0.4])


def test_exp_of_log_proba_is_not_a_log_proba():
    """Check that np.exp of a log-probability output is no longer flagged log."""
    log_proba = OpenWorldProba(np.log([[0.5, 0.5]]), [0], is_log_proba=True)
    assert log_proba.is_log_proba
    assert type(np.exp(log_proba)) is np.ndarray


def test_known_classes_are_read_only(proba):
    """Check that the carried classes cannot be changed in place."""
    with pytest.raises(ValueError, match="read-only"):
        proba.known_classes[0] = "z"


def test_open_world_proba_rejects_wrong_layout():
    """Check that the column count must be the number of classes plus one."""
    with pytest.raises(ValueError, match=r"\(n_samples, n_classes \+ 1\)"):
        OpenWorldProba(np.ones((2, 2)), [0, 1])


def test_novel_rows_marks_unknown_labels():
    """Check that a row is novel exactly when its label is not a known class."""
    assert_array_equal(novel_rows(["b", "z", "a", "y"], ["a", "b"]),
                       [False, True, False, True])


@pytest.mark.parametrize("y_true, match", [
    ([0, 1, 1], "every row has a known label.*OpenWorldSplit"),
    ([5, 6], "every row has a novel label"),
])
def test_novel_rows_refuses_one_sided_fold(y_true, match):
    """Check that a fold without novel (or known) rows is refused clearly."""
    with pytest.raises(ValueError, match=match):
        novel_rows(y_true, [0, 1])


def test_novel_rows_can_allow_one_sided_fold():
    """Check that require_both=False returns the mask for a closed-world fold."""
    assert_array_equal(novel_rows([0, 1], [0, 1], require_both=False),
                       [False, False])
