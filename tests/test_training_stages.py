"""Tests of FLOWR's training stages, each run alone on tiny data
(``training/_modules.py``, ``_class_stats.py``, ``_pretraining.py``,
``_meta_training.py``, ``_head_building.py``, ``pipeline.py``)."""

import copy

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.datasets import load_digits

from sklearn_flowr import CRPGaussianClassifier
from sklearn_flowr._core import estimate_prior
from sklearn_flowr.encoders import MLPEncoder, last_linear_layer
from sklearn_flowr.training import (
    FLOWRMetaModule,
    MetaTraining,
    SupE,
    SupEModule,
    SupENet,
    SupFC,
)
from sklearn_flowr.training._class_stats import class_statistics, initial_prior
from sklearn_flowr.training._head_building import (
    build_heads,
    check_head_template,
    known_class_table,
)
from sklearn_flowr.training._meta_training import (
    check_meta_training_plan,
    known_classes,
    meta_train,
)
from sklearn_flowr.training._pretraining import (
    build_encoder,
    embed_rows,
    match_noise_scale,
    pretrain_encoder,
)
from sklearn_flowr.training._runner import StageRunner
from sklearn_flowr.training.pipeline import (
    check_calibration_plan,
    check_training_plan,
    train_encoder,
)

META = dict(epochs=1, episodes_per_epoch=3, n_way=3, n_unknown=1, n_query=3)


@pytest.fixture(scope="module")
def digits5():
    """Digits 0-4 as float32 pixel features and class indices."""
    X, y = load_digits(return_X_y=True)
    keep = y < 5
    return (X[keep] / 16.0).astype(np.float32), y[keep]


def cpu_runner(seed=0):
    return StageRunner(torch.device("cpu"), seed)


def fresh_encoder(seed=0):
    torch.manual_seed(seed)
    return MLPEncoder(64, hidden=(16,), embedding_dim=4)


# ---------------------------------------------------------- head template
@pytest.mark.parametrize("head, meta, message", [
    (CRPGaussianClassifier(covariance="full"), MetaTraining(known_table="learned"),
     "known_table='refit'"),
    (CRPGaussianClassifier(covariance="isotropic", prior_scale=2.0), MetaTraining(),
     "prior_scale=2.0 scales"),
    (CRPGaussianClassifier(covariance="isotropic", prior_scale=2.0), None,
     "prior_scale=2.0 scales"),
    (CRPGaussianClassifier(covariance="isotropic", noise_shrinkage=0.2),
     MetaTraining(), "noise_shrinkage=0.2 shrinks"),
])
def test_head_template_refuses_what_training_cannot_fill(head, meta, message):
    """Check the head/stage combinations the flat configuration refused
    (now split between head=... and meta=...) are refused together."""
    with pytest.raises(ValueError, match=message):
        check_head_template(head, meta)


@pytest.mark.parametrize("head, meta", [
    (CRPGaussianClassifier(covariance="full", prior_scale=2.0,
                           noise_shrinkage=0.2), MetaTraining()),
    (CRPGaussianClassifier(covariance="full"), None),
    (CRPGaussianClassifier(covariance="isotropic"),
     MetaTraining(known_table="learned")),
    (CRPGaussianClassifier(covariance="isotropic", prior_var=2.0, sigma=0.3,
                           noise_shrinkage=0.2), MetaTraining()),
])
def test_head_template_accepts_what_training_fills(head, meta):
    """Check the combinations that build: the full head's factors on its
    estimates, the isotropic head with the learned table, and given values
    (which the factors leave alone)."""
    check_head_template(head, meta)


@pytest.mark.parametrize("params, message", [
    (dict(a=1.0), r"a=1.0 must lie in \[0, 1\)"),
    (dict(sigma=-1.0), "sigma=-1.0 must be positive"),
    (dict(class_prior="flat"), "class_prior must be 'crp' or 'uniform'"),
])
def test_meta_module_checks_its_settings(params, message):
    """Check that a meta-module built by hand refuses settings the episodes'
    model cannot take, and takes MetaTraining's defaults otherwise."""
    with pytest.raises(ValueError, match=message):
        FLOWRMetaModule(fresh_encoder(), **params)
    module = FLOWRMetaModule(fresh_encoder())
    defaults = MetaTraining()
    assert (module.a, module.sigma) == (defaults.episode_discount,
                                        defaults.episode_noise)
    with pytest.raises(ValueError, match="known_count=0.5 must exceed a=0.9"):
        FLOWRMetaModule(fresh_encoder(), a=0.9, known_count=0.5,
                        known_means=np.zeros((2, 4)), known_vars=np.ones(2))


