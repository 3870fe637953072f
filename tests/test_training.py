"""Tests of the training half, ``sklearn_flowr.training``."""

import copy

import numpy as np
import pytest
import torch
from scipy.special import log_softmax as scipy_log_softmax
from scipy.stats import multivariate_normal
from sklearn.datasets import load_digits
from skorch.callbacks import Checkpoint, LoadInitState
from skorch.dataset import Dataset
from torch.utils.data import DataLoader, Subset

from sklearn_flowr import CRPGaussianClassifier
from sklearn_flowr._core import concentration_from_raw
from sklearn_flowr.encoders import MLPEncoder, last_linear_layer
from sklearn_flowr.training import (
    EpisodeDataset,
    EpisodicMetaNet,
    FLOWRMetaModule,
    SupEModule,
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


@pytest.fixture
def seed():
    """One seed for torch and NumPy draws in a test."""
    torch.manual_seed(0)
    return 0


@pytest.fixture
def episode64(rng):
    """A float64 episode: 3 support classes, 2 unknown-unknown query classes."""
    d = 3
    z_s = torch.tensor(rng.normal(scale=2.0, size=(7, d)))
    y_s = torch.tensor([0, 0, 1, 2, 2, 2, 1])
    z_q = torch.tensor(rng.normal(scale=2.0, size=(9, d)))
    y_q = torch.tensor([0, 3, 1, 4, 3, 2, 4, 3, 1])
    head = dict(prior_mean=torch.tensor(rng.normal(size=d)),
                prior_log_var=torch.tensor([0.4], dtype=torch.float64),
                beta_raw=torch.tensor(0.3, dtype=torch.float64), a=A, sigma=SIGMA)
    return z_s, y_s, z_q, y_q, head


@pytest.fixture(scope="module")
def digits():
    """Scaled sklearn digits as float32 pixels."""
    X, y = load_digits(return_X_y=True)
    return (X / 16.0).astype(np.float32), y


def small_encoder(in_features=64, embedding_dim=8, seed=0):
    torch.manual_seed(seed)
    return MLPEncoder(in_features, hidden=(32,), embedding_dim=embedding_dim)


def textbook_log_joint(z_support, y_support, z_query, *, mu0, s0, b, known=()):
    """``log N(z; m_n, v_n I) + log p(n)`` per column, from conjugate formulas.

    ``known`` holds ``(mean, var, count)`` of known-known classes (columns first).
    """
    d = z_query.shape[1]
    columns = [(m, v, c) for m, v, c in known]
    for label in np.unique(y_support):
        rows = z_support[y_support == label]
        post_var = 1.0 / (1.0 / s0 + rows.shape[0] / SIGMA)
        post_mean = post_var * (mu0 / s0 + rows.sum(0) / SIGMA)
        columns.append((post_mean, post_var + SIGMA, rows.shape[0]))
    k = sum(c for _, _, c in columns)
    n = len(columns)
    out = [np.atleast_1d(multivariate_normal(m, v * np.eye(d)).logpdf(z_query))
           + np.log((c - A) / (k + b)) for m, v, c in columns]
    out.append(np.atleast_1d(multivariate_normal(mu0, (s0 + SIGMA) * np.eye(d))
                             .logpdf(z_query))
               + np.log((b + A * n) / (k + b)))
    return np.stack(out, axis=1).reshape(len(z_query), n + 1)


# --------------------------------------------------------------------- losses
@pytest.mark.parametrize("class_prior", ["crp", "uniform"])
def test_episode_logits_match_head(episode64, class_prior):
    """Check that torch episode logits equal the NumPy head's log-posterior."""
    z_s, y_s, z_q, _, head = episode64
    logits = flowr_episode_logits(z_s, y_s, z_q, 3, class_prior=class_prior, **head)
    b = float(concentration_from_raw(head["beta_raw"], A))
    clf = CRPGaussianClassifier(
        a=A, b=b, sigma=SIGMA, prior_mean=head["prior_mean"].numpy(),
        prior_var=float(head["prior_log_var"].exp()), class_prior=class_prior,
        known_count="observed",
    ).fit(z_s.numpy(), y_s.numpy())
    np.testing.assert_allclose(torch.log_softmax(logits, 1).numpy(),
                               clf.predict_log_proba(z_q.numpy()), atol=1e-10)


def test_episode_logits_match_textbook_with_known_classes(episode64):
    """Check large-context logits (known table + support) against loops."""
    z_s, y_s, z_q, _, head = episode64
    known_means = np.array([[1.0, -1.0, 0.5], [-2.0, 0.0, 1.0]])
    known_vars = np.array([0.7, 1.9])
    known_counts = np.array([1.0, 3.0])
    logits = flowr_episode_logits(
        z_s, y_s + 2, z_q, 3, **head,
        known_nat_mean=torch.tensor(known_means / known_vars[:, None]),
        known_precision=torch.tensor(1.0 / known_vars[:, None]),
        known_counts=torch.tensor(known_counts))
    b = float(concentration_from_raw(head["beta_raw"], A))
    # The known table gives lam_n = 1/s_n; its predictive adds sigma.
    known = [(m, v + SIGMA, c) for m, v, c in
             zip(known_means, known_vars, known_counts, strict=True)]
    expected = textbook_log_joint(
        z_s.numpy(), y_s.numpy(), z_q.numpy(), mu0=head["prior_mean"].numpy(),
        s0=float(head["prior_log_var"].exp()), b=b, known=known)
    np.testing.assert_allclose(logits.numpy(), expected, atol=1e-10)


def hand_meta_loss(z_s, y_s, z_q, y_q, head, lambda_adapt):
    """Query NLL + lambda * L_adapt with explicit loops and scipy densities."""
    mu0 = head["prior_mean"].numpy()
    s0 = float(head["prior_log_var"].exp())
    b = float(concentration_from_raw(head["beta_raw"], A))
    z_s, y_s, z_q, y_q = (t.numpy() for t in (z_s, y_s, z_q, y_q))
    n_way = len(np.unique(y_s))
    log_post = scipy_log_softmax(
        textbook_log_joint(z_s, y_s, z_q, mu0=mu0, s0=s0, b=b), axis=1)
    target = np.minimum(y_q, n_way)
    nll = -np.mean(log_post[np.arange(len(y_q)), target])
    adapt_terms = []
    for u in np.unique(y_q[y_q >= n_way]):
        rows = np.flatnonzero(y_q == u)
        first, rest = rows[0], rows[1:]
        # The new class joins the support with one example, label n_way.
        z_new = np.vstack([z_s, z_q[first]])
        y_new = np.append(y_s, n_way)
        joint = textbook_log_joint(z_new, y_new, z_q[rest], mu0=mu0, s0=s0, b=b)
        adapt_terms.extend(-scipy_log_softmax(joint, axis=1)[:, n_way])
    adapt = np.mean(adapt_terms) if adapt_terms else 0.0
    return nll + lambda_adapt * adapt


@pytest.mark.parametrize("lambda_adapt", [0.0, 0.1, 2.0])
def test_meta_training_loss_matches_hand_computation(episode64, lambda_adapt):
    """Check the NLL + adaptation loss against explicit loops."""
    z_s, y_s, z_q, y_q, head = episode64
    loss = meta_training_loss(z_s, y_s, z_q, y_q, 3, lambda_adapt=lambda_adapt,
                              **head)
    expected = hand_meta_loss(z_s, y_s, z_q, y_q, head, lambda_adapt)
    assert float(loss) == pytest.approx(expected, rel=1e-10)


def test_adaptation_loss_needs_two_rows_of_an_unknown_class(episode64):
    """Check that unknown classes with a single query row add no adaptation."""
    z_s, y_s, z_q, _, head = episode64
    y_q = torch.tensor([0, 3, 1, 4, 5, 2, 6, 7, 1])
    with_adapt = meta_training_loss(z_s, y_s, z_q, y_q, 3, lambda_adapt=5.0, **head)
    without = meta_training_loss(z_s, y_s, z_q, y_q, 3, lambda_adapt=0.0, **head)
    assert float(with_adapt) == float(without)


def test_support_class_without_rows_is_an_error(episode64):
    """Check that a support class with no support row raises."""
    z_s, y_s, z_q, y_q, head = episode64
    with pytest.raises(ValueError, match="at least one support row"):
        flowr_episode_logits(z_s, y_s, z_q, 4, **head)


def test_sup_e_loss_matches_hand_computation(rng):
    """Check Sup-E loss = CE of Gaussian logits + beta sum d/s_n + l2 sum|mu|^2."""
    z = rng.normal(size=(6, 3))
    y = np.array([0, 1, 2, 1, 0, 2])
    means = rng.normal(size=(3, 3))
    log_var = np.array([0.1, -0.4, 0.7])
    loss = sup_e_loss(torch.tensor(z), torch.tensor(y), torch.tensor(means),
                      torch.tensor(log_var), beta=0.1, l2=1e-2)
    logits = np.stack([multivariate_normal(m, np.exp(lv) * np.eye(3)).logpdf(z)
                       for m, lv in zip(means, log_var, strict=True)], axis=1)
    ce = -np.mean(scipy_log_softmax(logits, axis=1)[np.arange(6), y])
    expected = ce + 0.1 * np.sum(3 / np.exp(log_var)) + 1e-2 * np.sum(means**2)
    assert float(loss) == pytest.approx(expected, rel=1e-10)


# ------------------------------------------------------------------ gradients
def test_meta_loss_gradients_reach_encoder_and_head(seed):
    """Check gradients flow to the encoder, mu0, log s0 and beta_raw."""
    module = FLOWRMetaModule(small_encoder(8, 4))
    x = torch.randn(16, 8)
    z = module(x)
    y_q = torch.tensor([0, 1, 2, 3, 3, 4, 4, 0])
    loss = meta_training_loss(z[:8], torch.arange(8) % 3, z[8:], y_q, 3,
                              **module.head_params())
    loss.backward()
    for name in ["prior_mean", "prior_log_var", "beta_raw"]:
        grad = getattr(module, name).grad
        assert grad is not None and torch.all(torch.isfinite(grad)), name
        assert grad.abs().sum() > 0, name
    assert all(p.grad is not None and p.grad.abs().sum() > 0
               for p in module.encoder.parameters())


def test_large_context_gradients_reach_known_table(seed):
    """Check gradients flow to the known-known (q_n, log lam_n) parameters."""
    module = FLOWRMetaModule(small_encoder(8, 4), known_means=np.zeros((3, 4)),
                             known_vars=np.ones(3))
    z = module(torch.randn(9, 8))
    loss = meta_training_loss(z[:0], torch.zeros(0, dtype=torch.long), z,
                              torch.tensor([0, 1, 2, 0, 3, 3, 4, 4, 1]), 0,
                              **module.head_params())
    loss.backward()
    assert module.known_nat_mean.grad.abs().sum() > 0
    assert module.known_log_precision.grad.abs().sum() > 0
    assert module.beta_raw.grad.abs() > 0


def test_sup_e_gradients_reach_encoder_means_and_variances(seed):
    """Check Sup-E gradients reach the encoder, class means and variances."""
    module = SupEModule(small_encoder(8, 4), n_classes=3)
    logits_loss = sup_e_loss(module.encoder(torch.randn(6, 8)),
                             torch.tensor([0, 1, 2, 0, 1, 2]),
                             module.class_means, module.class_log_var)
    logits_loss.backward()
    for parameter in [module.class_means, module.class_log_var,
                      *module.encoder.parameters()]:
        assert parameter.grad is not None and parameter.grad.abs().sum() > 0


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
    assert "train_loss" in capsys.readouterr().out  # skorch's epoch table
    after = fixed_episode_loss(net.module_, held_out)
    assert after < before
    assert np.isfinite(net.history[:, "train_loss"]).all()
    # The episode losses, read once per epoch, fill every batch row, and the
    # epoch's train_loss is their mean weighted by rows, as skorch's is.
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
            for k, v in module.head_params().items()}
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
    logits = flowr_episode_logits(z[:6], y_s, z[6:], 3, **module.head_params())
    clf = CRPGaussianClassifier(**module.head_kwargs(), known_count="observed")
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
                for k, v in net.module_.head_params().items()}
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
                    sigma=sigma)

    best_at_truth = min(_mean_episode_loss(held_out, head(mu0, s0, b, sigma))
                        for b in np.exp(np.linspace(np.log(0.1), np.log(30), 13)))
    at_learned = _mean_episode_loss(held_out, head(
        learned["prior_mean"], learned["prior_var"], learned["b"], learned["sigma"]))
    assert at_learned < best_at_truth + 0.02
    assert learned["b"] != pytest.approx(1.0, abs=0.3)  # b moved
