"""Unit rows that do not depend on the features' units."""

import functools

import numpy as np


@functools.cache
def _safe_range(dtype):
    """Lengths whose squares keep their digits in ``dtype``, neither
    underflowing nor overflowing."""
    info = np.finfo(dtype)
    return float(np.sqrt(info.tiny) / info.eps), float(np.sqrt(info.max) * info.eps)


def _lengths(X):
    return np.sqrt(np.einsum("ij,ij->i", X, X))


def unit_rows(X):
    """Rows of a float array ``X`` scaled to unit length, right for any finite
    row (rows are scaled by their largest value first where squares would
    underflow or overflow ``X``'s dtype); zero rows stay zero."""
    low, high = _safe_range(X.dtype)
    norms = _lengths(X)
    if norms.size and not (low < norms.min() and norms.max() < high):
        scale = np.abs(X).max(axis=1, keepdims=True)
        X = X / np.where(scale > 0, scale, 1)
        norms = _lengths(X)
    return X / np.where(norms > 0, norms, 1)[:, None]
