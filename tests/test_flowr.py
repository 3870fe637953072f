"""Tests of FLOWRClassifier: encoder + training + head, end to end on CPU."""

import copy
import pickle

import numpy as np
import pytest
import torch
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import GridSearchCV

from sklearn_flowr import CRPGaussianClassifier, FLOWRClassifier
from sklearn_flowr.encoders import last_linear_layer
from sklearn_flowr.metrics import novelty_scorer
from sklearn_flowr.model_selection import OpenWorldSplit
from sklearn_flowr.training._device import resolve_device

TINY = dict(embedding_dim=8, pretrain_epochs=2, meta_epochs=1, episodes_per_epoch=4,
            n_way=3, n_unknown=2, verbose=0, random_state=0)


@pytest.fixture(scope="module")
def large_model(digits):
    X, y = digits
    return FLOWRClassifier(backbone="conv4", setting="large", **TINY).fit(
        X[y < 7], y[y < 7])


@pytest.fixture(scope="module")
def small_model(digits):
    X, y = digits
    return FLOWRClassifier(backbone="conv4", setting="small", **TINY).fit(
        X[y < 7], y[y < 7])


def test_large_context_keeps_training_classes(large_model, digits):
    """Check that the large context predicts N + 1 columns over the training classes."""
    X, _ = digits
    proba = large_model.predict_proba(X[:5])
    assert proba.shape == (5, 8)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert large_model.classes_.tolist() == list(range(7))
    np.testing.assert_array_equal(large_model.head_.crp_count_, np.ones(7))


def test_open_world_step_matches_head_on_embeddings(large_model, digits):
    """Check that the estimator's stream equals the head's stream on transform(X)."""
    X, y = digits
    model = copy.deepcopy(large_model)
    head = copy.deepcopy(large_model.head_)
    rows = np.flatnonzero(y >= 5)[:30]
    out = model.open_world_step(X[rows], y[rows])
    expected = head.open_world_step(model.transform(X[rows]), y[rows])
    np.testing.assert_allclose(out.p_novel, expected.p_novel)
    assert out.is_novel[np.flatnonzero(y[rows] == 7)[0]]
    assert 7 in model.classes_.tolist()


def test_transform_shape_dtype_and_determinism(large_model, digits):
    """Check transform gives float64 (n, embedding_dim), the same twice."""
    X, _ = digits
    Z = large_model.transform(X[:4])
    assert Z.shape == (4, 8) and Z.dtype == np.float64
    np.testing.assert_array_equal(Z, large_model.transform(X[:4]))


def test_small_context_adapt_then_reset(small_model, digits):
    """Check adapt conditions on a support set and reset forgets it."""
    X, y = digits
    model = copy.deepcopy(small_model)
    with pytest.raises(NotFittedError, match="no classes yet"):
        model.predict_proba(X[:2])
    support = np.r_[np.flatnonzero(y == 7)[:3], np.flatnonzero(y == 8)[:2]]
    model.adapt(X[support], y[support])
    assert model.predict_proba(X[:3]).shape == (3, 3)
    assert model.classes_.tolist() == [7, 8]
    model.reset()
    with pytest.raises(NotFittedError):
        model.predict(X[:1])


def test_small_context_stream_from_the_prior(small_model, digits):
    """Check open_world_step runs on the meta-learned prior alone."""
    X, y = digits
    model = copy.deepcopy(small_model)
    out = model.open_world_step(X[y >= 7][:10], y[y >= 7][:10])
    assert out.is_novel[0] and out.p_novel[0] == 1.0


