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
from sklearn_flowr.training import MetaTraining, SupE
from sklearn_flowr.training.pipeline import resolve_device

TINY = dict(embedding_dim=8, pretrain=SupE(epochs=2),
            meta=MetaTraining(epochs=1, episodes_per_epoch=4, n_way=3, n_unknown=2),
            verbose=0, random_state=0)


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


@pytest.fixture(scope="module")
def small_isotropic_model(digits):
    """The paper's head: the meta-learned prior, class noise sigma * I, its
    own P(novel)."""
    X, y = digits
    return FLOWRClassifier(backbone="conv4", setting="small",
                           head=CRPGaussianClassifier(covariance="isotropic"),
                           calibration=None, **TINY).fit(X[y < 7], y[y < 7])


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
    """Check the fitted small-context model knows its training classes, adapt
    starts a task from the prior alone, and reset returns to the fitted state."""
    X, y = digits
    model = copy.deepcopy(small_model)
    fitted = model.predict_proba(X[:3])
    assert fitted.shape == (3, 8) and model.classes_.tolist() == list(range(7))
    support = np.r_[np.flatnonzero(y == 7)[:3], np.flatnonzero(y == 8)[:2]]
    model.adapt(X[support], y[support])
    assert model.predict_proba(X[:3]).shape == (3, 3)
    assert model.classes_.tolist() == [7, 8]
    model.reset()
    assert model.classes_.tolist() == list(range(7))
    np.testing.assert_array_equal(model.predict_proba(X[:3]), fitted)


def test_small_context_stream_from_the_prior(small_isotropic_model, digits):
    """Check the prior head of the small-context model (the paper's isotropic
    head; where adapt starts) streams as an independent CRPGaussianClassifier
    holding the meta-learned prior, on the model's embeddings."""
    X, y = digits
    model = copy.deepcopy(small_isotropic_model)
    rows = np.flatnonzero(y >= 7)[:30]
    learned = model.meta_module_.head_kwargs()
    reference = CRPGaussianClassifier(covariance="isotropic", **learned,
                                      known_count=model.meta.episode_known_count)
    expected = reference.open_world_step(model.transform(X[rows]), y[rows])
    out = copy.deepcopy(model.prior_head_).open_world_step(
        model.transform(X[rows]), y[rows])
    assert out.is_novel[0] and out.p_novel[0] == 1.0
    np.testing.assert_allclose(out.p_novel, expected.p_novel, rtol=1e-12)
    np.testing.assert_array_equal(out.y_pred, expected.y_pred)
    np.testing.assert_array_equal(out.is_novel, expected.is_novel)
    assert 0 < out.p_novel[1:].min() < 1  # later rows do meet learned classes


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


def test_pretrained_encoder_is_kept_apart_from_meta_training(small_model, digits):
    """Check transform(encoder="pretrained") embeds with the pre-meta encoder."""
    X, _ = digits
    current = small_model.transform(X[:5])
    pretrained = small_model.transform(X[:5], encoder="pretrained")
    assert pretrained.shape == current.shape
    assert not np.allclose(pretrained, current)  # meta-training moved it
    with pytest.raises(ValueError, match="encoder must be"):
        small_model.transform(X[:5], encoder="meta")
    loaded = pickle.loads(pickle.dumps(small_model))
    np.testing.assert_allclose(loaded.transform(X[:5], encoder="pretrained"),
                               pretrained, rtol=1e-6)


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
        FLOWRClassifier(head=CRPGaussianClassifier(novel_label=3), **TINY).fit(
            X[y < 5], y[y < 5])


def test_unfitted_use_raises(digits):
    """Check predictions before fit raise NotFittedError."""
    with pytest.raises(NotFittedError):
        FLOWRClassifier().predict(digits[0][:2])


def test_grid_search_over_a_and_sigma(digits):
    """Check GridSearchCV tunes a and sigma on the estimator with open-world
    CV: the grid changes the scores, and best_params_ is their argmax.

    The paper's isotropic head without meta-training, whose class noise is
    sigma (the default full head is tested in test_card_calls.py).
    """
    X, y = digits
    features = X.reshape(len(X), -1)[y < 6]
    search = GridSearchCV(
        FLOWRClassifier(backbone="mlp", setting="large",
                        head=CRPGaussianClassifier(covariance="isotropic"),
                        calibration=None, **{**TINY, "meta": None}),
        {"head__a": [0.1, 0.5], "head__sigma": [0.3, 1.0]},
        cv=OpenWorldSplit(n_splits=2, n_novel_classes=2, random_state=0),
        scoring=novelty_scorer,
    ).fit(features, y[y < 6])
    scores = search.cv_results_["mean_test_score"]
    assert np.isfinite(scores).all()
    assert np.unique(np.round(scores, 12)).shape[0] > 1
    assert search.best_params_ == search.cv_results_["params"][np.argmax(scores)]
    assert search.best_score_ == scores.max()


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
    # Columns in another order or renamed are refused before any change, as
    # scikit-learn's estimators refuse them; a NumPy array is taken with a warning.
    before = pickle.dumps(model)
    for other in (frame[frame.columns[::-1]], frame.add_prefix("x")):
        for method in (model.predict, model.transform,
                       lambda rows: model.partial_fit(rows, y[:3])):
            with pytest.raises(ValueError, match="feature names should match"):
                method(other.iloc[:3])
    assert pickle.dumps(model) == before
    with pytest.warns(UserWarning, match="does not have valid feature names"):
        model.predict(frame.to_numpy()[:3])


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


def test_fit_with_too_few_calibration_rows_warns(digits):
    """Check that a fit whose held-out rows give fewer calibration scores than
    novelty_alpha needs says so at the user's call (predict then takes the
    argmax rule), as the head's own fit does."""
    X, y = digits
    rows = np.flatnonzero(y < 4)[:60]
    with pytest.warns(UserWarning, match="the head has 8 calibration scores, "
                      "fewer than the 19") as record:
        model = FLOWRClassifier(backbone="mlp", **TINY).fit(
            X.reshape(len(X), -1)[rows], y[rows])
    assert {w.filename for w in record if "calibration scores" in str(w.message)} == {
        __file__}
    assert model.head_.conformal_scores_.shape == (8,)
