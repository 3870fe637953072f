"""Tests of FLOWR's training stages, each run alone on tiny data
(``training/_config.py``, ``_class_stats.py``, ``_pretraining.py``,
``_meta_training.py``, ``_head_building.py``, ``_pipeline.py``)."""

import copy

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits
from sklearn.utils._param_validation import InvalidParameterError

from sklearn_flowr import CRPGaussianClassifier
from sklearn_flowr._core import estimate_prior
from sklearn_flowr.encoders import MLPEncoder, last_linear_layer
from sklearn_flowr.training import FLOWRMetaModule, SupEModule, SupENet
from sklearn_flowr.training._class_stats import class_statistics, initial_prior
from sklearn_flowr.training._config import FLOWRConfig
from sklearn_flowr.training._head_building import build_head, known_class_table
from sklearn_flowr.training._meta_training import (
    check_meta_training_plan,
    known_classes,
    meta_train,
)
from sklearn_flowr.training._pipeline import train_flowr
from sklearn_flowr.training._pretraining import (
    build_encoder,
    embed_rows,
    match_noise_scale,
    pretrain,
)
from sklearn_flowr.training._runner import StageRunner

STAGE = dict(backbone="mlp", embedding_dim=4, pretrain_epochs=2, meta_epochs=1,
             episodes_per_epoch=3, n_way=3, n_unknown=1, n_query=3, verbose=0)


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


# ------------------------------------------------------------------ config
@pytest.mark.parametrize("params, message", [
    (dict(a=0.9, known_count=0.5), "known_count=0.5 must exceed a=0.9"),
    (dict(pretrain="sup-fc", class_stats="learned"), "needs pretrain='sup-e'"),
    (dict(pretrain=None, class_stats="learned"), "needs pretrain='sup-e'"),
    (dict(covariance="full", known_table="learned"), "known_table='refit'"),
    (dict(sigma=0.0), "sigma=0.0 must be positive"),
    (dict(covariance="isotropic", prior_scale=2.0), "prior_scale=2.0 scales"),
    (dict(covariance="isotropic", noise_shrinkage=0.2), "noise_shrinkage=0.2 shrinks"),
])
def test_config_refuses_bad_combinations(params, message):
    """Check that building a configuration checks the parameters together."""
    with pytest.raises(ValueError, match=message):
        FLOWRConfig(**params)


def test_config_from_params_checks_single_values_first():
    """Check that from_params refuses an invalid value with scikit-learn's
    parameter error, naming the estimator."""
    with pytest.raises(InvalidParameterError, match="FLOWRClassifier"):
        FLOWRConfig.from_params(dict(a=1.5))
    with pytest.raises(InvalidParameterError, match="n_way"):
        FLOWRConfig.from_params(dict(n_way=0))


@pytest.mark.parametrize("params, lr, meta_lr", [
    (dict(), 1e-3, 1e-4),
    (dict(backbone="resnet12"), 1e-4, 1e-5),
    (dict(lr=2e-3), 2e-3, 2e-4),
    (dict(lr=2e-3, meta_lr=5e-4), 2e-3, 5e-4),
])
def test_config_resolves_learning_rates(params, lr, meta_lr):
    """Check the default rates: 1e-3 (1e-4 for ResNets) and a tenth for meta."""
    config = FLOWRConfig.from_params({"lr": None, "meta_lr": None, **params})
    assert config.lr == pytest.approx(lr)
    assert config.meta_lr == pytest.approx(meta_lr)


