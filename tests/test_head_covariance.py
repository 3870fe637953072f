"""Tests of the head's full-covariance model, ``covariance="full"``."""

import copy
import pickle

import numpy as np
import pytest
from scipy.special import logsumexp
from scipy.stats import multivariate_normal
from sklearn.covariance import ledoit_wolf_shrinkage

from sklearn_flowr import CRPGaussianClassifier
from sklearn_flowr._core._covariance import whitening_basis


@pytest.fixture
def anisotropic(rng):
    """Six classes in 4-d whose within-class scatter lies mostly along one
    oblique direction, 12 rows each."""
    mixing = rng.normal(size=(4, 4))
    noise = np.diag([3.0, 0.5, 0.1, 0.05])
    centres = rng.normal(scale=3.0, size=(6, 4))
    y = np.repeat(np.arange(6), 12)
    X = centres[y] + rng.normal(size=(72, 4)) @ noise @ mixing
    return X, y


def given_full(rng, d=4):
    """A full class-noise covariance and prior covariance, given."""
    A, B = rng.normal(size=(d, d)), rng.normal(size=(d, d))
    return dict(sigma=A @ A.T / d + 0.2 * np.eye(d),
                prior_var=3.0 * B @ B.T / d + np.eye(d),
                prior_mean=rng.normal(size=d), b=1.3, covariance="full")


def textbook_joint(X_train, y_train, X, *, a, b, sigma, mu0, s0):
    """log p(x, n) of the known classes and the novel class from the conjugate
    formulas with full covariances, independently of the package."""
    labels = np.unique(y_train)
    counts = np.array([np.sum(y_train == label) for label in labels], float)
    k = counts.sum()
    sigma_inv, s0_inv = np.linalg.inv(sigma), np.linalg.inv(s0)
    log_joint = []
    for label, c in zip(labels, counts, strict=True):
        rows = X_train[y_train == label]
        post_cov = np.linalg.inv(s0_inv + rows.shape[0] * sigma_inv)
        post_mean = post_cov @ (s0_inv @ mu0 + sigma_inv @ rows.sum(0))
        pred = multivariate_normal(post_mean, post_cov + sigma)
        log_joint.append(pred.logpdf(X) + np.log((c - a) / (k + b)))
    novel = multivariate_normal(mu0, s0 + sigma)
    log_joint.append(novel.logpdf(X) + np.log((b + a * len(labels)) / (k + b)))
    return np.stack(log_joint, axis=1)


def test_whitening_basis_whitens_noise_and_diagonalises_prior(rng):
    """Check T.T W T = I and T.T S0 T diagonal, with T_inv the inverse."""
    params = given_full(rng, d=5)
    T, s0, T_inv = whitening_basis(params["sigma"], params["prior_var"])
    np.testing.assert_allclose(T.T @ params["sigma"] @ T, np.eye(5), atol=1e-12)
    np.testing.assert_allclose(T.T @ params["prior_var"] @ T, np.diag(s0),
                               atol=1e-12)
    np.testing.assert_allclose(T_inv @ T, np.eye(5), atol=1e-12)


def test_joint_log_proba_matches_textbook_full_covariance(anisotropic, rng):
    """Check log p(x, n) against scipy's multivariate normal with the full
    posterior covariances, computed without the change of basis."""
    X, y = anisotropic
    params = given_full(rng)
    clf = CRPGaussianClassifier(known_count="observed", **params).fit(X, y)
    X_query = X[::5] + rng.normal(size=(15, 4))
    expected = textbook_joint(X, y, X_query, a=0.5, b=1.3, sigma=params["sigma"],
                              mu0=params["prior_mean"], s0=params["prior_var"])
    np.testing.assert_allclose(clf.predict_joint_log_proba(X_query), expected,
                               rtol=1e-9)
    np.testing.assert_allclose(
        clf.predict_proba(X_query),
        np.exp(expected - logsumexp(expected, axis=1, keepdims=True)), atol=1e-12)


def test_class_mean_and_var_are_in_the_original_basis(anisotropic, rng):
    """Check class_mean_ and class_var_ equal the textbook posterior mean and
    the diagonal of the posterior covariance."""
    X, y = anisotropic
    params = given_full(rng)
    clf = CRPGaussianClassifier(**params).fit(X, y)
    sigma_inv = np.linalg.inv(params["sigma"])
    s0_inv = np.linalg.inv(params["prior_var"])
    for n, label in enumerate(clf.classes_):
        rows = X[y == label]
        post_cov = np.linalg.inv(s0_inv + rows.shape[0] * sigma_inv)
        post_mean = post_cov @ (s0_inv @ params["prior_mean"]
                                + sigma_inv @ rows.sum(0))
        np.testing.assert_allclose(clf.class_mean_[n], post_mean, rtol=1e-9)
        np.testing.assert_allclose(clf.class_var_[n], np.diag(post_cov), rtol=1e-9)


