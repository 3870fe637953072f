"""Tests of sklearn_flowr.model_selection.OpenWorldSplit."""

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from sklearn.model_selection import check_cv

from sklearn_flowr.model_selection import OpenWorldSplit


@pytest.fixture
def labels(rng):
    """Ten classes of unequal sizes (5 to 14 rows), shuffled."""
    y = np.repeat(np.arange(10), np.arange(5, 15))
    return rng.permutation(y)


def _held_out(y, train, test):
    return set(np.unique(y[test])) - set(np.unique(y[train]))


def test_split_holds_whole_classes_out_of_training(labels):
    """Check that every row of a held-out class is in the test fold."""
    X = np.zeros((labels.size, 2))
    for train, test in OpenWorldSplit(random_state=0).split(X, labels):
        held = _held_out(labels, train, test)
        assert len(held) == 2  # ceil(0.2 * 10)
        assert_array_equal(
            np.sort(test[np.isin(labels[test], list(held))]),
            np.flatnonzero(np.isin(labels, list(held))),
        )


def test_split_partitions_the_rows(labels):
    """Check that train and test are disjoint, sorted and cover all rows."""
    X = np.zeros((labels.size, 2))
    for train, test in OpenWorldSplit(n_splits=3, random_state=1).split(X, labels):
        assert np.intersect1d(train, test).size == 0
        assert_array_equal(np.sort(np.r_[train, test]), np.arange(labels.size))
        assert_array_equal(train, np.sort(train))


def test_split_tests_a_share_of_each_kept_class(labels):
    """Check that each kept class sends round(test_size * n) rows to test."""
    X = np.zeros((labels.size, 2))
    cv = OpenWorldSplit(n_splits=2, test_size=0.3, random_state=0)
    for train, test in cv.split(X, labels):
        held = _held_out(labels, train, test)
        for c in set(range(10)) - held:
            n_rows = np.sum(labels == c)
            assert np.sum(labels[test] == c) == int(np.floor(0.3 * n_rows + 0.5))


def test_split_keeps_a_training_row_of_every_kept_class():
    """Check that a one-row kept class stays in training, even with test_size."""
    y = np.array([0, 1, 1, 2, 2, 2, 2])
    cv = OpenWorldSplit(n_splits=3, n_novel_classes=1, test_size=0.9, random_state=0)
    for train, test in cv.split(np.zeros((7, 1)), y):
        held = _held_out(y, train, test)
        assert set(np.unique(y[train])) == {0, 1, 2} - held


def test_split_without_known_test_rows():
    """Check that test_size=0 puts only the held-out classes in the test fold."""
    y = np.repeat([0, 1, 2], 4)
    cv = OpenWorldSplit(n_splits=1, n_novel_classes=1, test_size=0.0, random_state=0)
    train, test = next(cv.split(np.zeros((12, 1)), y))
    assert np.unique(y[test]).size == 1
    assert train.size == 8


def test_split_holds_out_different_classes(labels):
    """Check that splits hold out disjoint classes while classes suffice."""
    X = np.zeros((labels.size, 2))
    held = [
        _held_out(labels, tr, te)
        for tr, te in OpenWorldSplit(n_splits=5, random_state=3).split(X, labels)
    ]
    assert set().union(*held) == set(range(10))


def test_split_none_partitions_classes_like_group_kfold(labels):
    """Check that n_novel_classes=None holds out n_classes // n_splits each."""
    X = np.zeros((labels.size, 2))
    cv = OpenWorldSplit(n_splits=3, n_novel_classes=None, random_state=0)
    held = [_held_out(labels, tr, te) for tr, te in cv.split(X, labels)]
    assert [len(h) for h in held] == [3, 3, 3]
    assert len(set().union(*held)) == 9


def test_split_cycles_when_splits_outnumber_classes(labels):
    """Check that extra splits start a new pass with distinct classes per split."""
    X = np.zeros((labels.size, 2))
    cv = OpenWorldSplit(n_splits=6, n_novel_classes=3, random_state=0)
    held = [_held_out(labels, tr, te) for tr, te in cv.split(X, labels)]
    assert all(len(h) == 3 for h in held)
    # 18 slots: the first pass covers all 10 classes once, the second 8 more.
    counts = np.bincount([c for h in held for c in h], minlength=10)
    assert set(counts) <= {1, 2}
    assert counts.sum() == 18