# ------------------------------------------------------------ class stats
def test_class_statistics_are_means_and_mean_variances(rng):
    """Check class_statistics against a per-class NumPy loop."""
    y = np.repeat(np.arange(3), [4, 5, 6])
    Z = rng.normal(size=(15, 3)) + 5 * y[:, None]
    means, variances = class_statistics(Z, y, 3)
    for k in range(3):
        np.testing.assert_allclose(means[k], Z[y == k].mean(axis=0))
        assert variances[k] == pytest.approx(Z[y == k].var(axis=0).mean())


def test_class_statistics_floor_is_relative_to_the_embedding(rng):
    """Check that a class of repeated rows gets the empirical-Bayes noise
    floor, 1e-6 times the mean feature variance (scale invariant)."""
    Z = np.r_[np.ones((3, 2)), rng.normal(size=(3, 2))]
    y = np.repeat([0, 1], 3)
    for scale in (1e-4, 1.0, 1e4):
        _, variances = class_statistics(scale * Z, y, 2)
        assert variances[0] == pytest.approx(1e-6 * (scale * Z).var(axis=0).mean())


def test_initial_prior_is_core_empirical_bayes(rng):
    """Check the prior meta-training starts from is _core's estimate_prior on
    the class means."""
    means = rng.normal(size=(6, 4))
    prior_mean, prior_var = initial_prior(means)
    expected_mean, expected_var = estimate_prior(means, np.arange(6), 6)
    np.testing.assert_array_equal(prior_mean, expected_mean)
    assert prior_var == expected_var == pytest.approx(means.var(axis=0).mean())


def test_from_sup_e_starts_from_the_initial_prior():
    """Check FLOWRMetaModule.from_sup_e starts its prior where the estimator's
    meta-training starts it: initial_prior of the Sup-E class means."""
    torch.manual_seed(0)
    sup_e = SupEModule(fresh_encoder(), 5)
    meta = FLOWRMetaModule.from_sup_e(sup_e)
    prior_mean, prior_var = initial_prior(sup_e.class_means.detach().numpy())
    kwargs = meta.head_kwargs()
    np.testing.assert_allclose(kwargs["prior_mean"], prior_mean, rtol=1e-6)
    assert kwargs["prior_var"] == pytest.approx(prior_var, rel=1e-6)


# -------------------------------------------------------------- pre-train
@pytest.mark.parametrize("method", ["sup-e", "sup-fc"])
def test_pretraining_changes_the_encoder(digits5, method):
    """Check that Sup-E and Sup-FC train the encoder's weights, and that the
    class table is the embeddings' statistics afterwards."""
    X, y = digits5
    stage = (SupE if method == "sup-e" else SupFC)(epochs=2)
    encoder = fresh_encoder()
    before = copy.deepcopy(encoder.state_dict())
    runner = cpu_runner()
    trained, means, variances = pretrain_encoder(encoder, X, y, 5, stage, runner)
    assert len(runner.history["pretrain"]) == 2
    assert runner.history["pretrain"][-1]["train_loss"] < \
        runner.history["pretrain"][0]["train_loss"]
    for name, value in trained.state_dict().items():
        assert not torch.equal(value, before[name]), name
    expected = class_statistics(embed_rows(trained, X, 64), y, 5)
    np.testing.assert_allclose(means, expected[0])
    np.testing.assert_allclose(variances, expected[1])


def test_no_pretraining_leaves_the_encoder(digits5):
    """Check pretrain=None trains nothing and records no history."""
    X, y = digits5
    encoder = fresh_encoder()
    before = copy.deepcopy(encoder.state_dict())
    runner = cpu_runner()
    trained, _, _ = pretrain_encoder(encoder, X, y, 5, None, runner)
    assert trained is encoder and runner.history == {}
    for name, value in trained.state_dict().items():
        assert torch.equal(value, before[name])


