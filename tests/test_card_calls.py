"""The calls the design card promises, as scikit-learn users write them:
``clf.fit(X, y)`` then ``clf.partial_fit``; ``cross_val_score``;
``GridSearchCV`` over ``head__a`` and ``head__sigma`` with
``make_scorer(h_measure)``; ``clone`` and pickling. Only the training budget
differs from the defaults (the default head, calibration and stages)."""

import pickle

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.metrics import make_scorer
from sklearn.model_selection import GridSearchCV, cross_val_score

from sklearn_flowr import FLOWRClassifier
from sklearn_flowr.metrics import h_measure
from sklearn_flowr.model_selection import OpenWorldSplit
from sklearn_flowr.training import MetaTraining, SupE, pipeline
from sklearn_flowr.training._memo import ENCODER_MEMO

BUDGET = dict(pretrain=SupE(epochs=2),
              meta=MetaTraining(epochs=1, episodes_per_epoch=4, n_way=3, n_unknown=1),
              embedding_dim=8, verbose=0, random_state=0)


@pytest.fixture
def features(digits):
    """Digits 0-5 as 64 pixel features (the "mlp" backbone keeps fits short)."""
    X, y = digits
    keep = y < 6
    return X.reshape(len(X), -1)[keep], y[keep]


@pytest.fixture
def count_trainings(monkeypatch):
    """Count calls of the encoder training FLOWRClassifier.fit runs."""
    ENCODER_MEMO.clear()
    calls = []
    original = pipeline.train_encoder

    def counted(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(pipeline, "train_encoder", counted)
    yield calls
    ENCODER_MEMO.clear()


@pytest.mark.parametrize("setting", ["small", "large"])
def test_fit_then_predict_and_partial_fit(digits, setting):
    """Check that right after fit the model predicts with the training classes
    known, in both settings, and partial_fit then learns a new class online."""
    X, y = digits
    clf = FLOWRClassifier(setting=setting, **BUDGET).fit(X[y < 5], y[y < 5])
    assert clf.classes_.tolist() == [0, 1, 2, 3, 4]
    proba = clf.predict_proba(X[y < 5][:20])
    assert proba.shape == (20, 6)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert set(clf.predict(X[:20])) <= {0, 1, 2, 3, 4, -1}
    assert 0.5 < clf.score(X[y < 5][:200], y[y < 5][:200]) <= 1.0
    clf.partial_fit(X[y == 7][:3], y[y == 7][:3])
    assert clf.classes_.tolist() == [0, 1, 2, 3, 4, 7]
    assert clf.predict_proba(X[:2]).shape == (2, 7)


def test_cross_val_score_is_finite(features):
    """Check cross_val_score with the default scorer (accuracy) and folds that
    keep every class gives finite scores."""
    X, y = features
    scores = cross_val_score(FLOWRClassifier(backbone="mlp", **BUDGET), X, y, cv=3,
                             error_score="raise")
    assert scores.shape == (3,) and np.isfinite(scores).all()
    assert scores.min() > 0.3


def test_grid_search_over_a_and_sigma_with_h_measure(features, count_trainings):
    """Check the card's GridSearchCV: head__a x head__sigma scored by
    make_scorer(h_measure) on folds holding classes out. Scores are finite and
    differ, best_params_ is their argmax, and the encoder is trained once per
    fold plus once for the refit (head settings reuse it)."""
    X, y = features
    search = GridSearchCV(
        FLOWRClassifier(backbone="mlp", **BUDGET),
        {"head__a": [0.0, 0.5], "head__sigma": ["auto", 0.1, 1.0]},
        scoring=make_scorer(h_measure, response_method="predict_proba"),
        cv=OpenWorldSplit(n_splits=2, n_novel_classes=2, random_state=0),
        error_score="raise",
    ).fit(X, y)
    scores = search.cv_results_["mean_test_score"]
    assert np.isfinite(scores).all()
    assert np.unique(np.round(scores, 9)).shape[0] > 1
    assert search.best_params_ == search.cv_results_["params"][np.argmax(scores)]
    assert len(count_trainings) == 2 + 1
    assert search.best_estimator_.head_.sigma is not None


def test_head_sigma_moves_p_novel(features):
    """Check an explicit head__sigma changes the default head's P(novel)
    materially (on rows of classes it never saw), and reuses the encoder."""
    X, y = features
    train = y < 4
    p_novel = {}
    for sigma in ("auto", 0.1, 1.0):
        clf = FLOWRClassifier(backbone="mlp", **BUDGET).set_params(head__sigma=sigma)
        p_novel[sigma] = clf.fit(X[train], y[train]).predict_proba(X[~train])[:, -1]
    largest = max(np.abs(p_novel[a] - p_novel[b]).max()
                  for a in p_novel for b in p_novel)
    assert largest > 0.2


def test_nested_set_params_never_changes_the_shared_default():
    """Check set_params(head__a=...) on one FLOWRClassifier() leaves every
    other default-constructed instance as it was."""
    first = FLOWRClassifier().set_params(head__a=0.1, meta__epochs=3,
                                         pretrain__epochs=4)
    second = FLOWRClassifier()
    assert first.get_params()["head__a"] == 0.1
    assert second.get_params()["head__a"] == 0.5
    assert second.get_params()["meta__epochs"] == 10
    assert second.get_params()["pretrain__epochs"] == 20


def test_clone_and_pickle_round_trip(features):
    """Check clone keeps every nested setting unfitted, and pickling a fitted
    model keeps its predictions."""
    X, y = features
    clf = FLOWRClassifier(backbone="mlp", **BUDGET).set_params(head__a=0.2)
    twin = clone(clf)
    assert twin.get_params()["head__a"] == 0.2 and twin.head is not clf.head
    clf.fit(X[y < 4], y[y < 4])
    loaded = pickle.loads(pickle.dumps(clf))
    np.testing.assert_allclose(loaded.predict_proba(X[:5]), clf.predict_proba(X[:5]))
    assert not hasattr(clone(clf), "head_")


@pytest.mark.parametrize("params, message", [
    (dict(head__a=1.5), "'a' parameter"),
    (dict(meta__n_way=0), "'n_way' parameter"),
    (dict(pretrain__epochs=-2), "'epochs' parameter"),
    (dict(embedding_dim=0), "'embedding_dim' parameter"),
    (dict(calibration="always"), "'calibration' parameter"),
])
def test_bad_parameters_fail_before_training(features, count_trainings, params,
                                             message):
    """Check a bad own or nested parameter fails in fit with a message naming
    it, before any training and leaving the model unfitted."""
    X, y = features
    clf = FLOWRClassifier(backbone="mlp", **BUDGET)
    clf = clone(clf).set_params(**params)
    with pytest.raises(ValueError, match=message):
        clf.fit(X, y)
    assert not count_trainings
    assert not hasattr(clf, "head_")


def test_unknown_nested_parameter_is_named():
    """Check a misspelt nested name raises sklearn's clear error."""
    with pytest.raises(ValueError, match="Invalid parameter 'sigmaa'"):
        FLOWRClassifier().set_params(head__sigmaa=1.0)
