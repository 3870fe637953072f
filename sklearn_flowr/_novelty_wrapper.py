"""What the novelty wrappers share: their base class, the novelty score and
labels read from a wrapped estimator, and their numpydoc text."""

from __future__ import annotations

import copy

import numpy as np
from scipy.special import logit
from sklearn.base import BaseEstimator, ClassifierMixin, MetaEstimatorMixin
from sklearn.utils import Bunch, _safe_indexing, column_or_1d
from sklearn.utils.validation import _num_samples, check_is_fitted

from ._core import fill_doc as _fill_doc
from ._core._novelty_odds import novel_log_odds
from .base import DefaultParts
from .head import CRPGaussianClassifier
from .validation import check_missing_labels, check_targets, label_result_dtype

# Log-odds are clipped here: a row before any class exists has P(novel) = 1
# (infinite odds), and fits and ranks need finite values. Mapped log-odds keep
# P(novel) within 1e-13 of 0 and 1; raw scores keep their order as far as
# exp() reaches (a high-dimensional head's log-odds span hundreds of nats).
LOG_ODDS_CLIP = 30.0
SCORE_CLIP = 700.0


def clip_log_odds(log_odds, bound=LOG_ODDS_CLIP):
    """Log-odds clipped to +-``bound``."""
    return np.clip(log_odds, -bound, bound)


def clipped_logit(p):
    """``logit(p)`` clipped to +-:data:`LOG_ODDS_CLIP`."""
    with np.errstate(divide="ignore"):
        return clip_log_odds(logit(np.asarray(p, dtype=np.float64)))


def check_rows(X, y):
    """``y`` as a 1-d array of labels of one kind, as many as the rows of ``X``
    (at least one)."""
    if y is None:
        raise ValueError("The rows need their labels: y is None.")
    check_missing_labels(y)
    y = column_or_1d(y)
    if _num_samples(X) != y.shape[0]:
        raise ValueError(f"X and y have different numbers of rows: "
                         f"{_num_samples(X)} and {y.shape[0]}.")
    if y.shape[0] == 0:
        raise ValueError("Found array with 0 sample(s) while a minimum of 1 is "
                         "required.")
    return check_targets(y)  # (one kind first: scikit-learn fails on mixed kinds)


def has_log_proba(estimator):
    """Whether ``estimator`` gives open-world log-probabilities."""
    return callable(getattr(estimator, "predict_log_proba", None))


def labels_of_columns(index, classes, novel_label):
    """Column indices to labels; an index past the known classes is novel."""
    classes = np.asarray(classes)
    is_novel = index >= classes.shape[0]
    out = np.empty(index.shape[0], dtype=label_result_dtype(classes, novel_label))
    out[~is_novel] = classes[index[~is_novel]]
    out[is_novel] = novel_label
    return out


def known_of_log_proba(log_proba, classes, novel_label):
    """Best known class of each row of open-world log-probabilities
    (``novel_label`` while no class is known)."""
    return labels_of_columns(log_proba[:, :-1].argmax(axis=1) if log_proba.shape[1] > 1
                             else np.zeros(log_proba.shape[0], dtype=np.intp),
                             classes, novel_label)


def novelty_scores(estimator, X):
    """Novelty score of each row (higher = more novel); log-odds are clipped."""
    if has_log_proba(estimator):
        log_proba = np.asarray(estimator.predict_log_proba(X), dtype=np.float64)
        return clip_log_odds(novel_log_odds(log_proba), SCORE_CLIP)
    return np.asarray(estimator.novelty_score(X), dtype=np.float64)


def best_known(estimator, X):
    """Best known class of each row (``novel_label_`` while none is known)."""
    if not has_log_proba(estimator):
        return estimator.predict_known(X)
    return known_of_log_proba(np.asarray(estimator.predict_log_proba(X)),
                              estimator.classes_, estimator.novel_label_)


# Numpydoc text the wrappers' docstrings share (``%(name)s``).
WRAPPER_DOCS = {
    "estimator": """estimator : estimator or None, default=None
        An open-world classifier with ``fit`` and ``partial_fit`` and either
        ``predict_log_proba`` (N+1 columns, the novel class last) or
        ``novelty_score`` and ``predict_known``. ``None``:
        ``CRPGaussianClassifier()``.""",
    "attributes": """classes_ : ndarray of shape (n_classes,)
        Known classes of ``estimator_``.
    novel_label_ : object
        Label :meth:`predict` gives a row called novel.""",
    "X": """Parameters
        ----------
        X : array-like of shape (n_samples, ...)
""",
}