def test_fine_tuning_changes_only_the_last_layer(small_model, digits):
    """Check adapt(fine_tune=...) tunes a copy's last linear layer only."""
    X, y = digits
    model = copy.deepcopy(small_model)
    support = np.r_[np.flatnonzero(y == 7)[:4], np.flatnonzero(y == 8)[:4]]
    model.adapt(X[support], y[support], fine_tune=3)
    tuned, original = model.encoder_, model.meta_module_.encoder
    assert tuned is not original
    last = last_linear_layer(tuned)
    last_name = next(name for name, mod in tuned.named_modules() if mod is last)
    original_params = dict(original.named_parameters())
    for name, param in tuned.named_parameters():
        if name.startswith(last_name + "."):
            assert not torch.equal(param, original_params[name])
        else:
            torch.testing.assert_close(param, original_params[name])
    model.reset()
    assert model.encoder_ is model.meta_module_.encoder


@pytest.mark.parametrize("pretrain", ["sup-fc", None])
def test_other_pretraining_choices(digits, pretrain):
    """Check Sup-FC and no pre-training fit and predict too."""
    X, y = digits
    model = FLOWRClassifier(backbone="conv4", setting="large", pretrain=pretrain,
                            **{**TINY, "meta_epochs": 0}).fit(X[y < 5], y[y < 5])
    assert model.predict_proba(X[:2]).shape == (2, 6)


@pytest.mark.parametrize("class_stats", ["empirical", "learned"])
def test_class_stats_seed_the_prior(digits, class_stats):
    """Check the prior mean comes from the chosen class statistics of Sup-E."""
    X, y = digits
    model = FLOWRClassifier(backbone="conv4", setting="small",
                            class_stats=class_stats,
                            **{**TINY, "meta_epochs": 0}).fit(X[y < 4], y[y < 4])
    Z = model.transform(X[y < 4])
    empirical = np.stack([Z[y[y < 4] == c].mean(axis=0) for c in range(4)])
    learned = model.history_["pretrain"]  # Sup-E ran in both cases
    assert len(learned) == TINY["pretrain_epochs"]
    prior_mean = model.head_.prior_mean
    if class_stats == "empirical":
        np.testing.assert_allclose(prior_mean, empirical.mean(axis=0), rtol=1e-4,
                                   atol=1e-5)
    else:
        assert not np.allclose(prior_mean, empirical.mean(axis=0), atol=1e-3)


def test_learned_class_stats_need_sup_e(digits):
    """Check class_stats='learned' with Sup-FC fails before any training."""
    X, y = digits
    model = FLOWRClassifier(pretrain="sup-fc", class_stats="learned", **TINY)
    with pytest.raises(ValueError, match="needs pretrain='sup-e'"):
        model.fit(X[y < 4], y[y < 4])
    assert not hasattr(model, "head_")


def test_pretrained_encoder_is_kept_apart_from_meta_training(small_model, digits):
    """Check transform(encoder="pretrained") embeds with the pre-meta encoder."""
    X, _ = digits
    current = small_model.transform(X[:5])
    pretrained = small_model.transform(X[:5], encoder="pretrained")
    assert pretrained.shape == current.shape
    assert not np.allclose(pretrained, current)  # meta-training moved it
    with pytest.raises(ValueError, match="encoder must be"):
        small_model.transform(X[:5], encoder="meta")
    clone = pickle.loads(pickle.dumps(small_model))
    np.testing.assert_allclose(clone.transform(X[:5], encoder="pretrained"),
                               pretrained, rtol=1e-6)


def test_last_batch_of_one_row_is_dropped(digits):
    """Check a training set of k * batch_size + 1 rows trains (batch norm needs
    two rows per batch)."""
    X, y = digits
    rows = np.flatnonzero(y < 3)[:33]
    model = FLOWRClassifier(backbone="conv4", batch_size=16,
                            **{**TINY, "meta_epochs": 0}).fit(X[rows], y[rows])
    assert len(model.history_["pretrain"]) == TINY["pretrain_epochs"]


def test_same_seed_same_model(digits):
    """Check random_state makes CPU training reproducible."""
    X, y = digits
    params = dict(backbone="conv4", setting="small", **{**TINY, "meta_epochs": 0})
    first = FLOWRClassifier(**params).fit(X[y < 4], y[y < 4])
    second = FLOWRClassifier(**params).fit(X[y < 4], y[y < 4])
    np.testing.assert_array_equal(first.transform(X[:6]), second.transform(X[:6]))


