"""Tests of the task samplers of sklearn_flowr.protocol (small and large context)."""

import pickle

import joblib
import numpy as np
import pytest
from numpy.testing import assert_array_equal

from sklearn_flowr.protocol import (
    LargeContextTasks,
    SmallContextTasks,
)

# --------------------------------------------------------------------- fixtures


@pytest.fixture
def seed():
    """The seed every sampler of a test is built with."""
    return 7


# ------------------------------------------------------------ small context
def test_small_context_task_composition(seed):
    """Check class counts, query counts, shot range and disjoint rows/classes."""
    y = np.repeat(np.arange(30), 25)
    tasks = SmallContextTasks(y, n_tasks=40, random_state=seed)
    assert len(tasks) == 40
    for i, task in enumerate(tasks):
        assert task.task_id == i
        support_classes = np.unique(y[task.support])
        query_classes, query_counts = np.unique(y[task.query], return_counts=True)
        assert support_classes.shape[0] == 10
        assert query_classes.shape[0] == 15
        assert np.all(query_counts == 10)
        shots = np.bincount(y[task.support])[support_classes]
        assert shots.min() >= 1 and shots.max() <= 10
        assert set(support_classes) <= set(query_classes)
        # Queries never reuse support rows, and no row appears twice.
        rows = np.r_[task.support, task.query]
        assert np.unique(rows).shape[0] == rows.shape[0]
        novel = np.setdiff1d(query_classes, support_classes)
        assert novel.shape[0] == 5
        assert not np.isin(novel, support_classes).any()


def test_small_context_shots_are_unbalanced(seed):
    """Check that shots vary within tasks and cover 1..10 across tasks."""
    y = np.repeat(np.arange(20), 25)
    tasks = SmallContextTasks(y, n_tasks=50, random_state=seed)
    all_shots, unequal = [], 0
    for task in tasks:
        shots = np.unique(y[task.support], return_counts=True)[1]
        all_shots.extend(shots.tolist())
        unequal += np.unique(shots).shape[0] > 1
    assert set(all_shots) == set(range(1, 11))
    assert unequal == len(tasks)


def test_queries_are_permuted(seed):
    """Check that the query stream interleaves classes instead of grouping them."""
    y = np.repeat(np.arange(20), 25)
    task = SmallContextTasks(y, n_tasks=1, random_state=seed)[0]
    stream = y[task.query]
    changes = np.count_nonzero(stream[1:] != stream[:-1])
    assert changes > 100  # grouped would give 14 changes in 150 rows
    # Novel classes do not all come last either.
    novel = np.setdiff1d(stream, y[task.support])
    assert np.flatnonzero(np.isin(stream, novel)).min() < 50


def test_tasks_are_reproducible_by_seed(seed):
    """Check same seed -> same tasks, another seed -> other tasks."""
    y = np.repeat(np.arange(20), 25)
    a = SmallContextTasks(y, n_tasks=5, random_state=seed)
    b = SmallContextTasks(y, n_tasks=5, random_state=seed)
    c = SmallContextTasks(y, n_tasks=5, random_state=seed + 1)
    assert list(a) == list(b)
    assert all(ta != tc for ta, tc in zip(a, c, strict=True))


def test_task_depends_only_on_seed_and_index(seed):
    """Check that order of access, slicing, pickling and workers change nothing."""
    y = np.repeat(np.arange(20), 25)
    tasks = SmallContextTasks(y, n_tasks=8, random_state=seed)
    forward = list(tasks)
    backward = [tasks[i] for i in reversed(range(8))][::-1]
    assert forward == backward
    assert tasks[2:5] == forward[2:5]
    assert tasks[-1] == forward[7]
    assert list(pickle.loads(pickle.dumps(tasks))) == forward
    in_workers = joblib.Parallel(n_jobs=2, backend="threading")(
        joblib.delayed(tasks.__getitem__)(i) for i in range(8))
    assert in_workers == forward


def test_random_state_none_and_generator():
    """Check None fixes a fresh seed at construction; a Generator seeds too."""
    y = np.repeat(np.arange(20), 25)
    tasks = SmallContextTasks(y, n_tasks=3)
    assert tasks[1] == tasks[1]
    assert SmallContextTasks(y, n_tasks=3)[1] != tasks[1]
    from_generator = SmallContextTasks(y, n_tasks=3,
                                       random_state=np.random.default_rng(3))
    again = SmallContextTasks(y, n_tasks=3, random_state=np.random.default_rng(3))
    assert list(from_generator) == list(again)


def test_task_indexing_errors(seed):
    """Check out-of-range and non-integer task indices raise clear errors."""
    tasks = SmallContextTasks(np.repeat(np.arange(20), 25), n_tasks=3,
                              random_state=seed)
    with pytest.raises(IndexError, match="Task index 3 out of range for 3"):
        tasks[3]
    with pytest.raises(TypeError, match="ints or slices"):
        tasks["0"]
    assert repr(tasks[0]).startswith("Task(task_id=0, n_support=")