def test_learned_class_stats_are_sup_e_parameters(digits5):
    """Check class_stats='learned' returns the class means and exp(log s_n) of
    the Sup-E net the stage trains (the same net trained by hand)."""
    X, y = digits5
    stage = SupE(epochs=2)
    encoder, means, variances = pretrain_encoder(
        fresh_encoder(), X, y, 5, stage, cpu_runner(seed=3), learned_stats=True)
    net = SupENet(module__encoder=fresh_encoder(), module__n_classes=5,
                  criterion__beta=stage.beta, batch_size=stage.batch_size,
                  max_epochs=2, verbose=0,
                  random_state=3).fit(X, y)
    np.testing.assert_allclose(means, net.module_.class_means.detach().numpy(),
                               rtol=1e-6)
    np.testing.assert_allclose(
        variances, np.exp(net.module_.class_log_var.detach().double().numpy()),
        rtol=1e-6)
    empirical = class_statistics(embed_rows(encoder, X, 64), y, 5)[0]
    assert not np.allclose(means, empirical, atol=1e-3)


# ---------------------------------------------------------- scale matching
@pytest.mark.parametrize("scale", [1e-3, 1.0, 1e3])
def test_scale_matching_sets_within_class_variance_to_noise(digits5, scale):
    """Check the mean within-class variance of the rescaled embedding is
    the episode noise, the returned class table is that of the rescaled embedding, and
    the embedding is only rescaled -- at any starting scale."""
    X, y = digits5
    encoder = fresh_encoder()
    with torch.no_grad():
        last_linear_layer(encoder).weight.mul_(scale)
    Z_before = embed_rows(encoder, X, 64)
    means, variances = class_statistics(Z_before, y, 5)
    means, variances, factor = match_noise_scale(
        encoder, X, y, means, variances, noise=0.3, batch_size=64)
    Z = embed_rows(encoder, X, 64)
    within = np.mean([Z[y == k].var(axis=0).mean() for k in range(5)])
    assert within == pytest.approx(0.3, rel=1e-4)
    np.testing.assert_allclose(Z, factor * Z_before, rtol=1e-4,
                               atol=1e-5 * np.abs(Z).max())
    expected = class_statistics(Z, y, 5)
    np.testing.assert_allclose(means, expected[0], rtol=1e-4,
                               atol=1e-5 * np.abs(Z).max())
    np.testing.assert_allclose(variances, expected[1], rtol=1e-3)


def test_scale_matching_leaves_a_nonlinear_output_alone(digits5):
    """Check an encoder whose output is not linear in its last linear layer
    is left as it was (to float32 rounding of the undone scale), with a
    warning and factor 1."""
    X, y = digits5
    encoder = torch.nn.Sequential(fresh_encoder(), torch.nn.Tanh())
    before = copy.deepcopy(encoder.state_dict())
    means, variances = class_statistics(embed_rows(encoder, X, 64), y, 5)
    with pytest.warns(UserWarning, match="not linear in its last linear layer"):
        out_means, out_variances, factor = match_noise_scale(
            encoder, X, y, means, variances, noise=0.3, batch_size=64)
    assert factor == 1.0
    assert out_means is means and out_variances is variances
    for name, value in encoder.state_dict().items():
        torch.testing.assert_close(value, before[name], rtol=1e-6, atol=0)


# ------------------------------------------------------------ meta-train
def test_known_classes_hold_out_a_fifth_in_the_large_context():
    """Check the large context holds out max(n_unknown, ceil(N / 5)) classes,
    drawn by the seed, and the small context none."""
    small = known_classes("small", MetaTraining(), 10, seed=0)
    np.testing.assert_array_equal(small, np.arange(10))
    meta = MetaTraining(n_unknown=1)
    assert known_classes("large", meta, 10, seed=0).shape == (8,)
    assert known_classes("large", MetaTraining(n_unknown=3), 10,
                         seed=0).shape == (7,)
    draws = {tuple(known_classes("large", meta, 10, seed=s)) for s in range(5)}
    assert len(draws) > 1