def test_pickle_round_trip_keeps_online_state(large_model, digits):
    """Check pickling keeps encoder, head and what was learned online."""
    X, y = digits
    model = copy.deepcopy(large_model)
    model.partial_fit(X[y == 9][:3], y[y == 9][:3])
    loaded = pickle.loads(pickle.dumps(model))
    # The pickle holds CPU tensors; the loaded model runs where device says.
    assert next(loaded.encoder_.parameters()).device.type == "cpu"
    assert loaded.classes_.tolist() == model.classes_.tolist()
    np.testing.assert_allclose(loaded.predict_proba(X[:4]), model.predict_proba(X[:4]))
    assert (next(loaded.encoder_.parameters()).device.type
            == resolve_device(model.device).type)


@pytest.mark.parametrize("layout", ["nhwc", "nchw", "uint8"])
def test_image_layouts_are_equivalent(large_model, digits, layout):
    """Check (n,H,W,1), (n,1,H,W) and uint8 images embed like (n,H,W) floats."""
    X, _ = digits
    images = X[:3]
    converted = {"nhwc": images[..., None], "nchw": images[:, None],
                 "uint8": np.round(images * 255).astype(np.uint8)}[layout]
    expected = large_model.transform(
        np.round(images * 255) / 255 if layout == "uint8" else images)
    np.testing.assert_allclose(large_model.transform(converted), expected, rtol=1e-5,
                               atol=1e-6)


@pytest.mark.parametrize(
    "bad, message",
    [
        (np.zeros((2, 64)), "2-d feature vectors need backbone='mlp'"),
        (np.zeros((2, 8, 9)), "fitted on"),
        (np.zeros((2, 8, 8, 5)), "channel axis"),
        (np.full((2, 8, 8), np.nan), "NaN"),
        (np.zeros((0, 8, 8)), "0 sample"),
        (np.array([["a"] * 8] * 8)[None], "numeric"),
    ],
)
def test_bad_inputs_raise(large_model, bad, message):
    """Check shape/dtype errors are clear."""
    with pytest.raises(ValueError, match=message):
        large_model.predict(bad)


def test_novel_label_in_training_labels_fails_before_training(digits):
    """Check a label equal to novel_label is refused up front."""
    X, y = digits
    with pytest.raises(ValueError, match="novel label"):
        FLOWRClassifier(novel_label=3, **TINY).fit(X[y < 5], y[y < 5])


def test_unfitted_use_raises(digits):
    """Check predictions before fit raise NotFittedError."""
    with pytest.raises(NotFittedError):
        FLOWRClassifier().predict(digits[0][:2])


def test_checkpoint_resume_trains_only_the_missing_epochs(digits, tmp_path):
    """Check an interrupted fit resumes from checkpoint_dir."""
    X, y = digits
    params = dict(backbone="conv4", setting="small",
                  **{**TINY, "meta_epochs": 0}, checkpoint_dir=tmp_path)
    FLOWRClassifier(**{**params, "pretrain_epochs": 1}).fit(X[y < 4], y[y < 4])
    resumed = FLOWRClassifier(**{**params, "pretrain_epochs": 2}).fit(
        X[y < 4], y[y < 4])
    assert len(resumed.history_["pretrain"]) == 2
    done = FLOWRClassifier(**{**params, "pretrain_epochs": 2}).fit(X[y < 4], y[y < 4])
    np.testing.assert_array_equal(done.transform(X[:3]), resumed.transform(X[:3]))