def test_meta_module_shares_the_config_checks():
    """Check that a meta-module built by hand refuses what the config refuses,
    with the same message."""
    for params in (dict(a=1.0), dict(sigma=-1.0), dict(class_prior="flat")):
        with pytest.raises(ValueError) as config_error:
            FLOWRConfig(**params)
        with pytest.raises(ValueError) as module_error:
            FLOWRMetaModule(fresh_encoder(), **params)
        assert str(config_error.value) == str(module_error.value)
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
    config = FLOWRConfig(**{**STAGE, "pretrain": method})
    encoder = fresh_encoder()
    before = copy.deepcopy(encoder.state_dict())
    runner = cpu_runner()
    trained, means, variances = pretrain(encoder, X, y, 5, config, runner)
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
    trained, _, _ = pretrain(encoder, X, y, 5, FLOWRConfig(**{**STAGE,
                                                              "pretrain": None}),
                             runner)
    assert trained is encoder and runner.history == {}
    for name, value in trained.state_dict().items():
        assert torch.equal(value, before[name])


def test_learned_class_stats_are_sup_e_parameters(digits5):
    """Check class_stats='learned' returns the class means and exp(log s_n) of
    the Sup-E net the stage trains (the same net trained by hand)."""
    X, y = digits5
    config = FLOWRConfig(**{**STAGE, "class_stats": "learned"})
    encoder, means, variances = pretrain(fresh_encoder(), X, y, 5, config,
                                         cpu_runner(seed=3))
    net = SupENet(module__encoder=fresh_encoder(), module__n_classes=5,
                  criterion__beta=config.beta, batch_size=config.batch_size,
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
def test_scale_matching_sets_within_class_variance_to_sigma(digits5, scale):
    """Check the mean within-class variance of the rescaled embedding is
    sigma, the returned class table is that of the rescaled embedding, and
    the embedding is only rescaled -- at any starting scale."""
    X, y = digits5
    encoder = fresh_encoder()
    with torch.no_grad():
        last_linear_layer(encoder).weight.mul_(scale)
    Z_before = embed_rows(encoder, X, 64)
    means, variances = class_statistics(Z_before, y, 5)
    means, variances, factor = match_noise_scale(
        encoder, X, y, means, variances, sigma=0.3, batch_size=64)
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
            encoder, X, y, means, variances, sigma=0.3, batch_size=64)
    assert factor == 1.0
    assert out_means is means and out_variances is variances
    for name, value in encoder.state_dict().items():
        torch.testing.assert_close(value, before[name], rtol=1e-6, atol=0)


# ------------------------------------------------------------ meta-train
def test_known_classes_hold_out_a_fifth_in_the_large_context():
    """Check the large context holds out max(n_unknown, ceil(N / 5)) classes,
    drawn by the seed, and the small context none."""
    small = known_classes(FLOWRConfig(setting="small"), 10, seed=0)
    np.testing.assert_array_equal(small, np.arange(10))
    config = FLOWRConfig(setting="large", n_unknown=1)
    assert known_classes(config, 10, seed=0).shape == (8,)
    assert known_classes(FLOWRConfig(setting="large", n_unknown=3), 10,
                         seed=0).shape == (7,)
    draws = {tuple(known_classes(config, 10, seed=s)) for s in range(5)}
    assert len(draws) > 1


@pytest.mark.parametrize("params, message", [
    (dict(n_unknown=5), "leaves no support class"),
    (dict(n_query=9), "n_query \\+ 1 = 10 rows per class"),
])
def test_meta_training_plan_fails_on_the_labels_alone(params, message):
    """Check the episode checks run from the labels, without images."""
    y = np.repeat(np.arange(5), 9)
    with pytest.raises(ValueError, match=message):
        check_meta_training_plan(FLOWRConfig(**params), y, 5, seed=0)
    check_meta_training_plan(FLOWRConfig(**params, meta_epochs=0), y, 5, seed=0)


