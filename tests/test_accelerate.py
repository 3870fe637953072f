"""Tests of the accelerate nets (``sklearn_flowr.training._accelerate``).

A single-process ``Accelerator(cpu=True)`` proves the wiring: the accelerated
nets train exactly like the plain ones. One test launches two CPU processes
(gloo DDP) to check what a single process cannot: gradients synchronised
through the losses' head parameters, and episodes sharded across processes.
"""

import copy
import os
import pickle
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
import torch
from sklearn.base import clone
from skorch import NeuralNetClassifier
from skorch.dataset import Dataset

from sklearn_flowr.encoders import MLPEncoder
from sklearn_flowr.training import (
    AcceleratedEpisodicMetaNet,
    AcceleratedSupENet,
    AcceleratedSupFCNet,
    EpisodeDataset,
    EpisodicMetaNet,
    FLOWRMetaModule,
    MetaTraining,
    SupE,
    SupENet,
    SupFCNet,
    accelerated,
)
from sklearn_flowr.training._nets import _batch_index_loader

accelerate = pytest.importorskip("accelerate")


@pytest.fixture
def accelerator():
    return accelerate.Accelerator(cpu=True)


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(6), 20)
    X = (2 * rng.normal(size=(6, 8))[y] + rng.normal(size=(120, 8))).astype("f4")
    return X, y


@pytest.fixture
def encoder():
    torch.manual_seed(0)
    return MLPEncoder(8, hidden=(16,), embedding_dim=4)


def _max_diff(a, b):
    return max(float((p.detach() - q.detach()).abs().max())
               for p, q in zip(a.parameters(), b.parameters(), strict=True))


def test_accelerated_returns_the_module_level_classes():
    """Check that accelerated maps each net to its accelerated class, always the
    same object, and that an accelerated class maps to itself."""
    pairs = [(SupENet, AcceleratedSupENet), (SupFCNet, AcceleratedSupFCNet),
             (EpisodicMetaNet, AcceleratedEpisodicMetaNet)]
    for net_class, expected in pairs:
        assert accelerated(net_class) is expected
        assert accelerated(expected) is expected
        assert issubclass(expected, net_class)
        assert expected.__name__ == "Accelerated" + net_class.__name__


@pytest.mark.parametrize("other", [NeuralNetClassifier, dict, "SupENet",
                                   type("MySupENet", (SupENet,), {})])
def test_accelerated_rejects_other_classes(other):
    """Check that accelerated raises a TypeError for anything but the nets."""
    with pytest.raises(TypeError, match="takes SupENet, SupFCNet or EpisodicMetaNet"):
        accelerated(other)


def test_missing_accelerate_names_the_extra(monkeypatch):
    """Check that without accelerate the error says how to install it."""
    monkeypatch.setitem(sys.modules, "accelerate", None)
    with pytest.raises(ImportError, match=r'sklearn-flowr\[accelerate\]'):
        accelerated(SupENet)


@pytest.mark.parametrize("shuffle", [False, True])
def test_batch_loader_gives_the_batches_of_the_plain_loader(accelerator, shuffle):
    """Check that the shardable loader, prepared by the accelerator, yields the
    batches of ``_batch_index_loader`` in the same order for the same seed."""
    X = np.arange(40, dtype=np.float32).reshape(20, 2)
    y = np.arange(20)
    torch.manual_seed(3)
    plain = [b for b in _batch_index_loader(Dataset(X, y), 6, shuffle=shuffle)]
    torch.manual_seed(3)
    loader = accelerator.prepare(_batch_index_loader(Dataset(X, y), 6,
                                                     shuffle=shuffle))
    prepared = list(loader)
    assert len(prepared) == len(plain) == 4
    for (xa, ya), (xb, yb) in zip(prepared, plain, strict=True):
        # Tensors, which accelerate moves to its device (NumPy it leaves).
        assert torch.is_tensor(xa) and torch.is_tensor(ya)
        assert torch.equal(torch.as_tensor(xa), torch.as_tensor(xb))
        assert torch.equal(torch.as_tensor(ya), torch.as_tensor(yb))


