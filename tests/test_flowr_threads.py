"""Tests of FLOWRClassifier(n_jobs=...): torch's CPU threads while it trains,
embeds, fine-tunes and predicts, as scikit-learn reads n_jobs."""

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.utils._param_validation import InvalidParameterError

from sklearn_flowr import FLOWRClassifier
from sklearn_flowr.encoders import MLPEncoder
from sklearn_flowr.training import MetaTraining, SupE


@pytest.fixture
def other_threads():
    """torch set to 3 threads (neither the default 1 nor a tested 2), so a
    restored setting can be told apart; the test's own setting restored."""
    saved = torch.get_num_threads()
    torch.set_num_threads(3)
    yield 3
    torch.set_num_threads(saved)


def _recorded_model(seen, **params):
    """A tiny FLOWRClassifier whose encoder records torch's threads on every
    forward pass (training, embedding, fine-tuning, predicting)."""
    torch.manual_seed(0)
    encoder = MLPEncoder(64, hidden=(16,), embedding_dim=4)
    encoder.register_forward_hook(
        lambda module, inputs, output: seen.append(torch.get_num_threads()))
    return FLOWRClassifier(
        backbone=encoder, embedding_dim=4, pretrain=SupE(epochs=1),
        meta=MetaTraining(epochs=1, episodes_per_epoch=2, n_way=3, n_unknown=1),
        calibration=None, verbose=0, random_state=0, reuse_encoder=False,
        **params)


def _features(digits, n_classes=5):
    X, y = digits
    keep = y < n_classes
    return X[keep][:150].reshape(-1, 64), y[keep][:150]


@pytest.mark.parametrize("n_jobs, expected", [(None, 1), (2, 2)])
def test_n_jobs_sets_torch_threads_and_restores_them(digits, other_threads,
                                                     n_jobs, expected):
    """Check fit, adapt (with fine-tuning) and predict run torch on the threads
    n_jobs asks for (None: one) and leave torch's own setting as it was."""
    seen = []
    X, y = _features(digits)
    model = _recorded_model(seen, n_jobs=n_jobs).fit(X, y)
    assert seen and set(seen) == {expected}
    assert torch.get_num_threads() == other_threads
    seen.clear()
    model.adapt(X[:6], y[:6], fine_tune=2)
    model.predict(X[:4])
    assert seen and set(seen) == {expected}
    assert torch.get_num_threads() == other_threads


def test_n_jobs_none_reads_joblib_parallel_config(digits, other_threads):
    """Check n_jobs=None follows a joblib.parallel_config block, as
    scikit-learn's n_jobs does."""
    import joblib

    seen = []
    X, y = _features(digits)
    model = _recorded_model(seen)
    with joblib.parallel_config(n_jobs=2):
        model.fit(X, y)
    assert seen and set(seen) == {2}
    assert torch.get_num_threads() == other_threads


def test_changing_n_jobs_after_fit_needs_no_refit(digits, other_threads):
    """Check set_params(n_jobs=...) on a fitted model is read by the next
    call, without the refit a training setting would ask for."""
    seen = []
    X, y = _features(digits)
    model = _recorded_model(seen).fit(X, y)
    expected = model.predict_proba(X[:5])
    seen.clear()
    model.set_params(n_jobs=2)
    # Other threads may sum in another order: float32 rounding.
    np.testing.assert_allclose(model.predict_proba(X[:5]), expected, rtol=1e-4,
                               atol=1e-7)
    assert seen and set(seen) == {2}


def test_n_jobs_zero_is_refused_before_any_state_change(digits, monkeypatch):
    """Check n_jobs=0 fails fit with scikit-learn's parameter error before any
    training, leaving an unfitted model unfitted and a fitted one as it was;
    set after fit, predict refuses it alike."""
    from sklearn_flowr.training import SupENet

    X, y = _features(digits)
    model = _recorded_model([]).fit(X, y)
    head, before = model.head_, model.predict_proba(X[:5])

    def no_training(*args, **kwargs):
        raise AssertionError("pre-training started")

    monkeypatch.setattr(SupENet, "fit", no_training)
    unfitted = _recorded_model([], n_jobs=0)
    with pytest.raises(InvalidParameterError, match="'n_jobs' parameter"):
        unfitted.fit(X, y)
    assert not [name for name in vars(unfitted) if name.endswith("_")]
    model.set_params(n_jobs=0)
    with pytest.raises(InvalidParameterError, match="'n_jobs' parameter"):
        model.fit(X, y)
    with pytest.raises(InvalidParameterError, match="'n_jobs' parameter"):
        model.predict(X[:5])
    model.set_params(n_jobs=None)
    assert model.head_ is head
    np.testing.assert_array_equal(model.predict_proba(X[:5]), before)


def test_n_jobs_is_a_parameter():
    """Check n_jobs defaults to None and travels through get_params and
    clone."""
    assert FLOWRClassifier().n_jobs is None
    assert FLOWRClassifier(n_jobs=-1).get_params()["n_jobs"] == -1
    assert clone(FLOWRClassifier(n_jobs=2)).n_jobs == 2
