"""Tests of the stream numerics shared by the head and the class-mean baselines
(``sklearn_flowr._core._streaming``)."""

import numpy as np
import pytest

import sklearn_flowr._core._streaming as streaming
from sklearn_flowr._core import chunk_slices, group_sums, prefix_states


def test_group_sums_equal_a_loop(rng):
    """Check per-class sums and counts against a loop over the classes."""
    Z = rng.normal(size=(50, 3))
    index = rng.integers(2, 9, size=50)
    classes, sums, counts = group_sums(Z, index)
    np.testing.assert_array_equal(classes, np.unique(index))
    for k, label in enumerate(classes):
        np.testing.assert_allclose(sums[k], Z[index == label].sum(axis=0))
        assert counts[k] == np.sum(index == label)


def test_group_sums_of_selected_rows_equal_those_of_their_copy(rng):
    """Check that ``rows`` sums the rows it names, in their order, exactly as
    the copy ``Z[rows]`` would."""
    Z = rng.normal(size=(60, 4))
    rows = rng.permutation(60)[:35]
    index = rng.integers(0, 7, size=35)
    for got, want in zip(group_sums(Z, index, rows), group_sums(Z[rows], index),
                         strict=True):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("with_live", [False, True])
def test_prefix_states_are_the_sums_before_each_row(rng, with_live):
    """Check the state each row picks holds exactly the (live) rows of that
    class before it, for every touched class."""
    Z = rng.normal(size=(30, 4))
    index = rng.integers(0, 6, size=30) * 10
    live = rng.random(30) > 0.3 if with_live else np.ones(30, dtype=bool)
    table = prefix_states(Z, index, live=live if with_live else None)
    np.testing.assert_array_equal(table.touched, np.unique(index))
    for t in range(30):
        for j, label in enumerate(table.touched):
            before = (index[:t] == label) & live[:t]
            state = table.pick[t, j]
            assert table.owner[state] == label
            assert table.seen[t, j] == before.sum()
            assert table.counts[state] == before.sum()
            np.testing.assert_allclose(table.sums[state], Z[:t][before].sum(axis=0),
                                       atol=1e-12)


def test_chunk_slices_cover_the_stream_within_the_bound(rng, monkeypatch):
    """Check chunks are consecutive, cover every row once and respect the
    element bound (one row at least)."""
    monkeypatch.setattr(streaming, "_CHUNK_ELEMENTS", 600)
    monkeypatch.setattr(streaming, "_MAX_CHUNK_ROWS", 9)
    index = rng.integers(0, 12, size=200)
    chunks = list(chunk_slices(index, n_classes=12, width=5))
    assert chunks[0].start == 0 and chunks[-1].stop == 200
    for previous, chunk in zip(chunks, chunks[1:], strict=False):
        assert previous.stop == chunk.start
    for chunk in chunks:
        rows = chunk.stop - chunk.start
        touched = np.unique(index[chunk]).shape[0]
        assert 1 <= rows <= 9
        assert rows == 1 or rows * (rows + touched) * 5 <= 600


def test_chunk_slices_give_one_row_when_nothing_fits():
    """Check a bound too small for any chunk still makes progress row by row."""
    chunks = list(chunk_slices(np.arange(5), n_classes=10**9, width=10**9))
    assert [(c.start, c.stop) for c in chunks] == [(i, i + 1) for i in range(5)]