@pytest.mark.parametrize("setting", ["small", "large"])
def test_meta_training_starts_from_the_class_table(digits5, setting):
    """Check the untrained meta-module holds initial_prior of the class means
    and, large context, the known classes' (mu_n / s_n, 1 / s_n)."""
    X, y = digits5
    config = FLOWRConfig(**{**STAGE, "setting": setting, "meta_epochs": 0})
    rng = np.random.default_rng(0)
    means, variances = rng.normal(size=(5, 4)), rng.uniform(0.5, 2.0, size=5)
    meta = meta_train(fresh_encoder(), X, y, means, variances, config,
                      cpu_runner())
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
    config = FLOWRConfig(**STAGE)
    encoder = fresh_encoder()
    before = copy.deepcopy(encoder.state_dict())
    means, variances = class_statistics(embed_rows(encoder, X, 64), y, 5)
    runner = cpu_runner()
    meta = meta_train(encoder, X, y, means, variances, config, runner)
    assert len(runner.history["meta"]) == 1
    assert any(not torch.equal(value, before[name])
               for name, value in meta.encoder.state_dict().items())
    assert meta.head_kwargs()["b"] != pytest.approx(1.0)


# ---------------------------------------------------------- head building
def _meta_with_prior(config, prior_mean, prior_var, b):
    """An (untrained) meta-module of ``config`` holding the given prior."""
    meta = FLOWRMetaModule(fresh_encoder(), **config.meta_module_params(),
                           prior_mean=prior_mean, prior_var=prior_var, b=b)
    meta.known_classes_ = np.arange(0)
    return meta


def test_large_context_head_is_conjugate_update_from_the_learned_prior(rng):
    """Check the large-context head conditions every class from the learned
    prior: lam = 1/s0 + n/sigma, m = (mu0/s0 + sum z / sigma) / lam."""
    y = np.repeat(np.arange(3), [2, 3, 4])
    Z = rng.normal(size=(9, 4)) + 3 * y[:, None]
    mu0, s0, b, sigma = rng.normal(size=4), 2.0, 1.7, 0.4
    config = FLOWRConfig(setting="large", sigma=sigma, covariance="isotropic")
    labels = np.array([10, 20, 30])
    head = build_head(CRPGaussianClassifier(**config.head_params()),
                      _meta_with_prior(config, mu0, s0, b), Z, y, labels, config)
    counts = np.bincount(y)
    lam = 1 / s0 + counts / sigma
    sums = np.stack([Z[y == k].sum(axis=0) for k in range(3)])
    np.testing.assert_array_equal(head.classes_, labels)
    np.testing.assert_allclose(head.class_mean_, (mu0 / s0 + sums / sigma)
                               / lam[:, None], rtol=1e-6)
    np.testing.assert_allclose(head.crp_count_, np.ones(3))
    assert head.b == pytest.approx(b) and head.sigma == pytest.approx(sigma)
    _, variances = known_class_table(_meta_with_prior(config, mu0, s0, b), Z, y,
                                     3, sigma=sigma)
    np.testing.assert_allclose(variances, 1 / lam, rtol=1e-6)


def test_small_context_head_carries_only_the_learned_prior(rng):
    """Check the small-context head is unfitted, with the meta-learned prior
    and the configuration's a, sigma and novel label."""
    mu0 = rng.normal(size=4)
    config = FLOWRConfig(setting="small", a=0.2, sigma=0.7, novel_label="new",
                         covariance="isotropic", calibrate_novelty=False)
    head = build_head(CRPGaussianClassifier(**config.head_params()),
                      _meta_with_prior(config, mu0, 0.5, 3.0), None, np.zeros(0, int),
                      np.zeros(0), config)
    assert not head.__sklearn_is_fitted__()
    np.testing.assert_allclose(head.prior_mean, mu0, rtol=1e-6)
    assert head.prior_var == pytest.approx(0.5)
    assert (head.a, head.sigma, head.novel_label) == (0.2, 0.7, "new")
    assert head.b == pytest.approx(3.0)