def test_grid_search_over_a_and_sigma(digits):
    """Check GridSearchCV tunes a and sigma on the estimator with open-world CV."""
    X, y = digits
    features = X.reshape(len(X), -1)[y < 6]
    search = GridSearchCV(
        FLOWRClassifier(backbone="mlp", setting="large",
                        **{**TINY, "meta_epochs": 0}),
        {"a": [0.1, 0.5], "sigma": [0.3, 1.0]},
        cv=OpenWorldSplit(n_splits=2, n_novel_classes=2, random_state=0),
        scoring=novelty_scorer,
    ).fit(features, y[y < 6])
    assert set(search.best_params_) == {"a", "sigma"}
    assert np.isfinite(search.cv_results_["mean_test_score"]).all()


def test_head_alone_equals_flowr_head_on_embeddings(large_model, digits):
    """Check the learned head is a plain CRPGaussianClassifier on embeddings."""
    X, _ = digits
    assert isinstance(large_model.head_, CRPGaussianClassifier)
    np.testing.assert_allclose(
        large_model.predict_log_proba(X[:3]),
        large_model.head_.predict_log_proba(large_model.transform(X[:3])))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_fit_and_cpu_reload(digits):
    """Check training on CUDA and loading the pickle where CUDA is absent."""
    X, y = digits
    model = FLOWRClassifier(setting="large", device="cuda", **TINY).fit(
        X[y < 5], y[y < 5])
    assert next(model.encoder_.parameters()).is_cuda
    state = pickle.dumps(model)
    loaded = pickle.loads(state)
    loaded.set_params(device="cpu")
    loaded.meta_module_.cpu()
    loaded.encoder_.cpu()
    np.testing.assert_allclose(loaded.predict_proba(X[:3]), model.predict_proba(X[:3]),
                               rtol=1e-4)


def test_match_sigma_sets_within_class_variance_to_sigma(digits):
    """Check the pre-trained embedding is rescaled so the mean within-class
    variance of the training embeddings equals sigma."""
    X, y = digits
    rows = y < 4
    params = dict(backbone="conv4", setting="small", sigma=0.3,
                  **{**TINY, "meta_epochs": 0})
    model = FLOWRClassifier(**params).fit(X[rows], y[rows])
    Z = model.transform(X[rows])
    within = np.mean([Z[y[rows] == c].var(axis=0).mean() for c in range(4)])
    assert within == pytest.approx(0.3, rel=0.05)
    raw = FLOWRClassifier(**params, match_sigma=False).fit(X[rows], y[rows])
    Z_raw = raw.transform(X[rows])
    ratio = np.linalg.norm(Z) / np.linalg.norm(Z_raw)
    np.testing.assert_allclose(Z, ratio * Z_raw, rtol=1e-3, atol=1e-4 * ratio)


@pytest.mark.parametrize("lr, meta_lr, expected", [(None, None, 1e-4),
                                                   (2e-3, None, 2e-4),
                                                   (None, 5e-4, 5e-4)])
def test_meta_training_rate_defaults_to_a_tenth_of_lr(lr, meta_lr, expected,
                                                      monkeypatch, digits):
    """Check that meta-training runs at meta_lr, a tenth of lr when unset."""
    from sklearn_flowr import _flowr

    seen = []
    original = _flowr.EpisodicMetaNet.initialize_optimizer

    def spy(net, *args, **kwargs):
        seen.append(net.lr)
        return original(net, *args, **kwargs)

    monkeypatch.setattr(_flowr.EpisodicMetaNet, "initialize_optimizer", spy)
    X, y = digits
    FLOWRClassifier(**{**TINY, "pretrain_epochs": 0}, lr=lr,
                    meta_lr=meta_lr).fit(X[y < 5], y[y < 5])
    assert seen and seen[-1] == pytest.approx(expected)


