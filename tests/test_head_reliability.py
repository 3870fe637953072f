"""The head's learning calls are all or nothing and check what they learn:
mixed steps, saving, ``correct``, ``merge``, tiny feature scales, labels."""

import copy
import pickle
import sys

import numpy as np
import pytest

import sklearn_flowr
from sklearn_flowr import CRPGaussianClassifier
from sklearn_flowr.head import _buffers

X4 = np.array([[0.0, 0.0], [0.3, 0.0], [9.0, 9.0], [9.0, 9.3]])


def _head(**params):
    return CRPGaussianClassifier(covariance="isotropic", **params).fit(X4, [0, 0, 1, 1])


def assert_same_head(got, expected):
    """Every attribute of the two heads equal, arrays and buffers included."""
    assert pickle.dumps(got) == pickle.dumps(expected)


def test_mixed_step_with_a_bad_label_changes_nothing():
    """Check that a mixed step whose later labelled run holds the novel label
    leaves the head as it was (classes_, the provisional classes, buffers)."""
    head = _head(unlabelled_threshold=0.0)
    before = copy.deepcopy(head)
    Xs = np.array([[30.0, 30.0], [-40.0, 40.0], [0.1, 0.1]])
    with pytest.raises(ValueError, match="novel label"):
        head.open_world_step(Xs, [5, 0, -1], labelled=[True, False, True])
    assert head.classes_.tolist() == [0, 1]
    assert_same_head(head, before)
    # and it still learns as an untouched copy does
    out = head.open_world_step(Xs, [5, 0, 2], labelled=[True, False, True])
    ref = before.open_world_step(Xs, [5, 0, 2], labelled=[True, False, True])
    assert out.y_assigned.tolist() == ref.y_assigned.tolist()
    assert_same_head(head, before)


def test_empty_mixed_batch_is_refused():
    """Check that an empty mixed batch gets a clear error, not IndexError."""
    head = _head()
    with pytest.raises(ValueError, match="0 rows"):
        head.open_world_step(np.empty((0, 2)), [], labelled=np.array([], bool))


@pytest.mark.parametrize("how", ["pickle", "deepcopy", "save"])
def test_saving_leaves_the_growth_buffers_alone(how, tmp_path, monkeypatch):
    """Check that pickling, deepcopy and save do not change the live head's
    buffers (an incremental growth under way included), even when
    interrupted half-way, and that it learns new classes afterwards."""
    monkeypatch.setattr(_buffers, "_INCREMENTAL_ELEMENTS", 0)
    head = _head(b=1.0, sigma=0.5, prior_mean=0.0, prior_var=10.0)
    head.partial_fit(np.arange(8.0).reshape(4, 2) + 20, [2, 3, 4, 5])
    assert head._state._next is not None  # a growth under way
    buffers = {name: getattr(head._state, name) for name in head._state._BUFFERS}
    twin = copy.deepcopy(head)
    calls = {"save": lambda: sklearn_flowr.save(head, tmp_path / "h.skops"),
             "pickle": lambda: pickle.dumps(head),
             "deepcopy": lambda: copy.deepcopy(head)}
    calls[how]()
    for name, buffer in buffers.items():
        assert getattr(head._state, name) is buffer
    assert head._state._next is not None
    rows = np.arange(16.0).reshape(8, 2) - 50
    head.partial_fit(rows, np.arange(10, 18))
    twin.partial_fit(rows, np.arange(10, 18))
    np.testing.assert_array_equal(head.predict_joint_log_proba(rows),
                                  twin.predict_joint_log_proba(rows))


@pytest.mark.parametrize("y_true, match", [
    (["cat", "cat"], "numeric and string"),
    ([None, None], "missing label"),
    ([np.nan, np.nan], "NaN"),
    ([2.5, 2.5], "Unknown label type"),
])
def test_correct_checks_the_true_labels(y_true, match):
    """Check that correct refuses true labels partial_fit would refuse, and
    changes nothing."""
    head = _head(unlabelled_threshold=0.0)
    rows = np.array([[30.0, 30.0], [30.2, 30.0]])
    out = head.open_world_step(rows)
    before = copy.deepcopy(head)
    with pytest.raises(ValueError, match=match):
        head.correct(rows, out.y_assigned, y_true)
    assert_same_head(head, before)


def test_correct_refuses_rows_never_learned():
    """Check that correct refuses a row the head did not learn without a
    label, even when its class has such rows."""
    head = _head(unlabelled_threshold=0.0)
    out = head.open_world_step(np.array([[0.1, 0.0], [0.2, 0.0]]))
    assert out.y_assigned.tolist() == [0, 0]
    before = copy.deepcopy(head)
    with pytest.raises(ValueError, match="not learned"):
        head.correct(np.array([[5.0, -5.0]]), [0], [1])
    assert_same_head(head, before)
    head.correct(np.array([[0.2, 0.0]]), [0], [1])  # a learned row moves


