"""Tests of one-row ``open_world_step`` calls on float64 ndarrays (the online
loop's case, which skips ``validate_data`` and scores with one matrix-vector
product): they give what the same steps as lists give, bad input raises the
same messages. Speed itself lives in benchmarks/bench_head.py."""

import copy

import numpy as np
import pytest

from sklearn_flowr import CRPGaussianClassifier
from sklearn_flowr.baselines import NCMClassifier
from sklearn_flowr.validation import MAX_ABS_INPUT


def _fitted(rng, labels, **params):
    y = np.repeat(np.asarray(labels), 3)
    centres = rng.normal(scale=4.0, size=(len(labels), 4))
    X = centres[np.repeat(np.arange(len(labels)), 3)] + rng.normal(size=(y.shape[0], 4))
    return CRPGaussianClassifier(**params).fit(X, y)


def _assert_same_result(got, expected):
    assert list(got) == list(expected)
    for key in expected:
        assert got[key].dtype == expected[key].dtype, key
        np.testing.assert_array_equal(got[key], expected[key], err_msg=key)


@pytest.mark.parametrize(("labels", "new_label", "params"), [
    ([0, 1, 2], 5, {}),
    ([0, 1, 2], 5, {"covariance": "full"}),
    ([0, 1, 2], 5, {"novelty_calibration": (0.5, -1.0), "class_prior": "uniform"}),
    ([0, 1, 2], 5, {"novel_label": "unknown"}),
    (["a", "b", "c"], "zz", {}),
])
def test_one_row_ndarray_steps_equal_list_steps(rng, labels, new_label, params):
    """Check a stream of one-row float64 ndarray steps gives the results,
    dtypes and state of the same steps as lists: known and new labels, rows
    declared novel or not."""
    head = _fitted(rng, labels, **params)
    ndarray, general = copy.deepcopy(head), copy.deepcopy(head)
    rows = rng.normal(scale=4.0, size=(12, 4))
    stream = [labels[t % len(labels)] for t in range(12)]
    stream[3] = stream[7] = new_label
    for t in range(12):
        y = np.array([stream[t]])
        _assert_same_result(ndarray.open_world_step(rows[t : t + 1], y),
                            general.open_world_step(rows[t : t + 1].tolist(),
                                                    [stream[t]]))
    np.testing.assert_array_equal(ndarray.classes_, general.classes_)
    np.testing.assert_array_equal(ndarray.predict_joint_log_proba(rows),
                                  general.predict_joint_log_proba(rows))


def test_one_row_ndarray_steps_of_baselines_equal_list_steps(rng):
    """Check a baseline's one-row ndarray steps against lists."""
    X = rng.normal(size=(12, 3))
    model = NCMClassifier(threshold=3.0).fit(X, np.repeat([0, 1, 2], 4))
    ndarray, general = copy.deepcopy(model), copy.deepcopy(model)
    for t, label in enumerate([0, 7, 7, 2]):
        _assert_same_result(ndarray.open_world_step(X[t : t + 1], np.array([label])),
                            general.open_world_step(X[t : t + 1].tolist(), [label]))


@pytest.mark.parametrize(("row", "y", "error"), [
    ([[np.nan, 0.0, 0.0, 0.0]], [0], "Input X contains NaN"),
    ([[np.inf, 0.0, 0.0, 0.0]], [0], "Input X contains infinity"),
    ([[2 * MAX_ABS_INPUT, 0.0, 0.0, 0.0]], [0], "magnitude"),
    ([[0.0, 0.0, 0.0]], [0], "X has 3 features"),
    ([[0.0] * 4], [-1], "novel label"),
    ([[0.0] * 4], ["a"], "cannot be mixed"),
])
def test_bad_one_row_input_keeps_the_messages(rng, row, y, error):
    """Check a bad one-row ndarray step raises the message of lists with the
    head unchanged."""
    head = _fitted(rng, [0, 1, 2], covariance="isotropic")
    X, y = np.array(row), np.array(y)
    before = copy.deepcopy(head)
    with pytest.raises(ValueError, match=error):
        head.open_world_step(X, y)
    np.testing.assert_array_equal(head.class_count_, before.class_count_)
    np.testing.assert_array_equal(head.classes_, before.classes_)


def test_one_row_steps_at_the_edge_of_the_input_range(rng):
    """Check rows at the edge of the input range (a norm of exactly
    MAX_ABS_INPUT, values at +-MAX_ABS_INPUT) are learned as lists are."""
    head = _fitted(rng, [0, 1, 2])
    general = copy.deepcopy(head)
    on_norm = np.array([[MAX_ABS_INPUT, 0.0, 0.0, 0.0]])
    edge = np.array([[MAX_ABS_INPUT, -MAX_ABS_INPUT, 0.0, 0.0]])
    for X in (on_norm, edge):
        _assert_same_result(head.open_world_step(X, np.array([1])),
                            general.open_world_step(X.tolist(), [1]))
    assert head.class_count_[1] == 5


def test_changed_parameters_in_one_row_steps(rng):
    """Check a parameter set after fitting to an equal value (a new object)
    is found unchanged, and that a changed value or one that cannot be
    compared (an array of another shape) is refused."""
    head = _fitted(rng, [0, 1, 2], a=0.5, covariance="isotropic")
    general = copy.deepcopy(head)
    X, y = np.zeros((1, 4)), np.array([1])
    head.set_params(a=float("0.5"))  # equal, but not the same object
    _assert_same_result(head.open_world_step(X, y),
                        general.open_world_step(X.tolist(), [1]))
    head.set_params(a=0.25)
    with pytest.raises(ValueError, match="parameters changed after fitting"):
        head.open_world_step(X, y)
    head.set_params(a=0.5, prior_mean=np.zeros(4))  # fitted with "auto"
    with pytest.raises(ValueError, match="parameters changed after fitting"):
        head.open_world_step(X, y)


@pytest.mark.parametrize("scale", [1e-3, 1.0, 30.0, 1e3])
def test_one_row_novelty_equals_the_batch_formulas(rng, scale):
    """Check a one-row step's P(novel) and log-odds equal ``predict_proba``'s
    log-softmax at every level of the scores: the step sums exp relative to
    0 while the best known score is within +-600, else relative to it."""
    head = _fitted(rng, list(range(6)), covariance="isotropic")
    X = head.prior_mean_ + scale * rng.normal(size=(40, 4))
    levels = []
    for t in range(X.shape[0]):
        row, y = X[t : t + 1], np.array([t % 6])
        joint = head.predict_joint_log_proba(row)[0]
        levels.append(joint[:-1].max())
        log_proba = head.predict_log_proba(row)[0]
        expected_odds = log_proba[-1] - np.logaddexp.reduce(log_proba[:-1])
        step = head.open_world_step(row, y)
        np.testing.assert_allclose(step.p_novel[0], np.exp(log_proba[-1]),
                                   rtol=1e-12, atol=1e-300)
        np.testing.assert_allclose(step.novelty_score[0], expected_odds,
                                   rtol=1e-12, atol=1e-12)
    levels = np.array(levels)
    # the case each scale stands for
    if scale <= 1.0:
        assert np.all(np.abs(levels) <= 600.0)
    elif scale >= 1e3:
        assert np.all(levels < -600.0)
    else:
        assert np.any(levels < -600.0) and np.any(np.abs(levels) <= 600.0)