def test_sup_e_matches_the_plain_net(accelerator, data, encoder):
    """Check that AcceleratedSupENet in one process changes the weights and
    trains exactly like SupENet with the same seed and encoder."""
    X, y = data
    nets = []
    for net_class, extra in [(AcceleratedSupENet, {"accelerator": accelerator}),
                             (SupENet, {})]:
        torch.manual_seed(1)  # the shuffling
        nets.append(net_class(module__encoder=copy.deepcopy(encoder),
                              module__n_classes=6, max_epochs=3, batch_size=16,
                              verbose=0, random_state=0, **extra).fit(X, y))
    fast, plain = nets
    assert _max_diff(fast.module_.encoder, encoder) > 1e-3
    assert _max_diff(fast.module_, plain.module_) < 1e-6
    np.testing.assert_allclose(fast.history[:, "train_loss"],
                               plain.history[:, "train_loss"], rtol=1e-6)
    assert fast.history[-1, "train_batch_count"] == 8  # ceil(120 / 16)
    np.testing.assert_allclose(fast.predict_proba(X), plain.predict_proba(X),
                               atol=1e-6)


def test_sup_fc_trains(accelerator, data, encoder):
    """Check that AcceleratedSupFCNet fits and predicts class indices."""
    X, y = data
    net = AcceleratedSupFCNet(module__encoder=copy.deepcopy(encoder),
                              module__n_classes=6, max_epochs=2, verbose=0,
                              accelerator=accelerator).fit(X, y)
    assert _max_diff(net.module_.encoder, encoder) > 1e-4
    assert net.predict(X).shape == (120,)


def test_meta_net_trains_the_head(accelerator, data, encoder):
    """Check that AcceleratedEpisodicMetaNet fits two epochs of episodes with a
    finite loss, that the FLOWR head parameters get gradients and move, and
    that it matches the plain EpisodicMetaNet."""
    X, y = data
    module = FLOWRMetaModule(copy.deepcopy(encoder))
    start = copy.deepcopy(module)
    nets = []
    for net_class, extra in [(AcceleratedEpisodicMetaNet,
                              {"accelerator": accelerator}),
                             (EpisodicMetaNet, {})]:
        episodes = EpisodeDataset(X, y, n_way=3, n_unknown=2, n_episodes=4,
                                  random_state=0)
        nets.append(net_class(module=copy.deepcopy(module), max_epochs=2,
                              verbose=0, **extra).fit(episodes))
    fast, plain = nets
    losses = np.asarray(fast.history[:, "train_loss"])
    assert losses.shape == (2,) and np.all(np.isfinite(losses))
    assert fast.history[-1, "train_batch_count"] == 4
    for name in ("beta_raw", "prior_mean", "prior_log_var"):
        parameter = getattr(fast.module_, name)
        assert parameter.grad is not None
        assert not torch.equal(parameter.detach(), getattr(start, name).detach())
    np.testing.assert_allclose(losses, plain.history[:, "train_loss"], rtol=1e-6)
    assert _max_diff(fast.module_, plain.module_) < 1e-6


def test_meta_net_large_context(accelerator, data, encoder):
    """Check that the known-known table of a large-context module is learned."""
    X, y = data
    module = FLOWRMetaModule(copy.deepcopy(encoder), known_means=np.zeros((4, 4)),
                             known_vars=np.ones(4))
    episodes = EpisodeDataset(X, y, setting="large", known_classes=np.arange(4),
                              n_way=3, n_unknown=2, n_episodes=3)
    net = AcceleratedEpisodicMetaNet(module=module, max_epochs=1, verbose=0,
                                     accelerator=accelerator).fit(episodes)
    assert float(net.module_.known_nat_mean.detach().abs().max()) > 0
    assert np.isfinite(net.history[-1, "train_loss"])


class _RecordingEpisodes(EpisodeDataset):
    """Episodes that note the ``(epoch, index)`` of every draw."""

    def __getitem__(self, index):
        self.drawn.append((self.epoch, index))
        return super().__getitem__(index)