@pytest.mark.parametrize("setting", ["small", "large"])
def test_full_covariance_head_equals_independent_empirical_bayes(rng, setting):
    """Check covariance='full' gives the head CRPGaussianClassifier's own
    full-covariance empirical Bayes fits on the embeddings, with the learned b."""
    y = np.repeat(np.arange(4), 6)
    Z = rng.normal(size=(24, 3)) @ rng.normal(size=(3, 3)) + 4 * rng.normal(
        size=(4, 3))[y]
    config = FLOWRConfig(setting=setting, covariance="full",
                         calibrate_novelty=False)
    head = build_head(CRPGaussianClassifier(**config.head_params()),
                      _meta_with_prior(config, 0.0, 1.0, 2.5), Z, y, np.arange(4),
                      config)
    reference = CRPGaussianClassifier(covariance="full", b=head.b).fit(Z, y)
    assert head.b == pytest.approx(2.5)
    if setting == "small":
        np.testing.assert_allclose(head.prior_var, reference.prior_var_)
        np.testing.assert_allclose(head.sigma, reference.sigma_)
        return
    probe = rng.normal(size=(5, 3))
    np.testing.assert_allclose(head.predict_proba(probe),
                               reference.predict_proba(probe), atol=1e-10)


@pytest.mark.parametrize("setting", ["small", "large"])
def test_prior_scale_scales_only_the_empirical_prior_covariance(rng, setting):
    """Check prior_scale gives the full head fitted with the empirical-Bayes
    mu0, noise and b held and the prior covariance multiplied, computed here
    from an independent plain fit."""
    y = np.repeat(np.arange(4), 6)
    Z = rng.normal(size=(24, 3)) @ rng.normal(size=(3, 3)) + 4 * rng.normal(
        size=(4, 3))[y]
    config = FLOWRConfig(setting=setting, covariance="full", prior_scale=1.5,
                         calibrate_novelty=False)
    head = build_head(CRPGaussianClassifier(**config.head_params()),
                      _meta_with_prior(config, 0.0, 1.0, 2.5), Z, y, np.arange(4),
                      config)
    plain = CRPGaussianClassifier(covariance="full", b=2.5).fit(Z, y)
    reference = CRPGaussianClassifier(
        covariance="full", b=2.5, prior_mean=plain.prior_mean_,
        prior_var=1.5 * plain.prior_var_, sigma=plain.sigma_)
    probe = rng.normal(scale=3.0, size=(6, 3))
    if setting == "small":  # unfitted with the prior: learn a task's classes
        np.testing.assert_allclose(head.prior_var, 1.5 * plain.prior_var_)
        np.testing.assert_allclose(head.sigma, plain.sigma_)
        head, reference = head.partial_fit(Z, y), reference.partial_fit(Z, y)
    else:
        reference.fit(Z, y)
    np.testing.assert_allclose(head.predict_proba(probe),
                               reference.predict_proba(probe), atol=1e-10)
    # A wider prior for new classes' means: a far query is more novel.
    assert (head.predict_proba(probe)[:, -1]
            != plain.predict_proba(probe)[:, -1]).any()


@pytest.mark.parametrize("setting", ["small", "large"])
def test_noise_shrinkage_shrinks_only_the_empirical_noise_covariance(rng, setting):
    """Check noise_shrinkage gives the full head with the empirical-Bayes
    prior and b held and the noise covariance moved towards its mean
    eigenvalue, computed here from an independent plain fit."""
    y = np.repeat(np.arange(4), 6)
    Z = rng.normal(size=(24, 3)) @ rng.normal(size=(3, 3)) + 4 * rng.normal(
        size=(4, 3))[y]
    config = FLOWRConfig(setting=setting, covariance="full", noise_shrinkage=0.4,
                         calibrate_novelty=False)
    head = build_head(CRPGaussianClassifier(**config.head_params()),
                      _meta_with_prior(config, 0.0, 1.0, 2.5), Z, y, np.arange(4),
                      config)
    plain = CRPGaussianClassifier(covariance="full", b=2.5).fit(Z, y)
    W = plain.sigma_
    shrunk = 0.6 * W + 0.4 * np.trace(W) / 3 * np.eye(3)
    reference = CRPGaussianClassifier(
        covariance="full", b=2.5, prior_mean=plain.prior_mean_,
        prior_var=plain.prior_var_, sigma=shrunk)
    probe = rng.normal(scale=3.0, size=(6, 3))
    if setting == "small":
        np.testing.assert_allclose(head.sigma, shrunk)
        np.testing.assert_allclose(head.prior_var, plain.prior_var_)
        head, reference = head.partial_fit(Z, y), reference.partial_fit(Z, y)
    else:
        np.testing.assert_allclose(head.sigma_, shrunk)
        reference.fit(Z, y)
    np.testing.assert_allclose(head.predict_proba(probe),
                               reference.predict_proba(probe), atol=1e-10)
    assert not np.allclose(head.predict_proba(probe), plain.predict_proba(probe))