fill_doc = _fill_doc(WRAPPER_DOCS)


class NoveltyWrapper(DefaultParts, MetaEstimatorMixin, ClassifierMixin,
                     BaseEstimator):
    """Base of the novelty wrappers: a subclass learns with ``_learn`` and
    decides one row with ``_decide_one`` (1-row arrays named by ``_STEP_KEYS``)."""

    _STEP_KEYS = ("y_pred", "y_known", "p_novel", "is_novel")
    _DEFAULT_PARTS = {"estimator": CRPGaussianClassifier}

    def _estimator(self):
        return CRPGaussianClassifier() if self.estimator is None else self.estimator

    def _start_fit(self, X, y):
        """Rows that can be indexed (an array-like with ``__array__`` only is
        converted), checked ``y`` and the estimator to wrap, before any fitting."""
        self._validate_params()
        if not hasattr(X, "__getitem__") and hasattr(X, "__array__"):
            X = np.asarray(X)
        y = check_rows(X, y)
        estimator = self._estimator()
        if not (has_log_proba(estimator) or (
                callable(getattr(estimator, "novelty_score", None))
                and callable(getattr(estimator, "predict_known", None)))):
            raise TypeError(
                f"{type(estimator).__name__} has neither predict_log_proba nor "
                "novelty_score and predict_known: "
                f"{type(self).__name__} needs a novelty score.")
        return X, y, estimator

    @property
    def classes_(self):
        return self.estimator_.classes_

    @property
    def novel_label_(self):
        return self.estimator_.novel_label_

    @property
    def n_features_in_(self):
        return self.estimator_.n_features_in_

    @property
    def feature_names_in_(self):
        """The fitted estimator's feature names (when its ``X`` had them)."""
        return self.estimator_.feature_names_in_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags = copy.deepcopy(self._estimator().__sklearn_tags__().input_tags)
        return tags

    def _models(self):
        return [self.estimator_]

    def _learn(self, X, y):
        for model in self._models():
            model.partial_fit(X, y)

    def partial_fit(self, X, y, classes=None):
        """Learn labelled rows with every wrapped model, all or none of them.

        Parameters
        ----------
        X : array-like of shape (n_samples, ...)
        y : array-like of shape (n_samples,)
        classes : ignored (for the scikit-learn signature)

        Returns
        -------
        self : object
        """
        check_is_fitted(self)
        y = check_rows(X, y)
        work = copy.deepcopy(self)
        work._learn(X, y)
        self.__dict__.update(work.__dict__)
        return self

    def open_world_step(self, X, y):
        """Decide each row with the model before it, then learn its label.

        On an error or interrupt the model is left as it was.

        Parameters
        ----------
        X : array-like of shape (n_samples, ...)
            Rows in stream order.
        y : array-like of shape (n_samples,)
            Their labels, revealed after each decision.

        Returns
        -------
        result : Bunch
            ``y_pred``, ``y_known``, ``p_novel`` and ``is_novel`` (the label
            was unseen at that moment), each of shape (n_samples,).
        """
        check_is_fitted(self)
        y = check_rows(X, y)
        work = copy.deepcopy(self)
        out = work._stream(X, y)
        self.__dict__.update(work.__dict__)
        return out

    def _stream(self, X, y):
        rows = []
        for i in range(y.shape[0]):
            x, label = _safe_indexing(X, [i]), y[i : i + 1]
            rows.append({**self._decide_one(x),
                         "is_novel": ~np.isin(label, self.classes_)})
            self._learn(x, label)
        return Bunch(**{name: np.concatenate([row[name] for row in rows]) if rows
                        else np.zeros(0, dtype=bool if name == "is_novel" else float)
                        for name in self._STEP_KEYS})

    def _with_novel(self, y_known, novel):
        """``y_known`` with ``novel_label_`` where ``novel``, in the labels' dtype."""
        out = np.empty(novel.shape[0],
                       dtype=label_result_dtype(np.asarray(self.classes_),
                                                self.novel_label_))
        out[:] = y_known
        out[novel] = self.novel_label_
        return out
