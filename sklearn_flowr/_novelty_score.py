"""The novelty score of an open-world estimator, read through public methods.

A probabilistic estimator (the head, ``FLOWRClassifier``: ``predict_log_proba``
with the novel class last) scores a row by the log-odds of novel against known;
a baseline by its ``novelty_score``. Higher means more novel. The calibration
and conformal wrappers both read scores here.
"""

import copy

import numpy as np
from sklearn.utils import column_or_1d
from sklearn.utils.validation import _num_samples

from ._core._novelty_odds import novel_log_odds
from ._head import CRPGaussianClassifier
from ._labels import label_result_dtype

__all__ = ["WrapperMixin", "best_known", "check_rows", "check_scoring",
           "has_log_proba", "novelty_scores"]

# Log-odds are clipped here: a row without any known class has P(novel) = 1
# (infinite odds), and fits and ranks need finite values.
LOG_ODDS_CLIP = 30.0


def has_log_proba(estimator):
    """Whether ``estimator`` gives open-world log-probabilities."""
    return callable(getattr(estimator, "predict_log_proba", None))


def check_scoring(estimator, wrapper):
    """Fail unless ``estimator`` exposes a novelty score ``wrapper`` can read."""
    if not (has_log_proba(estimator) or (
            callable(getattr(estimator, "novelty_score", None))
            and callable(getattr(estimator, "predict_known", None)))):
        raise TypeError(
            f"{type(estimator).__name__} has neither predict_log_proba nor "
            f"novelty_score and predict_known: {wrapper} needs a novelty score.")


def novelty_scores(estimator, X):
    """Novelty score of each row (higher = more novel), clipped to +-30 for
    log-odds."""
    if has_log_proba(estimator):
        log_proba = np.asarray(estimator.predict_log_proba(X), dtype=np.float64)
        return np.clip(novel_log_odds(log_proba), -LOG_ODDS_CLIP, LOG_ODDS_CLIP)
    return np.asarray(estimator.novelty_score(X), dtype=np.float64)


def best_known(estimator, X):
    """Best known class of each row, whatever its novelty (``novel_label_``
    while the estimator knows no class)."""
    if not has_log_proba(estimator):
        return estimator.predict_known(X)
    log_proba = np.asarray(estimator.predict_log_proba(X))
    return labels_of_columns(log_proba[:, :-1].argmax(axis=1) if
                             log_proba.shape[1] > 1 else
                             np.zeros(log_proba.shape[0], dtype=np.intp),
                             estimator.classes_, estimator.novel_label_)


def labels_of_columns(index, classes, novel_label):
    """Column indices to labels; an index past the known classes is novel."""
    classes = np.asarray(classes)
    is_novel = index >= classes.shape[0]
    out = np.empty(index.shape[0], dtype=label_result_dtype(classes, novel_label))
    out[~is_novel] = classes[index[~is_novel]]
    out[is_novel] = novel_label
    return out


def with_novel(y_known, novel, classes, novel_label):
    """``y_known`` with ``novel_label`` where ``novel``, in the labels' dtype."""
    out = np.empty(novel.shape[0], dtype=label_result_dtype(np.asarray(classes),
                                                            novel_label))
    out[:] = y_known
    out[novel] = novel_label
    return out


def check_rows(X, y):
    """``y`` as a 1-d array with as many rows as ``X``."""
    y = column_or_1d(y)
    if _num_samples(X) != y.shape[0]:
        raise ValueError(f"X and y have different numbers of rows: "
                         f"{_num_samples(X)} and {y.shape[0]}.")
    return y


class WrapperMixin:
    """What the novelty wrappers share: the default estimator (the head),
    the wrapped model's classes and novel label, and its input tags."""

    def _estimator(self):
        return CRPGaussianClassifier() if self.estimator is None else self.estimator

    @property
    def classes_(self):
        return self.estimator_.classes_

    @property
    def novel_label_(self):
        return self.estimator_.novel_label_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags = copy.deepcopy(self._estimator().__sklearn_tags__().input_tags)
        return tags
