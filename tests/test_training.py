"""Tests of the training half, ``sklearn_flowr.training``."""

import copy

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits
from skorch.callbacks import Checkpoint, LoadInitState
from skorch.dataset import Dataset
from torch.utils.data import DataLoader, Subset

from sklearn_flowr import CRPGaussianClassifier
from sklearn_flowr.encoders import MLPEncoder, last_linear_layer
from sklearn_flowr.training import (
    EpisodeDataset,
    EpisodicMetaNet,
    FLOWRMetaModule,
    SupENet,
    SupFCNet,
    embed,
    fine_tune_last_layer,
    flowr_episode_logits,
    meta_training_loss,
    sup_e_loss,
)
from sklearn_flowr.training._fine_tune import _split_support
from sklearn_flowr.training._nets import _batch_index_loader

A, SIGMA = 0.5, 0.5


@pytest.fixture(scope="module")
def digits():
    """Scaled sklearn digits as float32 pixels."""
    X, y = load_digits(return_X_y=True)
    return (X / 16.0).astype(np.float32), y


def small_encoder(in_features=64, embedding_dim=8, seed=0):
    torch.manual_seed(seed)
    return MLPEncoder(in_features, hidden=(32,), embedding_dim=embedding_dim)


# --------------------------------------------------------------------- losses


# ------------------------------------------------------------------ gradients


# ------------------------------------------------------------------- episodes
def test_small_context_episode_properties():
    """Check class counts, shots in 1..10, query sizes and class disjointness."""
    y = np.repeat(np.arange(10), 20)
    X = np.arange(200)[:, None].astype(float)
    episodes = EpisodeDataset(X, y, n_way=4, n_unknown=3, n_query=5, n_episodes=30)
    all_shots = []
    for i in range(len(episodes)):
        X_ep, y_ep = episodes[i]
        is_query = X_ep["is_query"].numpy()
        labels = y_ep.numpy()
        original = y[X_ep["x"][:, 0].numpy().astype(int)]
        assert not is_query[: (~is_query).sum()].any()  # support first
        support, query = labels[~is_query], labels[is_query]
        assert set(support) == set(range(4))
        shots = np.bincount(support)
        all_shots.extend(shots)
        assert np.all(np.bincount(query) == 5)
        assert set(query) == set(range(7))  # 4 support + 3 unknown classes
        # Unknown-unknown classes are not support classes, and rows are unique.
        assert not set(original[is_query & (labels >= 4)]) & set(original[~is_query])
        assert len(np.unique(X_ep["x"][:, 0])) == len(labels)
    assert min(all_shots) >= 1 and max(all_shots) <= 10
    assert len(set(all_shots)) > 3  # unbalanced


def test_episodes_are_deterministic_by_seed_and_epoch():
    """Check same (seed, epoch, index) -> same episode; otherwise different."""
    y = np.repeat(np.arange(8), 20)
    X = np.arange(160)[:, None].astype(float)

    def draw(seed, epoch=0):
        episodes = EpisodeDataset(X, y, n_way=3, random_state=seed)
        episodes.set_epoch(epoch)
        return episodes[2][0]["x"]

    assert torch.equal(draw(1), draw(1))
    assert not torch.equal(draw(1), draw(2))
    assert not torch.equal(draw(1, 0), draw(1, 1))


def test_large_context_episode_labels():
    """Check large-context episodes: query only, known columns, novel after."""
    y = np.repeat(np.arange(6), 10)
    X = np.arange(60)[:, None].astype(float)
    episodes = EpisodeDataset(X, y, setting="large", known_classes=[4, 0, 2],
                              n_way=2, n_unknown=2, n_query=3)
    X_ep, y_ep = episodes[0]
    assert X_ep["is_query"].all()
    original = y[X_ep["x"][:, 0].numpy().astype(int)]
    labels = y_ep.numpy()
    known = labels < 3
    np.testing.assert_array_equal(np.array([4, 0, 2])[labels[known]], original[known])
    assert set(original[~known]) <= {1, 3, 5}
    assert np.all(np.bincount(labels) [np.unique(labels)] == 3)


