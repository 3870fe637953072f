"""Tests of FLOWRClassifier with the whitened head on a pretrained backbone's
own features (``sklearn_flowr.training._head_building``)."""

import copy
import pickle

import numpy as np
import pytest
import torch
from sklearn.base import clone
from torch import nn

import sklearn_flowr
from sklearn_flowr import CRPGaussianClassifier, FLOWRClassifier, WhitenedCRPClassifier
from sklearn_flowr.training import MetaTraining


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(8), 10)
    X = 2.0 * rng.normal(size=(8, 12))[y] + rng.normal(size=(80, 12))
    return X.astype(np.float32), y


def backbone():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(12, 16), nn.ReLU())


def frozen(head=None, **params):
    params = {"pretrain": None, "meta": None, "verbose": 0, "random_state": 0,
              **params}
    return FLOWRClassifier(backbone=backbone(), head=head or WhitenedCRPClassifier(),
                           embedding_dim=None, **params)


def test_head_on_the_backbones_own_features(data):
    """Check that without training stages the head is the whitened head fitted
    on the network's own features (no projection between), online too."""
    X, y = data
    known = y < 6
    clf = frozen(WhitenedCRPClassifier(head=CRPGaussianClassifier(
        known_count="observed", novelty_alpha=None)), calibration=None)
    clf.fit(X[known], y[known])
    network = clf.encoder_.network
    device = next(network.parameters()).device  # CUDA where the machine has one
    with torch.no_grad():
        features = network(torch.from_numpy(X).to(device)).double().cpu().numpy()
    # One scalar (the episode noise's match), which the whitener's unit rows undo.
    np.testing.assert_allclose(clf.transform(X), clf.noise_scale_ * features,
                               rtol=1e-5, atol=1e-5)
    expected = WhitenedCRPClassifier().fit(clf.transform(X[known]), y[known])
    np.testing.assert_allclose(clf.predict_proba(X), expected.predict_proba(
        clf.transform(X)), rtol=1e-9, atol=1e-12)
    out = clf.open_world_step(X[y == 7][:3], y[y == 7][:3])
    assert out.is_novel.tolist() == [True, False, False]
    assert clf.classes_.tolist() == [0, 1, 2, 3, 4, 5, 7]


@pytest.mark.parametrize("setting", ["small", "large"])
def test_defaults_with_meta_training_and_conformal_decision(data, setting):
    """Check fit with meta-training, P(novel)'s map, the conformal decision
    (held-out scores in the inner head), adapt and reset."""
    X, y = data
    meta = MetaTraining(epochs=1, episodes_per_epoch=2, n_way=3, n_unknown=1)
    clf = frozen(meta=meta, setting=setting).fit(X[y < 6], y[y < 6])
    inner = clf.head_.head_
    assert inner.novelty_calibration == clf.novelty_calibration_ is not None
    assert inner.conformal_scores_.shape[0] > 0
    pvalues = clf.head_.novelty_pvalues(clf.transform(X[:5]))
    novel = clf.predict(X[:5]) == clf.novel_label_
    np.testing.assert_array_equal(novel, pvalues <= inner.novelty_alpha)
    clf.adapt(X[y == 6][:3], y[y == 6][:3])
    assert 6 in clf.classes_ and (setting == "small") == (clf.classes_.size == 1)
    assert 6 not in clf.reset().classes_


def test_clone_pickle_and_save_round_trip(data, tmp_path):
    """Check clone, pickling and skops saving of the fitted model; the loaded
    one predicts the same and keeps learning."""
    X, y = data
    clf = frozen().fit(X[y < 6], y[y < 6])
    assert isinstance(clone(clf).head, WhitenedCRPClassifier)
    sklearn_flowr.save(clf, tmp_path / "model.skops")
    for loaded in (pickle.loads(pickle.dumps(clf)),
                   sklearn_flowr.load(tmp_path / "model.skops")):
        np.testing.assert_array_equal(loaded.predict_proba(X), clf.predict_proba(X))
        loaded.partial_fit(X[y == 7][:2], y[y == 7][:2])
        assert 7 in loaded.classes_


def test_nested_head_parameters(data):
    """Check that the inner head's parameters are reached through the wrapper
    (head__head__<name>), its default head included."""
    X, y = data
    clf = frozen(calibration=None).set_params(head__head__novelty_alpha=None)
    assert clf.get_params()["head__head__novelty_alpha"] is None
    clf.fit(X[y < 6], y[y < 6])
    assert clf.head_.head_.novelty_alpha is None


