"""Input checks and numpydoc text the metrics share."""

import numpy as np
from sklearn.utils import check_array, column_or_1d

from .._core import FLOWR_REFERENCE
from .._core import fill_doc as _fill_doc


def check_binary(y_true):
    """``y_true`` as booleans: it may be boolean, or take values in {0, 1}."""
    y_true = column_or_1d(y_true)
    if y_true.shape[0] == 0:
        raise ValueError("y_true is empty.")
    if y_true.dtype == bool:
        return y_true
    labels = np.unique(y_true)
    if not np.all(np.isin(labels, [0, 1])):
        raise ValueError(
            f"y_true must be boolean or in {{0, 1}}; got labels {labels.tolist()}."
        )
    return y_true == 1


def check_scores(score, name):
    """A one-dimensional array of finite floats (any novelty score)."""
    score = check_array(score, ensure_2d=False, dtype=np.float64, input_name=name)
    if score.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional; got shape {score.shape}.")
    return score


def check_boolean(values, name):
    values = np.asarray(values)
    if values.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional; got shape {values.shape}.")
    if values.dtype != bool:
        raise ValueError(f"{name} must be a boolean array; got dtype {values.dtype}.")
    return values


def same_labels(a, b):
    """Elementwise label equality, as objects when the dtypes differ (an int
    novel label next to string classes)."""
    if a.dtype != b.dtype:
        return np.asarray(a.astype(object) == b.astype(object), dtype=bool)
    return a == b


def check_proba(y_proba, dtype=np.float64):
    """``(values, known_classes, is_log_proba)`` of a ``predict_proba`` (or
    ``predict_log_proba``) output: no NaN, no infinity but log(0)."""
    is_log_proba = bool(getattr(y_proba, "is_log_proba", False))
    values = check_array(np.asarray(y_proba), dtype=dtype,
                         ensure_all_finite=not is_log_proba, input_name="y_proba")
    if np.isnan(values).any():
        raise ValueError("y_proba contains NaN.")
    return values, getattr(y_proba, "known_classes", None), is_log_proba


# Numpydoc text the metrics share, filled into ``%(name)s`` fields.
_DOCS = {
    "is_novel": """is_novel : array-like of bool of shape (n_samples,)
        Whether each row is novel (its class unseen when it was predicted).""",
    "pvalues": """pvalues : array-like of shape (n_samples,)
        Novelty p-values in [0, 1]; small means novel.
    alpha : float in [0, 1]
        The level: declared novel iff ``pvalues <= alpha``.""",
    "selected": """selected : array-like of bool of shape (n_samples,)
        Whether each row was declared novel (a boolean mask, not indices).""",
    "score": """Any finite score, higher meaning more likely novel.""",
    "binary": """y_true : array-like of shape (n_samples,)
        Outcomes: booleans, or 0 and 1 (1 = positive).
    y_prob : array-like of shape (n_samples,)
        Predicted probability of the positive class, in [0, 1].""",
    "binning": """n_bins : int >= 1, default=15
        Number of bins.
    strategy : {"uniform", "quantile"}, default="uniform"
        Equal-width bins of [0, 1], or equal-mass bins (the adaptive ECE).""",
    "flowr": f".. [1] {FLOWR_REFERENCE}, section 6.",
    "scorer": """estimator : fitted classifier
        Has ``classes_`` and a ``predict_proba`` whose last column is novel.
    X : array-like of shape (n_samples, n_features)
        Test rows.
    y : array-like of shape (n_samples,)
        Their true labels; some must be in ``classes_`` and some not.""",
}


fill_doc = _fill_doc(_DOCS)