@pytest.mark.parametrize("kwargs, match", [
    (dict(n_way=5, n_unknown=2), "needs 7 classes"),
    (dict(n_way=2, n_unknown=1, shots=(1, 12)), "at least 17 examples"),
    (dict(shots=(0, 3)), "1 <= low <= high"),
    (dict(n_query=0), "n_query must be"),
    (dict(setting="medium"), "setting must be"),
    (dict(setting="large", n_way=None, n_unknown=1), "needs 1 classes"),
])
def test_episode_errors(kwargs, match):
    """Check clear errors for too few classes/examples and bad settings."""
    y = np.repeat(np.arange(4), 15)
    with pytest.raises(ValueError, match=match):
        EpisodeDataset(np.zeros((60, 2)), y, **kwargs)


# ----------------------------------------------------------------------- nets
def test_sup_e_net_loss_is_sup_e_loss(digits):
    """Check the net's loss equals ``sup_e_loss`` on the encoder's output."""
    X, y = digits[0][:50], digits[1][:50]
    net = SupENet(module__encoder=small_encoder(), module__n_classes=10,
                  criterion__l2=0.01, verbose=0).initialize()
    Xt, yt = torch.as_tensor(X), torch.as_tensor(y)
    module = net.module_
    with torch.no_grad():
        loss = net.get_loss(net.infer(Xt), yt)
        expected = sup_e_loss(module.encoder(Xt), yt, module.class_means,
                              module.class_log_var, beta=0.1, l2=0.01)
    assert float(loss) == pytest.approx(float(expected))


@pytest.mark.parametrize("as_tensor", [False, True])
@pytest.mark.parametrize("shuffle", [False, True])
def test_batch_index_loader_yields_dataloader_batches(rng, shuffle, as_tensor):
    """Check the one-index batch loader yields DataLoader's batches, same order."""
    X, y = rng.normal(size=(25, 3)).astype(np.float32), np.arange(25)
    if as_tensor:
        X, y = torch.as_tensor(X), torch.as_tensor(y)
    # A Subset, as skorch's internal validation split hands to the loader.
    dataset = Subset(Dataset(X, y), rng.permutation(25)[:20].tolist())

    def batches(loader):
        torch.manual_seed(0)
        return list(loader(dataset, batch_size=6, shuffle=shuffle))

    ours, expected = batches(_batch_index_loader), batches(DataLoader)
    assert len(ours) == len(expected) == 4
    for (X_ours, y_ours), (X_expected, y_expected) in zip(ours, expected,
                                                          strict=True):
        torch.testing.assert_close(X_ours, X_expected, rtol=0, atol=0)
        torch.testing.assert_close(y_ours, y_expected, rtol=0, atol=0)


@pytest.mark.parametrize("net_class", [SupENet, SupFCNet])
def test_mini_batch_nets_shuffle_by_default(net_class):
    """Check Sup-E / Sup-FC nets reshuffle the training rows every epoch."""
    assert net_class().get_params()["iterator_train__shuffle"] is True
    assert net_class(iterator_train__shuffle=False).iterator_train__shuffle is False


def test_sup_fc_net_learns_digits(digits):
    """Check that Sup-FC pre-training fits the training digits."""
    X, y = digits
    net = SupFCNet(module__encoder=small_encoder(), module__n_classes=10, lr=1e-2,
                   batch_size=64, max_epochs=3, verbose=0, random_state=0).fit(X, y)
    assert np.mean(net.predict(X) == y) > 0.8


def fixed_episode_loss(module, episodes):
    """Mean meta-training loss of a module on fixed episodes, eval mode."""
    net = EpisodicMetaNet(module=module, verbose=0).initialize()
    module.eval()
    with torch.no_grad():
        losses = [float(net.get_loss(net.infer(X_ep), y_ep, X=X_ep))
                  for X_ep, y_ep in (episodes[i] for i in range(len(episodes)))]
    return np.mean(losses)


def test_end_to_end_sup_e_then_meta_training_on_digits(digits, capsys):
    """Check Sup-E then small-context meta-training lowers the meta loss."""
    X, y = digits
    train = y < 7
    sup_e = SupENet(module__encoder=small_encoder(), module__n_classes=7, lr=1e-2,
                    batch_size=64, max_epochs=3, verbose=0, random_state=0)
    sup_e.fit(X[train], y[train])
    assert np.mean(sup_e.predict(X[train]) == y[train]) > 0.8
    meta = FLOWRMetaModule.from_sup_e(sup_e.module_)
    held_out = EpisodeDataset(X[train], y[train], n_episodes=10, random_state=99)
    before = fixed_episode_loss(copy.deepcopy(meta), held_out)
    episodes = EpisodeDataset(X[train], y[train], n_episodes=20, random_state=0)
    net = EpisodicMetaNet(module=meta, max_epochs=3, lr=3e-3, verbose=1)
    net.fit(episodes)
    printed = capsys.readouterr().out
    assert "train_loss" in printed  # skorch's epoch table
    assert "\x1b[" not in printed  # no terminal colours in captured output
    after = fixed_episode_loss(net.module_, held_out)
    assert after < before
    assert np.isfinite(net.history[:, "train_loss"]).all()
    # The episode losses fill every batch row, and the epoch's train_loss
    # is their mean weighted by rows, as skorch's is.
    for row in net.history:
        batch_losses = [batch["train_loss"] for batch in row["batches"]]
        assert len(batch_losses) == row["train_batch_count"] == 20
        assert all(isinstance(v, float) for v in batch_losses)
        rows = [batch["train_batch_size"] for batch in row["batches"]]
        assert row["train_loss"] == pytest.approx(np.average(batch_losses,
                                                             weights=rows))