def test_bad_input(data):
    """Check that a head the whitener contradicts fails before training, and
    that rows of the wrong width fail after fit, leaving the model."""
    X, y = data
    clf = frozen(WhitenedCRPClassifier(head=CRPGaussianClassifier(sigma=0.5)))
    with pytest.raises(ValueError, match="leave them 'auto'"):
        clf.fit(X, y)
    assert not hasattr(clf, "encoder_")
    clf = frozen(calibration=None).fit(X, y)
    before = clf.predict_proba(X)
    with pytest.raises(ValueError, match="12"):
        clf.partial_fit(X[:2, :10], y[:2])
    np.testing.assert_array_equal(clf.predict_proba(X), before)


def test_cross_fitted_calibration_takes_the_whitened_head(data):
    """Check calibration=k (folds holding classes out, one model each) fits
    with the whitened head: each fold's head gets y's novel label through the
    wrapper's ``head__novel_label``."""
    X, y = data
    meta = MetaTraining(epochs=1, episodes_per_epoch=2, n_way=3, n_unknown=1)
    clf = frozen(meta=meta, setting="large", calibration=2).fit(X, y)
    assert clf.novelty_calibration_ is not None
    assert clf.predict_proba(X[:3]).shape == (3, 9)


def test_progress_says_nothing_trains_without_stages(data, capsys):
    """Check fit's first progress line, without training stages, says the
    encoder only embeds (it said "Training")."""
    X, y = data
    frozen(verbose=1, calibration=None).fit(X[y < 6], y[y < 6])
    out = capsys.readouterr().out
    assert "Embedding with the given encoder" in out and "Training" not in out


def test_grid_search_and_h_measure_scorer_on_the_whitened_head(data):
    """Check GridSearchCV over the whitener's noise shrinkage with the
    README's H-measure scorer on class-holding-out folds: it runs with the
    default conformal decision, and the axis changes the score."""
    from sklearn.metrics import make_scorer
    from sklearn.model_selection import GridSearchCV

    from sklearn_flowr.metrics import h_measure
    from sklearn_flowr.model_selection import OpenWorldSplit

    X, y = data
    head = WhitenedCRPClassifier(whitener=sklearn_flowr.head.TwoCovarianceWhitener())
    search = GridSearchCV(
        frozen(head, calibration=None),
        {"head__whitener__noise_shrinkage": [0.05, 0.9]},
        scoring=make_scorer(h_measure, response_method="predict_proba"),
        cv=OpenWorldSplit(n_splits=2, n_novel_classes=2, random_state=0),
    ).fit(X, y)
    scores = search.cv_results_["mean_test_score"]
    assert np.isfinite(scores).all() and scores[0] != scores[1]


@pytest.mark.parametrize("setting", ["small", "large"])
def test_the_default_head_is_the_whitened_head(data, setting, tmp_path):
    """Check that head=CRPGaussianClassifier() (covariance="whitened") works as
    head=WhitenedCRPClassifier() does: the same probabilities and P(novel)
    online, adapt from the prior head (which keeps the whitener) after a
    save and load, and reset."""
    X, y = data
    known = y < 6
    meta = MetaTraining(epochs=1, episodes_per_epoch=2, n_way=3, n_unknown=1)
    params = {"meta": meta, "setting": setting, "calibration": "train"}
    one = frozen(CRPGaussianClassifier(), **params)
    composed = frozen(WhitenedCRPClassifier(), **params)
    one.fit(X[known], y[known])
    composed.fit(X[known], y[known])
    assert one.head_.covariance == "whitened"
    for name in ("prior_mean_", "prior_var_", "scalings_"):  # the fitted whitener
        np.testing.assert_array_equal(getattr(one.prior_head_.whitener_, name),
                                      getattr(one.head_.whitener_, name))
    np.testing.assert_allclose(one.predict_proba(X), composed.predict_proba(X),
                               rtol=1e-9, atol=1e-12)
    sklearn_flowr.save(one, tmp_path / "model.skops")
    one = sklearn_flowr.load(tmp_path / "model.skops")
    rows = np.flatnonzero(y == 7)[:3]
    for model in (one, composed):
        model.adapt(X[rows], y[rows])
    np.testing.assert_allclose(one.predict_proba(X), composed.predict_proba(X),
                               rtol=1e-9, atol=1e-12)
    steps = [copy.deepcopy(model).open_world_step(X[y == 6], y[y == 6])
             for model in (one, composed)]
    np.testing.assert_allclose(steps[0].p_novel, steps[1].p_novel, rtol=1e-9)
    assert 7 not in one.reset().classes_