@pytest.mark.parametrize("params, message", [
    (dict(n_unknown=5), "leaves no support class"),
    (dict(n_query=9), "n_query \\+ 1 = 10 rows per class"),
])
def test_meta_training_plan_fails_on_the_labels_alone(params, message):
    """Check the episode checks run from the labels, without images."""
    y = np.repeat(np.arange(5), 9)
    with pytest.raises(ValueError, match=message):
        check_meta_training_plan("small", MetaTraining(**params), y, 5, seed=0)
    check_meta_training_plan("small", None, y, 5, seed=0)


@pytest.mark.parametrize("setting", ["small", "large"])
def test_meta_training_starts_from_the_class_table(digits5, setting):
    """Check the untrained meta-module holds initial_prior of the class means
    and, large context, the known classes' (mu_n / s_n, 1 / s_n)."""
    X, y = digits5
    rng = np.random.default_rng(0)
    means, variances = rng.normal(size=(5, 4)), rng.uniform(0.5, 2.0, size=5)
    meta = meta_train(fresh_encoder(), X, y, means, variances, setting=setting,
                      meta=None, encoder_lr=1e-4, runner=cpu_runner())
    prior_mean, prior_var = initial_prior(means)
    kwargs = meta.head_kwargs()
    np.testing.assert_allclose(kwargs["prior_mean"], prior_mean, rtol=1e-6)
    assert kwargs["prior_var"] == pytest.approx(prior_var, rel=1e-6)
    known = meta.known_classes_
    assert meta.n_known == (len(known) if setting == "large" else 0)
    if setting == "large":
        nat_mean = meta.known_nat_mean.detach().double().numpy()
        np.testing.assert_allclose(nat_mean, means[known] / variances[known, None],
                                   rtol=1e-5)


def test_meta_training_changes_encoder_and_head(digits5):
    """Check meta-training moves the encoder and the head's parameters and
    records its history."""
    X, y = digits5
    encoder = fresh_encoder()
    before = copy.deepcopy(encoder.state_dict())
    means, variances = class_statistics(embed_rows(encoder, X, 64), y, 5)
    runner = cpu_runner()
    meta = meta_train(encoder, X, y, means, variances, setting="small",
                      meta=MetaTraining(**META), encoder_lr=1e-4, runner=runner)
    assert len(runner.history["meta"]) == 1
    assert any(not torch.equal(value, before[name])
               for name, value in meta.encoder.state_dict().items())
    assert meta.head_kwargs()["b"] != pytest.approx(1.0)


# ---------------------------------------------------------- head building
def _meta_with_prior(stage, prior_mean, prior_var, b):
    """An (untrained) meta-module of the stage ``stage`` holding the prior."""
    meta = FLOWRMetaModule(fresh_encoder(), **stage.module_params(),
                           prior_mean=prior_mean, prior_var=prior_var, b=b)
    meta.known_classes_ = np.arange(0)
    return meta


def _full_problem(rng):
    """Embeddings of 4 classes with a correlated class noise, and labels."""
    y = np.repeat(np.arange(4), 6)
    Z = rng.normal(size=(24, 3)) @ rng.normal(size=(3, 3)) + 4 * rng.normal(
        size=(4, 3))[y]
    return Z, y


@pytest.mark.parametrize("setting", ["small", "large"])
def test_isotropic_head_is_conjugate_update_from_the_learned_prior(rng, setting):
    """Check the isotropic head conditions every training class from the
    learned prior, in both settings: lam = 1/s0 + n/sigma,
    m = (mu0/s0 + sum z / sigma) / lam."""
    y = np.repeat(np.arange(3), [2, 3, 4])
    Z = rng.normal(size=(9, 4)) + 3 * y[:, None]
    mu0, s0, b, sigma = rng.normal(size=4), 2.0, 1.7, 0.4
    config = MetaTraining(episode_noise=sigma)
    labels = np.array([10, 20, 30])
    _, head = build_heads(CRPGaussianClassifier(covariance="isotropic"),
                          _meta_with_prior(config, mu0, s0, b), Z, y, labels)
    counts = np.bincount(y)
    lam = 1 / s0 + counts / sigma
    sums = np.stack([Z[y == k].sum(axis=0) for k in range(3)])
    np.testing.assert_array_equal(head.classes_, labels)
    np.testing.assert_allclose(head.class_mean_, (mu0 / s0 + sums / sigma)
                               / lam[:, None], rtol=1e-6)
    np.testing.assert_allclose(head.crp_count_, np.ones(3))
    assert head.b == pytest.approx(b) and head.sigma == pytest.approx(sigma)
    _, variances = known_class_table(_meta_with_prior(config, mu0, s0, b), Z, y,
                                     3, noise=sigma)
    np.testing.assert_allclose(variances, 1 / lam, rtol=1e-6)


