"""Calibration of a probability (ECE, class-wise ECE, Brier decomposition,
reliability bins) on the bins of :func:`sklearn.calibration.calibration_curve`,
and the open-world log-loss."""

from numbers import Integral

import numpy as np
from sklearn.calibration import calibration_curve
from sklearn.metrics import brier_score_loss
from sklearn.utils import Bunch, check_consistent_length, column_or_1d
from sklearn.utils._param_validation import Interval, StrOptions, validate_params

from ..validation import novel_rows
from ._checks import check_binary, check_proba, fill_doc
from ._h_measure import novel_column

__all__ = [
    "brier_decomposition",
    "classwise_calibration_error",
    "expected_calibration_error",
    "neg_novelty_ece_scorer",
    "open_world_log_loss",
]

DEFAULT_N_BINS = 15

_BINNING = {
    "n_bins": [Interval(Integral, 1, None, closed="left")],
    "strategy": [StrOptions({"uniform", "quantile"})],
}
_BINARY = {"y_true": ["array-like"], "y_prob": ["array-like"], **_BINNING}


def _check_binary_and_proba(y_true, y_prob):
    y_true = check_binary(y_true)
    y_prob = column_or_1d(y_prob).astype(np.float64, copy=False)
    check_consistent_length(y_true, y_prob)
    if not np.all(np.isfinite(y_prob)):
        raise ValueError("y_prob contains NaN or infinity.")
    if y_prob.min() < 0.0 or y_prob.max() > 1.0:
        raise ValueError(
            "y_prob has values outside [0, 1]: calibration needs a probability, "
            "not a novelty score."
        )
    return y_true, y_prob


def _bin_index(y_prob, n_bins, strategy="uniform"):
    """Bin of each probability, as ``calibration_curve`` bins it."""
    if strategy == "quantile":
        edges = np.percentile(y_prob, np.linspace(0.0, 1.0, n_bins + 1) * 100)
    else:
        edges = np.linspace(0.0, 1.0, n_bins + 1)
    return np.searchsorted(edges[1:-1], y_prob)


@validate_params(_BINARY, prefer_skip_nested_validation=True)
@fill_doc
def expected_calibration_error(y_true, y_prob, *,
                               n_bins: int = DEFAULT_N_BINS,
                               strategy: str = "uniform") -> float:
    """Expected calibration error of a binary probability:
    :math:`\\sum_k \\frac{n_k}{n} |\\bar p_k - \\bar y_k|` over the bins ``k``.

    Parameters
    ----------
    %(binary)s
    %(binning)s

    Returns
    -------
    ece : float
        In [0, 1]; 0 when perfectly calibrated.

    References
    ----------
    .. [1] C. Guo, G. Pleiss, Y. Sun and K. Q. Weinberger, "On calibration of
       modern neural networks", ICML, 2017.

    Examples
    --------
    >>> from sklearn_flowr.metrics import expected_calibration_error
    >>> expected_calibration_error([0, 1, 0, 1], [1.0, 1.0, 1.0, 1.0])
    0.5
    >>> expected_calibration_error([0, 0, 0, 1], [0.25, 0.25, 0.25, 0.25])
    0.0
    >>> y_true, y_prob = [0, 0, 1, 1], [0.1, 0.2, 0.3, 0.4]
    >>> round(expected_calibration_error(y_true, y_prob, n_bins=2,
    ...                                  strategy="quantile"), 4)
    0.4
    """
    y_true, y_prob = _check_binary_and_proba(y_true, y_prob)
    return _binned_ece(y_true, y_prob, n_bins, strategy)


