"""Tests of device placement (training/_device.py) and FLOWRClassifier on devices.

CPU tests check the placement logic; the GPU tests (marked ``gpu``, skipped
without CUDA) check that CUDA and the CPU give the same answers.
"""

import copy
import pickle

import numpy as np
import pytest
import torch
from torch import nn

from sklearn_flowr import FLOWRClassifier
from sklearn_flowr.training import MetaTraining, SupE
from sklearn_flowr.training._device import (
    deterministic_cuda,
    exact_float32,
    module_device,
    place_modules,
    resolve_device,
    to_device_if_fits,
)

TINY = dict(embedding_dim=8, pretrain=SupE(epochs=2),
            meta=MetaTraining(epochs=1, episodes_per_epoch=4, n_way=3, n_unknown=2),
            verbose=0, random_state=0)
CUDA = torch.cuda.is_available()


@pytest.fixture(scope="module")
def cpu_model(digits):
    X, y = digits
    return FLOWRClassifier(setting="large", device="cpu", **TINY).fit(
        X[y < 7], y[y < 7])


def test_resolve_device_auto_and_explicit():
    """Check that 'auto' follows CUDA's availability and names pass through."""
    assert resolve_device("auto").type == ("cuda" if CUDA else "cpu")
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(torch.device("cpu")) == torch.device("cpu")
    with pytest.raises(ValueError, match="not a torch device"):
        resolve_device("gpu0")


@pytest.mark.skipif(CUDA, reason="checks the error of a machine without CUDA")
def test_resolve_device_cuda_without_cuda_says_the_fix():
    """Check that asking for CUDA without it names the fix."""
    with pytest.raises(ValueError, match="set_params\\(device='cpu'\\)"):
        resolve_device("cuda")


def test_place_modules_moves_only_what_is_elsewhere():
    """Check that a module already in place keeps its very parameter tensors."""
    layer = nn.Linear(3, 2)
    weight = layer.weight
    place_modules(torch.device("cpu"), layer, None, layer)
    assert layer.weight is weight
    layer.to(torch.float64)
    place_modules(torch.device("cpu"), layer)
    assert module_device(layer) == torch.device("cpu")
    assert module_device(nn.ReLU()) == torch.device("cpu")


def test_precision_contexts_restore_global_settings():
    """Check that the TF32 and determinism switches restore what was set."""
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
             torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark)
    with pytest.raises(RuntimeError), exact_float32(), deterministic_cuda():
        assert not torch.backends.cudnn.allow_tf32
        assert torch.backends.cudnn.deterministic
        assert not torch.backends.cudnn.benchmark
        raise RuntimeError("inside")
    assert saved == (torch.backends.cuda.matmul.allow_tf32,
                     torch.backends.cudnn.allow_tf32,
                     torch.backends.cudnn.deterministic,
                     torch.backends.cudnn.benchmark)
    with deterministic_cuda(enabled=False):
        assert torch.backends.cudnn.deterministic == saved[2]


def test_data_stays_on_the_host_for_the_cpu():
    """Check that only a CUDA device takes the training data."""
    X = np.zeros((5, 2), dtype=np.float32)
    assert to_device_if_fits(X, torch.device("cpu")) is X


def test_unpickled_model_runs_where_device_says(cpu_model, digits):
    """Check that a loaded model places its modules on first use and predicts alike."""
    X, _ = digits
    loaded = pickle.loads(pickle.dumps(cpu_model))
    assert module_device(loaded.meta_module_) == torch.device("cpu")
    np.testing.assert_allclose(loaded.predict_proba(X[:20]),
                               cpu_model.predict_proba(X[:20]))
    assert loaded.encoder_ is loaded.meta_module_.encoder


def test_set_params_device_is_read_at_use(cpu_model, digits):
    """Check that device is read when the model runs, with a clear error if unusable."""
    X, _ = digits
    model = copy.deepcopy(cpu_model)
    model.set_params(device="auto")
    np.testing.assert_allclose(
        model.predict_proba(X[:5]), cpu_model.predict_proba(X[:5]), atol=1e-5)
    if not CUDA:
        model.set_params(device="cuda")
        with pytest.raises(ValueError, match="no usable CUDA"):
            model.predict_proba(X[:5])


def test_fit_rejects_an_unusable_device_before_training(digits):
    """Check that a bad device fails before any training and leaves no state."""
    X, y = digits
    model = FLOWRClassifier(setting="large", device="gpu0", **TINY)
    with pytest.raises(ValueError, match="not a torch device"):
        model.fit(X[y < 7], y[y < 7])
    assert not hasattr(model, "history_")