@pytest.mark.parametrize("n_novel_classes, expected", [(3, 3), (0.25, 3), (0.01, 1)])
def test_split_n_novel_classes_count_or_fraction(labels, n_novel_classes, expected):
    """Check an int is a count and a float a fraction of classes, rounded up."""
    X = np.zeros((labels.size, 2))
    cv = OpenWorldSplit(n_splits=2, n_novel_classes=n_novel_classes, random_state=0)
    for train, test in cv.split(X, labels):
        assert len(_held_out(labels, train, test)) == expected


def test_split_is_deterministic_given_random_state(labels):
    """Check that an int random_state repeats the splits; another seed does not."""
    X = np.zeros((labels.size, 2))

    def folds(seed):
        return [
            (tr.tolist(), te.tolist())
            for tr, te in OpenWorldSplit(random_state=seed).split(X, labels)
        ]

    assert folds(0) == folds(0)
    assert folds(0) != folds(1)


def test_split_accepts_string_labels():
    """Check that any sortable labels work, not only integers."""
    y = np.repeat(["cat", "dog", "emu", "fox"], 3)
    cv = OpenWorldSplit(n_splits=2, n_novel_classes=1, random_state=0)
    for train, test in cv.split(np.zeros((12, 1)), y):
        assert len(_held_out(y, train, test)) == 1


def test_split_is_a_scikit_learn_cv_splitter():
    """Check get_n_splits, check_cv pass-through and the parameter repr."""
    cv = OpenWorldSplit(n_splits=4, random_state=0)
    assert cv.get_n_splits() == 4
    assert check_cv(cv) is cv
    assert repr(cv) == (
        "OpenWorldSplit(n_novel_classes=0.2, n_splits=4, random_state=0, test_size=0.2)"
    )


@pytest.mark.parametrize(
    "params, match",
    [
        ({"n_splits": 0}, r"'n_splits' parameter .* must be an int in the range "
                          r"\[1, inf\)\. Got 0"),
        ({"n_splits": 2.5}, r"'n_splits' parameter .* Got 2\.5"),
        ({"n_novel_classes": 0}, r"'n_novel_classes' parameter .* must be an int "
                                 r"in the range \[1, inf\), a float in the range "
                                 r"\(0\.0, 1\.0\) or None\. Got 0"),
        ({"n_novel_classes": 1.5}, r"'n_novel_classes' parameter .* Got 1\.5"),
        ({"n_novel_classes": True}, "n_novel_classes must be .* not a bool"),
        ({"n_novel_classes": "two"}, r"'n_novel_classes' parameter .* Got 'two'"),
        ({"test_size": 1.0}, r"'test_size' parameter .* must be a float in the "
                             r"range \[0\.0, 1\.0\)\. Got 1\.0"),
        ({"test_size": -0.1}, r"'test_size' parameter .* Got -0\.1"),
    ],
)
def test_split_rejects_bad_parameters(params, match):
    """Check that invalid parameters fail when the splitter is built."""
    with pytest.raises(ValueError, match=match):
        OpenWorldSplit(**params)


@pytest.mark.parametrize(
    "y, params, match",
    [
        (np.zeros(6), {}, "at least 2 classes"),
        (np.repeat([0, 1, 2], 2), {"n_novel_classes": 3}, "holds out 3 of 3"),
        (np.repeat([0, 1, 2], 2), {"n_novel_classes": 0.9}, "holds out 3 of 3"),
        (np.repeat([0, 1], 3), {"n_novel_classes": None}, "holds out 0 of 2"),
        (np.repeat([0, 1, 2], 3), {}, "inconsistent numbers of samples"),
    ],
)
def test_split_rejects_impossible_splits(y, params, match):
    """Check that too few classes or too many held-out classes raise."""
    cv = OpenWorldSplit(n_splits=5, **params)
    with pytest.raises(ValueError, match=match):
        next(cv.split(np.zeros((6, 1)), y))


def test_split_requires_y():
    """Check that splitting without labels raises a clear error."""
    with pytest.raises(ValueError, match="needs y"):
        next(OpenWorldSplit().split(np.zeros((6, 1))))