@fill_doc
def neg_novelty_ece_scorer(estimator, X, y) -> float:
    """Minus the :func:`expected_calibration_error` of an open-world
    classifier's P(novel) on ``(X, y)``, a row being novel when its label is
    not in ``estimator.classes_``; a ``scoring`` for ``GridSearchCV`` with
    :class:`~sklearn_flowr.model_selection.OpenWorldSplit`.

    Negated as scikit-learn's ``neg_log_loss``, so that greater is better. Use
    it to choose a calibration (such as ``novel_prior`` of
    :class:`~sklearn_flowr.calibration.NoveltyCalibratedClassifier`), which
    moves P(novel) without changing its order: :func:`novelty_scorer`, a
    ranking score, gives such settings one score.

    Parameters
    ----------
    %(scorer)s

    Returns
    -------
    score : float
        In [-1, 0]; minus the ECE on 15 equal-width bins.

    Examples
    --------
    Three classes on a line; the head knows the first two, so the third's
    rows should get P(novel) near 1:

    >>> import numpy as np
    >>> from sklearn_flowr import CRPGaussianClassifier
    >>> from sklearn_flowr.metrics import neg_novelty_ece_scorer
    >>> y = np.repeat([0, 1, 2], 20)
    >>> X = 8.0 * y[:, None] + np.random.default_rng(0).normal(size=(60, 3))
    >>> head = CRPGaussianClassifier().fit(X[:40], y[:40])
    >>> score = neg_novelty_ece_scorer(head, X, y)
    >>> bool(-1.0 <= score <= 0.0)
    True
    """
    is_novel, p_novel = novel_column(estimator, X, y, "neg_novelty_ece_scorer")
    return -expected_calibration_error(is_novel, p_novel)


def _binned_ece(y_true, y_prob, n_bins, strategy):
    """The ECE of checked inputs: boolean ``y_true``, float ``y_prob``."""
    bins = _bin_index(y_prob, n_bins, strategy)
    # |sum of predictions - sum of outcomes| per bin, over n: the weighted
    # gap of the formula with the bin counts cancelled.
    predicted = np.bincount(bins, weights=y_prob, minlength=n_bins)
    observed = np.bincount(bins, weights=y_true.astype(np.float64),
                           minlength=n_bins)
    return float(np.sum(np.abs(predicted - observed)) / y_true.shape[0])


def _one_vs_rest_targets(y_true, y_proba, classes):
    """Probabilities (n_samples, n_columns) and the boolean outcome of each
    column, for a closed-world or an open-world (last column novel) output."""
    values, known, is_log_proba = check_proba(y_proba)
    if is_log_proba:
        values = np.exp(values)
    if values.min() < 0.0 or values.max() > 1.0:
        raise ValueError(
            "y_proba has values outside [0, 1]: calibration needs "
            "probabilities, not scores."
        )
    y_true = column_or_1d(y_true)
    check_consistent_length(y_true, values)
    n_columns = values.shape[1]
    if classes is None:
        if known is None:
            raise ValueError(
                "classes is required unless y_proba is the array an open-world "
                "classifier's predict_proba returned, unchanged (it carries its "
                "known_classes; np.asarray, slicing or arithmetic drops them)."
            )
        classes = known
    else:
        classes = column_or_1d(classes)
        if known is not None and not np.array_equal(classes, known):
            raise ValueError(
                f"classes {classes.tolist()!r} differ from the known classes "
                f"{known.tolist()!r} that y_proba carries."
            )
    if np.unique(classes).shape[0] != classes.shape[0]:
        raise ValueError(f"classes has repeated labels: {classes.tolist()!r}.")
    if classes.shape[0] == n_columns - 1:
        # The open-world layout: the last column is "novel", whose positives
        # are the rows of every class outside `classes`.
        is_novel = novel_rows(y_true, classes, require_both=False)
        targets = [y_true == label for label in classes] + [is_novel]
    elif classes.shape[0] == n_columns:
        unknown = ~np.isin(y_true, classes)
        if unknown.any():
            raise ValueError(
                f"y_true has labels {np.unique(y_true[unknown]).tolist()!r} that "
                "are not in classes; for an open-world output, whose last column "
                "is the novel class, pass the known classes only."
            )
        targets = [y_true == label for label in classes]
    else:
        raise ValueError(
            f"y_proba has {n_columns} columns but classes has "
            f"{classes.shape[0]} labels: pass one label per column, or one per "
            "column but the last for an open-world output (the last column is "
            "the novel class)."
        )
    return values, np.column_stack(targets)


@validate_params({"y_true": ["array-like"], "y_proba": ["array-like"],
                  "classes": ["array-like", None], **_BINNING},
                 prefer_skip_nested_validation=True)