@pytest.mark.parametrize("known_table", ["refit", "learned"])
def test_known_table_after_meta_training(known_table, digits):
    """Check that "refit" conditions every training class from the learned prior
    on its final embeddings and "learned" keeps the meta-trained table."""
    X, y = digits
    X, y = X[y < 7], y[y < 7]
    clf = FLOWRClassifier(setting="large", known_table=known_table, **TINY).fit(X, y)
    head, meta = clf.head_, clf.meta_module_
    Z = clf.transform(X)
    prior = meta.head_kwargs()
    prior_var = np.atleast_1d(prior["prior_var"])[0]
    counts = np.bincount(y)
    precision = 1.0 / prior_var + counts / clf.sigma
    sums = np.stack([Z[y == k].sum(axis=0) for k in range(7)])
    refit_means = ((prior["prior_mean"] / prior_var + sums / clf.sigma)
                   / precision[:, None])
    expected = refit_means.copy()
    if known_table == "learned":
        rows = meta.known_classes_
        table = meta.known_nat_mean.detach().cpu().double().numpy()
        lam = np.exp(meta.known_log_precision.detach().cpu().double().numpy())
        expected[rows] = table / lam
        assert not np.allclose(expected[rows], refit_means[rows], atol=1e-4)
    np.testing.assert_allclose(head.class_mean_, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("setting", ["small", "large"])
def test_default_verbose_shows_progress(digits, setting, capsys):
    """Check that fit with the default verbose trains and prints epoch tables and bars.

    Every README example runs with the defaults; a progress-bar crash there
    once hid behind tests that all pinned ``verbose=0``.
    """
    X, y = digits
    params = {key: value for key, value in TINY.items() if key != "verbose"}
    model = FLOWRClassifier(backbone="mlp", setting=setting, **params)
    assert model.verbose == 1
    model.fit(X.reshape(len(X), -1)[y < 7], y[y < 7])
    support = np.r_[np.flatnonzero(y == 8)[:3], np.flatnonzero(y == 9)[:3]]
    model.adapt(X.reshape(len(X), -1)[support], y[support], fine_tune=2)
    captured = capsys.readouterr()
    assert captured.out.count("train_loss") == 2  # pre-training and meta tables
    assert "0/4" in captured.err  # the meta-training bar counts the episodes
    assert "fine-tuning" in captured.err


def test_verbose_zero_is_silent(digits, capsys):
    """Check that verbose=0 prints nothing while fitting and adapting."""
    X, y = digits
    model = FLOWRClassifier(backbone="mlp", setting="small", **TINY)
    model.fit(X.reshape(len(X), -1)[y < 7], y[y < 7])
    support = np.r_[np.flatnonzero(y == 8)[:3], np.flatnonzero(y == 9)[:3]]
    model.adapt(X.reshape(len(X), -1)[support], y[support], fine_tune=2)
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


def test_novel_label_and_feature_names(digits):
    """Check novel_label_ and feature_names_in_ on a feature DataFrame."""
    pd = pytest.importorskip("pandas")
    X, y = digits
    frame = pd.DataFrame(X.reshape(len(X), -1)[y < 7],
                         columns=[f"px{i}" for i in range(64)])
    model = FLOWRClassifier(backbone="mlp", setting="large", **TINY).fit(
        frame, y[y < 7])
    assert model.novel_label_ == -1
    np.testing.assert_array_equal(model.feature_names_in_, frame.columns)
    assert model.predict(frame.iloc[:3]).shape == (3,)


@pytest.mark.parametrize("learn_sigma", [False, True])
def test_meta_training_moves_the_head(digits, learn_sigma):
    """Check meta-training moves every learned head parameter from where
    pre-training leaves it (the same seed without meta-training), at the
    default head_lr, and that the fitted head uses the learned values."""
    X, y = digits
    params = dict(TINY, backbone="mlp", learn_sigma=learn_sigma,
                  episodes_per_epoch=20)
    start = FLOWRClassifier(**{**params, "meta_epochs": 0}).fit(X[y < 7], y[y < 7])
    model = FLOWRClassifier(**params).fit(X[y < 7], y[y < 7])
    before = start.meta_module_.head_kwargs()
    after = model.meta_module_.head_kwargs()
    assert abs(after["b"] - before["b"]) > 0.02  # at meta_lr: < 0.002
    assert abs(np.log(after["prior_var"] / before["prior_var"])) > 0.02
    assert np.abs(after["prior_mean"] - before["prior_mean"]).max() > 0.02
    assert (after["sigma"] != before["sigma"]) is learn_sigma
    assert model.head_.b == pytest.approx(after["b"])
    assert model.head_.sigma == pytest.approx(after["sigma"])


@pytest.mark.parametrize("setting", ["small", "large"])
def test_full_covariance_head_is_empirical_bayes_on_the_final_embedding(
        digits, setting):
    """Check covariance="full" builds the head by full-covariance empirical
    Bayes on the training classes' meta-trained embeddings (an independent
    fit of CRPGaussianClassifier on transform(X)), keeps a and the
    meta-learned b, leaves meta-training itself unchanged, and (large context)
    keeps the training classes fixed online unless update_known."""
    X, y = digits
    X, y = X[y < 7], y[y < 7]
    params = dict(TINY, backbone="mlp", setting=setting)
    isotropic = FLOWRClassifier(**params).fit(X, y)
    model = FLOWRClassifier(**params, covariance="full").fit(X, y)
    Z = model.transform(X)
    np.testing.assert_allclose(Z, isotropic.transform(X), rtol=1e-6, atol=1e-6)
    reference = CRPGaussianClassifier(covariance="full", a=model.a,
                                      b=isotropic.head_.b).fit(Z, y)
    head = model.head_
    assert head.covariance == "full" and head.b == isotropic.head_.b
    if setting == "small":
        assert not head.__sklearn_is_fitted__()
        np.testing.assert_allclose(head.prior_var, reference.prior_var_)
        np.testing.assert_allclose(head.sigma, reference.sigma_)
        np.testing.assert_allclose(head.prior_mean, reference.prior_mean_)
        rows = np.flatnonzero(digits[1] >= 7)[:12]
        model.adapt(digits[0][rows], digits[1][rows])
        proba = model.predict_proba(digits[0][rows[:3]])
        assert proba.shape == (3, np.unique(digits[1][rows]).shape[0] + 1)
        np.testing.assert_allclose(proba.sum(axis=1), 1.0)
        return
    np.testing.assert_allclose(head.prior_var_, reference.prior_var_)
    np.testing.assert_allclose(model.predict_proba(X[:20]),
                               reference.predict_proba(Z[:20]), atol=1e-10)
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
    (dict(a=0.9, known_count=0.5), "known_count=0.5 must exceed a=0.9"),
    (dict(n_unknown=7, n_way=3), "leaves no support class"),
    (dict(n_query=60), "n_query \\+ 1 = 61 rows per class"),
    (dict(covariance="full", known_table="learned"), "known_table='refit'"),
])
def test_training_plan_fails_before_pre_training(digits, monkeypatch, setting,
                                                 params, message):
    """Check that what meta-training would reject fails before any training,
    leaving a fitted model exactly as it was."""
    from sklearn_flowr.training import SupENet

    X, y = digits
    X, y = X[y < 7][:300], y[y < 7][:300]
    model = FLOWRClassifier(**{**TINY, "setting": setting}).fit(X, y)
    state = {k: v for k, v in vars(model).items() if k.endswith("_")}
    proba = model.predict_proba(X[:20]) if setting == "large" else None

    def no_training(*args, **kwargs):
        raise AssertionError("pre-training started")

    monkeypatch.setattr(SupENet, "fit", no_training)
    fitted_params = model.get_params()
    with pytest.raises(ValueError, match=message):
        model.set_params(**params).fit(X, y)
    after = {k: v for k, v in vars(model).items() if k.endswith("_")}
    assert after.keys() == state.keys()
    assert all(after[k] is state[k] for k in state)
    # The fitted model answers for the parameters it was fitted with.
    model.set_params(**fitted_params)
    if proba is not None:
        np.testing.assert_array_equal(model.predict_proba(X[:20]), proba)


