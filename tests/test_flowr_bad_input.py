"""FLOWRClassifier at the door: magnitudes, divergence, absurd sizes, interrupts.

Each case asserts the error (type and a fragment of its message) and, where a
fitted model was called, that its state equals a snapshot taken before.
"""

import copy

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.utils._param_validation import InvalidParameterError

import sklearn_flowr._flowr as flowr
from sklearn_flowr import CRPGaussianClassifier, FLOWRClassifier
from sklearn_flowr.training import MetaTraining, SupE, pipeline
from sklearn_flowr.training._examples import flowr_example


def _state(clf, X):
    """What a caller sees of a fitted model, as copies taken now."""
    return {"classes": np.array(clf.classes_, copy=True),
            "encoder": clf.encoder_,
            "head_id": id(clf.head_),
            "proba": np.array(clf.predict_proba(X), copy=True),
            "counts": np.array(clf.head_.class_count_, copy=True)}


def _assert_same(before, after):
    np.testing.assert_array_equal(after["classes"], before["classes"])
    assert after["encoder"] is before["encoder"]
    assert after["head_id"] == before["head_id"]
    np.testing.assert_array_equal(after["proba"], before["proba"])
    np.testing.assert_array_equal(after["counts"], before["counts"])


@pytest.fixture
def fitted():
    clf, X, y = flowr_example("large")  # knows digits 0-4
    return copy.deepcopy(clf), X, y


def test_values_beyond_float32_are_refused_by_name(fitted):
    clf, X, _ = fitted
    before = _state(clf, X[:20])
    for method in (clf.transform, clf.predict, clf.predict_proba):
        with pytest.raises(ValueError, match="beyond the float32 range"):
            method(X[:2] * 1e200)
    with pytest.raises(ValueError, match="beyond the float32 range"):
        clf.partial_fit(X[:2] * 1e200, [9, 9])
    _assert_same(before, _state(clf, X[:20]))


def test_non_finite_embeddings_are_named_not_reported_as_nan_input(fitted):
    clf, X, _ = fitted
    before = _state(clf, X[:20])
    huge = np.full((2, X.shape[1]), 3e38)
    with pytest.raises(ValueError, match="non-finite embeddings for 2 of 2 rows"):
        clf.open_world_step(huge, [9, 9])
    _assert_same(before, _state(clf, X[:20]))


@pytest.mark.parametrize("stage, param", [("pretrain", "pretrain__lr"),
                                          ("meta", "meta__encoder_lr")])
def test_a_diverging_stage_stops_and_names_its_learning_rate(stage, param):
    X, y = load_digits(return_X_y=True)
    X, y = X[y < 5] / 16.0, y[y < 5]
    clf = FLOWRClassifier(
        backbone="mlp", embedding_dim=4, pretrain=SupE(epochs=2),
        meta=MetaTraining(epochs=1, episodes_per_epoch=3, n_way=3, n_unknown=1),
        calibration=None, verbose=0, random_state=0, reuse_encoder=False)
    clf.set_params(**{param: 1e30})
    with pytest.raises(FloatingPointError, match=param):
        clf.fit(X, y)
    assert not hasattr(clf, "head_")  # nothing of the failed fit was kept


@pytest.mark.parametrize("params, name", [
    ({"fine_tune_steps": 10**30}, "fine_tune_steps"),
    ({"meta__epochs": 10**30}, "epochs"),
    ({"pretrain__batch_size": 10**12}, "batch_size"),
    ({"embedding_dim": 10**7}, "embedding_dim"),
])
def test_absurd_sizes_are_refused_before_any_training(no_training, params, name):
    X, y = load_digits(return_X_y=True)
    clf = FLOWRClassifier(backbone="mlp", verbose=0).set_params(**params)
    with pytest.raises(InvalidParameterError, match=name):
        clf.fit(X / 16.0, y)


def test_reset_interrupted_leaves_the_task_as_it_was(fitted, monkeypatch):
    clf, X, y = fitted
    clf.partial_fit(X[y == 9][:2], y[y == 9][:2])
    before = _state(clf, X[:20])

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(flowr.copy, "deepcopy", interrupt)
    with pytest.raises(KeyboardInterrupt):
        clf.reset()
    monkeypatch.undo()
    _assert_same(before, _state(clf, X[:20]))


@pytest.mark.parametrize("call", ["partial_fit", "open_world_step", "adapt"])
@pytest.mark.parametrize("where", ["embed", "head", "fine_tune"])
def test_online_calls_interrupted_leave_the_model_as_it_was(fitted, monkeypatch,
                                                             call, where):
    clf, X, y = fitted
    rows = np.r_[np.flatnonzero(y == 8)[:3], np.flatnonzero(y == 0)[:2]]
    before = _state(clf, X[:20])

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    if where == "embed":
        monkeypatch.setattr(pipeline, "embed", interrupt)
    elif where == "head":
        for name in ("partial_fit", "open_world_step"):
            monkeypatch.setattr(CRPGaussianClassifier, name, interrupt)
    else:
        monkeypatch.setattr(pipeline, "fine_tune_last_layer", interrupt)
    kwargs = {"fine_tune": 2} if call == "adapt" else {}
    try:
        getattr(clf, call)(X[rows], y[rows], **kwargs)
    except KeyboardInterrupt:
        pass
    else:  # only a call that never reaches the patched point may succeed
        assert where == "fine_tune" and call != "adapt"
        return
    monkeypatch.undo()
    _assert_same(before, _state(clf, X[:20]))


def test_a_head_the_stages_cannot_fill_is_refused_before_training():
    """Check that a head other than CRPGaussianClassifier or the whitened head
    (here a calibration wrapper) gets a TypeError naming it before any
    training, not a KeyError."""
    from sklearn_flowr import CRPGaussianClassifier, FLOWRClassifier
    from sklearn_flowr.calibration import NoveltyCalibratedClassifier

    X = np.random.default_rng(0).normal(size=(12, 4))
    clf = FLOWRClassifier(backbone="mlp", verbose=0, head=NoveltyCalibratedClassifier(
        CRPGaussianClassifier()))
    with pytest.raises(TypeError, match="NoveltyCalibratedClassifier"):
        clf.fit(X, [0, 1, 2] * 4)
    assert not hasattr(clf, "encoder_")
