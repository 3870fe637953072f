"""Calibration of a probability: expected calibration error and reliability bins.

scikit-learn has the reliability curve (:func:`sklearn.calibration.calibration_curve`)
and the Brier score (:func:`sklearn.metrics.brier_score_loss`) but no expected
calibration error; this module adds it, on the very bins of
``calibration_curve(strategy="uniform")`` so that the figure and the number
describe the same groups of rows.
"""

from numbers import Integral

import numpy as np
from sklearn.calibration import calibration_curve
from sklearn.utils import Bunch, check_consistent_length, column_or_1d
from sklearn.utils._param_validation import Interval, validate_params

__all__ = ["expected_calibration_error", "reliability_bins"]

DEFAULT_N_BINS = 15


def _check_binary_and_proba(y_true, y_prob):
    y_true = column_or_1d(y_true)
    y_prob = column_or_1d(y_prob).astype(np.float64, copy=False)
    check_consistent_length(y_true, y_prob)
    if y_true.shape[0] == 0:
        raise ValueError("y_true is empty.")
    if not np.all(np.isfinite(y_prob)):
        raise ValueError("y_prob contains NaN or infinity.")
    if y_prob.min() < 0.0 or y_prob.max() > 1.0:
        raise ValueError(
            "y_prob has values outside [0, 1]: calibration needs a probability, "
            "not a novelty score."
        )
    if y_true.dtype == bool:
        return y_true, y_prob
    labels = np.unique(y_true)
    if not np.all(np.isin(labels, [0, 1])):
        raise ValueError(
            f"y_true must be boolean or in {{0, 1}}; got labels {labels.tolist()}."
        )
    return y_true == 1, y_prob


def _bin_index(y_prob, n_bins):
    """Bin of each probability among ``n_bins`` equal-width bins of [0, 1].

    Right-closed bins ``(k / n_bins, (k + 1) / n_bins]``, the first one also
    holding 0: the rule of ``calibration_curve(strategy="uniform")``.
    """
    inner_edges = np.linspace(0.0, 1.0, n_bins + 1)[1:-1]
    return np.searchsorted(inner_edges, y_prob)


@validate_params(
    {
        "y_true": ["array-like"],
        "y_prob": ["array-like"],
        "n_bins": [Interval(Integral, 1, None, closed="left")],
    },
    prefer_skip_nested_validation=True,
)
def expected_calibration_error(y_true, y_prob, *,
                               n_bins: int = DEFAULT_N_BINS) -> float:
    """Expected calibration error of a binary probability, equal-width bins.

    The rows are grouped into ``n_bins`` equal-width bins of [0, 1] by their
    predicted probability, right-closed ``(k / n_bins, (k + 1) / n_bins]`` with
    0 in the first bin -- the bins of
    :func:`sklearn.calibration.calibration_curve` with ``strategy="uniform"``.
    The error is the gap between the mean prediction and the observed
    frequency of the positive class in each bin, weighted by the bin's share
    of the rows:

    .. math::

       \\mathrm{ECE} = \\sum_k \\frac{n_k}{n}
       \\left| \\bar p_k - \\bar y_k \\right| .

    It is 0 for a perfectly calibrated probability (up to the sampling noise
    of the bins) and at most 1.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Outcomes: booleans, or 0 and 1 (1 = positive).

    y_prob : array-like of shape (n_samples,)
        Predicted probability of the positive class, in [0, 1].

    n_bins : int, default=15
        Number of equal-width bins.

    Returns
    -------
    ece : float
        The expected calibration error, in [0, 1].

    See Also
    --------
    sklearn.calibration.calibration_curve : the per-bin frequencies and mean
        predictions (a reliability diagram).
    sklearn.metrics.brier_score_loss : mean squared error of the probability.

    References
    ----------
    .. [1] M. P. Naeini, G. F. Cooper and M. Hauskrecht, "Obtaining well
       calibrated probabilities using Bayesian binning", AAAI, 2015.
    .. [2] C. Guo, G. Pleiss, Y. Sun and K. Q. Weinberger, "On calibration of
       modern neural networks", ICML, 2017.

    Examples
    --------
    >>> from sklearn_flowr.metrics import expected_calibration_error
    >>> expected_calibration_error([0, 1, 0, 1], [1.0, 1.0, 1.0, 1.0])
    0.5
    >>> expected_calibration_error([0, 0, 0, 1], [0.25, 0.25, 0.25, 0.25])
    0.0
    """
    y_true, y_prob = _check_binary_and_proba(y_true, y_prob)
    bins = _bin_index(y_prob, n_bins)
    # |sum of predictions - sum of outcomes| per bin, over n: the weighted
    # gap of the formula with the bin counts cancelled.
    predicted = np.bincount(bins, weights=y_prob, minlength=n_bins)
    observed = np.bincount(bins, weights=y_true.astype(np.float64),
                           minlength=n_bins)
    return float(np.sum(np.abs(predicted - observed)) / y_true.shape[0])


def reliability_bins(y_true, y_prob, *, n_bins: int = DEFAULT_N_BINS) -> Bunch:
    """Reliability-diagram data: the non-empty bins of ``calibration_curve``.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Outcomes: booleans, or 0 and 1.
    y_prob : array-like of shape (n_samples,)
        Predicted probability of the positive class, in [0, 1].
    n_bins : int, default=15
        Number of equal-width bins (see :func:`expected_calibration_error`).

    Returns
    -------
    bins : :class:`~sklearn.utils.Bunch`
        Arrays of shape (n_nonempty_bins,): ``prob_pred`` (mean prediction),
        ``prob_true`` (frequency of the positive class) and ``count`` (rows),
        plus ``n_bins``.

    Examples
    --------
    >>> from sklearn_flowr.metrics._calibration import reliability_bins
    >>> bins = reliability_bins([0, 1, 1, 1], [0.1, 0.9, 0.9, 0.95], n_bins=2)
    >>> bins.prob_true.tolist(), bins.count.tolist()
    ([0.0, 1.0], [1, 3])
    """
    y_true, y_prob = _check_binary_and_proba(y_true, y_prob)
    prob_true, prob_pred = calibration_curve(y_true, y_prob, n_bins=n_bins,
                                             strategy="uniform")
    count = np.bincount(_bin_index(y_prob, n_bins), minlength=n_bins)
    return Bunch(prob_pred=prob_pred, prob_true=prob_true,
                 count=count[count > 0], n_bins=n_bins)