@pytest.mark.parametrize("stage", ["pretrain", "meta"])
def test_ctrl_c_stops_fit_and_resume_finishes(digits, tmp_path, monkeypatch,
                                             stage):
    """Check Ctrl-C during training raises KeyboardInterrupt out of fit (skorch
    would end fit quietly), sets nothing, and a fit with the same
    checkpoint_dir resumes to exactly the model an uninterrupted fit gives."""
    from sklearn_flowr.training import EpisodicMetaNet, SupENet

    X, y = digits
    X, y = X[y < 5], y[y < 5]
    params = dict(TINY, backbone="mlp", pretrain_epochs=3, meta_epochs=3)
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
    params = dict(TINY, backbone="mlp", meta_epochs=0, checkpoint_dir=tmp_path)
    FLOWRClassifier(**params).fit(X[y < 4], y[y < 4])
    with pytest.raises(ValueError, match="the training data differ"):
        FLOWRClassifier(**params).fit(X[y >= 4], y[y >= 4])
    with pytest.raises(ValueError, match="embedding_dim: 8 -> 4"):
        FLOWRClassifier(**{**params, "embedding_dim": 4}).fit(X[y < 4], y[y < 4])
    # More epochs, or another device or verbosity, resume the same fit.
    FLOWRClassifier(**{**params, "pretrain_epochs": 3, "verbose": 1}).fit(
        X[y < 4], y[y < 4])
    (tmp_path / "pretrain" / "history.json").write_text("{not json")
    with pytest.raises(ValueError, match="history.json"):
        FLOWRClassifier(**params).fit(X[y < 4], y[y < 4])