@pytest.mark.parametrize("kwargs, match", [
    (dict(n_support_classes=10, n_novel_classes=5),
     r"needs 15 classes \(n_support_classes=10 \+ n_novel_classes=5\) but only 12"),
    (dict(shots=(0, 3)), r"1 <= low <= high; got \(0, 3\)"),
    (dict(shots=(5, 2)), r"1 <= low <= high; got \(5, 2\)"),
    (dict(shots=3), "shots must be a pair"),
    (dict(n_novel_classes=-1),
     r"'n_novel_classes' parameter .* must be an int in the range \[0, inf\)\. Got -1"),
    (dict(n_support_classes=0),
     r"'n_support_classes' parameter .* must be an int in the range \[1, inf\)"),
    (dict(n_query=0), r"'n_query' parameter .* must be an int in the range \[1, inf\)"),
    (dict(n_tasks=2.5),
     r"'n_tasks' parameter .* must be an int in the range \[1, inf\)\. Got 2\.5"),
    (dict(random_state=-3), "random_state must be None, a non-negative int"),
])
def test_small_context_parameter_errors(kwargs, match):
    """Check bad parameters and too few classes fail before any sampling."""
    y = np.repeat(np.arange(12), 30)
    params = dict(n_support_classes=5, n_novel_classes=2) | kwargs
    with pytest.raises(ValueError, match=match):
        SmallContextTasks(y, **params)


def test_small_context_names_small_classes():
    """Check the error names each too-small class, its size and the need."""
    y = np.r_[np.repeat(np.arange(14), 20), np.full(12, 14), np.full(19, 15)]
    with pytest.raises(ValueError, match=(
        r"at least 20 examples \(up to 10 shots \+ n_query=10 queries.*"
        r"2 of 16 classes have fewer: 14 \(12 examples\), 15 \(19 examples\)"
        r".*Lower shots\[1\] or n_query")):
        SmallContextTasks(y)


def test_string_labels_in_messages():
    """Check labels keep their own form (not numpy reprs) in the messages."""
    y = np.repeat(np.array(["cat", "dog", "eel"]), [30, 30, 4])
    with pytest.raises(ValueError, match=r"'eel' \(4 examples\)"):
        SmallContextTasks(y, n_support_classes=2, n_novel_classes=1)


# ------------------------------------------------------------ large context
def test_large_context_task_composition(seed):
    """Check every known class is queried, plus novel classes from the rest."""
    y = np.repeat(np.arange(12), 15)
    known = np.array([9, 0, 4, 2, 7, 5])
    tasks = LargeContextTasks(y, known, n_tasks=10, random_state=seed)
    assert_array_equal(tasks.novel_pool, [1, 3, 6, 8, 10, 11])
    seen_novel = set()
    for task in tasks:
        assert task.support.shape == (0,)
        classes, counts = np.unique(y[task.query], return_counts=True)
        assert np.all(counts == 10)
        assert set(known) <= set(classes)
        novel = np.setdiff1d(classes, known)
        assert novel.shape[0] == 5
        seen_novel |= set(novel.tolist())
        stream = y[task.query]
        assert np.count_nonzero(stream[1:] != stream[:-1]) > 40
    assert seen_novel == {1, 3, 6, 8, 10, 11}


def test_large_context_subsamples_known_classes(seed):
    """Check n_known_query_classes draws that many known classes per task."""
    y = np.repeat(np.arange(12), 15)
    tasks = LargeContextTasks(y, range(8), n_novel_classes=2,
                              n_known_query_classes=3, n_tasks=20,
                              random_state=seed)
    queried = set()
    for task in tasks:
        classes = np.unique(y[task.query])
        assert np.count_nonzero(classes < 8) == 3
        assert np.count_nonzero(classes >= 8) == 2
        queried |= set(classes[classes < 8].tolist())
    assert queried == set(range(8))


@pytest.mark.parametrize("known, kwargs, match", [
    ([0, 1, 99], {}, r"known_classes \[99\] \(1 of 3\) have no rows in y"),
    ([0, 1, 1], {}, "repeated labels"),
    ([], {}, "non-empty 1-d array"),
    (range(8), {}, r"needs 5 classes \(n_novel_classes, drawn from the labels of y "
                   r"outside known_classes\) but only 4"),
    (range(4), dict(n_query=16), r"at least 16 examples.*12 of 12 classes"),
    (range(4), dict(n_known_query_classes=5),
     r"needs 5 classes \(n_known_query_classes\) but only 4"),
    (range(4), dict(n_known_query_classes=0, n_novel_classes=0),
     "both 0"),
    (range(4), dict(n_novel_classes=-2),
     r"'n_novel_classes' parameter .* must be an int in the range \[0, inf\)"),
])
def test_large_context_errors(known, kwargs, match):
    """Check clear errors for bad known classes, pools and counts."""
    y = np.repeat(np.arange(12), 15)
    with pytest.raises(ValueError, match=match):
        LargeContextTasks(y, known, **kwargs)
