"""Log-sum-exp and log-softmax for any array API (scipy's takes NumPy only),
and the head's in-place NumPy softmax."""

import numpy as np

from ._namespace import get_namespace


def logsumexp(x, *, axis=-1, keepdims=False):
    """``log(sum(exp(x)))`` along ``axis`` without overflow; ``-inf`` for a
    row of ``-inf``."""
    xp = get_namespace(x)
    peak = xp.max(x, axis=axis, keepdims=True)
    # A row of -inf would give inf - inf = nan below; shift it by 0 instead.
    peak = xp.where(xp.isfinite(peak), peak, xp.zeros_like(peak))
    out = xp.log(xp.sum(xp.exp(x - peak), axis=axis, keepdims=True)) + peak
    if not keepdims:
        out = xp.squeeze(out, axis=axis)
    return out


def log_softmax(x, *, axis=-1):
    """Normalise log-weights so that their exponentials sum to one."""
    return x - logsumexp(x, axis=axis, keepdims=True)


def softmax_rows_inplace(scores):
    """Row probabilities of float64 log-weights, in place (no temporaries)."""
    scores -= scores.max(axis=1, keepdims=True)
    # exp is 3x slower far below underflow: -700 gives 1e-304, not 0.
    np.maximum(scores, -700.0, out=scores)
    np.exp(scores, out=scores)
    scores /= scores.sum(axis=1, keepdims=True)
    return scores
