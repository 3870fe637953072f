"""Tests of the head's novelty decision at ``novelty_alpha``: conformal
p-values of P(novel) against cross-fitted and online held-out scores."""

import copy
import warnings

import numpy as np
import pytest
from scipy.special import logsumexp
from sklearn.base import clone
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.utils._param_validation import InvalidParameterError

from sklearn_flowr import CRPGaussianClassifier, WhitenedCRPClassifier, saving
from sklearn_flowr.head import (
    TwoCovarianceWhitener,
    _cross_fit,
    _decision,
    _plda,
    _two_covariance,
)

ALPHA = 0.05


def novel_log_odds(head, X):
    """log P(novel) - log P(known) from the public probabilities."""
    log_proba = head.predict_log_proba(X)
    return log_proba[:, -1] - logsumexp(log_proba[:, :-1], axis=1)


@pytest.fixture(scope="module")
def digit_splits():
    """Digits 0-6 known (half fitted, half held out), 7-9 unseen, for
    three seeds, in raw 64-d pixels and in 20 PCA components."""
    X, y = load_digits(return_X_y=True)
    known = y < 7
    X_known, y_known, X_unseen = X[known], y[known], X[~known]
    splits = []
    for seed in range(3):
        fit = np.random.default_rng(seed).random(y_known.shape[0]) < 0.5
        pca = PCA(20, random_state=0).fit(X_known[fit])
        for name, f in (("raw", lambda Z: Z), ("pca", pca.transform)):
            splits.append((name, seed, f(X_known[fit]), y_known[fit],
                           f(X_known[~fit]), f(X_unseen)))
    return splits


@pytest.mark.parametrize("covariance", ["isotropic", "full", "whitened"])
def test_false_novel_rate_on_held_out_digits_is_at_most_alpha(digit_splits,
                                                              covariance):
    """Check that on held-out rows of known digits predict says novel for at
    most alpha + 2 SE of them, over seeds and features, and that it finds
    far more unseen digits than the 4.5% of the argmax rule's report (30%:
    with 150-250 calibration rows the threshold varies by a few points)."""
    for name, seed, X_fit, y_fit, X_test, X_unseen in digit_splits:
        head = CRPGaussianClassifier(covariance=covariance).fit(X_fit, y_fit)
        rate = np.mean(head.predict(X_test) == -1)
        bound = ALPHA + 2 * np.sqrt(ALPHA * (1 - ALPHA) / X_test.shape[0])
        assert rate <= bound, (name, seed, rate)
        assert np.mean(head.predict(X_unseen) == -1) > 0.3, (name, seed)


@pytest.mark.parametrize("make_head", [
    lambda: CRPGaussianClassifier(covariance="isotropic"),
    CRPGaussianClassifier,
    WhitenedCRPClassifier,
], ids=["isotropic", "whitened", "WhitenedCRPClassifier"])
def test_false_novel_rate_with_three_rows_a_class(make_head):
    """Check that with three fitted rows of each of eight digits, predict says
    novel for at most alpha + 2 SE of the held-out rows of those digits, over
    three draws (the default head's few-shot case: its whitener is fitted
    again without each fold, or the held-out rows look too familiar)."""
    X, y = load_digits(return_X_y=True)
    for seed in range(3):
        order = np.random.default_rng(seed).permutation(y.shape[0])
        fit = np.concatenate([order[y[order] == c][:3] for c in range(8)])
        test = np.setdiff1d(np.flatnonzero(y < 8), fit)
        head = make_head().fit(X[fit], y[fit])
        rate = np.mean(head.predict(X[test]) == -1)
        bound = ALPHA + 2 * np.sqrt(ALPHA * (1 - ALPHA) / test.shape[0])
        assert rate <= bound, (seed, rate)


def _fold_log_odds(X, y, train, held):
    """The held-out rows' novel log-odds under a TwoCovarianceWhitener and an
    isotropic head fitted on the ``train`` rows, by public methods only."""
    whitener = TwoCovarianceWhitener().fit(X[train], y[train])
    head = CRPGaussianClassifier(
        covariance="isotropic", sigma=1.0, prior_mean=np.zeros(X.shape[1]),
        prior_var=whitener.prior_var_, known_count="observed",
    ).fit(whitener.transform(X[train]), y[train])
    joint = head.predict_joint_log_proba(whitener.transform(X[held]))
    return joint[:, -1] - logsumexp(joint[:, :-1], axis=1)


