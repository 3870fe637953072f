"""PEELER: Gaussian class embeddings with a learned precision (Mahalanobis)."""

from numbers import Real

import numpy as np
from scipy.stats import chi2
from sklearn.utils._param_validation import Interval, StrOptions

from ._prototypes import PrototypeBaseline

__all__ = ["PEELERClassifier"]


class PEELERClassifier(PrototypeBaseline):
    """Open-set classifier on Gaussian class embeddings (PEELER's metric).

    Each class is a Gaussian with mean ``mu_n`` (the mean of its rows,
    updated online) and a diagonal precision ``prec`` shared by all classes.
    A row is compared to every class by the normalised Mahalanobis distance

    ``d_n(z) = sum_j prec_j (z_j - mu_nj)^2 / d``,

    gets the class of the smallest one, and its novelty score is
    ``min_n d_n(z)``.

    In :meth:`fit` the precision is the closed-form maximum-likelihood fit of
    that Gaussian head to the training classes, the inverse of the pooled
    within-class variance per dimension, ``prec_j = n / sum_i (z_ij -
    mu_{y_i} j)^2`` (plus ``var_smoothing`` on the variance); a given
    ``precision`` is used as is instead (e.g. the inverse of Sup-E's learned
    class variances). Later calls to :meth:`partial_fit` and
    ``open_world_step`` update the means only.

    Parameters
    ----------
    precision : float, array-like of shape (n_features,) or None, default=None
        Fixed diagonal precision ``prec``. ``None`` learns it in :meth:`fit`;
        an estimator that starts with :meth:`partial_fit` or
        ``open_world_step`` (nothing to learn it from) then uses the identity,
        i.e. the normalised squared Euclidean distance.
    threshold : float or "auto", default="auto"
        Score at or above which :meth:`predict` and ``open_world_step``'s
        ``y_pred`` declare a row novel. ``"auto"`` is the 95% quantile of the
        score of a row of its own class under the model: ``d * d_n(z)`` is
        chi-square with ``d`` degrees of freedom, so ``chi2.ppf(0.95, d) / d``.
    var_smoothing : float, default=1e-9
        Fraction of the largest feature variance added to the pooled
        variances for numerical stability (as in
        :class:`~sklearn.naive_bayes.GaussianNB`).
    novel_label : object, default="auto"
        Label returned for the novel class: ``"novel"`` for string labels, -1
        (or one below the smallest label) for numeric ones. It may not occur
        in ``y``.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Known labels: sorted in ``fit``, new ones appended in order of arrival.
    n_classes_ : int
        Number of known classes.
    class_count_ : ndarray of shape (n_classes,)
        Rows each class was learned from.
    class_mean_ : ndarray of shape (n_classes, n_features)
        Class means ``mu_n``.
    precision_ : ndarray of shape (n_features,)
        Diagonal precision ``prec`` in use.
    threshold_ : float
        Novelty threshold in use (follows ``threshold``, also when it is
        changed after fitting).
    novel_label_ : object
        Label used for the novel class.
    n_features_in_ : int
        Number of features seen during ``fit``.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during ``fit`` (only when ``X`` has string
        column names).

    See Also
    --------
    NCMClassifier : the same class means with the Euclidean distance.

    Notes
    -----
    ``novelty_score`` and ``open_world_step``'s ``p_novel`` are
    ``min_n d_n(z)`` (``inf`` while no class exists): a score, not a
    probability.

    In the small-context protocol the support classes of a task must be the
    only known classes, so learn the precision on the training classes once
    and pass it on: ``PEELERClassifier(precision=PEELERClassifier().fit(
    Z_train, y_train).precision_)``, then ``partial_fit`` on each support set.

    Deviations from Liu et al.: PEELER meta-trains its encoder with an
    open-set (entropy-maximisation) loss and predicts a class-specific
    precision from each support set; here the encoder is given (Sup-FC or
    Sup-E embeddings) and one diagonal precision is shared by all classes,
    learned once in ``fit``, so that a class seen once gets a usable metric.

    References
    ----------
    .. [1] B. Liu, H. Kang, H. Li, G. Hua and N. Vasconcelos, "Few-Shot
       Open-Set Recognition using Meta-Learning", CVPR, 2020.
    .. [2] J. Willes, J. Harrison, A. Harakeh, C. Finn, M. Pavone and
       S. Waslander, "Bayesian Embeddings for Few-Shot Open World
       Recognition", IEEE TPAMI, 2022 (PEELER baseline).

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
    _empty_score = np.inf

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
    """Maximum-likelihood within-class variance per feature, shared by classes.

    Features with no within-class spread (e.g. one row per class) get the
    smoothing term, or 1 when ``X`` does not vary at all.
    """
    counts = np.bincount(y_index, minlength=n_classes).astype(np.float64)
    sums = np.zeros((n_classes, X.shape[1]))
    np.add.at(sums, y_index, X)
    means = sums / counts[:, None]
    variance = np.mean((X - means[y_index]) ** 2, axis=0)
    epsilon = var_smoothing * float(np.max(np.var(X, axis=0)))
    variance = variance + epsilon
    return np.where(variance > 0, variance, 1.0)
