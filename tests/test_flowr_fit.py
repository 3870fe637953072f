"""Tests of FLOWRClassifier.fit: what each training choice does, checkpoints,
and the checks that run before any training (see also test_training_stages)."""

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from sklearn_flowr import CRPGaussianClassifier, FLOWRClassifier
from sklearn_flowr.training import MetaTraining, SupE, SupFC

# Every fit here trains afresh (reuse_encoder=False): the tests compare
# trainings, which the in-process encoder memo would otherwise short-cut.
# No novelty map but where the test is about it (calibration="train").
TINY = dict(embedding_dim=8, pretrain=SupE(epochs=2),
            meta=MetaTraining(epochs=1, episodes_per_epoch=4, n_way=3, n_unknown=2),
            verbose=0, random_state=0, reuse_encoder=False, calibration=None)
ISOTROPIC = CRPGaussianClassifier(covariance="isotropic")
# Heads whose fit trains the encoder on every row (none held out for predict's
# decision), for the tests that count or read the training rows.
EVERY_ROW = CRPGaussianClassifier(covariance="full", novelty_alpha=None)
ISOTROPIC_EVERY_ROW = CRPGaussianClassifier(covariance="isotropic", novelty_alpha=None)


def tiny(**params):
    """A fresh model of TINY with ``params`` (its parts cloned, so a nested
    set_params never changes TINY's shared parts)."""
    return clone(FLOWRClassifier(**{**TINY, **params}))


@pytest.mark.parametrize("pretrain", [SupFC(epochs=2), None])
def test_other_pretraining_choices(digits, pretrain):
    """Check Sup-FC trains the encoder otherwise than Sup-E (its own loss and
    weights), and pretrain=None trains nothing: its encoder does not depend on
    the data it is fitted on (but for match_episode_noise's scale)."""
    X, y = digits
    params = dict(TINY, backbone="conv4", setting="large", pretrain=pretrain,
                  meta=None)
    model = FLOWRClassifier(**params).fit(X[y < 5], y[y < 5])
    assert model.predict_proba(X[:2]).shape == (2, 6)
    other_data = FLOWRClassifier(**params).fit(X[y >= 5], y[y >= 5])
    sup_e = FLOWRClassifier(**{**params, "pretrain": SupE(epochs=2)}).fit(
        X[y < 5], y[y < 5])
    Z = model.transform(X[:20])
    assert not np.allclose(Z, sup_e.transform(X[:20]), atol=1e-4)
    if pretrain is None:
        assert "pretrain" not in model.history_
        # Up to match_episode_noise's factor, which the data set.
        other = other_data.transform(X[:20])
        np.testing.assert_allclose(Z / np.linalg.norm(Z),
                                   other / np.linalg.norm(other), rtol=1e-5)
        return
    losses = [row["train_loss"] for row in model.history_["pretrain"]]
    assert losses[-1] < losses[0]
    assert losses != [row["train_loss"] for row in sup_e.history_["pretrain"]]
    assert not np.allclose(Z, other_data.transform(X[:20]), atol=1e-4)


@pytest.mark.parametrize("class_stats", ["empirical", "learned"])
def test_class_stats_seed_the_prior(digits, monkeypatch, class_stats):
    """Check the prior (mu0, s0) is empirical Bayes on the chosen class means:
    the embeddings' class means, or Sup-E's learned ones (read off the
    pre-training net), both rescaled by match_episode_noise's factor."""
    from sklearn_flowr.training import SupENet

    nets = []
    original = SupENet.fit

    def keep(net, *args, **kwargs):
        nets.append(net)
        return original(net, *args, **kwargs)

    monkeypatch.setattr(SupENet, "fit", keep)
    X, y = digits
    # The paper's isotropic head carries the prior (the full head re-estimates
    # it); meta-training at a negligible rate leaves the prior where it starts.
    model = tiny(head=ISOTROPIC_EVERY_ROW).set_params(
        meta__class_stats=class_stats, meta__encoder_lr=1e-12,
        meta__prior_lr=1e-12).fit(X[y < 4], y[y < 4])
    assert len(nets) == 1 and len(model.history_["pretrain"]) == 2
    Z = model.transform(X[y < 4])
    empirical = np.stack([Z[y[y < 4] == c].mean(axis=0) for c in range(4)])
    learned = (model.noise_scale_
               * nets[0].module_.class_means.detach().cpu().double().numpy())
    means = empirical if class_stats == "empirical" else learned
    np.testing.assert_allclose(model.prior_head_.prior_mean, means.mean(axis=0),
                               rtol=1e-4, atol=1e-5)
    assert model.prior_head_.prior_var == pytest.approx(
        means.var(axis=0).mean(), rel=1e-4)
    assert not np.allclose(empirical.mean(axis=0), learned.mean(axis=0),
                           atol=1e-3)