@pytest.mark.parametrize("n_rows", [40, 120, 700])
@pytest.mark.parametrize("make_head", [CRPGaussianClassifier, WhitenedCRPClassifier])
def test_whitened_calibration_refits_the_whitener_without_each_fold(make_head,
                                                                    n_rows):
    """Check that the whitened heads' calibration scores are each scored fit
    row's novel log-odds under a whitener and a head both fitted without its
    fold (the k-th row of the c-th class in fold (k + c) mod 5; the folds in
    order until 150 rows are scored), to rounding: refitted in the span of
    the rows (40 rows of 64 features) or in the whole space."""
    X, y = load_digits(return_X_y=True)
    keep = np.flatnonzero(y < 6)[:n_rows]
    X, y = X[keep], y[keep]
    rank = np.array([np.sum(y[:i] == y[i]) for i in range(y.shape[0])])
    fold = (rank + y) % 5  # the labels 0-5 are the classes' indices
    sizes = np.bincount(fold, minlength=5)
    scored = [k for k in range(5) if sizes[:k].sum() < 150]
    assert len(scored) == (5 if n_rows < 150 else 2)
    expected = np.sort(np.concatenate([
        _fold_log_odds(X, y, fold != k, fold == k) for k in scored]))
    head = make_head().fit(X, y)
    assert (head.whitener_.solver_ == "span") == (n_rows == 40)
    scores = (head.head_ if hasattr(head, "head_") else head).conformal_scores_
    np.testing.assert_allclose(scores, expected, rtol=1e-7, atol=1e-7)


@pytest.mark.parametrize("make_head", [CRPGaussianClassifier, WhitenedCRPClassifier])
def test_two_rows_a_class_are_calibrated(make_head):
    """Check that with two rows of each of ten digits the whitened heads get
    calibration scores (every fold leaves most classes both rows) and keep the
    false-novel rate at most alpha + 2 SE, over three draws."""
    X, y = load_digits(return_X_y=True)
    for seed in range(3):
        order = np.random.default_rng(seed).permutation(y.shape[0])
        fit = np.concatenate([order[y[order] == c][:2] for c in range(10)])
        test = np.setdiff1d(np.arange(y.shape[0]), fit)
        head = make_head().fit(X[fit], y[fit])
        scores = (head.head_ if hasattr(head, "head_") else head).conformal_scores_
        assert scores.shape == (20,)
        rate = np.mean(head.predict(X[test]) == -1)
        assert rate <= ALPHA + 2 * np.sqrt(ALPHA * (1 - ALPHA) / test.shape[0])


def test_calibration_scores_stop_at_enough_rows(rng):
    """Check that fit scores folds in order until 150 rows are (each fold
    costs a fit), and every fold of a smaller set."""
    y = np.repeat(np.arange(10), 50)
    X = rng.normal(scale=3.0, size=(10, 4))[y] + rng.normal(size=(500, 4))
    head = CRPGaussianClassifier(covariance="isotropic").fit(X, y)
    assert head.conformal_scores_.shape == (200,)  # folds 0-1 hold 100 rows
    head = CRPGaussianClassifier(covariance="isotropic").fit(X[::4], y[::4])
    assert head.conformal_scores_.shape == (125,)


@pytest.mark.parametrize("n_rows", [40, 400])
@pytest.mark.parametrize("make_head", [CRPGaussianClassifier, WhitenedCRPClassifier])
def test_interrupted_calibration_leaves_the_head_as_it_was(monkeypatch, make_head,
                                                           n_rows):
    """Check that a Ctrl-C in a fold's whitener estimate of fit's calibration
    leaves the whitened head exactly as before the call (refits in the span
    of 40 rows of 64 features, or in the whole space)."""
    X, y = load_digits(return_X_y=True)
    head = make_head().fit(X[:300], y[:300])
    inner = head.head_ if hasattr(head, "head_") else head
    before = (inner.conformal_scores_, head.whitener_.scalings_.copy(),
              inner.class_mean_.copy(), head.predict_proba(X[300:320]))
    calls = []

    def interrupt_third(estimate):
        def call(*args, **kwargs):
            calls.append(1)
            if len(calls) == 3:  # fit, then the calibration's second fold
                raise KeyboardInterrupt
            return estimate(*args, **kwargs)
        return call

    for module in (_plda, _two_covariance):
        monkeypatch.setattr(module, "estimate", interrupt_third(module.estimate))
    with pytest.raises(KeyboardInterrupt):
        head.fit(X[300:300 + n_rows], y[300:300 + n_rows])
    assert len(calls) == 3
    inner = head.head_ if hasattr(head, "head_") else head
    after = (inner.conformal_scores_, head.whitener_.scalings_,
             inner.class_mean_, head.predict_proba(X[300:320]))
    for old, new in zip(before, after, strict=True):
        np.testing.assert_array_equal(new, old)


