"""Row lengths that do not depend on the features' units."""

import functools

import numpy as np


@functools.cache
def _safe_range(dtype):
    """Lengths whose squares keep their digits in ``dtype``, neither
    underflowing nor overflowing."""
    info = np.finfo(dtype)
    return float(np.sqrt(info.tiny) / info.eps), float(np.sqrt(info.max) * info.eps)


def row_norms(X):
    """Euclidean length of each row of a float array ``X``, right for any
    finite row: rows whose squares would underflow or overflow ``X``'s dtype
    are scaled by their largest value first."""
    low, high = _safe_range(X.dtype)
    norms = np.sqrt(np.einsum("ij,ij->i", X, X))
    if not (norms.size == 0 or low < norms.min() and norms.max() < high):
        unsafe = ~((norms > low) & (norms < high))
        rows = X[unsafe]
        scale = np.abs(rows).max(axis=1, keepdims=True)
        with np.errstate(invalid="ignore"):  # 0 / 0 of a zero row: length 0
            norms[unsafe] = np.nan_to_num(
                np.linalg.norm(rows / scale, axis=1)) * scale[:, 0]
    return norms


def unit_rows(X):
    """Rows of ``X`` scaled to unit length; zero rows stay zero."""
    norms = row_norms(X)
    return X / np.where(norms > 0, norms, 1)[:, None]
