"""Stable log-sum-exp and log-softmax over the last axis, for any array API,
and the head's in-place NumPy softmax."""

import numpy as np

from ._namespace import get_namespace


def logsumexp(x, *, axis=-1, keepdims=False):
    """Return ``log(sum(exp(x)))`` along ``axis`` without overflow.

    Rows whose entries are all ``-inf`` give ``-inf`` (not NaN): a class that
    is not instantiated yet is masked with ``-inf``.
    """
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
    """Turn a float64 NumPy array of log-weights into row probabilities, in place.

    The exponentials of an (n_samples, n_classes + 1) block at 10^4 classes
    cost as much as the matrix product that made it, so this runs in place
    (one pass of ``exp``, no temporaries of that size) and in NumPy only: the
    head's prediction path never imports torch. Arguments far below the
    underflow point send ``exp`` down a slow path (three times slower at 10^4
    classes), so shifted log-weights are clamped at -700 first: such entries
    become ``exp(-700) ~ 1e-304`` instead of an underflowed 0, a change far
    below float64 resolution of a probability row.
    """
    scores -= scores.max(axis=1, keepdims=True)
    np.maximum(scores, -700.0, out=scores)
    np.exp(scores, out=scores)
    scores /= scores.sum(axis=1, keepdims=True)
    return scores