def test_merge_refuses_provisional_classes_and_keeps_the_record():
    """Check that merge refuses heads holding provisional classes (each head
    numbers its own), and that merged heads keep which rows were learned
    without a label: merged then corrected equals one head fed both streams."""
    params = dict(b=1.0, sigma=0.5, prior_mean=4.5, prior_var=30.0,
                  unlabelled_threshold=0.0)
    left, right = _head(**params), _head(**params)
    left.open_world_step(np.array([[30.0, 30.0]]))
    right.open_world_step(np.array([[-40.0, 40.0]]))
    with pytest.raises(ValueError, match="provisional classes"):
        left.merge(right)
    left, right = _head(**params), _head(**params)
    out_left = left.open_world_step(np.array([[0.2, 0.1]]))
    out_right = right.open_world_step(np.array([[9.1, 9.0]]))
    merged = left.merge(right)
    merged.correct(np.array([[0.2, 0.1], [9.1, 9.0]]),
                   np.r_[out_left.y_assigned, out_right.y_assigned], [1, 0])
    whole = CRPGaussianClassifier(covariance="isotropic", **params).fit(
        np.r_[X4, X4, [[0.2, 0.1], [9.1, 9.0]]], [0, 0, 1, 1, 0, 0, 1, 1, 1, 0])
    np.testing.assert_allclose(merged.predict_joint_log_proba(X4),
                               whole.predict_joint_log_proba(X4), rtol=1e-12)


@pytest.mark.parametrize("covariance", ["isotropic", "full"])
@pytest.mark.parametrize("scale", [1e-154, 1e-160, 1e-110])
def test_tiny_feature_scales_are_refused(scale, covariance):
    """Check that features too small for float64's squares are refused with
    an error naming the problem (they gave wrong answers silently)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 3)) + np.repeat(np.eye(3)[:2] * 5, 10, axis=0)
    y = np.repeat([0, 1], 10)
    with pytest.raises(ValueError, match="underflow"):
        CRPGaussianClassifier(covariance=covariance).fit(X * scale, y)


@pytest.mark.parametrize("covariance", ["isotropic", "full"])
def test_small_feature_scales_within_range_are_scale_free(covariance):
    """Check that features at 1e-90 give the predictions of the unscaled head."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(60, 3)) + np.repeat(rng.normal(scale=4, size=(3, 3)),
                                             20, axis=0)
    y = np.repeat([0, 1, 2], 20)
    test = rng.normal(scale=5, size=(50, 3))
    ref = CRPGaussianClassifier(covariance=covariance).fit(X, y)
    head = CRPGaussianClassifier(covariance=covariance).fit(X * 1e-90, y)
    np.testing.assert_array_equal(head.predict(test * 1e-90), ref.predict(test))
    np.testing.assert_allclose(head.predict_proba(test * 1e-90),
                               ref.predict_proba(test), atol=1e-9)


def test_interrupt_during_rollback_keeps_the_attributes():
    """Check that a Ctrl-C at any line of the rollback after a bad-input
    ValueError leaves every attribute in place (the rollback restarts)."""
    from sklearn_flowr.base import all_or_nothing

    rollback = all_or_nothing._restore.__code__
    k = 0
    while True:
        k += 1
        head = _head()
        before = copy.deepcopy(head)
        seen = {"lines": 0}

        def tracer(frame, event, arg, k=k, seen=seen):
            if frame.f_code is not rollback:
                return None

            def local(frame, event, arg):
                if event == "line":
                    seen["lines"] += 1
                    if seen["lines"] == k:
                        raise KeyboardInterrupt
                return local
            return local

        sys.settrace(tracer)
        try:
            with pytest.raises((KeyboardInterrupt, ValueError)):
                head.partial_fit(X4, ["a", "b", "c", "d"])
        finally:
            sys.settrace(None)
        assert head.get_params() == before.get_params()
        assert_same_head(head, before)
        if seen["lines"] < k:
            break
    assert k > 3


def test_uint64_labels_stay_exact():
    """Check that uint64 labels beyond int64 keep their values: joining int64
    classes, beside the novel label -1 and in a stream's predictions."""
    big = np.array([2**63 + 1, 2**63 + 2], dtype=np.uint64)
    head = _head()
    head.partial_fit(X4[[0, 2]] + 50, big)
    assert head.classes_.tolist() == [0, 1, 2**63 + 1, 2**63 + 2]
    labels = np.array([2**63 + 1, 2**63 + 1, 2**63 + 2, 2**63 + 2], dtype=np.uint64)
    head = CRPGaussianClassifier(covariance="isotropic").fit(X4, labels)
    assert head.predict([[0.1, 0.0], [-60.0, 60.0]]).tolist() == [2**63 + 1, -1]
    out = head.open_world_step([[-60.0, 60.0], [0.1, 0.0]],
                               np.array([2**63 + 3, 2**63 + 1], dtype=np.uint64))
    assert out.y_pred.tolist() == [-1, 2**63 + 1]
    assert out.y_known.tolist()[1] == 2**63 + 1


def test_head_saved_without_a_record_still_learns_unlabelled_rows():
    """Check that a head whose saved state predates the record of unlabelled
    rows merges and streams, and leaves the class default untouched."""
    params = dict(b=1.0, sigma=0.5, prior_mean=4.5, prior_var=30.0,
                  unlabelled_threshold=0.0)
    state = _head(**params).__getstate__()
    del state["_discovered"]
    old = object.__new__(CRPGaussianClassifier)
    old.__setstate__(state)
    default = copy.deepcopy(CRPGaussianClassifier._discovered)
    assert old.merge(_head(**params)).class_count_.tolist() == [4.0, 4.0]
    old.open_world_step(np.array([[30.0, 30.0]]))
    assert old.classes_.tolist() == [0, 1, -2]
    assert CRPGaussianClassifier._discovered == default
