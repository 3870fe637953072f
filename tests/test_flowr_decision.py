"""Tests of FLOWRClassifier.predict's novel decision: conformal p-values
calibrated on rows held out of the known classes' training."""

import copy

import numpy as np
import pytest

import sklearn_flowr
from sklearn_flowr import CRPGaussianClassifier, FLOWRClassifier
from sklearn_flowr.training import MetaTraining, SupE
from sklearn_flowr.training.pipeline import CONFORMAL_SHARE, _held_out_scores

BUDGET = dict(pretrain=SupE(epochs=2),
              meta=MetaTraining(epochs=1, episodes_per_epoch=5),
              verbose=0, random_state=0)


def _n_held_out(y):
    counts = np.unique(y, return_counts=True)[1]
    return int(sum(min(max(1, round(CONFORMAL_SHARE * n)), n // 2) for n in counts))


@pytest.fixture(scope="module")
def split():
    """Digits 0-6 halved into training and held-out rows; digits 7-9 unseen."""
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X = (X.reshape(-1, 8, 8) / 16.0).astype(np.float32)
    known = np.flatnonzero(y < 7)
    fit = np.random.default_rng(0).random(known.shape[0]) < 0.5
    return X, y, known[fit], known[~fit], np.flatnonzero(y >= 7)


@pytest.fixture(scope="module")
def fitted(split):
    X, y, train, _, _ = split
    return FLOWRClassifier(**BUDGET, setting="large").fit(X[train], y[train])


def test_decision_is_calibrated_on_held_out_rows(split, fitted):
    """Check the head's calibration scores are those of the share of each
    class's rows the encoder did not train on (not the training rows' own), and
    the false-novel rate on known-class rows meets alpha within 2 SE."""
    X, y, train, test, unseen = split
    scores = fitted.head_.conformal_scores_
    assert scores.shape == (_n_held_out(y[train]),)
    assert np.all(np.diff(scores) >= 0)
    false_novel = np.mean(fitted.predict(X[test]) == -1)
    alpha = fitted.head_.novelty_alpha
    assert false_novel <= alpha + 2 * np.sqrt(alpha * (1 - alpha) / test.shape[0])
    assert np.mean(fitted.predict(X[unseen]) == -1) > 2 * alpha


def test_held_out_scores_survive_copies_adapt_and_saving(split, fitted, tmp_path):
    """Check the held-out scores stay with the model: deep copies, reset,
    adapt (large context) and save/load all predict alike."""
    X, y, train, test, _ = split
    expected = fitted.head_.conformal_scores_
    rows = X[test[:60]]
    y_pred = fitted.predict(rows)
    sklearn_flowr.save(fitted, tmp_path / "model.skops")
    for model in (copy.deepcopy(fitted), copy.deepcopy(fitted).reset(),
                  sklearn_flowr.load(tmp_path / "model.skops")):
        np.testing.assert_array_equal(model.head_.conformal_scores_, expected)
        np.testing.assert_array_equal(model.predict(rows), y_pred)
    adapted = copy.deepcopy(fitted).adapt(X[test[:2]], y[test[:2]])
    # Its known rows are scored before they are learned and join the scores.
    assert adapted.head_.conformal_scores_.shape[0] >= expected.shape[0]
    assert np.isin(expected, adapted.head_.conformal_scores_).all()


def test_refit_of_head_params_keeps_held_out_scores(split):
    """Check a refit after a head__* change calibrates on held-out rows again
    (the memoised encoder serves it), and novelty_alpha=None trains the
    encoder on every row: the head keeps its own cross-fitted scores (its
    first folds, until 150 rows are scored)."""
    X, y, train, _, _ = split
    clf = FLOWRClassifier(**BUDGET).fit(X[train], y[train])
    Z = clf.transform(X[train[:5]])
    clf.set_params(head__a=0.2).fit(X[train], y[train])
    assert clf.head_.conformal_scores_.shape == (_n_held_out(y[train]),)
    np.testing.assert_array_equal(clf.transform(X[train[:5]]), Z)
    plain = FLOWRClassifier(**BUDGET, head=CRPGaussianClassifier(
        covariance="full", novelty_alpha=None)).fit(X[train], y[train])
    assert 150 <= plain.head_.conformal_scores_.shape[0] < train.shape[0]


def test_held_out_scores_are_drawn_like_new_rows_of_the_deciding_head():
    """Check the held rows' scores, each from the head fitted without its fold,
    give new rows of known classes a false-novel rate of alpha within 2 SE
    under the head fitted on every row, when the training rows lie tighter than
    held and new rows (as an encoder's own training rows do); a head fitted
    without all held rows scores them too novel (half of alpha here)."""
    rng = np.random.default_rng(0)
    means = rng.normal(scale=6.0, size=(4, 3))

    def rows(n, spread):
        y = np.repeat(np.arange(4), n)
        return means[y] + rng.normal(scale=spread, size=(y.shape[0], 3)), y

    (Z_train, y_train), (Z_held, y_held) = rows(450, 0.5), rows(50, 1.0)
    Z_new = rows(1000, 1.0)[0]
    Z, y = np.vstack([Z_train, Z_held]), np.concatenate([y_train, y_held])
    held = np.arange(Z_train.shape[0], Z.shape[0])
    assert np.all(np.diff(y[held]) >= 0)  # listed class by class

    def fit(Z, y):
        return CRPGaussianClassifier(novelty_alpha=0.1).fit(Z, y)

    head = fit(Z, y).set_conformal_scores(_held_out_scores(fit, Z, y, held))
    false_novel = np.mean(head.predict(Z_new) == head.novel_label_)
    assert abs(false_novel - 0.1) <= 2 * np.sqrt(0.1 * 0.9 / held.shape[0])


def test_set_conformal_scores_checks_its_input():
    """Check set_conformal_scores refuses non-finite scores before any change
    and an unfitted head."""
    head = CRPGaussianClassifier(covariance="isotropic").fit(
        [[0, 0], [0.2, 0], [4, 4], [4, 4.2]], [0, 0, 1, 1])
    before = head.conformal_scores_
    with pytest.raises(ValueError, match="finite"):
        head.set_conformal_scores([0.0, np.nan])
    np.testing.assert_array_equal(head.conformal_scores_, before)
    with pytest.raises(ValueError, match="1-d"):
        head.set_conformal_scores(np.zeros((3, 2)))
    np.testing.assert_array_equal(head.conformal_scores_, before)
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        CRPGaussianClassifier(covariance="isotropic").set_conformal_scores([0.0])


def test_unseeded_fits_hold_out_the_same_rows(split, tmp_path):
    """Check fits without a random_state hold out the same rows, so a second
    fit with the same checkpoint_dir matches its fingerprint (and resumes)."""
    X, y, train, _, _ = split
    params = dict(BUDGET, random_state=None, checkpoint_dir=str(tmp_path),
                  reuse_encoder=False)
    first = FLOWRClassifier(**params).fit(X[train], y[train])
    second = FLOWRClassifier(**params).fit(X[train], y[train])
    assert first.head_.conformal_scores_.shape == second.head_.conformal_scores_.shape