def test_novelty_alpha_none_is_the_argmax_rule(blobs, rng):
    """Check that novelty_alpha=None predicts the argmax of predict_proba
    over the classes and the novel class, in predict and in streams."""
    X, y = blobs
    queries = np.r_[X, rng.normal(scale=8.0, size=(40, 5))]
    head = CRPGaussianClassifier(novelty_alpha=None).fit(X[y < 3], y[y < 3])
    labels = np.r_[head.classes_, head.novel_label_]
    np.testing.assert_array_equal(
        head.predict(queries), labels[head.predict_proba(queries).argmax(axis=1)])
    stream = copy.deepcopy(head).open_world_step(X[y == 3], y[y == 3])
    row_by_row = copy.deepcopy(head)
    for x, label, y_pred in zip(X[y == 3], y[y == 3], stream.y_pred, strict=True):
        proba = row_by_row.predict_proba(x[None])[0]
        labels = np.r_[row_by_row.classes_, row_by_row.novel_label_]
        assert y_pred == labels[proba.argmax()]
        row_by_row.partial_fit(x[None], [label])


def test_predict_is_the_conformal_rule(blobs, rng):
    """Check that predict says novel exactly where (1 + #{c >= s}) / (n + 1)
    <= alpha, and the best known class elsewhere."""
    X, y = blobs
    head = CRPGaussianClassifier(novelty_alpha=0.1).fit(X, y)
    queries = np.r_[X, rng.normal(scale=8.0, size=(40, 5))]
    scores = novel_log_odds(head, queries)
    calibration = head.conformal_scores_
    assert calibration.shape == (60,) and np.all(np.diff(calibration) >= 0)
    pvalues = (1 + (calibration[None] >= scores[:, None]).sum(1)) / 61
    np.testing.assert_allclose(head.novelty_pvalues(queries), pvalues)
    best = head.classes_[head.predict_proba(queries)[:, :-1].argmax(axis=1)]
    np.testing.assert_array_equal(head.predict(queries),
                                  np.where(pvalues <= 0.1, -1, best))


def test_fit_scores_are_cross_fitted_over_five_folds(blobs):
    """Check that each fit row's calibration score is its novel log-odds
    under the head fitted on the other folds (every class spread over them)."""
    X, y = blobs
    head = CRPGaussianClassifier(covariance="full").fit(X, y)
    fold = _cross_fit.fold_of_rows(y)
    np.testing.assert_array_equal(np.bincount(fold), [12] * 5)
    expected = np.empty(60)
    for k in range(5):
        fold_head = CRPGaussianClassifier(covariance="full").fit(
            X[fold != k], y[fold != k])
        expected[fold == k] = novel_log_odds(fold_head, X[fold == k])
    np.testing.assert_allclose(head.conformal_scores_, np.sort(expected),
                               rtol=1e-9, atol=1e-9)


def test_too_few_scores_keep_the_argmax_rule():
    """Check that with too few calibration scores to reach alpha (or folds
    that cannot be fitted) predict is the argmax rule."""
    X = [[0.0, 0.0], [0.2, 0.0], [4.0, 4.0], [4.0, 4.2]]
    with pytest.warns(UserWarning, match="4 rows gave 0 calibration scores"):
        head = CRPGaussianClassifier(covariance="isotropic").fit(X, [0, 0, 1, 1])
    assert head.conformal_scores_.shape == (0,)  # a fold of 1-row classes
    queries = [[0.1, 0.0], [-6.0, 7.0]]
    np.testing.assert_array_equal(head.predict(queries), [0, -1])
    np.testing.assert_array_equal(head.novelty_pvalues(queries), [1.0, 1.0])