@fill_doc
def classwise_calibration_error(y_true, y_proba, classes=None, *,
                                n_bins: int = DEFAULT_N_BINS,
                                strategy: str = "uniform") -> float:
    """Class-wise expected calibration error: the mean over the columns of
    the one-vs-rest :func:`expected_calibration_error`.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels, unseen ones included for an open-world output.
    y_proba : array-like of shape (n_samples, n_columns)
        Probabilities, one column per class; or an open-world ``predict_proba``
        output as returned (its known classes, then the novel column).
    classes : array-like of shape (n_columns,) or (n_columns - 1,), default=None
        Labels of the columns (one fewer: the last is novel); None: those
        ``y_proba`` carries.
    %(binning)s

    Returns
    -------
    cw_ece : float
        In [0, 1].

    References
    ----------
    .. [1] M. Kull, M. Perello-Nieto, M. Kängsepp, T. Silva Filho, H. Song and
       P. Flach, "Beyond temperature scaling: obtaining well-calibrated
       multi-class probabilities with Dirichlet calibration", NeurIPS, 2019.

    Examples
    --------
    Two known classes and the novel column (``"c"`` is novel), one bin:

    >>> from sklearn_flowr.metrics import classwise_calibration_error
    >>> y_proba = [[0.8, 0.1, 0.1], [0.2, 0.6, 0.2], [0.1, 0.1, 0.8],
    ...            [0.5, 0.3, 0.2]]
    >>> y_true = ["a", "b", "c", "a"]
    >>> err = classwise_calibration_error(y_true, y_proba, ["a", "b"], n_bins=1)
    >>> round(err, 4)  # (0.1 + 0.025 + 0.075) / 3
    0.0667
    """
    values, targets = _one_vs_rest_targets(y_true, y_proba, classes)
    return float(np.mean([
        _binned_ece(targets[:, column], values[:, column], n_bins, strategy)
        for column in range(values.shape[1])
    ]))


@validate_params(_BINARY, prefer_skip_nested_validation=True)
@fill_doc
def brier_decomposition(y_true, y_prob, *, n_bins: int = DEFAULT_N_BINS,
                        strategy: str = "uniform") -> Bunch:
    """The Brier score and its decomposition [1]_ over the bins of
    :func:`expected_calibration_error`, with the within-bin term [2]_.

    Parameters
    ----------
    %(binary)s
    %(binning)s

    Returns
    -------
    decomposition : :class:`~sklearn.utils.Bunch`
        Floats ``brier``, ``reliability``, ``resolution``, ``uncertainty`` and
        ``within_bin``; ``brier = reliability - resolution + uncertainty +
        within_bin``.

    References
    ----------
    .. [1] A. H. Murphy, "A new vector partition of the probability score",
       Journal of Applied Meteorology, 12(4), 595-600, 1973.
    .. [2] D. B. Stephenson, C. A. S. Coelho and I. T. Jolliffe, "Two extra
       components in the Brier score decomposition", Weather and
       Forecasting, 23(4), 752-757, 2008.

    Examples
    --------
    >>> from sklearn_flowr.metrics import brier_decomposition
    >>> parts = brier_decomposition([0, 0, 1, 1], [0.2, 0.2, 0.8, 0.8], n_bins=2)
    >>> round(parts.brier, 4), round(parts.reliability, 4)
    (0.04, 0.04)
    >>> round(parts.resolution, 4), round(parts.uncertainty, 4), parts.within_bin
    (0.25, 0.25, 0.0)
    """
    y_true, y_prob = _check_binary_and_proba(y_true, y_prob)
    brier = float(brier_score_loss(y_true.astype(np.int8), y_prob, pos_label=1))
    outcome = y_true.astype(np.float64)
    n = outcome.shape[0]
    bins = _bin_index(y_prob, n_bins, strategy)
    count = np.bincount(bins, minlength=n_bins)
    mean_pred, mean_true = (
        np.divide(np.bincount(bins, weights=values, minlength=n_bins), count,
                  out=np.zeros(n_bins), where=count > 0)
        for values in (y_prob, outcome))
    weight = count / n
    base_rate = outcome.mean()
    pred_dev = y_prob - mean_pred[bins]
    true_dev = outcome - mean_true[bins]
    return Bunch(
        brier=brier,
        reliability=float(np.sum(weight * (mean_pred - mean_true) ** 2)),
        resolution=float(np.sum(weight * (mean_true - base_rate) ** 2)),
        uncertainty=float(base_rate * (1.0 - base_rate)),
        within_bin=float(np.mean(pred_dev ** 2 - 2.0 * pred_dev * true_dev)),
    )


