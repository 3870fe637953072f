"""Tests of saving a fitted FLOWRClassifier: pickle, copy and skops.io.

The fitted model stores its torch modules with NumPy arrays in place of
tensors (``training/_persistence.py``), so a pickle holds no tensor storage
(a CUDA-trained model loads where CUDA is absent) and skops.io, which refuses
tensors, can store and safely load it.
"""

import copy
import io
import pickle

import numpy as np
import pytest
import torch

import sklearn_flowr
from sklearn_flowr import FLOWRClassifier
from sklearn_flowr.training import MetaTraining, SupE
from sklearn_flowr.training._persistence import (
    TensorState,
    modules_from_state,
    modules_to_state,
)

sio = pytest.importorskip("skops.io")

TINY = dict(embedding_dim=8, pretrain=SupE(epochs=2),
            meta=MetaTraining(epochs=1, episodes_per_epoch=3, n_way=3, n_unknown=1),
            random_state=0)
# What a saved FLOWRClassifier asks the user to trust: the package's own
# classes, torch's layers, skorch's training history. Nothing else (no
# functions, no pickle).
TRUSTED_PREFIXES = ("sklearn_flowr.", "torch.nn.modules.", "skorch.history.")


@pytest.fixture(scope="module")
def large_model(digits):
    X, y = digits
    # Default verbose, as users call it.
    return FLOWRClassifier(setting="large", **TINY).fit(X[y < 6], y[y < 6])


def skops_round_trip(model, trusted=None):
    """Save and load through the package's helpers (a vetted list of types,
    plus ``trusted``), and the types the file asks to trust."""
    buffer = io.BytesIO()
    sklearn_flowr.save(model, buffer)
    dumped = buffer.getvalue()
    untrusted = sio.get_untrusted_types(data=dumped)
    assert untrusted and all(t.startswith(TRUSTED_PREFIXES) for t in untrusted), (
        untrusted)
    return sklearn_flowr.load(io.BytesIO(dumped), trusted=trusted), untrusted


def test_skops_round_trip_keeps_model_and_online_state(large_model, digits):
    """Check skops.io stores a fitted large-context model with what it learned
    online, lists only the package's, torch's layer and skorch's history types
    to trust, and loads a model that predicts and keeps learning alike."""
    X, y = digits
    model = copy.deepcopy(large_model)
    model.partial_fit(X[y == 8][:3], y[y == 8][:3])
    loaded, untrusted = skops_round_trip(model)
    assert "sklearn_flowr.training._persistence.TensorState" in untrusted
    assert "torch.nn.modules.conv.Conv2d" in untrusted
    assert loaded.encoder_ is loaded.meta_module_.encoder
    assert repr(loaded) == repr(model)  # the parts (head, stages) come back
    assert loaded.classes_.tolist() == model.classes_.tolist()
    np.testing.assert_array_equal(loaded.predict_proba(X[:20]),
                                  model.predict_proba(X[:20]))
    rows = np.flatnonzero(y == 9)[:4]
    np.testing.assert_array_equal(loaded.open_world_step(X[rows], y[rows]).p_novel,
                                  model.open_world_step(X[rows], y[rows]).p_novel)
    for name, parameter in model.meta_module_.named_parameters():
        twin = dict(loaded.meta_module_.named_parameters())[name]
        assert isinstance(twin, torch.nn.Parameter)
        assert twin.requires_grad == parameter.requires_grad
        assert twin.dtype == parameter.dtype
        torch.testing.assert_close(twin, parameter, rtol=0, atol=0)
    for name, buffer in model.meta_module_.named_buffers():
        torch.testing.assert_close(dict(loaded.meta_module_.named_buffers())[name],
                                   buffer, rtol=0, atol=0)


def test_skops_small_context_model_adapts_and_fine_tunes_after_loading(digits):
    """Check a small-context model saved mid-task loads with its task,
    fine-tuning (which trains the last layer) still works on the loaded one,
    and reset returns both to the fitted model (the training classes known)."""
    X, y = digits
    model = FLOWRClassifier(setting="small", verbose=0, **TINY).fit(
        X[y < 6], y[y < 6])
    support = np.r_[np.flatnonzero(y == 6)[:3], np.flatnonzero(y == 7)[:3]]
    model.adapt(X[support], y[support])
    loaded, _ = skops_round_trip(model)
    np.testing.assert_array_equal(loaded.predict_proba(X[:10]),
                                  model.predict_proba(X[:10]))
    before = [p.detach().clone() for p in loaded.encoder_.parameters()]
    loaded.adapt(X[support], y[support], fine_tune=3)
    after = list(loaded.encoder_.parameters())
    assert any(not torch.equal(b, a) for b, a in zip(before, after, strict=True))
    model.reset()
    loaded.reset()
    np.testing.assert_array_equal(loaded.transform(X[:10]), model.transform(X[:10]))
    assert loaded.classes_.tolist() == model.classes_.tolist() == list(range(6))
    np.testing.assert_array_equal(loaded.predict_proba(X[:10]),
                                  model.predict_proba(X[:10]))