def test_verbose_zero_is_silent(digits, capsys):
    """Check that verbose=0 prints nothing."""
    X, y = digits
    episodes = EpisodeDataset(X, y, n_episodes=2)
    EpisodicMetaNet(module__encoder=small_encoder(), max_epochs=1,
                    verbose=0).fit(episodes)
    assert capsys.readouterr().out == ""


def test_large_context_meta_training_runs(digits):
    """Check a large-context run from Sup-E updates the known-known table."""
    X, y = digits
    train = y < 7
    sup_e = SupENet(module__encoder=small_encoder(), module__n_classes=5,
                    max_epochs=1, verbose=0).fit(X[y < 5], y[y < 5])
    meta = FLOWRMetaModule.from_sup_e(sup_e.module_, setting="large")
    means = sup_e.module_.class_means.detach()
    s = sup_e.module_.class_log_var.detach().exp()[:, None]
    torch.testing.assert_close(meta.known_nat_mean.detach(), means / s)
    start = meta.known_nat_mean.detach().clone()
    episodes = EpisodeDataset(X[train], y[train], setting="large",
                              known_classes=np.arange(5), n_way=5, n_unknown=2,
                              n_episodes=5)
    net = EpisodicMetaNet(module=meta, max_epochs=1, verbose=0).fit(episodes)
    assert not torch.equal(net.module_.known_nat_mean.detach(), start)
    assert np.isfinite(net.history[-1, "train_loss"])


def test_checkpoint_resume_equals_uninterrupted_run(digits, tmp_path):
    """Check that a checkpointed run resumed with LoadInitState continues exactly."""
    X, y = digits
    episodes = EpisodeDataset(X, y, n_episodes=4, random_state=3)

    def make_net(max_epochs, callbacks=()):
        return EpisodicMetaNet(module__encoder=small_encoder(seed=5),
                               max_epochs=max_epochs, verbose=0,
                               callbacks=list(callbacks))

    straight = make_net(3).fit(episodes)
    checkpoint = Checkpoint(dirname=str(tmp_path), monitor=None)
    make_net(2, [checkpoint]).fit(episodes)
    checkpoint = Checkpoint(dirname=str(tmp_path), monitor=None)
    resumed = make_net(1, [checkpoint, LoadInitState(checkpoint)]).fit(episodes)
    assert len(resumed.history) == 3
    for (name, p), q in zip(straight.module_.named_parameters(),
                            resumed.module_.parameters(), strict=True):
        torch.testing.assert_close(p, q, msg=name)


# ----------------------------------------------------------- test-time helpers
def test_fine_tune_updates_only_last_layer_of_a_copy(digits, seed):
    """Check fine-tuning changes only the last layer, of a copy, and fits."""
    X, y = digits
    support = np.concatenate([np.flatnonzero(y == c)[:6] for c in (7, 8, 9)])
    module = FLOWRMetaModule(small_encoder(), prior_var=1.0)
    original = copy.deepcopy(module.encoder.state_dict())
    tuned = fine_tune_last_layer(module.encoder, module, X[support], y[support],
                                 steps=30, lr=1e-2)
    for key, value in module.encoder.state_dict().items():
        assert torch.equal(value, original[key]), key
    last = {f"layers.{len(tuned.layers) - 1}.{n}" for n in ("weight", "bias")}
    for key, value in tuned.state_dict().items():
        assert torch.equal(value, original[key]) != (key in last), key
    assert last_linear_layer(tuned).weight.requires_grad
    assert not tuned.training


