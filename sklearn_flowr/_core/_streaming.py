"""Per-class sums, prefix states and chunking of online streams (NumPy)."""

from typing import NamedTuple

import numpy as np
from scipy import sparse

# Elements of a stream chunk's temporaries (~32 MB of float64).
_CHUNK_ELEMENTS = 4_000_000
_MAX_CHUNK_ROWS = 512


def selected_rows(Z, rows, chunk):
    """The rows ``chunk`` (a slice) of ``Z``, or of its rows ``rows`` (an
    integer index array; None: all) copied from ``Z`` a chunk at a time."""
    return Z[chunk] if rows is None else Z[rows[chunk]]


def group_sums(Z, index, rows=None):
    """The sorted distinct classes of ``index``, their rows' sums (n_groups, d) and
    counts (float64); ``rows``: the indices (an integer array) of the rows of
    ``Z`` that ``index`` labels (default all), summed without a copy of them."""
    order = np.argsort(index, kind="stable")
    sorted_index = index[order]
    starts = np.flatnonzero(np.r_[True, sorted_index[1:] != sorted_index[:-1]])
    bounds = np.r_[starts, sorted_index.shape[0]]
    # A 0/1 matrix of the groups' rows, in stream order: no sorted copy of Z.
    onehot = sparse.csr_array(
        (np.ones(order.shape[0]), order if rows is None else rows[order], bounds),
        shape=(starts.shape[0], Z.shape[0]))
    return sorted_index[starts], onehot @ Z, np.diff(bounds).astype(np.float64)


class PrefixStates(NamedTuple):
    """The states the classes of a chunk go through (:func:`prefix_states`)."""

    touched: np.ndarray  # (n_touched,) classes with rows in the chunk, sorted
    owner: np.ndarray  # (n_states,) class of each state
    sums: np.ndarray  # (n_states, d) sum of the chunk's rows the state took in
    counts: np.ndarray  # (n_states,) how many rows that is
    seen: np.ndarray  # (n_rows, n_touched) rows of class j before row t
    pick: np.ndarray  # (n_rows, n_touched) the state of class j row t sees


def prefix_states(Z, index, live=None):
    """Every state the classes of rows ``Z`` (class ``index``) pass through in a
    chunk, as prefix sums; rows not ``live`` (frozen classes) are left out."""
    touched, row_class = np.unique(index, return_inverse=True)
    row_class = row_class.reshape(-1)
    n_touched = touched.shape[0]
    onehot = row_class[:, None] == np.arange(n_touched)
    if live is not None:
        onehot &= live[:, None]
    seen = np.cumsum(onehot, axis=0) - onehot
    changes = onehot.sum(axis=0)
    offset = np.r_[0, np.cumsum(changes + 1)[:-1]]
    # The live rows grouped by class, in stream order within a class.
    order = np.flatnonzero(onehot.any(axis=1))
    order = order[np.argsort(row_class[order], kind="stable")]
    group = row_class[order]
    group_first = (np.cumsum(changes) - changes)[group]
    rank = np.arange(order.shape[0]) - group_first
    cumulative = np.cumsum(Z[order], axis=0)
    before = np.vstack([np.zeros((1, Z.shape[1])), cumulative])[group_first]
    n_states = int(changes.sum()) + n_touched
    state_rows = offset[group] + rank + 1
    sums = np.zeros((n_states, Z.shape[1]))
    sums[state_rows] = cumulative - before
    counts = np.zeros(n_states)
    counts[state_rows] = rank + 1.0
    return PrefixStates(touched=touched, owner=np.repeat(touched, changes + 1),
                        sums=sums, counts=counts, seen=seen, pick=offset + seen)


def chunk_slices(index, *, n_classes, width):
    """Slices of the stream ``index`` whose scores and prefix states, ``width``
    wide, stay within ``_CHUNK_ELEMENTS`` (one row at least)."""
    n_rows = index.shape[0]
    start = 0
    while start < n_rows:
        stop = min(n_rows, start + min(_MAX_CHUNK_ROWS,
                                       max(1, _CHUNK_ELEMENTS // (n_classes + 2))))
        while stop - start > 1:
            rows = stop - start
            touched = np.unique(index[start:stop]).shape[0]
            if rows * (rows + touched) * width <= _CHUNK_ELEMENTS:
                break
            stop = start + rows // 2
        yield slice(start, stop)
        start = stop