def test_episode_epochs_follow_the_history(accelerator, data, encoder):
    """Check that each epoch draws its own episodes, and that a resumed run goes
    on with the next epochs' draws (accelerate's own pass count restarts)."""
    X, y = data
    episodes = _RecordingEpisodes(X, y, n_way=3, n_unknown=2, n_episodes=2)
    episodes.drawn = []
    net = AcceleratedEpisodicMetaNet(module=FLOWRMetaModule(encoder), max_epochs=2,
                                     verbose=0, accelerator=accelerator)
    net.fit(episodes)
    assert episodes.drawn == [(0, 0), (0, 1), (1, 0), (1, 1)]
    episodes.drawn = []
    net.partial_fit(episodes)
    assert episodes.drawn == [(2, 0), (2, 1), (3, 0), (3, 1)]


def test_pickle_and_clone(accelerator, data, encoder):
    """Check that a fitted accelerated net pickles and predicts the same after
    loading, that it clones, and that the accelerator keeps no reference to
    the net's modules, optimizers or loaders."""
    X, y = data
    net = AcceleratedSupENet(module__encoder=encoder, module__n_classes=6,
                             max_epochs=1, verbose=0,
                             accelerator=accelerator).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loaded = pickle.loads(pickle.dumps(net))
    assert type(loaded) is AcceleratedSupENet
    assert loaded.device is None  # device placement stays the accelerator's
    np.testing.assert_allclose(loaded.predict_proba(X), net.predict_proba(X))
    assert not (accelerator._models or accelerator._optimizers
                or accelerator._dataloaders)
    loaded.partial_fit(X, y)  # and it trains on
    twin = clone(net)
    assert type(twin) is AcceleratedSupENet
    assert twin.get_params()["max_epochs"] == 1
    meta = AcceleratedEpisodicMetaNet(module=FLOWRMetaModule(encoder), max_epochs=1,
                                      verbose=0, accelerator=accelerator)
    meta.fit(EpisodeDataset(X, y, n_way=3, n_unknown=2, n_episodes=2))
    assert pickle.loads(pickle.dumps(meta)).module_.n_known == 0


def test_verbose_zero_prints_nothing(accelerator, data, encoder, capsys):
    """Check that verbose=0 silences the epoch table, as with the plain nets,
    and verbose=1 prints it (on the main process)."""
    X, y = data
    for verbose in (0, 1):
        AcceleratedSupENet(module__encoder=encoder, module__n_classes=6,
                           max_epochs=1, verbose=verbose,
                           accelerator=accelerator).fit(X, y)
        assert ("train_loss" in capsys.readouterr().out) == bool(verbose)


def test_device_must_be_left_to_the_accelerator(accelerator, data, encoder):
    """Check that a device with accelerate's device placement is refused."""
    X, y = data
    net = AcceleratedSupENet(module__encoder=encoder, module__n_classes=6,
                             max_epochs=1, verbose=0, device="cpu",
                             accelerator=accelerator)
    with pytest.raises(ValueError, match="device=None"):
        net.fit(X, y)


