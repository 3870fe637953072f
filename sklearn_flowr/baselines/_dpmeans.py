"""DP-means: nearest class mean that opens a class for a row far from all."""

from numbers import Number, Real

import numpy as np
from sklearn.utils import Bunch
from sklearn.utils._param_validation import (
    Interval,
    StrOptions,
    validate_parameter_constraints,
)
from sklearn.utils.validation import validate_data

from .._core import group_sums
from ..base import all_or_nothing
from ..validation import (
    check_magnitude,
    next_provisional_label,
    same_label,
)
from ._base import fill_doc
from ._ncm import NCMClassifier
from ._prototypes import PrototypeBaseline

__all__ = ["DPMeansClassifier"]

# threshold="auto"'s quantile of the within-class pair distances: the second
# row of a new Gaussian class opens a class of its own with probability 0.01.
AUTO_QUANTILE = 0.99


def _auto_threshold(X, y_index):
    """The ``AUTO_QUANTILE`` quantile of the distance between two rows of one
    class (NaN when no class has two rows)."""
    # For n Gaussian rows, x_i - mean has (n - 1) / (2 n) times the covariance
    # of x_i - x_j: sqrt(2 n / (n - 1)) ||x_i - mean|| is a pair's distance.
    classes, sums, counts = group_sums(X, y_index)
    position = np.searchsorted(classes, y_index)
    n = counts[position]
    distances = np.linalg.norm(X - sums[position] / n[:, None], axis=1)
    paired = n >= 2
    if not paired.any():
        return np.nan
    pair_scale = np.sqrt(2.0 * n[paired] / (n[paired] - 1.0))
    return float(np.quantile(distances[paired] * pair_scale, AUTO_QUANTILE))