# ----------------------------------------------------------------------- GPU
@pytest.fixture(scope="module")
def cuda_model(digits):
    X, y = digits
    return FLOWRClassifier(setting="large", device="cuda", **TINY).fit(
        X[y < 7], y[y < 7])


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
def test_cuda_and_cpu_predictions_agree(cuda_model, digits):
    """Check that one model predicts the same on CUDA and on the CPU (float32)."""
    X, _ = digits
    on_cuda = cuda_model.predict_proba(X[:200])
    Z_cuda = cuda_model.transform(X[:200])
    assert module_device(cuda_model.encoder_).type == "cuda"
    model = copy.deepcopy(cuda_model).set_params(device="cpu")
    np.testing.assert_allclose(model.transform(X[:200]), Z_cuda, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(model.predict_proba(X[:200]), on_cuda, atol=1e-4)
    assert module_device(model.encoder_).type == "cpu"


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
def test_cuda_training_is_seeded(cuda_model, digits):
    """Check that the same seed gives the same model on CUDA (within 1e-4):
    trained again, not taken from the encoder memo."""
    X, y = digits
    again = FLOWRClassifier(setting="large", device="cuda", reuse_encoder=False,
                            **TINY).fit(X[y < 7], y[y < 7])
    np.testing.assert_allclose(again.transform(X[:100]), cuda_model.transform(X[:100]),
                               rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(again.predict_proba(X[:100]),
                               cuda_model.predict_proba(X[:100]), atol=1e-4)


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
def test_cuda_and_cpu_training_agree(cuda_model, cpu_model, digits):
    """Check that training on CUDA and on the CPU gives nearly the same embedding.

    Float32 sums run in other orders on the two devices and the differences
    grow over the training steps, so the trained models are compared on their
    embeddings (relative error) and decisions, not on saturated probabilities.
    """
    X, _ = digits
    Z_cuda, Z_cpu = cuda_model.transform(X[:300]), cpu_model.transform(X[:300])
    relative = np.linalg.norm(Z_cuda - Z_cpu) / np.linalg.norm(Z_cpu)
    agree = np.mean(cuda_model.predict(X[:300]) == cpu_model.predict(X[:300]))
    gap = np.abs(cuda_model.predict_proba(X[:300]) - cpu_model.predict_proba(X[:300]))
    print(f"CUDA- vs CPU-trained: relative embedding gap {relative:.2e}, "
          f"decisions agree {agree:.3f}, max |proba gap| {gap.max():.2e}")
    # Measured on an H100 (torch 2.11): gap 0.13, agreement 0.987. Adam
    # normalises tiny gradients to full-size steps, so float32 rounding
    # differences become visible weight differences within a few steps.
    assert relative < 0.3
    assert agree >= 0.95


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
def test_cuda_pickle_keeps_live_model_and_reloads_on_cuda(cuda_model, digits):
    """Check that pickling leaves the live model on CUDA; the copy predicts on CUDA."""
    X, _ = digits
    blob = pickle.dumps(cuda_model)
    assert module_device(cuda_model.meta_module_).type == "cuda"
    loaded = pickle.loads(blob)
    assert module_device(loaded.meta_module_).type == "cpu"  # CPU tensors inside
    np.testing.assert_allclose(loaded.predict_proba(X[:50]),
                               cuda_model.predict_proba(X[:50]), atol=1e-6)
    assert module_device(loaded.meta_module_).type == "cuda"
    clone = copy.deepcopy(cuda_model)
    np.testing.assert_allclose(clone.predict_proba(X[:50]),
                               cuda_model.predict_proba(X[:50]), atol=1e-6)


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
def test_match_episode_noise_on_cuda(digits):
    """Check that match_episode_noise sets the within-class variance on CUDA
    (without meta-training, the default MetaTraining's episode_noise=0.5)."""
    X, y = digits
    params = {**TINY, "meta": None}
    model = FLOWRClassifier(setting="large", device="cuda", **params).fit(
        X[y < 7], y[y < 7])
    Z, labels = model.transform(X[y < 7]), y[y < 7]
    within = np.mean([((Z[labels == c] - Z[labels == c].mean(0)) ** 2).mean()
                      for c in range(7)])
    assert model.noise_scale_ != 1.0
    np.testing.assert_allclose(within, 0.5, rtol=0.05)


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
@pytest.mark.parametrize("setting", ["small", "large"])
def test_cuda_defaults_with_progress(digits, setting, capsys):
    """Check that the default verbose and autocast='bf16' train on CUDA."""
    X, y = digits
    params = {**TINY, "verbose": 1, "meta": MetaTraining(
        epochs=1, episodes_per_epoch=4, n_way=3, n_unknown=2, autocast="bf16")}
    model = FLOWRClassifier(setting=setting, device="auto", **params).fit(
        X[y < 7], y[y < 7])
    support = np.r_[np.flatnonzero(y == 8)[:3], np.flatnonzero(y == 9)[:3]]
    model.adapt(X[support], y[support], fine_tune=3)
    assert model.predict_proba(X[:4]).shape == (4, len(model.classes_) + 1)
    assert {8, 9} <= set(model.classes_.tolist())
    assert "train_loss" in capsys.readouterr().out