_DDP_SCRIPT = textwrap.dedent("""
    import os
    import numpy as np, torch, torch.distributed as dist
    from accelerate import Accelerator
    from sklearn_flowr.encoders import MLPEncoder
    from sklearn_flowr.training import (AcceleratedEpisodicMetaNet,
        AcceleratedSupENet, EpisodeDataset, FLOWRMetaModule)

    accelerator = Accelerator(cpu=True)
    assert accelerator.num_processes == 2
    rank = accelerator.process_index

    def same_on_all_processes(module):
        for parameter in module.parameters():
            mine = parameter.detach().clone()
            other = [torch.zeros_like(mine) for _ in range(2)]
            dist.all_gather(other, mine)
            assert torch.equal(other[0], other[1])

    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(6), 20)
    X = (2 * rng.normal(size=(6, 8))[y] + rng.normal(size=(120, 8))).astype("f4")
    torch.manual_seed(0)
    sup_e = AcceleratedSupENet(
        module__encoder=MLPEncoder(8, hidden=(16,), embedding_dim=4),
        module__n_classes=6, max_epochs=1, batch_size=16, verbose=0,
        random_state=0, accelerator=accelerator).fit(X, y)
    # 8 batches of 16 rows, 4 on each process.
    assert sup_e.history[-1, "train_batch_count"] == 4
    same_on_all_processes(sup_e.module_)

    class Recording(EpisodeDataset):
        def __getitem__(self, index):
            drawn.append((self.epoch, index))
            return super().__getitem__(index)

    drawn = []
    meta = FLOWRMetaModule.from_sup_e(sup_e.module_, setting="large")
    start = float(meta.beta_raw.detach())
    episodes = Recording(X, y, setting="large", known_classes=np.arange(4),
                         n_way=3, n_unknown=2, n_episodes=4)
    net = AcceleratedEpisodicMetaNet(module=meta, max_epochs=2, verbose=0,
                                     accelerator=accelerator).fit(episodes)
    assert drawn == [(e, i) for e in range(2) for i in (rank, rank + 2)], drawn
    assert float(net.module_.beta_raw.detach()) != start
    same_on_all_processes(net.module_)
    accelerator.wait_for_everyone()
    print("rank", rank, "ok", flush=True)
    accelerator.end_training()
    # Leave without running C++ destructors: with torch's gloo backend a
    # plain DDP run aborts at interpreter exit now and then ("terminate
    # called without an active exception"), after all its work is done.
    os._exit(0)
""")


@pytest.mark.slow
def test_two_cpu_processes(tmp_path):
    """Check with two gloo processes that the losses' module parameters train
    through DDP, the parameters stay equal on both processes, and each process
    trains on its own share of the batches and episodes."""
    pytest.importorskip("torch.distributed.run")
    if not torch.distributed.is_gloo_available():
        pytest.skip("torch has no gloo backend")
    script = tmp_path / "ddp.py"
    script.write_text(_DDP_SCRIPT)
    # No GPU: with one, accelerate's barrier asks gloo for a CUDA device per
    # process.
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    result = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone",
         "--nproc_per_node", "2", str(script)],
        capture_output=True, text=True, env=env, timeout=240)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    assert result.stdout.count("ok") == 2


@pytest.mark.parametrize("setting", ["small", "large"])
def test_flowr_classifier_trains_through_the_accelerator(accelerator, setting):
    """FLOWRClassifier(accelerator=...) with its default verbose trains the
    model a plain fit trains, and predicts the same."""
    from sklearn.datasets import load_digits

    from sklearn_flowr import FLOWRClassifier

    X, y = load_digits(return_X_y=True)
    X = X.astype("f4") / 16
    known = y < 7
    params = dict(backbone="mlp", setting=setting, pretrain=SupE(epochs=2),
                  meta=MetaTraining(epochs=2, episodes_per_epoch=4, n_way=4,
                                    n_unknown=2),
                  random_state=0, device="cpu")
    plain = FLOWRClassifier(**params, reuse_encoder=False).fit(X[known], y[known])
    through = FLOWRClassifier(**params, accelerator=accelerator).fit(X[known],
                                                                     y[known])
    assert list(through.history_) == ["pretrain", "meta"]
    assert len(through.history_["meta"]) == 2
    np.testing.assert_allclose(through.transform(X[:50]), plain.transform(X[:50]),
                               atol=1e-5)
    # Both settings predict straight after fit, the training classes known.
    np.testing.assert_allclose(through.predict_proba(X[:50]),
                               plain.predict_proba(X[:50]), atol=1e-5)
    if setting == "small":
        for model in (plain, through):
            model.adapt(X[~known][:40], y[~known][:40])
    np.testing.assert_allclose(through.predict_proba(X[~known][40:90]),
                               plain.predict_proba(X[~known][40:90]), atol=1e-5)
    # Pickles like any model; clone keeps the accelerator.
    assert pickle.loads(pickle.dumps(through)).predict(X[:5]).shape == (5,)
    assert clone(through).accelerator is not None