def support_episode_loss(encoder, module, X, y):
    """Mean loss of fixed pseudo-episodes cut from a support set."""
    rng = np.random.default_rng(5)
    _, y_index = np.unique(y, return_inverse=True)
    Z = torch.as_tensor(embed(encoder, X))
    head = {k: v.detach() if torch.is_tensor(v) else v
            for k, v in module.episode_params().items()}
    losses = []
    for _ in range(20):
        s, s_y, q, q_y, n_way = _split_support(y_index, y_index.max() + 1, rng)
        losses.append(float(meta_training_loss(
            Z[s], torch.as_tensor(s_y), Z[q], torch.as_tensor(q_y), n_way,
            lambda_adapt=0.0, **head)))
    return np.mean(losses)


def test_fine_tune_lowers_support_loss(digits, seed):
    """Check fine-tuning lowers the meta-training loss on the support set."""
    X, y = digits
    support = np.concatenate([np.flatnonzero(y == c)[:6] for c in (7, 8, 9)])
    module = FLOWRMetaModule(small_encoder(), prior_var=1.0)
    tuned = fine_tune_last_layer(module.encoder, module, X[support], y[support],
                                 steps=30, lr=1e-2)
    before = support_episode_loss(module.encoder, module, X[support], y[support])
    after = support_episode_loss(tuned, module, X[support], y[support])
    assert after < before


def test_head_kwargs_give_the_same_head(seed):
    """Check the NumPy head built from head_kwargs equals the module's logits."""
    module = FLOWRMetaModule(small_encoder(8, 4), prior_mean=0.3, prior_var=2.0,
                             b=0.7).double()
    z = module(torch.randn(12, 8, dtype=torch.float64)).detach()
    y_s = torch.tensor([0, 1, 1, 2, 2, 2])
    logits = flowr_episode_logits(z[:6], y_s, z[6:], 3, **module.episode_params())
    clf = CRPGaussianClassifier(covariance="isotropic", **module.head_kwargs(),
                                known_count="observed")
    clf.fit(z[:6].numpy(), y_s.numpy())
    np.testing.assert_allclose(torch.log_softmax(logits.detach(), 1).numpy(),
                               clf.predict_log_proba(z[6:].numpy()), atol=1e-10)


def test_embed_shape_and_mode(digits):
    """Check embed returns (n, d) NumPy and restores the training mode."""
    encoder = small_encoder()
    encoder.train()
    Z = embed(encoder, digits[0][:300], batch_size=128)
    assert Z.shape == (300, 8) and encoder.training


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_meta_training_on_gpu(digits):
    """Check meta-training and fine-tuning run on CUDA and match CPU logits."""
    X, y = digits
    episodes = EpisodeDataset(X, y, n_episodes=3)
    net = EpisodicMetaNet(module__encoder=small_encoder(), max_epochs=1,
                          verbose=0, device="cuda").fit(episodes)
    assert next(net.module_.parameters()).is_cuda
    tuned = fine_tune_last_layer(net.module_.encoder, net.module_, X[:20], y[:20],
                                 steps=2)
    assert next(tuned.parameters()).is_cuda
    X_ep, y_ep = episodes[0]
    q = X_ep["is_query"]
    with torch.no_grad():
        z = net.module_(X_ep["x"].cuda()).double()
        head = {k: v.double() if torch.is_tensor(v) else v
                for k, v in net.module_.episode_params().items()}
        n_way = int(y_ep[~q].max()) + 1
        gpu = flowr_episode_logits(z[~q.cuda()], y_ep[~q].cuda(), z[q.cuda()],
                                   n_way, **head)
        cpu = flowr_episode_logits(
            z[~q.cuda()].cpu(), y_ep[~q], z[q.cuda()].cpu(), n_way,
            **{k: v.cpu() if torch.is_tensor(v) else v for k, v in head.items()})
    torch.testing.assert_close(gpu.cpu(), cpu)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("setting", ["small", "large"])
def test_meta_training_step_does_not_synchronise(digits, setting):
    """Check a meta-training episode step on CUDA (images on the device, as
    FLOWRClassifier holds them) never waits for the GPU: torch's sync debug
    mode turns every synchronising call into an error."""
    X, y = digits
    kwargs = {}
    if setting == "large":
        kwargs = dict(known_means=np.zeros((5, 8)), known_vars=np.ones(5))
    module = FLOWRMetaModule(small_encoder(), **kwargs)
    episodes = EpisodeDataset(
        torch.as_tensor(X, device="cuda"), y, setting=setting, n_episodes=3,
        known_classes=np.arange(5) if setting == "large" else None)
    net = EpisodicMetaNet(module=module, device="cuda", verbose=0).initialize()
    net.train_step_single(episodes[0])  # lazy initialisation may synchronise
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        net.train_step_single(episodes[1])
    finally:
        torch.cuda.set_sync_debug_mode("default")


