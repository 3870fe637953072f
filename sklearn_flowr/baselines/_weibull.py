"""Vectorised maximum-likelihood fit of the two-parameter Weibull distribution.

The Extreme Value Machine fits one Weibull per stored point, so the fit runs on
a whole matrix of samples at once: one row per point, one Newton iteration for
all rows together.
"""

import numpy as np

# Gumbel method of moments: log X of a Weibull(k) has standard deviation
# pi / (k sqrt(6)); it starts the Newton iteration close to the root.
_PI_OVER_SQRT6 = np.pi / np.sqrt(6.0)
# A sample spread below this (relative to its largest value) is treated as
# degenerate: all values equal, a step function (shape = inf).
_DEGENERATE_SPREAD = 1e-12
_MAX_ITER = 200


def fit_weibull(samples: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Fit ``Weibull(shape, scale)`` with location 0 to every row of ``samples``.

    The maximum-likelihood shape ``k`` solves the profile-likelihood equation

    ``g(k) = sum x^k log x / sum x^k - 1 / k - mean(log x) = 0``,

    whose left side increases in ``k``; the scale is then
    ``lambda = mean(x^k)^(1/k)``. All rows are solved together by Newton steps
    kept inside a bracket (a step that leaves it is replaced by geometric
    bisection). Samples are divided by their row maximum first, so ``x^k``
    never overflows.

    Parameters
    ----------
    samples : ndarray of shape (n_rows, n_values)
        Positive samples; ``inf`` marks a missing value, so rows may hold
        different numbers of samples.

    Returns
    -------
    shape : ndarray of shape (n_rows,)
        ``k``. ``inf`` for a row whose values are all equal (including a row
        with one value): the likelihood grows without bound towards a step at
        that value. ``1.0`` for a row without values.
    scale : ndarray of shape (n_rows,)
        ``lambda``. The common value for a degenerate row, ``inf`` for a row
        without values.

    Examples
    --------
    >>> import numpy as np
    >>> shape, scale = fit_weibull(np.array([[0.5, 1.0, 1.5, 2.0], [1.0, 1.0, 1.0,
    ...                                       np.inf]]))
    >>> np.round(shape, 4), np.round(scale, 4)
    (array([2.4532,    inf]), array([1.4143, 1.    ]))
    """
    samples = np.asarray(samples, dtype=np.float64)
    n_rows = samples.shape[0]
    valid = np.isfinite(samples)
    n_valid = valid.sum(axis=1)
    shape = np.ones(n_rows)
    scale = np.full(n_rows, np.inf)

    top = np.max(np.where(valid, samples, -np.inf), axis=1, initial=-np.inf)
    has_data = n_valid > 0
    # log(x / max) <= 0; missing values get weight 0 and log 0.
    with np.errstate(divide="ignore", invalid="ignore"):
        log_ratio = np.where(valid, np.log(samples / top[:, None]), 0.0)
    count = np.maximum(n_valid, 1)
    mean_log = log_ratio.sum(axis=1) / count
    spread = -np.min(log_ratio, axis=1, initial=0.0)
    degenerate = has_data & (spread <= _DEGENERATE_SPREAD)
    shape[degenerate] = np.inf
    scale[degenerate] = top[degenerate]

    rows = np.flatnonzero(has_data & ~degenerate)
    if rows.shape[0] == 0:
        return shape, scale
    log_ratio, weight = log_ratio[rows], valid[rows].astype(np.float64)
    mean_log, top, count = mean_log[rows], top[rows], count[rows]

    # Sums over a row's few values: a matrix-vector product or einsum is
    # several times faster than ``sum(axis=1)`` on short rows. Rows with
    # every value present need no weights.
    ones = np.ones(log_ratio.shape[1])
    log_ratio_sq = log_ratio**2
    if weight.all():
        weight = None

    def profile(k, log_ratio, log_ratio_sq, weight, mean_log):
        """g(k) and g'(k) of the profile-likelihood equation, per row."""
        power = np.exp(k[:, None] * log_ratio)  # x^k / max^k
        if weight is not None:
            power *= weight
        total = power @ ones  # >= 1: the maximum contributes 1
        first = np.einsum("ij,ij->i", power, log_ratio) / total
        second = np.einsum("ij,ij->i", power, log_ratio_sq) / total
        return first - 1.0 / k - mean_log, second - first**2 + 1.0 / k**2

    def rows_of(arrays, rows):
        """The rows ``rows`` of each per-row array (None stays None)."""
        return tuple(None if a is None else a[rows] for a in arrays)

    per_row = (log_ratio, log_ratio_sq, weight, mean_log)

    def value_at(k, rows=slice(None)):
        return profile(k, *rows_of(per_row, rows))[0]

    centred = log_ratio - mean_log[:, None]
    if weight is not None:
        centred *= weight
    std_log = np.sqrt((centred**2 @ ones) / count)
    k = _PI_OVER_SQRT6 / std_log
    # Bracket the root: g -> -inf as k -> 0 and g -> -mean_log > 0 as k -> inf.
    # Both ends start at k (one evaluation); only the rows whose end is on
    # the wrong side are evaluated again.
    start = value_at(k)
    low, high = k.copy(), k.copy()
    too_high, too_low = start > 0, start < 0
    for _ in range(_MAX_ITER):
        if not too_high.any():
            break
        low[too_high] /= 4.0
        too_high[too_high] = value_at(low[too_high], too_high) > 0
    for _ in range(_MAX_ITER):
        if not too_low.any():
            break
        high[too_low] *= 4.0
        too_low[too_low] = value_at(high[too_low], too_low) < 0
    # Newton steps on the rows still moving: a row leaves once its step is
    # below 1e-14 of k (its last step taken).
    live, live_k, live_rows = np.arange(k.shape[0]), k, per_row
    for _ in range(_MAX_ITER):
        value, slope = profile(live_k, *live_rows)
        below = value < 0
        low = np.where(below, live_k, low)
        high = np.where(below, high, live_k)
        step = live_k - value / slope
        # A converged Newton step lands on the bracket's edge (k itself):
        # take it rather than bisecting on.
        outside = ~((step >= low) & (step <= high))
        new_k = np.where(outside, np.sqrt(low * high), step)
        moving = np.abs(new_k - live_k) > 1e-14 * live_k
        k[live] = new_k
        if not moving.any():
            break
        if not moving.all():
            live, new_k, low, high = rows_of((live, new_k, low, high), moving)
            live_rows = rows_of(live_rows, moving)
        live_k = new_k
    shape[rows] = k
    # lambda = max * mean((x / max)^k)^(1/k), in logs.
    power = np.exp(k[:, None] * log_ratio)
    if weight is not None:
        power *= weight
    mean_power = (power @ ones) / count
    scale[rows] = top * np.exp(np.log(mean_power) / k)
    return shape, scale


def weibull_inclusion(distance: np.ndarray, shape: np.ndarray,
                      scale: np.ndarray) -> np.ndarray:
    """Probability of inclusion ``Psi = exp(-(distance / scale)^shape)``.

    Parameters
    ----------
    distance : ndarray of shape (n_samples, n_points)
        Non-negative distances.
    shape, scale : ndarray of shape (n_points,)
        From :func:`fit_weibull`; ``shape = inf`` is a step at ``scale``
        (1 inside, ``exp(-1)`` on it, 0 outside) and ``scale = inf`` includes
        everything.

    Returns
    -------
    psi : ndarray of shape (n_samples, n_points)

    Examples
    --------
    >>> weibull_inclusion(np.array([[0.0, 1.0, 2.0]]), np.array([1.0, 2.0, np.inf]),
    ...                   np.array([1.0, 1.0, 3.0]))
    array([[1.        , 0.36787944, 1.        ]])
    """
    with np.errstate(over="ignore"):
        return np.exp(-((distance / scale) ** shape))