def test_pickle_holds_no_tensor_storage(large_model):
    """Check a pickled model holds arrays, not torch storages: a model trained
    and pickled on CUDA then loads on a machine without CUDA (torch rebuilds
    storages on the device they were saved from)."""
    data = pickle.dumps(large_model)
    assert b"_rebuild_tensor" not in data and b"_rebuild_parameter" not in data
    assert b"storage" not in data.lower()


def test_saving_leaves_the_live_model_alone(large_model, digits):
    """Check pickling, deep-copying and skops leave the live modules' tensors
    the same objects with the same values, and copies share no tensor."""
    X, _ = digits
    parameters = list(large_model.meta_module_.parameters())
    values = [p.detach().clone() for p in parameters]
    proba = large_model.predict_proba(X[:5])
    pickle.dumps(large_model)
    sio.dumps(large_model)
    twin = copy.deepcopy(large_model)
    assert all(a is b for a, b in zip(parameters, large_model.meta_module_.parameters(),
                                      strict=True))
    assert all(torch.equal(p, v) for p, v in zip(parameters, values, strict=True))
    twin_ids = {id(p) for p in twin.meta_module_.parameters()}
    assert not twin_ids & {id(p) for p in parameters}
    np.testing.assert_array_equal(large_model.predict_proba(X[:5]), proba)


def test_user_module_backbone_is_stored_too(digits):
    """Check a model whose backbone is the user's own module instance saves
    through skops, listing that module's classes to trust."""
    X, y = digits
    X = X.reshape(len(X), -1)
    backbone = torch.nn.Sequential(torch.nn.Linear(64, 16), torch.nn.Tanh(),
                                   torch.nn.Linear(16, 8))
    model = FLOWRClassifier(backbone=backbone, setting="large", verbose=0,
                            **{**TINY, "embedding_dim": 8}).fit(X[y < 6], y[y < 6])
    tanh = "torch.nn.modules.activation.Tanh"  # not on the vetted list
    with pytest.warns(UserWarning, match=tanh):
        with pytest.raises(ValueError, match=tanh):
            skops_round_trip(model)
    with pytest.warns(UserWarning, match=tanh):
        loaded, untrusted = skops_round_trip(model, trusted=[tanh])
    assert tanh in untrusted
    np.testing.assert_array_equal(loaded.predict_proba(X[:5]),
                                  model.predict_proba(X[:5]))


def test_module_state_keeps_dtypes_ties_and_sharing():
    """Check the tensor states round-trip dtypes (bfloat16 included), tied
    weights stay tied and shared modules stay shared, and the originals are
    untouched."""
    first = torch.nn.Linear(3, 2).to(torch.bfloat16)
    second = torch.nn.Linear(3, 2)
    second.weight = torch.nn.Parameter(second.weight.detach(), requires_grad=False)
    tied = torch.nn.Linear(2, 3, bias=False)
    tied.weight = first.weight  # shapes (2, 3): a tied parameter
    container = torch.nn.ModuleList([first, second, tied])
    stored = modules_to_state((container, first))
    assert isinstance(stored[0][0]._parameters["weight"], TensorState)
    assert isinstance(first.weight, torch.nn.Parameter)  # original untouched
    restored, alias = modules_from_state(stored)
    assert alias is restored[0]
    assert restored[0].weight.dtype == torch.bfloat16
    torch.testing.assert_close(restored[0].weight, first.weight, rtol=0, atol=0)
    assert restored[2].weight is restored[0].weight
    assert restored[1].weight.requires_grad is False
    assert restored[1].bias.requires_grad is True


@pytest.mark.parametrize("shape", [(8, 4, 3, 3), (8, 1, 3, 3)])
def test_tensor_state_keeps_the_channels_last_layout(shape):
    """Check a channels-last tensor comes back with its exact strides (a
    size-1 channel side included, where contiguous() is ambiguous) and a
    row-major one stays row-major: a module computes alike after loading."""
    tensor = torch.randn(shape).contiguous(memory_format=torch.channels_last)
    if shape[1] == 1:  # (the same values, channels-last strides forced)
        tensor = torch.empty_strided(shape, (9, 1, 3, 1)).copy_(tensor)
    restored = TensorState(torch.nn.Parameter(tensor)).to_tensor()
    assert restored.stride() == tensor.stride()
    assert torch.equal(restored, tensor)
    plain = torch.randn(shape)
    assert TensorState(plain).to_tensor().stride() == plain.stride()