@pytest.mark.parametrize("name", ["params.pt", "optimizer.pt", "criterion.pt"])
@pytest.mark.parametrize("damage", ["truncate", "garbage"])
def test_damaged_checkpoint_file_is_named(digits, tmp_path, name, damage):
    """Check that a truncated or garbage torch file of a checkpoint fails with
    an error naming the file and the fix, not torch's raw error."""
    X, y = digits
    params = dict(TINY, backbone="mlp", meta_epochs=0, checkpoint_dir=tmp_path)
    FLOWRClassifier(**params).fit(X[y < 4], y[y < 4])
    path = tmp_path / "pretrain" / name
    assert path.exists()
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2] if damage == "truncate"
                     else b"not a torch file")
    with pytest.raises(ValueError, match=f"{name}.*Delete"):
        FLOWRClassifier(**params).fit(X[y < 4], y[y < 4])


@pytest.mark.parametrize("bad, message", [
    (lambda Xs, ys: (Xs, ys[:-1]), "samples"),
    (lambda Xs, ys: (Xs, np.where(np.arange(len(ys)) == 0, np.nan, ys)), None),
    (lambda Xs, ys: (Xs[:, :4], ys), None),
])
@pytest.mark.parametrize("fine_tune", [None, 2])
def test_failed_adapt_keeps_the_previous_task(small_model, digits, bad, message,
                                             fine_tune):
    """Check a rejected adapt leaves the previous task's head and encoder, and
    bad fine_tune values are rejected clearly."""
    X, y = digits
    model = copy.deepcopy(small_model)
    support = np.flatnonzero(y >= 7)[:9]
    model.adapt(X[support], y[support])
    head, encoder = model.head_, model.encoder_
    proba = model.predict_proba(X[:10])
    with pytest.raises(ValueError, match=message):
        model.adapt(*bad(X[support[:6]], y[support[:6]]), fine_tune=fine_tune)
    assert model.head_ is head and model.encoder_ is encoder
    np.testing.assert_array_equal(model.predict_proba(X[:10]), proba)
    for value in (-1, "x", 1.5):
        with pytest.raises((ValueError, TypeError), match="fine_tune"):
            model.adapt(X[support], y[support], fine_tune=value)