# -------------------------------------------------------------- pipeline
def test_pipeline_equals_the_stages_run_by_hand(digits5):
    """Check train_flowr is the four stages in order, nothing more."""
    X, y = digits5
    config = FLOWRConfig(**{**STAGE, "setting": "large"})
    template = CRPGaussianClassifier(**config.head_params())
    fitted = train_flowr(X, np.arange(5), y, config, cpu_runner(), template)

    runner = cpu_runner()
    torch.manual_seed(runner.seed)
    encoder = build_encoder(config, X)
    encoder, means, variances = pretrain(encoder, X, y, 5, config, runner)
    means, variances, factor = match_noise_scale(
        encoder, X, y, means, variances, sigma=config.sigma, batch_size=64)
    meta = meta_train(encoder, X, y, means, variances, config, runner).eval()
    head = build_head(template, meta, embed_rows(meta.encoder, X, 64), y,
                      np.arange(5), config)
    assert fitted["noise_scale_"] == factor
    np.testing.assert_array_equal(fitted["head_"].class_mean_, head.class_mean_)
    np.testing.assert_array_equal(embed_rows(fitted["encoder_"], X[:10], 64),
                                  embed_rows(meta.encoder, X[:10], 64))
    assert not template.__sklearn_is_fitted__()  # a template, left unchanged


@pytest.mark.parametrize("setting, covariance", [
    ("small", "full"), ("large", "full"), ("large", "isotropic")])
def test_calibrate_novelty_sets_the_map_fitted_on_training_tasks(
        rng, setting, covariance):
    """Check calibrate_novelty=True gives the head built without it plus the
    map calibrate_novelty fits on the same embeddings and seed."""
    from sklearn_flowr.protocol import calibrate_novelty

    y = np.repeat(np.arange(12), 20)
    Z = 3.0 * rng.normal(size=(12, 4))[y] + rng.standard_t(3, size=(240, 4))
    config = FLOWRConfig(setting=setting, covariance=covariance,
                         calibrate_novelty=True)
    plain_config = FLOWRConfig(setting=setting, covariance=covariance,
                               calibrate_novelty=False)
    meta = _meta_with_prior(config, 0.0, 9.0, 1.0)
    head = build_head(CRPGaussianClassifier(**config.head_params()), meta, Z, y,
                      np.arange(12), config, random_state=3)
    plain = build_head(CRPGaussianClassifier(**config.head_params()), meta, Z, y,
                       np.arange(12), plain_config)
    expected = calibrate_novelty(plain, Z, y, setting=setting, random_state=3)
    assert head.novelty_calibration == (expected.slope, expected.intercept)
    assert 0 < expected.slope < 1  # heavy tails: the Gaussian odds are sharp
    if setting == "large":
        probe = rng.normal(scale=3.0, size=(6, 4))
        np.testing.assert_array_equal(
            head.predict(probe),
            plain.set_params(novelty_calibration=head.novelty_calibration)
            .predict(probe))