def test_learned_class_stats_need_sup_e(digits):
    """Check class_stats='learned' with Sup-FC fails before any training."""
    X, y = digits
    model = tiny(pretrain=SupFC()).set_params(
        meta__class_stats="learned")
    with pytest.raises(ValueError, match="needs pretrain=SupE"):
        model.fit(X[y < 4], y[y < 4])
    assert not hasattr(model, "head_")


@pytest.mark.parametrize("n_rows, batches", [(33, [16, 16]), (34, [16, 16, 2])])
def test_last_batch_of_one_row_is_dropped(digits, n_rows, batches):
    """Check a training set of k * batch_size + 1 rows drops its last batch of
    one row in every pre-training epoch (batch norm needs two rows per
    batch), and only then."""
    X, y = digits
    rows = np.flatnonzero(y < 3)[:n_rows]
    model = tiny(meta=None, head=EVERY_ROW).set_params(
        pretrain__batch_size=16).fit(X[rows], y[rows])
    history = model.history_["pretrain"]
    assert len(history) == 2
    for epoch in history:
        assert [batch["train_batch_size"] for batch in epoch["batches"]] == batches


def test_same_seed_same_model(digits):
    """Check random_state makes CPU training reproducible."""
    X, y = digits
    params = dict(TINY, backbone="conv4", setting="small", meta=None)
    first = FLOWRClassifier(**params).fit(X[y < 4], y[y < 4])
    second = FLOWRClassifier(**params).fit(X[y < 4], y[y < 4])
    np.testing.assert_array_equal(first.transform(X[:6]), second.transform(X[:6]))


def test_noise_shrinkage_changes_the_head_not_the_encoder(digits):
    """Check head__noise_shrinkage reaches the full head (the noise covariance
    moved towards its mean eigenvalue, the trace kept) and that training does
    not read it: with the same seed the refit gives the same encoder."""
    X, y = digits
    params = dict(TINY, backbone="mlp", setting="small")
    plain = FLOWRClassifier(**params).fit(X[y < 5], y[y < 5])
    shrunk = clone(FLOWRClassifier(**params)).set_params(head__noise_shrinkage=0.5).fit(
        X[y < 5], y[y < 5])
    np.testing.assert_array_equal(plain.transform(X[:6]), shrunk.transform(X[:6]))
    W = np.asarray(plain.prior_head_.sigma)
    np.testing.assert_allclose(shrunk.prior_head_.sigma,
                               0.5 * W + 0.5 * np.trace(W) / W.shape[0] * np.eye(
                                   W.shape[0]), rtol=1e-6, atol=1e-9)
    assert shrunk.head_.noise_shrinkage == 0.5


def test_checkpoint_resume_trains_only_the_missing_epochs(digits, tmp_path):
    """Check an interrupted fit resumes from checkpoint_dir."""
    X, y = digits
    params = dict(TINY, backbone="conv4", setting="small", meta=None,
                  checkpoint_dir=tmp_path)
    FLOWRClassifier(**{**params, "pretrain": SupE(epochs=1)}).fit(X[y < 4], y[y < 4])
    resumed = FLOWRClassifier(**params).fit(X[y < 4], y[y < 4])
    assert len(resumed.history_["pretrain"]) == 2
    done = FLOWRClassifier(**params).fit(X[y < 4], y[y < 4])
    np.testing.assert_array_equal(done.transform(X[:3]), resumed.transform(X[:3]))