@fill_doc
class DPMeansClassifier(PrototypeBaseline):
    """DP-means: nearest class mean, with a distance beyond which a row opens
    a new class.

    On labelled rows it is :class:`NCMClassifier` with ``threshold``.
    ``open_world_step(X)`` without labels runs DP-means [1]_ in one pass: a
    row beyond the threshold opens a provisional class (``"new-1"``, ... or
    -2, -3, ...), which later rows can join.

    Parameters
    ----------
    threshold : "auto" or float >= 0, default="auto"
        Distance to the nearest mean beyond which a row is novel (DP-means'
        ``lambda`` is its square); "auto": learned when the state starts (the
        0.99 quantile of within-class pair distances). Raise it if classes
        split, lower it if they merge.
    threshold_scale : float > 0, default=1.0
        Multiplies the threshold (for a grid search); read at call time.
    %(novel_label)s

    Attributes
    ----------
    %(classes_)s
    %(class_means)s
    is_provisional_ : ndarray of shape (n_classes,) of bool
        Whether each class was opened by an unlabelled row.
    threshold_ : float
        ``threshold_scale`` times ``threshold`` or the learned one.
    %(fitted_)s

    See Also
    --------
    NCMClassifier : the same means and score, without class discovery.

    References
    ----------
    .. [1] B. Kulis and M. I. Jordan, "Revisiting k-means: New Algorithms via
       Bayesian Nonparametrics", ICML, 2012.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_flowr.baselines import DPMeansClassifier
    >>> X = np.array([[0.0, 0.0], [0.0, 1.0], [5.0, 0.0], [5.0, 1.0]])
    >>> dp = DPMeansClassifier().fit(X, ["a", "a", "b", "b"])
    >>> dp.threshold_
    1.0
    >>> stream = np.array([[0.0, 0.5], [9.0, 9.0], [9.0, 9.5]])
    >>> out = dp.open_world_step(stream)
    >>> out.y_assigned, out.is_novel
    (array(['a', 'new-1', 'new-1'], dtype=object), array([False,  True, False]))
    >>> dp.predict([[9.0, 9.2]])
    array(['new-1'], dtype=object)
    """

    _parameter_constraints: dict = {
        "threshold": [StrOptions({"auto"}), Interval(Real, 0, None, closed="left")],
        "threshold_scale": [Interval(Real, 0, None, closed="neither")],
        "novel_label": "no_validation",
    }
    _from_distances = NCMClassifier._from_distances

    def __init__(self, *, threshold="auto", threshold_scale=1.0,
                 novel_label="auto"):
        self.threshold = threshold
        self.threshold_scale = threshold_scale
        self.novel_label = novel_label

    def open_world_step(self, X, y=None):
        """Predict each row with the state before it, then learn it: under its
        label, or without labels in its nearest class when within
        ``threshold_``, else in a new provisional class.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Embeddings, in stream order.
        y : array-like of shape (n_samples,) or None, default=None
            Labels, revealed after each prediction; None: an unlabelled stream.

        Returns
        -------
        result : :class:`~sklearn.utils.Bunch`
            Arrays of shape (n_samples,): ``y_pred``, ``y_known``, ``p_novel``
            (distance to the nearest mean), ``is_novel`` (the row opened a
            class), ``y_assigned`` (the class the row was learned under) and
            ``learned`` (all True).
        """
        if y is not None:
            result = super().open_world_step(X, y)
            result["y_assigned"] = np.asarray(y).reshape(-1)
            return result
        return self._discover(X)

    def _discover(self, X):
        """The unlabelled stream: assign each row, or open a class for it."""
        first_call = not self.__sklearn_is_fitted__()
        if first_call:
            self._check_stream_start()
        with all_or_nothing(self) as undo:
            if first_call:
                self._validate_params()
                X = validate_data(self, X, dtype=np.float64, reset=True)
                check_magnitude(X, units=True)
                numeric_novel = (isinstance(self.novel_label, Number)
                                 and not isinstance(self.novel_label, str))
                no_labels = np.empty(0, dtype=np.int64 if numeric_novel else object)
                self._start_labels(no_labels)
                self._start(X, None, no_labels, fitting=False)
            else:
                X = self._validate_input(X)[0]
            threshold = self.threshold_
            undo.append(self._registry.checkpoint())
            n_rows = X.shape[0]
            known_index = np.empty(n_rows, dtype=np.intp)
            score = np.empty(n_rows)
            assigned = np.empty(n_rows, dtype=np.intp)
            touched = set()
            for row, x in enumerate(self._centred(X)):
                best, distance = (value[0] for value in self._rank(
                    self._distances_to_means(x[None], self._sums, self._counts)))
                known_index[row], score[row] = best, distance
                if best >= 0 and distance <= threshold:
                    target = int(best)
                else:
                    target = self._open_provisional_class()
                if target not in touched:
                    # Journal a class's row before its first change (a class
                    # opened here lives in arrays the undo drops anyway).
                    undo.append(self._checkpoint(np.array([target])))
                    touched.add(target)
                self._learn_centred(x[None], np.array([target]))
                assigned[row] = target
            novel = self._is_novel(known_index, score)
            y_known = self._labels_of(known_index)
            return Bunch(y_pred=np.where(novel, self.novel_label_, y_known),
                         y_known=y_known, p_novel=score, is_novel=novel,
                         y_assigned=self._labels_of(assigned),
                         learned=np.ones(assigned.shape[0], dtype=bool))

    def _open_provisional_class(self):
        """Register the next provisional label; return its class index."""
        registry = self._registry
        numeric = registry.labels.dtype.kind in "biuf"

        def is_taken(label):
            return label in registry._index or same_label(label,
                                                           self.novel_label_)

        self._n_provisional, label = next_provisional_label(self._n_provisional + 1,
                                                 numeric, is_taken)
        registry.add(np.array([label], dtype=object if not numeric else None))
        self._grow()
        index = registry.n_labels - 1
        self._provisional = np.append(self._provisional, index)
        return index

    # ------------------------------------------------------------------ hooks
    def _check_stream_start(self):
        if isinstance(self.threshold, str) and self.threshold == "auto":
            raise ValueError(
                "DPMeansClassifier(threshold='auto') learns its threshold from "
                "the labelled rows of fit or the first partial_fit; call one "
                "of them first, or pass a float threshold to start a stream "
                "on an unfitted estimator."
            )

    def _start(self, X, y_index, labels, *, fitting):
        estimated = np.nan if y_index is None else _auto_threshold(X, y_index)
        if (isinstance(self.threshold, str) and self.threshold == "auto"
                and not np.isfinite(estimated)):
            raise ValueError(
                "DPMeansClassifier(threshold='auto') needs a class with at "
                "least two rows to learn its threshold from, and each class "
                "has one sample; pass a float threshold instead."
            )
        super()._start(X, y_index, labels, fitting=fitting)
        self._auto_threshold = estimated
        self._n_provisional = 0
        self._provisional = np.zeros(0, dtype=np.intp)

    def _declares_novel(self, score):
        return score > self.threshold_

    # -------------------------------------------------------------- attributes
    @property
    def threshold_(self):
        self._fitted("threshold_")
        scale = self.threshold_scale
        if not isinstance(scale, Real) or not 0 < scale < np.inf:
            # Read at call time: a value set after fitting fails here.
            validate_parameter_constraints(
                {"threshold_scale": self._parameter_constraints["threshold_scale"]},
                {"threshold_scale": scale}, caller_name=type(self).__name__)
        if isinstance(self.threshold, str) and self.threshold == "auto":
            estimated = self._auto_threshold
            if not np.isfinite(estimated):
                raise ValueError(
                    "threshold='auto' was set after a start without a class of "
                    "two rows: there is no learned threshold; pass a float "
                    "threshold or fit again."
                )
            return float(scale * estimated)
        return float(scale * self.threshold)

    @property
    def is_provisional_(self):
        mask = np.zeros(self._fitted("is_provisional_").n_classes_, dtype=bool)
        mask[self._provisional] = True
        return mask