def test_prior_head_carries_only_the_learned_prior(rng):
    """Check the prior head is unfitted, with the meta-learned prior and b,
    and the template's explicit a, sigma and novel label (its "auto" sigma
    would be the meta-learned one); the template is left unchanged."""
    mu0 = rng.normal(size=4)
    y = np.repeat(np.arange(2), 3)
    Z = rng.normal(size=(6, 4))
    meta = _meta_with_prior(MetaTraining(episode_noise=0.3), mu0, 0.5, 3.0)
    template = CRPGaussianClassifier(covariance="isotropic", a=0.2, sigma=0.7,
                                     novel_label="new")
    params = template.get_params()
    prior, fitted = build_heads(template, meta, Z, y, np.array([4, 5]))
    assert not prior.__sklearn_is_fitted__()
    np.testing.assert_allclose(prior.prior_mean, mu0, rtol=1e-6)
    assert prior.prior_var == pytest.approx(0.5)
    assert (prior.a, prior.sigma, prior.novel_label) == (0.2, 0.7, "new")
    assert prior.b == pytest.approx(3.0)
    np.testing.assert_array_equal(fitted.classes_, [4, 5])
    assert not template.__sklearn_is_fitted__() and template.get_params() == params
    auto, _ = build_heads(CRPGaussianClassifier(covariance="isotropic"), meta, Z, y,
                          np.array([4, 5]))
    assert auto.sigma == pytest.approx(0.3)


def test_full_covariance_heads_equal_independent_empirical_bayes(rng):
    """Check covariance='full' gives CRPGaussianClassifier's own
    full-covariance empirical Bayes fit on the embeddings, with the learned
    b, and a prior head carrying its estimates, from which the training
    classes learned online get the same posterior means."""
    Z, y = _full_problem(rng)
    config = MetaTraining()
    prior, head = build_heads(CRPGaussianClassifier(covariance="full"),
                              _meta_with_prior(config, 0.0, 1.0, 2.5), Z, y,
                              np.arange(4))
    reference = CRPGaussianClassifier(covariance="full", b=2.5).fit(Z, y)
    assert head.b == pytest.approx(2.5)
    probe = rng.normal(size=(5, 3))
    np.testing.assert_allclose(head.predict_proba(probe),
                               reference.predict_proba(probe), atol=1e-10)
    np.testing.assert_allclose(prior.prior_mean, reference.prior_mean_)
    np.testing.assert_allclose(prior.prior_var, reference.prior_var_)
    np.testing.assert_allclose(prior.sigma, reference.sigma_)
    online = prior.partial_fit(Z, y)
    np.testing.assert_allclose(online.class_mean_, reference.class_mean_,
                               atol=1e-10)


def test_prior_scale_scales_only_the_empirical_prior_covariance(rng):
    """Check prior_scale gives the full head fitted with the empirical-Bayes
    mu0, noise and b held and the prior covariance multiplied, computed here
    from an independent plain fit."""
    Z, y = _full_problem(rng)
    _, head = build_heads(CRPGaussianClassifier(covariance="full", prior_scale=1.5),
                          _meta_with_prior(MetaTraining(), 0.0, 1.0, 2.5), Z, y,
                          np.arange(4))
    plain = CRPGaussianClassifier(covariance="full", b=2.5).fit(Z, y)
    reference = CRPGaussianClassifier(
        covariance="full", b=2.5, prior_mean=plain.prior_mean_,
        prior_var=1.5 * plain.prior_var_, sigma=plain.sigma_).fit(Z, y)
    probe = rng.normal(scale=3.0, size=(6, 3))
    np.testing.assert_allclose(head.predict_proba(probe),
                               reference.predict_proba(probe), atol=1e-10)
    # A wider prior for new classes' means: a far query is more novel.
    assert (head.predict_proba(probe)[:, -1]
            != plain.predict_proba(probe)[:, -1]).any()