def test_match_episode_noise_sets_within_class_variance(digits):
    """Check the pre-trained embedding is rescaled so the mean within-class
    variance of the training embeddings equals episode_noise."""
    X, y = digits
    rows = y < 4
    # Meta-training at a negligible rate keeps the rescaled embedding.
    params = dict(TINY, backbone="conv4", setting="small",
                  meta=MetaTraining(epochs=1, episodes_per_epoch=1, n_way=3,
                                    n_unknown=1, episode_noise=0.3,
                                    encoder_lr=1e-12, prior_lr=1e-12))
    model = FLOWRClassifier(**params).fit(X[rows], y[rows])
    Z = model.transform(X[rows])
    within = np.mean([Z[y[rows] == c].var(axis=0).mean() for c in range(4)])
    assert within == pytest.approx(0.3, rel=0.05)
    raw = clone(FLOWRClassifier(**params)).set_params(
        meta__match_episode_noise=False).fit(X[rows], y[rows])
    Z_raw = raw.transform(X[rows])
    ratio = np.linalg.norm(Z) / np.linalg.norm(Z_raw)
    np.testing.assert_allclose(Z, ratio * Z_raw, rtol=1e-3, atol=1e-4 * ratio)


@pytest.mark.parametrize("lr, meta_lr, expected", [(None, None, 1e-4),
                                                   (2e-3, None, 2e-4),
                                                   (None, 5e-4, 5e-4)])
def test_meta_training_rate_defaults_to_a_tenth_of_lr(lr, meta_lr, expected,
                                                      monkeypatch, digits):
    """Check that meta-training runs its encoder at meta__encoder_lr, a tenth
    of pretrain__lr when unset."""
    from sklearn_flowr.training import EpisodicMetaNet

    seen = []
    original = EpisodicMetaNet.initialize_optimizer

    def spy(net, *args, **kwargs):
        seen.append(net.lr)
        return original(net, *args, **kwargs)

    monkeypatch.setattr(EpisodicMetaNet, "initialize_optimizer", spy)
    X, y = digits
    tiny().set_params(pretrain__epochs=0, pretrain__lr=lr,
                      meta__encoder_lr=meta_lr).fit(X[y < 5], y[y < 5])
    assert seen and seen[-1] == pytest.approx(expected)


