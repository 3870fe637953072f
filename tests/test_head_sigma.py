"""Tests of the head's class noise ``sigma="auto"`` (pooled within-class
variance)."""

import copy

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.model_selection import GridSearchCV, StratifiedKFold

from sklearn_flowr import CRPGaussianClassifier

GIVEN_PRIOR = dict(prior_mean=0.0, prior_var=4.0, b=1.3, sigma=0.5)


def pooled_within_class_variance(X, y):
    """Brute-force pooled within-class variance, averaged over features."""
    squares, n_classes = 0.0, 0
    for label in np.unique(y):
        rows = X[y == label]
        n_classes += 1
        for row in rows:
            for j in range(X.shape[1]):
                squares += (row[j] - rows[:, j].mean()) ** 2
    return squares / (X.shape[0] - n_classes) / X.shape[1]


@pytest.fixture(scope="module")
def raw_digits():
    """Raw 0-16 digit pixels: classes 0-5 split into fit and held-out rows,
    classes 6-9 never seen."""
    X, y = load_digits(return_X_y=True)
    known = y < 6
    X_known, y_known = X[known], y[known]
    fit = np.arange(y_known.shape[0]) % 2 == 0
    return (X_known[fit], y_known[fit], X_known[~fit], y_known[~fit], X[~known])


def test_sigma_auto_is_pooled_within_class_variance(blobs, rng):
    """Check that sigma='auto' (the default) equals a brute-force pooled
    within-class variance and that every prediction uses it."""
    X, y = blobs
    keep = np.r_[0:3, 15:30, 30:31, 45:52]  # unequal sizes, one singleton class
    X, y = X[keep] * 3.0, y[keep]
    clf = CRPGaussianClassifier(covariance="isotropic").fit(X, y)
    assert clf.sigma == "auto"
    assert isinstance(clf.sigma_, float)
    assert clf.sigma_ == pytest.approx(pooled_within_class_variance(X, y),
                                       rel=1e-12)
    fixed = CRPGaussianClassifier(covariance="isotropic", sigma=clf.sigma_).fit(X, y)
    queries = rng.normal(scale=4, size=(6, 5))
    np.testing.assert_array_equal(clf.predict_joint_log_proba(queries),
                                  fixed.predict_joint_log_proba(queries))
    np.testing.assert_array_equal(clf.class_var_, fixed.class_var_)


def test_float_sigma_is_kept_and_leaves_the_prior_unchanged(blobs):
    """Check that a float sigma is used as given and that the prior estimate
    does not depend on sigma."""
    X, y = blobs
    auto = CRPGaussianClassifier().fit(X, y)
    fixed = CRPGaussianClassifier(sigma=0.5).fit(X, y)
    assert fixed.sigma_ == 0.5
    np.testing.assert_array_equal(fixed.prior_mean_, auto.prior_mean_)
    np.testing.assert_array_equal(fixed.prior_var_, auto.prior_var_)
    assert fixed.b_ == auto.b_


def test_sigma_auto_fixes_raw_digit_pixels(raw_digits):
    """Check that the default head recognises raw digit pixels (feature scale
    ~16) where the paper's sigma=0.5 calls everything novel, and that unseen
    digits get more novel mass than held-out known ones."""
    X_fit, y_fit, X_test, y_test, X_unseen = raw_digits
    auto = CRPGaussianClassifier(covariance="isotropic", a=0.5).fit(X_fit, y_fit)
    # The argmax rule (novelty_alpha=None) reads the probabilities as they
    # are; the conformal rule would hide the mis-scaled sigma.
    paper = CRPGaussianClassifier(covariance="isotropic", a=0.5, sigma=0.5,
                                  novelty_alpha=None).fit(X_fit, y_fit)
    assert np.mean(auto.predict(X_test) == y_test) > 0.8
    assert np.mean(paper.predict(X_test) == y_test) < 0.05
    p_novel_known = auto.predict_proba(X_test)[:, -1].mean()
    p_novel_unseen = auto.predict_proba(X_unseen)[:, -1].mean()
    assert p_novel_unseen > p_novel_known + 0.3


def test_partial_fit_after_auto_fit_keeps_sigma_in_any_chunking(blobs, rng):
    """Check that sigma_ from fit stays fixed online, so partial_fit in chunks
    equals partial_fit of the whole batch."""
    X, y = blobs
    first = np.arange(60) % 3 == 0
    whole = CRPGaussianClassifier(known_count="observed").fit(X[first], y[first])
    sigma = whole.sigma_
    chunked = copy.deepcopy(whole)
    X_more = np.vstack([X[~first], rng.normal(scale=5, size=(9, 5))])
    y_more = np.r_[y[~first], rng.integers(4, 7, size=9)]
    whole.partial_fit(X_more, y_more)
    order = rng.permutation(y_more.shape[0])
    for part in np.array_split(order, [1, 5, 22]):
        chunked.partial_fit(X_more[part], y_more[part])
    assert whole.sigma_ == chunked.sigma_ == sigma
    sort_w, sort_c = np.argsort(whole.classes_), np.argsort(chunked.classes_)
    np.testing.assert_array_equal(chunked.classes_[sort_c], whole.classes_[sort_w])
    np.testing.assert_allclose(chunked.class_mean_[sort_c], whole.class_mean_[sort_w])
    np.testing.assert_allclose(chunked.class_var_[sort_c], whole.class_var_[sort_w])
    queries = rng.normal(scale=4, size=(5, 5))
    n = whole.classes_.shape[0]
    np.testing.assert_allclose(chunked.predict_proba(queries)[:, np.r_[sort_c, n]],
                               whole.predict_proba(queries)[:, np.r_[sort_w, n]],
                               rtol=1e-10)