def test_prior_head_of_a_scaled_prior_learns_new_classes(rng):
    """Check the prior head of a template with prior_scale carries the scaled
    prior covariance and learns a task's classes from it."""
    Z, y = _full_problem(rng)
    prior, _ = build_heads(CRPGaussianClassifier(covariance="full", prior_scale=1.5),
                           _meta_with_prior(MetaTraining(), 0.0, 1.0, 2.5), Z, y,
                           np.arange(4))
    plain = CRPGaussianClassifier(covariance="full", b=2.5).fit(Z, y)
    np.testing.assert_allclose(prior.prior_var, 1.5 * plain.prior_var_)
    # The same prior given by hand, its classes learned online too.
    reference = CRPGaussianClassifier(
        covariance="full", b=2.5, prior_mean=plain.prior_mean_,
        prior_var=1.5 * plain.prior_var_, sigma=plain.sigma_).partial_fit(Z, y)
    probe = rng.normal(scale=3.0, size=(6, 3))
    learned = prior.partial_fit(Z, y)
    np.testing.assert_allclose(learned.class_mean_, reference.class_mean_,
                               atol=1e-10)
    np.testing.assert_allclose(learned.predict_proba(probe),
                               reference.predict_proba(probe), atol=1e-10)


def test_noise_shrinkage_shrinks_only_the_empirical_noise_covariance(rng):
    """Check noise_shrinkage gives the full heads with the empirical-Bayes
    prior and b held and the noise covariance moved towards its mean
    eigenvalue, computed here from an independent plain fit; the prior head
    carries the shrunk noise (not shrunk again)."""
    Z, y = _full_problem(rng)
    prior, head = build_heads(
        CRPGaussianClassifier(covariance="full", noise_shrinkage=0.4),
        _meta_with_prior(MetaTraining(), 0.0, 1.0, 2.5), Z, y, np.arange(4))
    plain = CRPGaussianClassifier(covariance="full", b=2.5).fit(Z, y)
    W = plain.sigma_
    shrunk = 0.6 * W + 0.4 * np.trace(W) / 3 * np.eye(3)
    reference = CRPGaussianClassifier(
        covariance="full", b=2.5, prior_mean=plain.prior_mean_,
        prior_var=plain.prior_var_, sigma=shrunk).fit(Z, y)
    probe = rng.normal(scale=3.0, size=(6, 3))
    np.testing.assert_allclose(head.sigma_, shrunk)
    np.testing.assert_allclose(prior.sigma, shrunk)
    np.testing.assert_allclose(prior.prior_var, plain.prior_var_)
    np.testing.assert_allclose(head.predict_proba(probe),
                               reference.predict_proba(probe), atol=1e-10)
    np.testing.assert_allclose(prior.partial_fit(Z, y).class_mean_,
                               reference.class_mean_, atol=1e-10)
    assert not np.allclose(head.predict_proba(probe), plain.predict_proba(probe))


@pytest.mark.parametrize("update_known", [False, True])
def test_update_known_releases_the_training_classes(rng, update_known):
    """Check the fitted head keeps the training classes fixed online unless
    update_known, while new classes always learn."""
    Z, y = _full_problem(rng)
    _, head = build_heads(CRPGaussianClassifier(covariance="full"),
                          _meta_with_prior(MetaTraining(), 0.0, 1.0, 2.5), Z, y,
                          np.arange(4), update_known=update_known)
    means = head.class_mean_.copy()
    head.partial_fit(Z[:2] + 5.0, [0, 9])
    assert np.allclose(head.class_mean_[0], means[0]) != update_known
    assert head.classes_.tolist() == [0, 1, 2, 3, 9]