def _reliability_bins(y_true, y_prob, *, n_bins=DEFAULT_N_BINS, strategy="uniform"):
    """Reliability-diagram data: ``prob_pred``, ``prob_true`` and ``count`` of
    the non-empty bins of ``calibration_curve``, and ``n_bins``."""
    y_true, y_prob = _check_binary_and_proba(y_true, y_prob)
    prob_true, prob_pred = calibration_curve(y_true, y_prob, n_bins=n_bins,
                                             strategy=strategy)
    count = np.bincount(_bin_index(y_prob, n_bins, strategy), minlength=n_bins)
    return Bunch(prob_pred=prob_pred, prob_true=prob_true,
                 count=count[count > 0], n_bins=n_bins)


@validate_params(
    {
        "y_true": ["array-like"],
        "y_proba": ["array-like"],
        "sample_weight": ["array-like", None],
    },
    prefer_skip_nested_validation=True,
)
def open_world_log_loss(y_true, y_proba, *, sample_weight=None) -> float:
    """Log-loss of open-world probabilities: a row of a known class is scored
    on its column, any other on the last (novel) one; lower is better.

    ``make_scorer(open_world_log_loss, greater_is_better=False,
    response_method="predict_proba")`` is the open-world ``neg_log_loss``.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels, unseen ones included.
    y_proba : array of shape (n_samples, n_classes + 1)
        An open-world ``predict_proba`` or ``predict_log_proba`` output, as
        returned (it carries the known classes).
    sample_weight : array-like of shape (n_samples,), default=None

    Returns
    -------
    loss : float
        The (weighted) mean negative log-likelihood, probabilities clipped to
        ``[eps, 1 - eps]`` as in :func:`sklearn.metrics.log_loss`.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_flowr import CRPGaussianClassifier
    >>> from sklearn_flowr.metrics import open_world_log_loss
    >>> X = np.array([[0.0], [0.3], [5.0], [5.2], [9.0], [9.4]])
    >>> y = np.array([0, 0, 1, 1, 2, 2])
    >>> head = CRPGaussianClassifier(covariance="isotropic", sigma=0.1)
    >>> head = head.fit(X[y < 2], y[y < 2])
    >>> proba = head.predict_proba(X)  # columns 0, 1, novel
    >>> loss = open_world_log_loss(y, proba)  # class 2 scored on P(novel)
    >>> bool(np.isclose(loss, -np.log(proba[[0, 1, 2, 3, 4, 5],
    ...                                     [0, 0, 1, 1, 2, 2]]).mean()))
    True
    """
    known_classes = getattr(y_proba, "known_classes", None)
    if known_classes is None:
        raise ValueError(
            "open_world_log_loss needs the array an open-world classifier's "
            "predict_proba or predict_log_proba returned, unchanged: it carries "
            "the classes the classifier knew (known_classes), which tell the "
            "novel rows. Got a plain array (np.asarray, slicing or arithmetic "
            "drops them)."
        )
    y_true = column_or_1d(y_true)
    values, _, is_log_proba = check_proba(y_proba, dtype=[np.float64, np.float32])
    check_consistent_length(y_true, values, sample_weight)
    is_novel = novel_rows(y_true, known_classes, require_both=False)
    # The novel column is the last; a known label's column is its position in
    # known_classes, which follow classes_ and need not be sorted.
    order = np.argsort(known_classes, kind="stable")
    columns = np.full(y_true.shape[0], known_classes.shape[0])
    columns[~is_novel] = order[np.searchsorted(known_classes[order], y_true[~is_novel])]
    chosen = values[np.arange(y_true.shape[0]), columns]
    eps = np.finfo(values.dtype).eps
    if is_log_proba:
        log_p = np.clip(chosen, np.log(eps), np.log1p(-eps))
    else:
        log_p = np.log(np.clip(chosen, eps, 1.0 - eps))
    return float(-np.average(log_p, weights=sample_weight))