def test_isotropic_matrices_equal_the_isotropic_head(anisotropic):
    """Check that covariance="full" with sigma * I and s0 * I gives the paper's
    isotropic head."""
    X, y = anisotropic
    given = dict(prior_mean=0.5, prior_var=4.0, b=1.3, sigma=0.7)
    iso = CRPGaussianClassifier(covariance="isotropic", **given).fit(X, y)
    full = CRPGaussianClassifier(covariance="full", **given).fit(X, y)
    np.testing.assert_allclose(full.predict_joint_log_proba(X),
                               iso.predict_joint_log_proba(X), rtol=1e-10)
    np.testing.assert_allclose(full.class_mean_, iso.class_mean_, rtol=1e-10)
    np.testing.assert_allclose(full.class_var_, iso.class_var_, rtol=1e-10)


def test_auto_sigma_is_shrunk_pooled_within_class_covariance(anisotropic):
    """Check sigma_="auto" against the pooled within-class covariance and
    scikit-learn's Ledoit-Wolf shrinkage, and prior_var_ against the shrunk
    covariance of the class means."""
    X, y = anisotropic
    clf = CRPGaussianClassifier(covariance="full").fit(X, y)
    means = np.array([X[y == k].mean(0) for k in range(6)])
    residual = X - means[y]
    pooled = residual.T @ residual / (72 - 6)
    rho = ledoit_wolf_shrinkage(residual, assume_centered=True)
    expected = (1 - rho) * pooled + rho * np.trace(pooled) / 4 * np.eye(4)
    np.testing.assert_allclose(clf.sigma_, expected, rtol=1e-10)
    centred = means - means.mean(0)
    spread = centred.T @ centred / 6
    rho = ledoit_wolf_shrinkage(centred, assume_centered=True)
    np.testing.assert_allclose(
        clf.prior_var_,
        (1 - rho) * spread + rho * np.trace(spread) / 4 * np.eye(4), rtol=1e-10)
    np.testing.assert_allclose(clf.prior_mean_, means.mean(0))


@pytest.mark.parametrize("amount", [0.0, 0.3, 1.0])
def test_noise_shrinkage_moves_auto_sigma_towards_its_mean_eigenvalue(
        anisotropic, amount):
    """Check noise_shrinkage against the Ledoit-Wolf estimate mixed with
    mean(eig) * I by hand: the trace is kept, 1.0 is isotropic noise of the
    same mean variance, and the prior is untouched."""
    X, y = anisotropic
    plain = CRPGaussianClassifier(covariance="full").fit(X, y)
    clf = CRPGaussianClassifier(covariance="full", noise_shrinkage=amount).fit(X, y)
    W = plain.sigma_
    expected = (1 - amount) * W + amount * np.trace(W) / 4 * np.eye(4)
    np.testing.assert_allclose(clf.sigma_, expected, rtol=1e-10)
    assert np.trace(clf.sigma_) == pytest.approx(np.trace(W))
    np.testing.assert_allclose(clf.prior_var_, plain.prior_var_)
    if amount == 1.0:
        eig = np.linalg.eigvalsh(clf.sigma_)
        np.testing.assert_allclose(eig, eig.mean())


def test_noise_shrinkage_leaves_given_and_isotropic_noise_alone(anisotropic, rng):
    """Check a given sigma and the isotropic head ignore noise_shrinkage."""
    X, y = anisotropic
    given = given_full(rng)
    np.testing.assert_array_equal(
        CRPGaussianClassifier(**given, noise_shrinkage=0.5).fit(X, y).sigma_,
        CRPGaussianClassifier(**given).fit(X, y).sigma_)
    assert (CRPGaussianClassifier(noise_shrinkage=0.5).fit(X, y).sigma_
            == CRPGaussianClassifier().fit(X, y).sigma_)


@pytest.mark.parametrize("amount", [-0.1, 1.5, "dof"])
def test_bad_noise_shrinkage_raises_before_fitting(anisotropic, amount):
    X, y = anisotropic
    clf = CRPGaussianClassifier(covariance="full", noise_shrinkage=amount)
    with pytest.raises(ValueError, match="noise_shrinkage"):
        clf.fit(X, y)
    assert not hasattr(clf, "n_features_in_")


@pytest.mark.parametrize("class_prior", ["crp", "uniform"])
def test_open_world_step_equals_row_loop_full(anisotropic, rng, class_prior):
    """Check open_world_step equals predict_proba then partial_fit per row."""
    X, y = anisotropic
    clf = CRPGaussianClassifier(covariance="full", class_prior=class_prior)
    clf.fit(X[y < 3], y[y < 3])
    X_new = rng.normal(scale=3.0, size=(30, 4))
    y_new = rng.integers(0, 8, size=30)
    loop = copy.deepcopy(clf)
    p_novel = []
    for row, label in zip(X_new, y_new, strict=True):
        p_novel.append(loop.predict_proba(row[None])[0, -1])
        loop.partial_fit(row[None], [label])
    out = clf.open_world_step(X_new, y_new)
    np.testing.assert_allclose(out.p_novel, p_novel, rtol=1e-9, atol=1e-15)
    np.testing.assert_array_equal(clf.classes_, loop.classes_)
    np.testing.assert_allclose(clf.class_mean_, loop.class_mean_, rtol=1e-10)


