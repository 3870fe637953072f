"""PEELER: Gaussian class embeddings with a learned precision (Mahalanobis)."""

from numbers import Real

import numpy as np
from scipy.stats import chi2
from sklearn.utils._param_validation import Interval, StrOptions

from .._core import class_means
from ._base import fill_doc
from ._prototypes import PrototypeBaseline

__all__ = ["PEELERClassifier"]


@fill_doc
class PEELERClassifier(PrototypeBaseline):
    """Open-set classifier on Gaussian class embeddings (PEELER's metric).

    Class means ``mu_n`` are updated online and share a diagonal precision
    ``prec`` learned in ``fit``. A row gets the class of the smallest ``d_n(z)
    = sum_j prec_j (z_j - mu_nj)^2 / d``; novelty score ``min_n d_n(z)``.

    Parameters
    ----------
    precision : float, array-like of shape (n_features,) or None, default=None
        Fixed diagonal precision ``prec`` (e.g. learned on training classes).
        None: the inverse pooled within-class variance in ``fit``; the
        identity when the estimator starts with ``partial_fit``.
    threshold : float >= 0 or "auto", default="auto"
        Score at or above which a row is novel; "auto": the 95%% quantile of a
        known row's score, ``chi2.ppf(0.95, d) / d``.
    var_smoothing : float >= 0, default=1e-9
        Share of the largest feature variance added to the variances (as
        :class:`~sklearn.naive_bayes.GaussianNB`).
    %(novel_label)s

    Attributes
    ----------
    %(prototype_attrs)s
    precision_ : ndarray of shape (n_features,)
        Diagonal precision ``prec`` in use.
    threshold_ : float
        Novelty threshold in use (follows ``threshold``).

    See Also
    --------
    NCMClassifier : the same class means with the Euclidean distance.

    References
    ----------
    .. [1] B. Liu, H. Kang, H. Li, G. Hua and N. Vasconcelos, "Few-Shot
       Open-Set Recognition using Meta-Learning", CVPR, 2020.
    .. [2] %(willes)s (PEELER baseline).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_flowr.baselines import PEELERClassifier
    >>> X = np.array([[0.0, 0.0], [2.0, 4.0], [6.0, 0.0], [8.0, 4.0]])
    >>> peeler = PEELERClassifier().fit(X, [0, 0, 1, 1])
    >>> peeler.precision_.round(6)  # inverse pooled within-class variance
    array([1.  , 0.25])
    >>> peeler = PEELERClassifier(precision=[4.0, 1.0]).fit(X, [0, 0, 1, 1])
    >>> peeler.novelty_score([[1.0, 3.0]])  # (4 * 0**2 + 1 * 1**2) / 2
    array([0.5])
    >>> peeler.predict([[1.0, 3.0], [4.0, 2.0]])
    array([ 0, -1])
    """

    _parameter_constraints: dict = {
        "precision": [Interval(Real, 0, None, closed="neither"), "array-like", None],
        "threshold": [StrOptions({"auto"}), Interval(Real, 0, None, closed="left")],
        "var_smoothing": [Interval(Real, 0, None, closed="left")],
        "novel_label": "no_validation",
    }

    def __init__(self, *, precision=None, threshold="auto", var_smoothing=1e-9,
                 novel_label="auto"):
        self.precision = precision
        self.threshold = threshold
        self.var_smoothing = var_smoothing
        self.novel_label = novel_label

    def _start(self, X, y_index, labels, *, fitting):
        n_features = X.shape[1]
        if self.precision is not None:
            precision = np.asarray(self.precision, dtype=np.float64)
            if precision.ndim > 1 or precision.size not in (1, n_features):
                raise ValueError(
                    f"precision must be a float or an array of shape "
                    f"({n_features},); got shape {precision.shape}."
                )
            if not np.all(np.isfinite(precision) & (precision > 0)):
                raise ValueError("precision must be positive and finite.")
            precision = np.broadcast_to(precision, (n_features,)).copy()
        elif fitting:
            precision = 1.0 / _pooled_variance(X, y_index, labels.shape[0],
                                               self.var_smoothing)
        else:
            precision = np.ones(n_features)
        super()._start(X, y_index, labels, fitting=fitting)
        self.precision_ = precision

    def _metric_weights(self):
        # d_n(z) = sum_j prec_j (z_j - mu_nj)^2 / d
        return self.precision_ / self.precision_.shape[0]

    def _from_distances(self, distances):
        return np.min(distances, axis=1)

    def _declares_novel(self, score):
        return score >= self.threshold_

    @property
    def threshold_(self):
        self._fitted("threshold_")
        if isinstance(self.threshold, str):  # "auto"
            n_features = self.n_features_in_
            return float(chi2.ppf(0.95, n_features) / n_features)
        return float(self.threshold)


def _pooled_variance(X, y_index, n_classes, var_smoothing):
    """Within-class variance per feature plus the smoothing (1 where ``X`` is
    constant)."""
    means, _ = class_means(X, y_index, n_classes)
    variance = np.mean((X - means[y_index]) ** 2, axis=0)
    variance += var_smoothing * float(np.max(np.var(X, axis=0)))
    return np.where(variance > 0, variance, 1.0)
