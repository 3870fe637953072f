"""The baselines' shared base (a novelty score ``_score`` and a threshold rule)
and the numpydoc text they share, filled into ``%(name)s`` fields."""

from numbers import Real

import numpy as np
from sklearn.utils._param_validation import Interval

from .._core import FLOWR_REFERENCE
from .._core import fill_doc as _fill_doc
from ..base import OnlineOpenWorldClassifier

# The constraints of a ``threshold`` on a score >= 0 (None: never novel).
THRESHOLD_CONSTRAINTS = {"threshold": [Interval(Real, 0, None, closed="left"), None],
                         "novel_label": "no_validation"}


class OpenWorldBaseline(OnlineOpenWorldClassifier):
    """Base of the baselines; ``_empty_score``: the score while no class exists.
    Its ``__init__`` and constraints serve the baselines with only a threshold."""

    _parameter_constraints: dict = {**THRESHOLD_CONSTRAINTS}
    _empty_score = np.inf

    def __init__(self, *, threshold=None, novel_label="auto"):
        self.threshold = threshold
        self.novel_label = novel_label

    def novelty_score(self, X):
        """Novelty score of each row at the current state (higher = more novel).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        score : ndarray of shape (n_samples,)
        """
        return self._score(self._validated_rows(X))[1]

    def predict(self, X):
        """Best known class, or ``novel_label_`` when the threshold says novel.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
            Labels from ``classes_`` or ``novel_label_``.
        """
        known_index, score = self._score(self._validated_rows(X))
        novel = self._is_novel(known_index, score)
        return self._labels_of(np.where(novel, -1, known_index))

    def predict_known(self, X):
        """Best known class of each row, whatever its novelty score.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        y_known : ndarray of shape (n_samples,)
            Labels from ``classes_`` (``novel_label_`` while no class exists).
        """
        return self._labels_of(self._score(self._validated_rows(X))[0])

    def _declares_novel(self, score):
        """The ``threshold`` rule (None: never novel)."""
        if self.threshold is None:
            return np.zeros(score.shape[0], dtype=bool)
        return score >= self.threshold

    def _is_novel(self, known_index, score):
        """No class to give, or the method's threshold says novel."""
        return (known_index < 0) | self._declares_novel(score)

    def _stream(self, X, index, is_new):
        """Predict-then-learn, one row at a time (the default ``_stream``)."""
        known_index = np.empty(X.shape[0], dtype=np.intp)
        score = np.empty(X.shape[0])
        for row in range(X.shape[0]):
            known_index[row], score[row] = (
                value[0] for value in self._score(X[row : row + 1])
            )
            self._learn(X[row : row + 1], index[row : row + 1])
        return known_index, score, self._is_novel(known_index, score)

    @property
    def n_classes_(self):
        return len(self._fitted("n_classes_")._registry)


class StoredRowsBaseline(OpenWorldBaseline):
    """Base of the baselines that keep every learned row (kNN, SimpleShot)."""

    def _start(self, X, y_index, labels, *, fitting):
        self._rows = np.zeros((0, X.shape[1]))
        self._row_class = np.zeros(0, dtype=np.intp)

    def _stored(self, X):
        return X

    def _learn(self, X, index):
        # Replaced, never written in place: all_or_nothing restores them.
        self._rows = np.vstack([self._rows, self._stored(X)])
        self._row_class = np.concatenate([self._row_class, index])

    def _score(self, X):
        if self._rows.shape[0] == 0:
            return (np.full(X.shape[0], -1, dtype=np.intp),
                    np.full(X.shape[0], self._empty_score))
        return self._score_rows(X)


_NOVEL_LABEL = """novel_label : object, default="auto"
        Label of the novel class: ``"novel"`` for string labels, -1 (or one
        below the smallest label) for numeric ones. It may not occur in ``y``."""
_CLASSES = """classes_ : ndarray of shape (n_classes,)
        Known labels: sorted in ``fit``, new ones appended in order of arrival.
    n_classes_ : int
        Number of known classes."""
_FITTED = """novel_label_ : object
        Label used for the novel class.
    n_features_in_ : int
        Number of features seen during ``fit``.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during ``fit`` (only when ``X`` has string
        column names)."""
_MEANS = """class_count_ : ndarray of shape (n_classes,)
        Rows each class was learned from.
    class_mean_ : ndarray of shape (n_classes, n_features)
        Class means ``mu_n``."""

_SHARED = {
    "novel_label": _NOVEL_LABEL,
    # threshold=None with novel_label: the anchors' and NCM's parameters.
    "params": """threshold : float >= 0 or None, default=None
        Novelty score at or above which ``predict`` and ``open_world_step``
        declare a row novel; None never does (the protocol thresholds the
        scores itself).
    """ + _NOVEL_LABEL,
    "class_means": _MEANS,
    "attrs": f"{_CLASSES}\n    {_FITTED}",
    "prototype_attrs": f"{_CLASSES}\n    {_MEANS}\n    {_FITTED}",
    "fitted_": _FITTED,
    "classes_": _CLASSES,
    "willes": FLOWR_REFERENCE,
}


fill_doc = _fill_doc(_SHARED)