# -------------------------------------------------------------- pipeline
def test_train_encoder_equals_the_stages_run_by_hand(digits5):
    """Check train_encoder is the four stages in order, nothing more, and
    returns the pre-trained encoder before meta-training changed it."""
    X, y = digits5
    meta = MetaTraining(**META)
    trained = train_encoder(X, y, 5, backbone="mlp", setting="large",
                            embedding_dim=4, pretrain=SupE(epochs=2), meta=meta,
                            runner=cpu_runner())

    runner = cpu_runner()
    torch.manual_seed(runner.seed)
    encoder = build_encoder("mlp", 4, X)
    encoder, means, variances = pretrain_encoder(encoder, X, y, 5, SupE(epochs=2),
                                                 runner)
    means, variances, factor = match_noise_scale(
        encoder, X, y, means, variances, noise=meta.episode_noise, batch_size=64)
    pretrained = copy.deepcopy(encoder)
    meta = meta_train(encoder, X, y, means, variances, setting="large", meta=meta,
                      encoder_lr=1e-4, runner=runner).eval()
    assert sorted(trained) == ["embeddings", "history_", "meta_module_",
                               "noise_scale_", "pretrained_encoder_"]
    assert trained["noise_scale_"] == factor
    assert sorted(trained["history_"]) == ["meta", "pretrain"]
    np.testing.assert_array_equal(trained["embeddings"],
                                  embed_rows(meta.encoder, X, 64))
    np.testing.assert_array_equal(
        embed_rows(trained["pretrained_encoder_"], X[:10], 64),
        embed_rows(pretrained, X[:10], 64))
    assert not np.allclose(embed_rows(pretrained, X[:10], 64),
                           trained["embeddings"][:10])


def test_check_calibration_plan_is_the_cross_fit_plan(digits5):
    """Check the plan is cross_fit_plan's folds under the fit's seed."""
    from sklearn_flowr.protocol import cross_fit_plan

    X, y = digits5
    plan = check_calibration_plan(5, X, y, setting="large",
                                  meta=MetaTraining(**META), seed=4)
    expected = cross_fit_plan(5, X, y, setting="large", random_state=4)
    assert len(plan) == len(expected) == 5
    for got, want in zip(plan, expected, strict=True):
        np.testing.assert_array_equal(got.fit_rows, want.fit_rows)
        np.testing.assert_array_equal(got.query_rows, want.query_rows)
        assert got.seed == want.seed


@pytest.mark.parametrize("params, cv, message", [
    (dict(n_unknown=4, n_way=1), 5, "Fold 0 of calibration trains on 4 "
     "classes: .*leaves no support class"),
    (dict(setting="small"), 5, "holds out 1"),
    ({}, 1, "must be >= 2"),
])
def test_check_calibration_plan_fails_on_a_fold(digits5, params, cv, message):
    """Check each fold's classes get the training plan's checks, named by
    fold, before any training."""
    X, y = digits5
    setting = params.pop("setting", "large")
    meta = MetaTraining(**{**META, **params})
    check_training_plan(setting, meta, y, 5, seed=0)  # the whole data is fine
    with pytest.raises(ValueError, match=message):
        check_calibration_plan(cv, X, y, setting=setting, meta=meta, seed=0)


@pytest.mark.parametrize("setting, covariance", [
    ("small", "full"), ("large", "full"), ("large", "isotropic")])
def test_calibration_sets_the_map_fitted_on_training_tasks(
        rng, setting, covariance):
    """Check calibration="train" fits calibrate_novelty's map on the same
    embeddings and seed, run on the head the setting's tasks start from (the
    prior head in the small context), and the heads built with it predict as
    the plain heads with that map."""
    from types import SimpleNamespace

    from sklearn_flowr.protocol import calibrate_novelty
    from sklearn_flowr.training.pipeline import learn_novelty_map

    y = np.repeat(np.arange(12), 20)
    Z = 3.0 * rng.normal(size=(12, 4))[y] + rng.standard_t(3, size=(240, 4))
    template = CRPGaussianClassifier(covariance=covariance)
    meta = _meta_with_prior(MetaTraining(), 0.0, 9.0, 1.0)
    labels = np.arange(12)
    plain_prior, plain = build_heads(template, meta, Z, y, labels)
    start = plain_prior if setting == "small" else plain
    fitted = learn_novelty_map(SimpleNamespace(calibration="train", setting=setting,
                                             verbose=0), Z, y, None, start, Z,
                             seed=3)
    expected = calibrate_novelty(start, Z, y, setting=setting, random_state=3)
    novelty_map = (fitted.slope, fitted.intercept)
    assert novelty_map == (expected.slope, expected.intercept)
    prior, head = build_heads(clone(template).set_params(
        novelty_calibration=novelty_map), meta, Z, y, labels)
    assert head.novelty_calibration == prior.novelty_calibration == novelty_map
    assert 0 < expected.slope < 1  # heavy tails: the Gaussian odds are sharp
    probe = rng.normal(scale=3.0, size=(6, 4))
    np.testing.assert_array_equal(
        head.predict(probe),
        plain.set_params(novelty_calibration=head.novelty_calibration)
        .predict(probe))


