"""Maximum-likelihood Weibull fits of every row of a matrix at once (the EVM
fits one per stored point)."""

import numpy as np

# Gumbel method of moments: log X of a Weibull(k) has standard deviation
# pi / (k sqrt(6)); it starts the Newton iteration close to the root.
_PI_OVER_SQRT6 = np.pi / np.sqrt(6.0)
# A sample spread below this (relative to its largest value) is treated as
# degenerate: all values equal, a step function (shape = inf).
_DEGENERATE_SPREAD = 1e-12
_MAX_ITER = 200


def fit_weibull(samples: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Fit ``Weibull(shape, scale)``, location 0, to each row (``inf``: missing);
    ``shape = inf`` for equal values (a step), ``(1, inf)`` for an empty row."""
    # The ML shape k solves g(k) = sum x^k log x / sum x^k - 1/k - mean(log x)
    # = 0 (g increasing); the scale is then lambda = mean(x^k)^(1/k). Newton
    # steps kept inside a bracket, on x / max so that x^k never overflows.
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
    """Probability of inclusion ``Psi = exp(-(distance / scale)^shape)``;
    ``shape = inf`` is a step at ``scale``, ``scale = inf`` includes all."""
    with np.errstate(over="ignore"):
        return np.exp(-((distance / scale) ** shape))