def test_partial_fit_unfitted_estimates_sigma_from_first_batch(blobs):
    """Check that partial_fit on an unfitted head estimates sigma from its
    first batch, even with one class when the prior is given."""
    X, y = blobs
    clf = CRPGaussianClassifier(covariance="isotropic",
                                **dict(GIVEN_PRIOR, sigma="auto"))
    clf.partial_fit(X[y == 2], y[y == 2])
    assert clf.sigma_ == pytest.approx(
        pooled_within_class_variance(X[y == 2], y[y == 2]), rel=1e-12
    )
    clf.partial_fit(X[y != 2], y[y != 2])
    assert clf.sigma_ == pytest.approx(
        pooled_within_class_variance(X[y == 2], y[y == 2]), rel=1e-12
    )


@pytest.mark.parametrize("method", ["fit", "partial_fit"])
def test_sigma_auto_with_single_sample_classes_raises(blobs, method):
    """Check that one sample per class gives a clear error asking for a float
    sigma, and leaves no fitted state."""
    X, y = blobs
    rows = np.array([0, 15, 30])
    clf = CRPGaussianClassifier(covariance="isotropic",
                                **dict(GIVEN_PRIOR, sigma="auto"))
    with pytest.raises(ValueError, match="at least 2 samples.*Give sigma as a float"):
        getattr(clf, method)(X[rows], y[rows])
    assert not hasattr(clf, "n_features_in_")
    clf.set_params(sigma=0.5)
    getattr(clf, method)(X[rows], y[rows])
    assert clf.sigma_ == 0.5


def test_grid_search_over_sigma(raw_digits):
    """Check that GridSearchCV tunes sigma over floats and "auto"."""
    X_fit, y_fit, _, _, _ = raw_digits
    grid = {"sigma": [0.5, 20.0, "auto"]}
    cv = StratifiedKFold(n_splits=3, shuffle=True, random_state=0)
    search = GridSearchCV(CRPGaussianClassifier(covariance="isotropic",
                                                novelty_alpha=None), grid, cv=cv,
                          error_score="raise").fit(X_fit, y_fit)
    scores = dict(zip(map(str, grid["sigma"]),
                      search.cv_results_["mean_test_score"], strict=True))
    assert scores["0.5"] < 0.05 < 0.8 < min(scores["20.0"], scores["auto"])
    assert search.best_params_["sigma"] in (20.0, "auto")
    assert search.best_estimator_.sigma_ > 1.0


def pooled_within_class_variance_fast(X, y):
    """The pooled within-class variance, averaged over features (vectorised)."""
    labels = np.unique(y)
    residual = X - np.array([X[y == label].mean(0) for label in labels])[
        np.searchsorted(labels, y)]
    return np.sum(residual**2) / (X.shape[0] - labels.shape[0]) / X.shape[1]


@pytest.fixture(scope="module")
def unit_noise_digits():
    """Digit pixels scaled so that the pooled within-class variance is 1 (the
    scale of an embedding): classes 0-4 half fitted, the rest queries, classes
    5-9 never seen."""
    X, y = load_digits(return_X_y=True)
    X = X / np.sqrt(pooled_within_class_variance_fast(X, y))
    fit = (y < 5) & (np.arange(y.shape[0]) % 2 == 0)
    return X[fit], y[fit], X[~fit]


def test_full_covariance_sigma_choices_are_as_documented(unit_noise_digits):
    """Check that with covariance="full" a float sigma gives sigma * I, a
    matrix is used as given and "auto" a full (not isotropic) estimate."""
    X_fit, y_fit, _ = unit_noise_digits
    d = X_fit.shape[1]
    floated = CRPGaussianClassifier(covariance="full", sigma=0.1).fit(X_fit, y_fit)
    np.testing.assert_array_equal(floated.sigma_, 0.1 * np.eye(d))
    auto = CRPGaussianClassifier(covariance="full").fit(X_fit, y_fit)
    assert auto.sigma_.shape == (d, d)
    assert np.abs(auto.sigma_ - np.diag(np.diag(auto.sigma_))).max() > 0.01
    given = CRPGaussianClassifier(covariance="full", sigma=auto.sigma_).fit(
        X_fit, y_fit)
    np.testing.assert_array_equal(given.sigma_, auto.sigma_)


def test_full_covariance_sigma_moves_novelty(unit_noise_digits):
    """Check that with covariance="full" the choice of sigma ("auto", 0.1 or
    1.0) changes P(novel) materially on features of unit within-class
    variance: sigma is worth searching."""
    X_fit, y_fit, X_query = unit_noise_digits
    p_novel = {
        str(sigma): CRPGaussianClassifier(covariance="full", sigma=sigma)
        .fit(X_fit, y_fit).predict_proba(X_query)[:, -1]
        for sigma in ("auto", 0.1, 1.0)
    }
    for first, second in [("auto", "0.1"), ("auto", "1.0"), ("0.1", "1.0")]:
        assert np.abs(p_novel[first] - p_novel[second]).max() > 0.05