def _frozen_encoder():
    from sklearn_flowr.encoders import EfficientNetLite0Encoder

    torch.manual_seed(0)
    return EfficientNetLite0Encoder(pretrained=False, embedding_dim=8, min_size=32)


def test_frozen_backbone_features_give_the_same_embedding():
    """Check a frozen backbone's cached features, through its last layer, give
    bitwise the embedding the whole encoder gives, and that an encoder that
    trains more than its last layer gets no cache."""
    from sklearn_flowr.encoders import EfficientNetLite0Encoder
    from sklearn_flowr.training import embed
    from sklearn_flowr.training._runner import StageRunner, frozen_last_layer

    encoder = _frozen_encoder()
    X = np.random.default_rng(0).random((70, 1, 8, 8), dtype=np.float32)
    layer, features = StageRunner(torch.device("cpu"), 0).trainable(encoder, X, 16)
    assert layer is encoder.fc and features.shape == (70, 1280)
    np.testing.assert_array_equal(embed(layer, features, batch_size=64),
                                  embed(encoder, X, batch_size=64))
    unfrozen = EfficientNetLite0Encoder(pretrained=False, freeze=False)
    assert frozen_last_layer(unfrozen) is None
    assert frozen_last_layer(MLPEncoder(8, embedding_dim=4)) is None


def test_frozen_backbone_runs_once_per_row_in_training(digits5):
    """Check a fit with a frozen backbone runs the network on each training
    row once for training and the final embedding (plus the scale probe), not
    on every batch of every epoch, and its embedding is the whole encoder's."""
    from sklearn_flowr import FLOWRClassifier

    X, y = digits5
    X = X.reshape(-1, 1, 8, 8)[:120]
    y = y[:120]
    encoder = _frozen_encoder()
    rows = []
    encoder.network._conv_stem.register_forward_hook(
        lambda module, inputs, output: rows.append(inputs[0].shape[0]))
    model = FLOWRClassifier(
        backbone=encoder, embedding_dim=8, pretrain=SupE(epochs=3),
        meta=MetaTraining(epochs=2, episodes_per_epoch=3, n_way=3, n_unknown=1),
        calibration=None, verbose=0, random_state=0, reuse_encoder=False).fit(X, y)
    assert 0 < sum(rows) <= 2 * len(X)
    from sklearn_flowr.training import embed

    np.testing.assert_array_equal(model.transform(X[:5]),
                                  embed(model.encoder_, X[:5]).astype(np.float64))


def test_torch_threads_are_set_while_training_and_restored(digits5):
    """Check StageRunner trains with the threads n_jobs asks for (None: 1) and
    restores torch's setting after."""
    from skorch.callbacks import Callback

    from sklearn_flowr.training._runner import StageRunner

    class Record(Callback):
        def on_epoch_end(self, net, **kwargs):
            seen.append(torch.get_num_threads())

    X, y = digits5
    before = torch.get_num_threads()
    for n_jobs, expected in [(None, 1), (2, 2)]:
        seen = []
        net = SupENet(module__encoder=MLPEncoder(64, embedding_dim=4),
                      module__n_classes=5, verbose=0, callbacks=[Record()])
        StageRunner(torch.device("cpu"), 0, n_jobs=n_jobs).fit(net, "pretrain", 1,
                                                               X, y)
        assert seen == [expected]
        assert torch.get_num_threads() == before
    import joblib

    from sklearn_flowr.training import torch_threads

    with joblib.parallel_config(n_jobs=2), torch_threads():
        assert torch.get_num_threads() == 2  # n_jobs=None: joblib's setting
