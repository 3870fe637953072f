"""Row lengths that do not depend on the features' units."""

import numpy as np


def row_norms(X):
    """Euclidean length of each row of a float array ``X``, right for any
    finite row: rows whose squares would underflow or overflow ``X``'s dtype
    are scaled by their largest value first."""
    with np.errstate(over="ignore", under="ignore"):  # such rows: below
        norms = np.linalg.norm(X, axis=1)
    info = np.finfo(X.dtype)
    unsafe = ~((norms > np.sqrt(info.tiny) / info.eps)
               & (norms < np.sqrt(info.max) * info.eps))
    if unsafe.any():
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