def test_chunked_partial_fit_equals_fit_full(anisotropic, rng):
    """Check that partial_fit in chunks equals fit on the union."""
    X, y = anisotropic
    params = given_full(rng)
    whole = CRPGaussianClassifier(known_count="observed", **params).fit(X, y)
    chunked = CRPGaussianClassifier(**params)
    for rows in np.array_split(rng.permutation(72), 5):
        chunked.partial_fit(X[rows], y[rows])
    order = np.argsort(chunked.classes_)
    np.testing.assert_allclose(chunked.class_mean_[order], whole.class_mean_,
                               rtol=1e-10)
    np.testing.assert_allclose(chunked.predict_proba(X)[:, np.r_[order, 6]],
                               whole.predict_proba(X), rtol=1e-9, atol=1e-14)


def test_failed_partial_fit_leaves_full_head_unchanged(anisotropic):
    """Check a bad batch raises before any state changes."""
    X, y = anisotropic
    clf = CRPGaussianClassifier(covariance="full").fit(X, y)
    before = pickle.dumps(clf)
    bad = X[:3].copy()
    bad[1, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        clf.partial_fit(bad, y[:3])
    with pytest.raises(ValueError, match="features"):
        clf.open_world_step(X[:3, :2], y[:3])
    assert pickle.dumps(clf) == before


def test_pickle_round_trip_full(anisotropic):
    """Check a pickled full-covariance head predicts the same."""
    X, y = anisotropic
    clf = CRPGaussianClassifier(covariance="full").fit(X, y)
    clone = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(clone.predict_proba(X), clf.predict_proba(X))


@pytest.mark.parametrize(
    "params, message",
    [
        (dict(covariance="diagonal"), "'covariance' parameter"),
        (dict(sigma=np.eye(4)), "covariance='full'"),
        (dict(prior_var=np.eye(4)), r"prior_var must be a float or an array of "
                                    r"shape \(4,\)"),
        (dict(covariance="full", sigma=np.eye(3)), r"shape \(4, 4\)"),
        (dict(covariance="full", sigma=np.diag([1.0, 1.0, 1.0, -1.0])),
         "positive definite"),
        (dict(covariance="full", prior_var=np.triu(np.ones((4, 4)))),
         "symmetric"),
        (dict(covariance="full", sigma=np.full((4, 4), np.nan)), "finite"),
    ],
)
def test_bad_covariances_raise(anisotropic, params, message):
    """Check each bad covariance is named in a clear error and fit changes
    nothing."""
    X, y = anisotropic
    clf = CRPGaussianClassifier(**params)
    with pytest.raises(ValueError, match=message):
        clf.fit(X, y)
    assert not hasattr(clf, "n_features_in_")


def test_full_covariance_needs_within_class_scatter():
    """Check sigma="auto" with one row per class names the problem."""
    with pytest.raises(ValueError, match="at least 2 samples"):
        CRPGaussianClassifier(covariance="full").fit([[0.0, 1.0], [2.0, 3.0]],
                                                     [0, 1])


def test_fit_class_embeddings_rejects_full_covariance():
    """Check fit_class_embeddings says it supports isotropic variances only."""
    clf = CRPGaussianClassifier(covariance="full", b=1.0, sigma=0.5)
    with pytest.raises(ValueError, match="does not support covariance='full'"):
        clf.fit_class_embeddings(["a", "b"], [[0.0, 0.0], [3.0, 3.0]], [0.1, 0.1])


def test_full_covariance_ranks_novelty_on_anisotropic_classes(rng):
    """Check that on classes with strongly anisotropic scatter the full
    covariance ranks first sightings above the isotropic head (AUROC)."""
    from sklearn.metrics import roc_auc_score

    d = 6
    mixing = np.linalg.qr(rng.normal(size=(d, d)))[0]
    scales = np.array([4.0, 2.0, 0.2, 0.2, 0.2, 0.2])
    centres = rng.normal(scale=2.0, size=(80, d))
    y = np.repeat(np.arange(80), 10)
    X = centres[y] + (rng.normal(size=(800, d)) * scales) @ mixing
    train = y < 40
    scores = {}
    for covariance in ("isotropic", "full"):
        fitted = CRPGaussianClassifier(covariance=covariance).fit(X[train], y[train])
        head = CRPGaussianClassifier(
            covariance=covariance, prior_mean=fitted.prior_mean_,
            prior_var=fitted.prior_var_, b=fitted.b_, sigma=fitted.sigma_)
        stream = rng.permutation(np.flatnonzero(~train))
        out = head.open_world_step(X[stream], y[stream])
        scores[covariance] = roc_auc_score(out.is_novel, out.p_novel)
    assert scores["full"] > scores["isotropic"] + 0.05