@pytest.mark.parametrize("covariance", ["isotropic", "full", "whitened"])
def test_partial_fit_holds_out_rows_as_one_row_calls_do(blobs, rng, covariance):
    """Check that partial_fit's calibration scores do not depend on how its rows
    are split into calls: each row of a class known before it (a class new in
    the call too, from its second row) adds its novel log-odds under the head
    before it, as open_world_step's do; predict then agrees."""
    X, y = blobs
    head = CRPGaussianClassifier(covariance=covariance, novelty_alpha=0.2).fit(
        X[y < 3][::2], y[y < 3][::2])
    rows = rng.permutation(np.r_[np.flatnonzero(y < 3)[1::2],
                                 np.flatnonzero(y == 3)])
    batch, by_row, stream = (copy.deepcopy(head) for _ in range(3))
    batch.partial_fit(X[rows], y[rows])
    for i in rows:
        by_row.partial_fit(X[i][None], [y[i]])
    stream.open_world_step(X[rows], y[rows])
    n_new = 1  # the first row of class 3 has no class to be held out against
    assert (batch.conformal_scores_.shape[0]
            == head.conformal_scores_.shape[0] + rows.shape[0] - n_new)
    for other in (by_row, stream):
        np.testing.assert_allclose(batch.conformal_scores_,
                                   other.conformal_scores_, rtol=1e-10)
    np.testing.assert_allclose(batch.predict_proba(X), by_row.predict_proba(X),
                               rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(batch.predict(X), by_row.predict(X))


@pytest.mark.parametrize("covariance", ["isotropic", "full"])
def test_first_partial_fit_holds_out_rows_as_later_calls_do(blobs, rng, covariance):
    """Check that partial_fit on an unfitted head with a given prior holds its
    rows out as later calls do: one call, a one-row call then the rest, and
    chunks give the same calibration scores and predict."""
    X, y = blobs
    prior = dict(prior_mean=0.0, prior_var=9.0, sigma=1.0, b=1.0)
    rows = rng.permutation(y.shape[0])
    heads = [CRPGaussianClassifier(covariance=covariance, **prior)
             for _ in range(3)]
    heads[0].partial_fit(X[rows], y[rows])
    heads[1].partial_fit(X[rows[:1]], y[rows[:1]])
    heads[1].partial_fit(X[rows[1:]], y[rows[1:]])
    for chunk in np.array_split(rows, 7):
        heads[2].partial_fit(X[chunk], y[chunk])
    n_classes = np.unique(y).shape[0]  # each class's first row: nothing to hold
    assert heads[0].conformal_scores_.shape == (y.shape[0] - n_classes,)
    for other in heads[1:]:
        np.testing.assert_allclose(other.conformal_scores_,
                                   heads[0].conformal_scores_, rtol=1e-10)
        np.testing.assert_array_equal(other.predict(X), heads[0].predict(X))


@pytest.mark.parametrize("params", [{}, {"covariance": "isotropic"}])
def test_first_partial_fit_of_an_estimated_prior_warns(blobs, params):
    """Check that partial_fit on an unfitted head that estimates its whitener
    or prior from the rows holds none out and says so (predict is then the
    argmax rule), and is silent without novelty_alpha."""
    X, y = blobs
    with pytest.warns(UserWarning, match="holds none of them out"):
        head = CRPGaussianClassifier(**params).partial_fit(X, y)
    assert head.conformal_scores_.shape == (0,)
    argmax = copy.deepcopy(head).set_params(novelty_alpha=None)
    np.testing.assert_array_equal(head.predict(X), argmax.predict(X))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        CRPGaussianClassifier(**params, novelty_alpha=None).partial_fit(X, y)


@pytest.mark.parametrize("novelty_calibration", [None, (0.7, -1.5)])
def test_stream_equals_predict_then_partial_fit_row_by_row(
        blobs, rng, monkeypatch, novelty_calibration):
    """Check that open_world_step's decisions and calibration scores equal
    predict then partial_fit row by row (blocks of 7 rows), new classes and
    a Platt map included: the scores appended are the rows' novel log-odds
    before they are learned."""
    monkeypatch.setattr(_decision, "_BLOCK", 7)
    X, y = blobs
    far = rng.normal(scale=9.0, size=(3, 5))
    X = np.r_[X, far[[0, 0, 1, 2, 1]] + rng.normal(size=(5, 5))]
    y = np.r_[y, [4, 4, 5, 6, 5]]
    fit = np.arange(y.shape[0]) % 3 == 0
    fit[60:] = False
    head = CRPGaussianClassifier(
        novelty_alpha=0.15, novelty_calibration=novelty_calibration).fit(
        X[fit & (y < 3)], y[fit & (y < 3)])
    order = rng.permutation(np.flatnonzero(~fit))
    stream = copy.deepcopy(head).open_world_step(X[order], y[order])
    row_by_row, appended = copy.deepcopy(head), []
    for i in order:
        known = y[i] in row_by_row.classes_
        if known:
            appended.append(novel_log_odds(
                copy.deepcopy(row_by_row).set_params(novelty_calibration=None),
                X[i][None])[0])
        assert stream.y_pred[list(order).index(i)] == row_by_row.predict(X[i][None])[0]
        row_by_row.partial_fit(X[i][None], [y[i]])
    assert (stream.y_pred == -1).any() and (stream.y_pred != -1).any()
    after = copy.deepcopy(head)
    after.open_world_step(X[order], y[order])
    np.testing.assert_allclose(
        after.conformal_scores_,
        np.sort(np.r_[head.conformal_scores_, appended]), rtol=1e-10)
    np.testing.assert_allclose(after.conformal_scores_,
                               row_by_row.conformal_scores_, rtol=1e-10)


def test_interrupted_step_leaves_the_calibration_unchanged(blobs, monkeypatch):
    """Check that an interrupt in the decisions of a stream leaves the head,
    calibration scores included, as it was."""
    X, y = blobs
    head = CRPGaussianClassifier().fit(X[y < 3], y[y < 3])
    before = (head.conformal_scores_, head.class_count_.copy())

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(_decision, "stream_decisions", interrupt)
    with pytest.raises(KeyboardInterrupt):
        head.open_world_step(X[:9], y[:9])
    np.testing.assert_array_equal(head.conformal_scores_, before[0])
    np.testing.assert_array_equal(head.class_count_, before[1])


def test_save_load_and_merge_keep_the_scores(blobs, tmp_path):
    """Check that skops saving keeps the calibration scores and predictions,
    and that merge pools the parts' scores."""
    X, y = blobs
    left = CRPGaussianClassifier(covariance="isotropic").fit(X[::2], y[::2])
    right = CRPGaussianClassifier(covariance="isotropic").fit(X[1::2], y[1::2])
    path = tmp_path / "head.skops"
    saving.save(left, path)
    loaded = saving.load(path)
    np.testing.assert_array_equal(loaded.conformal_scores_, left.conformal_scores_)
    np.testing.assert_array_equal(loaded.predict(X), left.predict(X))
    merged = left.merge(right)
    np.testing.assert_array_equal(
        merged.conformal_scores_,
        np.sort(np.r_[left.conformal_scores_, right.conformal_scores_]))


def test_novelty_alpha_is_validated_and_changes_after_fit(blobs, rng):
    """Check that novelty_alpha outside (0, 1) is refused, and that it may
    change after fit: a larger alpha calls more rows novel."""
    X, y = blobs
    with pytest.raises(InvalidParameterError, match="novelty_alpha"):
        CRPGaussianClassifier(novelty_alpha=1.0).fit(X, y)
    head = CRPGaussianClassifier(novelty_alpha=0.02).fit(X, y)
    queries = np.r_[X, rng.normal(scale=6.0, size=(60, 5))]
    strict = np.sum(head.predict(queries) == -1)
    head.set_params(novelty_alpha=0.3).partial_fit(X[:1], y[:1])
    assert np.sum(head.predict(queries) == -1) > strict


def test_clone_and_grid_search_with_default_arguments(blobs):
    """Check that clone keeps novelty_alpha and GridSearchCV runs over it."""
    X, y = blobs
    assert clone(CRPGaussianClassifier()).novelty_alpha == ALPHA
    search = GridSearchCV(
        CRPGaussianClassifier(), {"novelty_alpha": [0.05, 0.2]},
        cv=StratifiedKFold(3, shuffle=True, random_state=0)).fit(X, y)
    assert search.best_params_["novelty_alpha"] in (0.05, 0.2)