@pytest.mark.parametrize("known_table", ["refit", "learned"])
def test_known_table_after_meta_training(known_table, digits):
    """Check that "refit" conditions every training class from the learned prior
    on its final embeddings and "learned" keeps the meta-trained table."""
    X, y = digits
    X, y = X[y < 7], y[y < 7]
    clf = tiny(head=ISOTROPIC, setting="large").set_params(
        meta__known_table=known_table).fit(X, y)
    head, meta = clf.head_, clf.meta_module_
    Z = clf.transform(X)
    prior = meta.head_kwargs()
    prior_var = np.atleast_1d(prior["prior_var"])[0]
    counts = np.bincount(y)
    sigma = clf.meta.episode_noise
    precision = 1.0 / prior_var + counts / sigma
    sums = np.stack([Z[y == k].sum(axis=0) for k in range(7)])
    refit_means = ((prior["prior_mean"] / prior_var + sums / sigma)
                   / precision[:, None])
    expected = refit_means.copy()
    if known_table == "learned":
        rows = meta.known_classes_
        table = meta.known_nat_mean.detach().cpu().double().numpy()
        lam = np.exp(meta.known_log_precision.detach().cpu().double().numpy())
        expected[rows] = table / lam
        assert not np.allclose(expected[rows], refit_means[rows], atol=1e-4)
    np.testing.assert_allclose(head.class_mean_, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("learn_noise", [False, True])
def test_meta_training_moves_the_head(digits, learn_noise):
    """Check meta-training moves every learned head parameter from where
    pre-training leaves it (the same seed without meta-training), at the
    default prior_lr, and that the fitted head uses the learned values."""
    X, y = digits
    params = dict(TINY, backbone="mlp", head=ISOTROPIC,
                  meta=MetaTraining(epochs=1, episodes_per_epoch=20, n_way=3,
                                    n_unknown=2, learn_episode_noise=learn_noise))
    start = FLOWRClassifier(**{**params, "meta": None}).fit(X[y < 7], y[y < 7])
    model = FLOWRClassifier(**params).fit(X[y < 7], y[y < 7])
    before = start.meta_module_.head_kwargs()
    after = model.meta_module_.head_kwargs()
    assert abs(after["b"] - before["b"]) > 0.02  # at encoder_lr: < 0.002
    assert abs(np.log(after["prior_var"] / before["prior_var"])) > 0.02
    assert np.abs(after["prior_mean"] - before["prior_mean"]).max() > 0.02
    assert (after["sigma"] != before["sigma"]) is learn_noise
    assert model.prior_head_.b == pytest.approx(after["b"])
    assert model.prior_head_.sigma == pytest.approx(after["sigma"])


@pytest.mark.parametrize("setting", ["small", "large"])
def test_full_covariance_head_is_empirical_bayes_on_the_final_embedding(
        digits, setting):
    """Check the default full head builds by full-covariance empirical
    Bayes on the training classes' meta-trained embeddings (an independent
    fit of CRPGaussianClassifier on transform(X)), keeps a and the
    meta-learned b, leaves meta-training itself unchanged, and (large context)
    keeps the training classes fixed online unless update_known."""
    X, y = digits
    X, y = X[y < 7], y[y < 7]
    params = dict(TINY, backbone="mlp", setting=setting)
    isotropic = FLOWRClassifier(**params, head=ISOTROPIC).fit(X, y)
    model = FLOWRClassifier(**params).fit(X, y)
    Z = model.transform(X)
    np.testing.assert_allclose(Z, isotropic.transform(X), rtol=1e-6, atol=1e-6)
    # fit's embedding and transform's agree to float32 rounding (on a GPU
    # their batches differ), so the head's estimates agree to that too.
    close = dict(rtol=1e-5, atol=1e-7)
    b = isotropic.prior_head_.b
    reference = CRPGaussianClassifier(covariance="full", a=model.head.a,
                                      b=b).fit(Z, y)
    head = model.head_
    assert head.covariance == "full" and head.b == b
    if setting == "small":
        head = model.prior_head_
        assert not head.__sklearn_is_fitted__()
        np.testing.assert_allclose(head.prior_var, reference.prior_var_, **close)
        np.testing.assert_allclose(head.sigma, reference.sigma_, **close)
        np.testing.assert_allclose(head.prior_mean, reference.prior_mean_, **close)
        rows = np.flatnonzero(digits[1] >= 7)[:12]
        model.adapt(digits[0][rows], digits[1][rows])
        proba = model.predict_proba(digits[0][rows[:3]])
        assert proba.shape == (3, np.unique(digits[1][rows]).shape[0] + 1)
        np.testing.assert_allclose(proba.sum(axis=1), 1.0)
        return
    np.testing.assert_allclose(head.prior_var_, reference.prior_var_, **close)
    np.testing.assert_allclose(model.predict_proba(X[:20]),
                               reference.predict_proba(Z[:20]), **close)
    np.testing.assert_array_equal(head.crp_count_, np.ones(7))
    before = head.class_mean_.copy()
    model.partial_fit(X[:5], y[:5])
    np.testing.assert_array_equal(model.head_.class_mean_, before)
    model.reset()
    model.set_params(update_known=True).fit(X, y)
    before = model.head_.class_mean_.copy()
    model.partial_fit(X[:5], y[:5])
    assert not np.allclose(model.head_.class_mean_, before)


@pytest.mark.parametrize("setting", ["small", "large"])
@pytest.mark.parametrize("params, message", [
    (dict(meta__episode_discount=0.9, meta__episode_known_count=0.5),
     "episode_known_count=0.5 must exceed episode_discount=0.9"),
    (dict(meta__n_unknown=7, meta__n_way=3), "leaves no support class"),
    (dict(meta__n_query=60), "n_query \\+ 1 = 61 rows per class"),
    (dict(meta__known_table="learned"), "known_table='refit'"),
])
def test_training_plan_fails_before_pre_training(digits, monkeypatch, setting,
                                                 params, message):
    """Check that what meta-training would reject fails before any training,
    leaving a fitted model exactly as it was."""
    from sklearn_flowr.training import SupENet

    X, y = digits
    X, y = X[y < 7][:300], y[y < 7][:300]
    model = tiny(setting=setting).fit(X, y)
    state = {k: v for k, v in vars(model).items() if k.endswith("_")}
    proba = model.predict_proba(X[:20]) if setting == "large" else None

    def no_training(*args, **kwargs):
        raise AssertionError("pre-training started")

    monkeypatch.setattr(SupENet, "fit", no_training)
    fitted_params = {name: clone(value) if hasattr(value, "get_params") else value
                     for name, value in model.get_params(deep=False).items()}
    with pytest.raises(ValueError, match=message):
        model.set_params(**params).fit(X, y)
    after = {k: v for k, v in vars(model).items() if k.endswith("_")}
    assert after.keys() == state.keys()
    assert all(after[k] is state[k] for k in state)
    # The fitted model answers for the parameters it was fitted with.
    model.set_params(**fitted_params)
    if proba is not None:
        np.testing.assert_array_equal(model.predict_proba(X[:20]), proba)


@pytest.mark.parametrize("setting", ["small", "large"])
@pytest.mark.parametrize("params, message", [
    (dict(meta__episode_discount=0.9, meta__episode_known_count=0.5),
     "episode_known_count=0.5 must exceed episode_discount=0.9"),
    (dict(pretrain=SupFC(), meta__class_stats="learned"), "needs pretrain=SupE"),
    (dict(meta__known_table="learned"), "known_table='refit'"),
    (dict(meta__n_unknown=7, meta__n_way=3), "leaves no support class"),
    (dict(meta__n_query=60), "n_query \\+ 1 = 61 rows per class"),
    (dict(head=CRPGaussianClassifier(covariance="isotropic", prior_scale=2.0)),
     "prior_scale=2.0 scales"),
    (dict(head__prior_scale=0.0), "'prior_scale' parameter"),
    (dict(head=CRPGaussianClassifier(covariance="isotropic", noise_shrinkage=0.1)),
     "noise_shrinkage=0.1 shrinks"),
    (dict(head__noise_shrinkage=1.5), "'noise_shrinkage' parameter"),
    (dict(meta__n_way=0), "'n_way' parameter"),
    (dict(pretrain__epochs=-1), "'epochs' parameter"),
])
def test_bad_configuration_fails_before_training_an_unfitted_model(
        digits, monkeypatch, setting, params, message):
    """Check that a bad combination of parameters fails in fit before any
    training, with a message naming it, and leaves the model unfitted."""
    from sklearn_flowr.training import SupENet, SupFCNet

    def no_training(*args, **kwargs):
        raise AssertionError("pre-training started")

    monkeypatch.setattr(SupENet, "fit", no_training)
    monkeypatch.setattr(SupFCNet, "fit", no_training)
    X, y = digits
    model = tiny(setting=setting).set_params(**params)
    with pytest.raises(ValueError, match=message):
        model.fit(X[y < 7][:300], y[y < 7][:300])
    assert not [name for name in vars(model) if name.endswith("_")]
    with pytest.raises(NotFittedError):
        model.predict(X[:1])


@pytest.mark.parametrize("stage", ["pretrain", "meta"])
def test_ctrl_c_stops_fit_and_resume_finishes(digits, tmp_path, monkeypatch,
                                             stage):
    """Check Ctrl-C during training raises KeyboardInterrupt out of fit (skorch
    would end fit quietly), sets nothing, and a fit with the same
    checkpoint_dir resumes to exactly the model an uninterrupted fit gives."""
    from sklearn_flowr.training import EpisodicMetaNet, SupENet

    X, y = digits
    X, y = X[y < 5], y[y < 5]
    params = dict(TINY, backbone="mlp", pretrain=SupE(epochs=3),
                  meta=MetaTraining(epochs=3, episodes_per_epoch=4, n_way=3,
                                    n_unknown=2))
    net_class = SupENet if stage == "pretrain" else EpisodicMetaNet
    original = net_class.train_step_single
    calls = []

    def interrupted(self, batch, **fit_params):
        calls.append(1)
        if len(calls) > 2 * (-(-len(X) // 64) if stage == "pretrain" else 4):
            raise KeyboardInterrupt
        return original(self, batch, **fit_params)

    monkeypatch.setattr(net_class, "train_step_single", interrupted)
    model = FLOWRClassifier(**params, checkpoint_dir=tmp_path)
    with pytest.raises(KeyboardInterrupt, match=f"{stage} interrupted after 2 of 3"):
        model.fit(X, y)
    assert not hasattr(model, "head_")
    monkeypatch.setattr(net_class, "train_step_single", original)
    model.fit(X, y)
    assert len(model.history_[stage]) == 3
    # Per-epoch seeds: the resumed fit is the uninterrupted one.
    uninterrupted = FLOWRClassifier(**params).fit(X, y)
    np.testing.assert_array_equal(model.transform(X[:20]),
                                  uninterrupted.transform(X[:20]))
    with pytest.raises(KeyboardInterrupt):  # without a checkpoint_dir too
        monkeypatch.setattr(net_class, "train_step_single", interrupted)
        calls.clear()
        FLOWRClassifier(**params).fit(X, y)


def test_checkpoint_dir_of_another_fit_is_refused(digits, tmp_path):
    """Check a reused checkpoint_dir refuses a fit on other data or with other
    parameters, saying what differs, and names an unreadable history file."""
    X, y = digits
    params = dict(TINY, backbone="mlp", meta=None, checkpoint_dir=tmp_path)
    FLOWRClassifier(**params).fit(X[y < 4], y[y < 4])
    with pytest.raises(ValueError, match="the training data differ"):
        FLOWRClassifier(**params).fit(X[y >= 4], y[y >= 4])
    with pytest.raises(ValueError, match="embedding_dim: 8 -> 4"):
        FLOWRClassifier(**{**params, "embedding_dim": 4}).fit(X[y < 4], y[y < 4])
    # More epochs, or another device or verbosity, resume the same fit.
    params["pretrain"] = SupE(epochs=3)
    FLOWRClassifier(**{**params, "verbose": 1}).fit(X[y < 4], y[y < 4])
    # So do parameters only the head reads: the encoder is the same.
    first = FLOWRClassifier(**params).fit(X[y < 4], y[y < 4])
    shrunk = FLOWRClassifier(**{**params, "head": CRPGaussianClassifier(
        covariance="full", noise_shrinkage=0.3, prior_scale=2.0)}).fit(
        X[y < 4], y[y < 4])
    np.testing.assert_array_equal(first.transform(X[:3]), shrunk.transform(X[:3]))
    (tmp_path / "pretrain" / "history.json").write_text("{not json")
    with pytest.raises(ValueError, match="history.json"):
        FLOWRClassifier(**params).fit(X[y < 4], y[y < 4])


@pytest.mark.parametrize("name", ["params.pt", "optimizer.pt", "criterion.pt"])
@pytest.mark.parametrize("damage", ["truncate", "garbage"])
def test_damaged_checkpoint_file_is_named(digits, tmp_path, name, damage):
    """Check that a truncated or garbage torch file of a checkpoint fails with
    an error naming the file and the fix, not torch's raw error."""
    X, y = digits
    params = dict(TINY, backbone="mlp", meta=None, checkpoint_dir=tmp_path)
    FLOWRClassifier(**params).fit(X[y < 4], y[y < 4])
    path = tmp_path / "pretrain" / name
    assert path.exists()
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2] if damage == "truncate"
                     else b"not a torch file")
    with pytest.raises(ValueError, match=f"{name}.*Delete"):
        FLOWRClassifier(**params).fit(X[y < 4], y[y < 4])


@pytest.mark.parametrize("setting", ["small", "large"])
def test_calibration_maps_p_novel_only(digits, setting):
    """Check calibration="train" (the default) trains the same encoder and
    head as without it and only adds the Platt map of P(novel): same best
    known class, P(novel) mapped as the head's parameter says."""
    from scipy.special import expit, logit

    X, y = digits
    params = dict(backbone="conv4", setting=setting, **TINY)
    plain = FLOWRClassifier(**params).fit(X[y < 5], y[y < 5])
    assert plain.head_.novelty_calibration is None
    model = FLOWRClassifier(**{**params, "calibration": "train"}).fit(X[y < 5],
                                                                      y[y < 5])
    slope, intercept = model.head_.novelty_calibration
    assert slope > 0 and np.isfinite(intercept)
    np.testing.assert_array_equal(model.transform(X[:20]), plain.transform(X[:20]))
    stream = slice(900, 960)
    out = model.open_world_step(X[stream], y[stream])
    expected = plain.open_world_step(X[stream], y[stream])
    np.testing.assert_array_equal(out.y_known, expected.y_known)
    # Where the unmapped P(novel) rounded to exactly 1 the mapped one, computed
    # from the log-odds, can be below 1: compare the others.
    exact = expected.p_novel < 1.0 - 1e-12
    assert exact.sum() > 40
    np.testing.assert_allclose(
        out.p_novel[exact],
        expit(slope * logit(expected.p_novel[exact]) + intercept), rtol=1e-6)


@pytest.mark.parametrize("calibration", ["train", 2])
def test_novelty_map_is_a_fitted_attribute(digits, calibration):
    """Check the map of P(novel) is learned in fit as novelty_calibration_ and
    the heads are built with it (their fit already had it: no parameter is set
    on a fitted head); the template is left unmapped."""
    X, y = digits
    rows = y < 6
    model = FLOWRClassifier(backbone="mlp", **{**TINY, "calibration": calibration})
    model.fit(X[rows].reshape(rows.sum(), -1), y[rows])
    slope, intercept = model.novelty_calibration_
    assert slope > 0 and np.isfinite(intercept)
    assert model.head.novelty_calibration is None
    for head in (model.head_, model.prior_head_):
        assert head.novelty_calibration == model.novelty_calibration_
    assert model.head_._fitted_params["novelty_calibration"] == (slope, intercept)
    assert (model.calibration_results_ is None) == (calibration == "train")


def test_calibration_refuses_a_one_row_class_before_training(digits):
    """Check a class of a single row fails in fit, before any training."""
    X, y = digits
    rows = np.r_[np.flatnonzero(y < 4), np.flatnonzero(y == 4)[:1]]
    # Without meta-training, whose episodes would refuse the class first.
    model = FLOWRClassifier(backbone="conv4", **{**TINY, "meta": None,
                                                 "calibration": "train"})
    with pytest.raises(ValueError, match="calibration='train' .* at least 2 rows"):
        model.fit(X[rows], y[rows])
    assert not hasattr(model, "head_")


def test_an_interrupted_refit_leaves_the_old_model_or_the_new_one(digits):
    """Check a KeyboardInterrupt at any line of fit's own frame leaves a
    fitted model wholly as it was or wholly refitted: the head, the head
    reset() returns to and the training classes agree."""
    import sys

    from sklearn_flowr import _flowr

    X, y = digits
    X = X.reshape(X.shape[0], -1)
    params = dict(backbone="mlp", **{**TINY, "reuse_encoder": True})
    model = FLOWRClassifier(**params).fit(X[y < 4], y[y < 4])
    old, new = [0, 1, 2, 3], [0, 1, 2]

    def run(k):
        count = 0

        def local(frame, event, arg):
            nonlocal count
            if event == "line":
                count += 1
                if count == k:
                    raise KeyboardInterrupt
            return local

        def trace(frame, event, arg):
            fit = frame.f_code is _flowr.FLOWRClassifier._fit.__code__
            return local if fit else None

        sys.settrace(trace)
        try:
            model.fit(X[y < 3], y[y < 3])
        finally:
            sys.settrace(None)
        return count

    n_lines = run(0)
    model.fit(X[y < 4], y[y < 4])
    for k in range(1, n_lines + 1):
        with pytest.raises(KeyboardInterrupt):
            run(k)
        got = [model.classes_.tolist(), model.train_classes_.tolist(),
               model.reset().classes_.tolist()]
        assert got in ([old] * 3, [new] * 3), (k, got)
        model.fit(X[y < 4], y[y < 4])


def test_partial_fit_on_an_unfitted_model_says_it_runs_fit(digits, capsys):
    """Check partial_fit on an unfitted model runs fit (the same model) and,
    when verbose, says that the encoder trains on those rows."""
    X, y = digits
    X, y = X[y < 5][:300], y[y < 5][:300]
    quiet = tiny().partial_fit(X, y)
    assert "runs fit" not in capsys.readouterr().out
    model = tiny(verbose=1).partial_fit(X, y)
    assert "partial_fit on an unfitted FLOWRClassifier runs fit" in (
        capsys.readouterr().out)
    np.testing.assert_allclose(model.predict_proba(X[:5]),
                               quiet.predict_proba(X[:5]), rtol=1e-6)
    np.testing.assert_allclose(model.predict_proba(X[:5]),
                               tiny().fit(X, y).predict_proba(X[:5]), rtol=1e-6)