def test_meta_module_keeps_batch_norm_frozen_in_training_mode():
    """Check meta-training mode leaves batch-norm running statistics untouched
    (frozen by default) and updates them when asked not to freeze."""
    from sklearn_flowr.encoders import Conv4
    from sklearn_flowr.training import FLOWRMetaModule

    x = torch.randn(6, 1, 8, 8)
    for freeze in (True, False):
        module = FLOWRMetaModule(Conv4(in_channels=1, embedding_dim=4,
                                       input_size=(8, 8)),
                                 freeze_batch_norm=freeze).train()
        norm = next(m for m in module.modules()
                    if isinstance(m, torch.nn.BatchNorm2d))
        before = norm.running_mean.clone()
        module(x)
        assert module.training
        assert torch.equal(norm.running_mean, before) is freeze


def _mean_episode_loss(episodes, head):
    total = 0.0
    with torch.no_grad():
        for i in range(len(episodes)):
            X_ep, labels = episodes[i]
            q, z = X_ep["is_query"], X_ep["x"]
            n_way = int(labels[~q].max()) + 1
            total += float(meta_training_loss(z[~q], labels[~q], z[q], labels[q],
                                              n_way, lambda_adapt=0.1, **head))
    return total / len(episodes)


@pytest.mark.parametrize("learn_sigma", [False, True])
def test_meta_training_recovers_the_generating_prior(learn_sigma):
    """Check that meta-training the head alone (a fixed identity embedding) on
    data drawn from FLOWR's own model moves mu0, s0, b (and sigma when
    learned) from a wrong start to the generating values: mu0 and s0 near the
    truth, and an episode loss no worse than the best b on a grid at the
    true prior (the episode sampler is not a CRP, so b has no 'true' value
    but a best one)."""
    from sklearn_flowr._core import raw_from_concentration

    rng = np.random.default_rng(0)
    mu0, s0, sigma = np.array([1.0, -2.0, 0.5, 3.0]), 4.0, 0.5
    means = mu0 + np.sqrt(s0) * rng.normal(size=(200, 4))
    y = np.repeat(np.arange(200), 20)
    X = (means[y] + np.sqrt(sigma) * rng.normal(size=(4000, 4))).astype("f4")
    torch.manual_seed(0)
    module = FLOWRMetaModule(torch.nn.Identity(), 4,
                             sigma=1.0 if learn_sigma else sigma,
                             learn_sigma=learn_sigma, prior_mean=0.0,
                             prior_var=1.0, b=1.0)
    episodes = EpisodeDataset(X, y, n_way=10, n_unknown=5, n_episodes=100,
                              random_state=0)
    net = EpisodicMetaNet(module=module, lr=0.1, max_epochs=3, verbose=0,
                          random_state=0).fit(episodes)
    learned = net.module_.head_kwargs()
    np.testing.assert_allclose(learned["prior_mean"], mu0, atol=0.5)
    assert 2.0 < learned["prior_var"] < 6.0  # from 1.0, truth 4.0
    if learn_sigma:
        assert 0.35 < learned["sigma"] < 0.7  # from 1.0, truth 0.5
    held_out = EpisodeDataset(X, y, n_way=10, n_unknown=5, n_episodes=30,
                              random_state=1)

    def head(prior_mean, prior_var, b, sigma):
        return dict(prior_mean=torch.tensor(prior_mean, dtype=torch.float32),
                    prior_log_var=torch.tensor([np.log(prior_var)],
                                               dtype=torch.float32),
                    beta_raw=torch.tensor(raw_from_concentration(b, 0.5)), a=0.5,
                    sigma=sigma, class_prior="crp")

    best_at_truth = min(_mean_episode_loss(held_out, head(mu0, s0, b, sigma))
                        for b in np.exp(np.linspace(np.log(0.1), np.log(30), 13)))
    at_learned = _mean_episode_loss(held_out, head(
        learned["prior_mean"], learned["prior_var"], learned["b"], learned["sigma"]))
    assert at_learned < best_at_truth + 0.02
    assert learned["b"] != pytest.approx(1.0, abs=0.3)  # b moved
