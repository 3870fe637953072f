"""Tests of the two-covariance whitener and the head on its output
(``sklearn_flowr.head._two_covariance``, ``sklearn_flowr.head._whitened``)."""

import pickle

import numpy as np
import pytest
from scipy import linalg
from sklearn.base import BaseEstimator, clone
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.utils.estimator_checks import parametrize_with_checks

import sklearn_flowr
from sklearn_flowr import CRPGaussianClassifier, WhitenedCRPClassifier
from sklearn_flowr.head import TwoCovarianceWhitener
from sklearn_flowr.head._plda import _spiked_variances, prior_variances, span_refit
from sklearn_flowr.head._two_covariance import fit_transform_with_refit


def classes_of(rng, n_classes, per_class, n_features, *, offset=3.0):
    """Gaussian classes with anisotropic noise, away from the origin."""
    means = rng.normal(scale=2.0, size=(n_classes, n_features)) + offset
    scales = rng.uniform(0.3, 1.5, size=n_features)
    y = np.repeat(np.arange(n_classes), per_class)
    return means[y] + scales * rng.normal(size=(y.shape[0], n_features)), y


def model_of(whitener):
    """What the head sees, whatever the rotation within equal ``beta``: the
    inverse noise ``A A^T`` and ``A diag(beta) A^T``, and the sorted ``beta``."""
    A, beta = whitener.scalings_, whitener.prior_var_
    return A @ A.T, (A * beta) @ A.T, np.sort(beta)


# n < d (all three), K - 1 < d < n (eigen, gram), K ~ d < n (eigen, gram).
SHAPES = [(5, 3, 40), (10, 6, 20), (18, 4, 20)]


@pytest.mark.parametrize(("n_classes", "per_class", "n_features"), SHAPES)
def test_fit_paths_agree(rng, n_classes, per_class, n_features):
    """Check that the eigen, Gram and span solvers fit the same model."""
    X, y = classes_of(rng, n_classes, per_class, n_features)
    solvers = ["eigen", "gram"] + (["span"] if X.shape[0] < n_features else [])
    models = [model_of(TwoCovarianceWhitener(solver=s).fit(X, y)) for s in solvers]
    for other in models[1:]:
        for got, expected in zip(other, models[0], strict=True):
            np.testing.assert_allclose(got, expected, rtol=1e-9,
                                       atol=1e-9 * np.abs(expected).max())


@pytest.mark.parametrize("n_features", [40, 12])
@pytest.mark.parametrize("sizes", [[1, 2, 3, 5, 4], [2, 7], [1, 1, 4, 2, 2, 3]])
def test_fit_paths_agree_on_unequal_classes(rng, sizes, n_features):
    """Check that the solvers fit the same model when classes differ in size,
    one-row classes included (the span's class means are weighted by them)."""
    y = np.repeat(np.arange(len(sizes)), sizes)
    X = classes_of(rng, len(sizes), max(sizes), n_features)[0][: y.shape[0]]
    X = rng.normal(scale=2.0, size=(len(sizes), n_features))[y] + X
    solvers = ["eigen", "gram"] + (["span"] if y.shape[0] < n_features else [])
    fitted = [TwoCovarianceWhitener(solver=s).fit(X, y) for s in solvers]
    models = [model_of(whitener) for whitener in fitted]
    for whitener, other in zip(fitted[1:], models[1:], strict=True):
        np.testing.assert_allclose(whitener.prior_mean_, fitted[0].prior_mean_,
                                   rtol=1e-12, atol=1e-14)
        for got, expected in zip(other, models[0], strict=True):
            np.testing.assert_allclose(got, expected, rtol=1e-9,
                                       atol=1e-9 * np.abs(expected).max())


@pytest.mark.parametrize("solver", ["eigen", "gram", "span"])
def test_equal_class_means_fit(solver):
    """Check that classes with the very same mean (no direction between
    them) fit with every solver: the prior at its floor, the rows whitened."""
    X, y = np.eye(10)[[0, 1, 0, 1]], np.array([0, 0, 1, 1])
    whitener = TwoCovarianceWhitener(solver=solver)
    U = whitener.fit_transform(X, y)
    floor = whitener.prior_floor / 2.0  # 1 / k_h, two rows per class
    np.testing.assert_allclose(whitener.prior_var_, floor)
    np.testing.assert_allclose(U, whitener.transform(X), atol=1e-12)
    assert np.isfinite(U).all()


@pytest.mark.parametrize(("n_classes", "per_class", "n_features"), SHAPES)
def test_heads_of_fit_paths_predict_alike(rng, n_classes, per_class, n_features):
    """Check that the head's probabilities do not depend on the solver."""
    X, y = classes_of(rng, n_classes, per_class, n_features)
    queries = classes_of(rng, n_classes + 3, 2, n_features)[0]
    solvers = ["eigen", "gram"] + (["span"] if X.shape[0] < n_features else [])
    probas = [WhitenedCRPClassifier(TwoCovarianceWhitener(solver=s)).fit(X, y)
              .predict_proba(queries) for s in solvers]
    for proba in probas[1:]:
        np.testing.assert_allclose(proba, probas[0], rtol=1e-7, atol=1e-10)


def head_scores(prior_var, U, y, U_held):
    """Joint log-probabilities of ``U_held`` under the isotropic head of a
    whitener of prior variances ``prior_var`` fitted on its rows ``U``."""
    head = CRPGaussianClassifier(
        covariance="isotropic", sigma=1.0, prior_mean=np.zeros(U.shape[1]),
        prior_var=prior_var, known_count="observed").fit(U, y)
    return head.predict_joint_log_proba(U_held)


@pytest.mark.parametrize("spectrum", ["spiked", "sample"])
@pytest.mark.parametrize("noise_shrinkage", ["dof", 0.3])
@pytest.mark.parametrize("solver", ["auto", "eigen", "gram", "span"])
def test_refits_in_the_span_are_refits_without_the_rows(rng, solver,
                                                        noise_shrinkage,
                                                        spectrum):
    """Check that a refit without some rows, computed from every row's
    coordinates in their span (fewer rows than features), is the model of a
    whitener fitted on the other rows alone: the same sorted prior
    variances, and a head on its whitened rows scores the held-out rows
    alike (its coordinates may turn among those of equal prior variance)."""
    X, y = classes_of(rng, 8, 4, 60)
    held = np.arange(32) % 5 == 1
    Z = X / np.linalg.norm(X, axis=1, keepdims=True)
    coordinates = linalg.qr((Z - Z[0]).T, mode="economic")[1].T  # any origin
    alpha = None if noise_shrinkage == "dof" else noise_shrinkage
    refit = span_refit(coordinates, y, 60, alpha, 1e-3, solver=solver,
                       spectrum=spectrum)
    prior_var, U, U_held = refit(~held, held)
    whitener = TwoCovarianceWhitener(noise_shrinkage=noise_shrinkage,
                                     prior_spectrum=spectrum).fit(
        X[~held], y[~held])
    np.testing.assert_allclose(np.sort(prior_var), np.sort(whitener.prior_var_),
                               rtol=1e-9)
    np.testing.assert_allclose(
        head_scores(prior_var, U, y[~held], U_held),
        head_scores(whitener.prior_var_, whitener.transform(X[~held]), y[~held],
                    whitener.transform(X[held])), rtol=1e-9, atol=1e-9)


def _means_eigenvalues(rng, spikes, bulk, n_classes, rows, n_features):
    """Eigenvalues of the covariance of ``n_classes`` whitened class means of
    ``rows`` rows each (unit noise), drawn from the prior ``diag(spikes,
    bulk, ..., bulk)``."""
    scales = np.full(n_features, np.sqrt(bulk))
    scales[: len(spikes)] = np.sqrt(spikes)
    means = (scales * rng.normal(size=(n_classes, n_features))
             + rng.normal(size=(n_classes, n_features)) / np.sqrt(rows))
    centred = means - means.mean(axis=0)
    return np.clip(np.linalg.eigvalsh(centred.T @ centred / (n_classes - 1)), 0, None)


def test_spiked_prior_recovers_spikes_and_bulk(rng):
    """Check that the spiked prior finds the prior of 60 class means of 3
    rows in 300 dimensions (one spike of 20 over a bulk of 0.5), where the
    sample rule puts every direction the means do not span at the floor and
    inflates the rest with their noise."""
    t = _means_eigenvalues(rng, [20.0], 0.5, 60, 3, 300)
    counts = np.full(60, 3)
    spiked = prior_variances(t, counts, 1e-3, "spiked")
    sample = prior_variances(t, counts, 1e-3, "sample")
    assert spiked.max() == pytest.approx(20.0, rel=0.4)
    assert np.median(spiked) == pytest.approx(0.5, rel=0.2)
    assert np.median(sample) < 0.05  # 241 of 300 directions at the floor
    assert sample.max() > spiked.max()


def test_spiked_prior_of_isotropic_means_is_isotropic(rng):
    """Check that means with no spike (an isotropic prior) give one prior
    variance in every direction, close to the truth."""
    t = _means_eigenvalues(rng, [], 0.8, 40, 4, 500)
    beta = prior_variances(t, np.full(40, 4), 1e-3, "spiked")
    np.testing.assert_allclose(beta, beta[0], rtol=1e-12)
    assert beta[0] == pytest.approx(0.8, rel=0.1)


@pytest.mark.parametrize("solver", ["eigen", "gram", "span"])
def test_spiked_prior_fits_means_of_few_directions(rng, solver):
    """Check that the spiked prior fits class means that span fewer
    directions than they could (dead and constant features: the rest of the
    eigenvalues zero to rounding), for every solver."""
    y = np.repeat(np.arange(40), 3)
    for _ in range(10):
        X = np.zeros((120, 20))
        X[:, :3] = rng.normal(scale=3.0, size=(40, 3))[y] + rng.normal(size=(120, 3))
        X[:, -1] = 1.0
        whitener = TwoCovarianceWhitener(prior_spectrum="spiked", solver=solver)
        assert np.isfinite(whitener.fit(X, y).prior_var_).all()


@pytest.mark.parametrize("scale", [1e-150, 1e-30, 1e30, 1e160])
def test_spiked_variances_scale_with_the_eigenvalues(scale):
    """Check that scaling the eigenvalues scales the spiked variances alike
    (no overflow or underflow in the spikes' roots)."""
    t = np.zeros(50)
    t[:29] = np.r_[40.0, 12.0, np.linspace(1.5, 0.5, 27)]
    np.testing.assert_allclose(_spiked_variances(scale * t, 29) / scale,
                               _spiked_variances(t, 29), rtol=1e-9)


def test_spiked_prior_formula():
    """Check the spiked variances by their definition: each spike's variance
    ``l`` gives its eigenvalue, ``t = l + g s l / (l - s)`` (``g = d / (K -
    1)``, ``s`` the bulk), the variances keep the trace, the spikes lie above
    the bulk's Marchenko-Pastur edge and the first other eigenvalue does
    not."""
    t = np.zeros(50)  # 30 classes: 29 eigenvalues above 0
    t[:29] = np.r_[40.0, 12.0, np.linspace(1.5, 0.5, 27)]
    counts = np.repeat([2, 3, 4, 5, 6], 6)
    noise, ratio = np.mean(1.0 / counts), 50 / 29
    variance = prior_variances(t, counts, 1e-9, "spiked") + noise
    spikes = variance != variance[-1]
    bulk = variance[-1]
    assert spikes.sum() == 2
    np.testing.assert_allclose(variance.sum(), t.sum(), rtol=1e-12)
    edge = bulk * (1 + np.sqrt(ratio)) ** 2
    assert (t[spikes] > edge).all() and t[~spikes].max() <= edge
    ell = variance[spikes]
    np.testing.assert_allclose(ell + ratio * bulk * ell / (ell - bulk), t[spikes],
                               rtol=1e-12)
    np.testing.assert_allclose(prior_variances(t, counts, 1e-9, "sample"),
                               np.maximum(t - noise, 1e-9 * (40.0 - noise)))


def test_fit_transform_with_refit(rng):
    """Check that ``fit_transform_with_refit`` fits as ``fit_transform`` with
    the span solver (rows under 3/4 of the features) and refits in that span
    (a refit without enough rows raises ValueError); with more rows it fits
    as ``fit_transform`` and gives no refit."""
    X, y = classes_of(rng, 6, 4, 40)
    whitener = TwoCovarianceWhitener()
    U, refit = fit_transform_with_refit(whitener, X, y)
    assert whitener.solver_ == "span"
    np.testing.assert_allclose(
        U, TwoCovarianceWhitener(solver="span").fit_transform(X, y), rtol=1e-12,
        atol=1e-12)
    held = y == 0
    prior_var, U_train, U_held = refit(~held, held)
    assert U_train.shape == (20, 40) and U_held.shape == (4, 40)
    assert prior_var.shape == (40,)
    with pytest.raises(ValueError, match="at least two classes"):
        refit(y == 1, y != 1)
    for per_class in (6, 8):  # 36 rows (3/4 of 40 and more), 48 (more than d)
        X, y = classes_of(rng, 6, per_class, 40)
        U, refit = fit_transform_with_refit(whitener, X, y)
        assert refit is None
        np.testing.assert_allclose(U, clone(whitener).fit_transform(X, y),
                                   rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(("n_classes", "per_class", "n_features"),
                         [*SHAPES, (6, 2, 40), (7, 5, 36)])
def test_fit_transform_equals_fit_then_transform(rng, n_classes, per_class,
                                                  n_features):
    """Check that ``fit_transform`` (the span's without a second pass: its
    fit has the rows' coordinates) gives the rows ``fit`` then ``transform``
    give, with every solver, unequal class sizes included."""
    X, y = classes_of(rng, n_classes, per_class, n_features)
    X, y = X[1:], y[1:]  # the first class one row short
    solvers = ["eigen", "gram"] + (["span"] if X.shape[0] < n_features else [])
    for solver in solvers:
        whitener = TwoCovarianceWhitener(solver=solver)
        U = whitener.fit_transform(X, y)
        expected = TwoCovarianceWhitener(solver=solver).fit(X, y).transform(X)
        np.testing.assert_allclose(U, expected, rtol=0,
                                   atol=1e-12 * np.abs(expected).max())
        np.testing.assert_allclose(whitener.transform(X[:3]), expected[:3], rtol=0,
                                   atol=1e-12 * np.abs(expected).max())


class _FitThenTransform(BaseEstimator):
    """A whitener with ``fit`` and ``transform`` only (no ``fit_transform``)."""

    def fit(self, X, y):
        self.inner_ = TwoCovarianceWhitener().fit(X, y)
        self.prior_var_ = self.inner_.prior_var_
        return self

    def transform(self, X):
        return self.inner_.transform(X)


def test_whitener_without_fit_transform(rng):
    """Check that WhitenedCRPClassifier takes a whitener with ``fit`` and
    ``transform`` only, as Pipeline does, and predicts as with the default."""
    X, y = classes_of(rng, 6, 4, 12)
    queries = classes_of(rng, 8, 2, 12)[0]
    expected = WhitenedCRPClassifier().fit(X, y).predict_proba(queries)
    got = WhitenedCRPClassifier(_FitThenTransform()).fit(X, y).predict_proba(queries)
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12)


def test_auto_solver_picks_by_shape(rng):
    """Check that "auto" takes the span when n << d, the Gram matrix when
    K << d < n, and the eigen-decomposition when K ~ d."""
    picks = [TwoCovarianceWhitener().fit(*classes_of(rng, *shape)).solver_
             for shape in [(3, 3, 60), (4, 20, 40), (30, 4, 20)]]
    assert picks == ["span", "gram", "eigen"]


def test_auto_solver_at_1280_features(rng):
    """Check "auto" at a pretrained network's width, as the solvers' timings of
    fit and the rows' transform by shape put them: the span for 500 rows of 100
    classes (its fit gives the rows' coordinates), the Gram matrix for 816 rows
    of 272 classes, the eigen solver for 3000 rows of 1000 classes (there the
    Gram's factored map costs more to apply to the rows than its fit saves;
    counting the fit alone would take the Gram solver)."""
    picks = [TwoCovarianceWhitener().fit(*classes_of(rng, *shape)).solver_
             for shape in [(100, 5, 1280), (272, 3, 1280), (1000, 3, 1280)]]
    assert picks == ["span", "gram", "eigen"]


def test_formula_matches_direct_numpy(rng):
    """Check the noise, prior and map against a direct computation of the
    formulas: W = (1-a) S + a nu I, T of the whitened means, beta, A."""
    X, y = classes_of(rng, 6, 4, 8)
    whitener = TwoCovarianceWhitener(solver="eigen", prior_spectrum="sample").fit(X, y)
    Z = X / np.linalg.norm(X, axis=1, keepdims=True)
    means = np.array([Z[y == c].mean(axis=0) for c in range(6)])
    residual = Z - means[y]
    S = residual.T @ residual / (24 - 6)
    a = 8 / (8 + 18)
    W = (1 - a) * S + a * np.trace(S) / 8 * np.eye(8)
    L = np.linalg.cholesky(W)
    M = np.linalg.solve(L, (means - means.mean(axis=0)).T)
    t, U = np.linalg.eigh(M @ M.T / 5)
    beta = t - 1 / 4.0
    beta = np.maximum(beta, 1e-3 * beta.max())
    np.testing.assert_allclose(whitener.prior_var_, beta, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(whitener.noise_shrinkage_, a)
    # A = L^-T U, up to rotations within equal beta (T has rank K - 1 = 5):
    # compare A^T W A = I and A diag(beta) A^T.
    A, direct = whitener.scalings_, linalg.solve_triangular(L.T, U)
    np.testing.assert_allclose(A.T @ W @ A, np.eye(8), atol=1e-9)
    np.testing.assert_allclose((A * beta) @ A.T, (direct * beta) @ direct.T,
                               rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(whitener.transform(X[:3]),
                               (Z[:3] - means.mean(axis=0)) @ A, rtol=1e-12)


@pytest.mark.parametrize(("n_classes", "per_class", "n_features", "alpha"), [
    (6, 4, 8, 8 / 26), (6, 4, 30, 0.5), (5, 5, 1280, 0.5)])
def test_dof_rule_never_weighs_the_target_above_the_rows(
        rng, n_classes, per_class, n_features, alpha):
    """Check that "dof" gives d / (d + n - K) when the within-class degrees of
    freedom n - K reach d, and 1/2 when they are fewer, for every solver."""
    X, y = classes_of(rng, n_classes, per_class, n_features)
    for solver in ("eigen", "gram", "span"):
        whitener = TwoCovarianceWhitener(solver=solver).fit(X, y)
        assert whitener.noise_shrinkage_ == pytest.approx(alpha, rel=1e-12)


def test_whitened_rows_have_unit_noise(rng):
    """Check that with noise_shrinkage=0 the pooled within-class covariance of
    the output is the identity (the model's noise)."""
    X, y = classes_of(rng, 5, 30, 6)
    U = TwoCovarianceWhitener(noise_shrinkage=0.0).fit(X, y).transform(X)
    residual = U - np.array([U[y == c].mean(axis=0) for c in range(5)])[y]
    np.testing.assert_allclose(residual.T @ residual / (150 - 5), np.eye(6),
                               atol=1e-9)


def test_scaling_rows_changes_nothing(rng):
    """Check that rescaling X, as a whole or row by row, leaves the whitener
    and the head's probabilities unchanged (rows are L2-normalised)."""
    X, y = classes_of(rng, 6, 3, 10)
    queries = classes_of(rng, 8, 2, 10)[0]
    row_scale = rng.uniform(0.01, 100.0, size=(X.shape[0], 1))
    base = WhitenedCRPClassifier().fit(X, y)
    scaled = WhitenedCRPClassifier().fit(1e6 * X * row_scale, y)
    np.testing.assert_allclose(scaled.predict_proba(1e-3 * queries),
                               base.predict_proba(queries), rtol=1e-7, atol=1e-12)


def test_online_equals_batch(rng):
    """Check that fit on part of the rows then partial_fit and open_world_step
    of the rest (more rows of known classes, and two new classes) equals fit
    on all rows (the whitener fitted on the first part in both,
    known_count="observed")."""
    X, y = classes_of(rng, 8, 4, 12)
    queries = classes_of(rng, 10, 2, 12)[0]
    first = np.tile([True, True, False, False], 8) & (y < 6)
    whitener = TwoCovarianceWhitener().fit(X[first], y[first])
    online = WhitenedCRPClassifier(whitener).fit(X[first], y[first])
    stepped = clone(online).fit(X[first], y[first])
    online.partial_fit(X[~first], y[~first])
    stepped.open_world_step(X[~first], y[~first])
    head = CRPGaussianClassifier(
        covariance="isotropic", sigma=1.0, prior_mean=np.zeros(12),
        prior_var=online.whitener_.prior_var_,
        b=online.head_.b_, known_count="observed")
    batch = head.fit(online.whitener_.transform(X), y)
    expected = batch.predict_proba(online.whitener_.transform(queries))
    for model in (online, stepped):
        np.testing.assert_allclose(model.predict_proba(queries), expected,
                                   rtol=1e-9, atol=1e-12)


def test_new_class_online_gets_the_crp_novel_mass(rng):
    """Check that P(novel) comes from the CRP prior: a new class learned
    online from one row takes the place the novel class held."""
    X, y = classes_of(rng, 5, 3, 9)
    far = rng.normal(size=(1, 9)) - 5.0
    clf = WhitenedCRPClassifier().fit(X, y)
    assert clf.predict(far)[0] == clf.novel_label_
    out = clf.open_world_step(np.vstack([far, far * 1.01]), [7, 7])
    assert out.is_novel.tolist() == [True, False]
    assert out.y_pred[1] == 7 and 7 in clf.classes_


@pytest.mark.parametrize(("X", "y", "match"), [
    ([[0.0, 0.0], [1.0, 2.0], [2.0, 1.0], [1.0, 1.0]], [0, 0, 1, 1], "all zeros"),
    ([[1.0, 0.0], [1.0, 2.0], [2.0, 1.0]], [0, 1, 2], "two rows"),
    ([[1.0, 0.0], [1.0, 2.0], [2.0, 1.0]], [0, 0, 0], "two classes"),
    ([[1.0, np.nan], [1.0, 2.0], [2.0, 1.0], [1.0, 1.0]], [0, 0, 1, 1], "NaN"),
    ([[1.0, 0.0], [2.0, 0.0], [0.0, 1.0], [0.0, 3.0]], [0, 0, 1, 1], "identical"),
    ([[1.0], [2.0], [-1.0], [-3.0]], [0, 0, 1, 1], "two features"),
])
def test_bad_fit_input_raises(X, y, match):
    """Check that bad rows or labels raise a clear ValueError."""
    with pytest.raises(ValueError, match=match):
        TwoCovarianceWhitener().fit(X, y)


def test_bad_parameters_raise():
    """Check the parameter constraints and the singular noise without
    shrinkage."""
    X, y = np.eye(4) + 1.0, [0, 0, 1, 1]
    with pytest.raises(ValueError, match="noise_shrinkage"):
        TwoCovarianceWhitener(noise_shrinkage=1.5).fit(X, y)
    with pytest.raises(ValueError, match="singular"):
        TwoCovarianceWhitener(noise_shrinkage=0.0).fit(X, y)


def test_head_parameters_set_by_the_whitener_are_refused(rng):
    """Check that a head with its own sigma, prior or full covariance is
    refused before anything is fitted."""
    X, y = classes_of(rng, 3, 3, 4)
    for head in (CRPGaussianClassifier(sigma=0.5),
                 CRPGaussianClassifier(covariance="full")):
        clf = WhitenedCRPClassifier(head=head)
        with pytest.raises(ValueError, match="leave them 'auto'"):
            clf.fit(X, y)
        assert not hasattr(clf, "head_")


def test_parts_that_do_not_fit_the_model_are_refused(rng):
    """Check that a head other than the CRP head, or a whitener without a
    prior, is refused with a clear error."""
    from sklearn.decomposition import PCA

    from sklearn_flowr.baselines import NCMClassifier

    X, y = classes_of(rng, 3, 3, 4)
    with pytest.raises(ValueError, match="is a CRPGaussianClassifier"):
        WhitenedCRPClassifier(head=NCMClassifier()).fit(X, y)
    with pytest.raises(ValueError, match="must set prior_var_"):
        WhitenedCRPClassifier(whitener=PCA(2)).fit(X, y)


def test_bad_rows_online_leave_the_model_unchanged(rng):
    """Check that a zero row or a wrong width in partial_fit raises before
    the head changes, and that an unfitted model refuses a stream."""
    X, y = classes_of(rng, 4, 3, 5)
    clf = WhitenedCRPClassifier().fit(X, y)
    before = clf.predict_proba(X)
    with pytest.raises(ValueError, match="all zeros"):
        clf.partial_fit(np.vstack([X[:1], np.zeros((1, 5))]), [0, 9])
    with pytest.raises(ValueError, match="features"):
        clf.open_world_step(X[:, :4], y)
    np.testing.assert_array_equal(clf.predict_proba(X), before)
    with pytest.raises(NotFittedError, match="fit on labelled rows"):
        WhitenedCRPClassifier().open_world_step(X, y)


@pytest.mark.parametrize("solver", ["eigen", "gram", "span"])
def test_clone_pickle_and_save_round_trip(rng, tmp_path, solver):
    """Check that a fitted model pickles and saves (trusted types) and keeps
    learning after loading, whatever the solver's state."""
    X, y = classes_of(rng, 4, 3, 16)
    clf = WhitenedCRPClassifier(TwoCovarianceWhitener(solver=solver)).fit(X, y)
    assert clone(clf).get_params()["whitener"].solver == solver
    sklearn_flowr.save(clf, tmp_path / "model.skops")
    for loaded in (pickle.loads(pickle.dumps(clf)),
                   sklearn_flowr.load(tmp_path / "model.skops")):
        np.testing.assert_array_equal(loaded.predict_proba(X), clf.predict_proba(X))
        loaded.partial_fit(X[:1] + 0.1, [11])
        assert 11 in loaded.classes_


def test_grid_search_and_cross_val_score_with_defaults(rng):
    """Check that the composed model works in GridSearchCV (nested
    parameters) and cross_val_score with default arguments."""
    X, y = classes_of(rng, 4, 10, 6)
    scores = cross_val_score(WhitenedCRPClassifier(), X, y)
    assert scores.shape == (5,) and np.all(scores > 0.5)
    search = GridSearchCV(
        WhitenedCRPClassifier(TwoCovarianceWhitener(), CRPGaussianClassifier(
            known_count="observed")),
        {"whitener__noise_shrinkage": ["dof", 0.3], "head__a": [0.0, 0.5]}).fit(X, y)
    assert set(search.best_params_) == {"whitener__noise_shrinkage", "head__a"}
    # The default parts' parameters, reached as GridSearchCV reaches them.
    search = GridSearchCV(WhitenedCRPClassifier(), {
        "whitener__prior_spectrum": ["sample", "spiked"], "head__a": [0.5]},
        cv=3).fit(X, y)
    assert search.best_estimator_.whitener_.prior_spectrum in ("sample", "spiked")
    default = WhitenedCRPClassifier()
    assert default.get_params()["whitener__prior_spectrum"] == "sample"
    assert default.set_params(whitener__solver="gram").whitener.solver == "gram"


ZERO_ROWS = (
    "the check's integer data has rows of zeros, which have no direction to "
    "scale to unit length: refused with a ValueError by design.")


@parametrize_with_checks(
    [TwoCovarianceWhitener(), WhitenedCRPClassifier()],
    expected_failed_checks=lambda est: {
        "check_estimators_dtypes": ZERO_ROWS,
        **({"check_classifiers_train": (
            "predict_proba has n_classes + 1 columns: the last is the novel "
            "class (open-world contract).")}
           if isinstance(est, WhitenedCRPClassifier) else {}),
    },
)
def test_sklearn_compatible(estimator, check):
    """Check scikit-learn's estimator contract."""
    check(estimator)


def test_novelty_calibration_wraps_it(rng):
    """Check that the package's novelty calibration takes the composed model
    (its fit, partial_fit and open_world_step)."""
    from sklearn_flowr.calibration import NoveltyCalibratedClassifier

    X, y = classes_of(rng, 9, 6, 8)
    clf = NoveltyCalibratedClassifier(WhitenedCRPClassifier(), cv=3,
                                      random_state=0).fit(X, y)
    assert clf.slope_ > 0
    p_novel = clf.predict_novelty_proba(classes_of(rng, 2, 1, 8)[0] - 9.0)
    assert p_novel.shape == (2,) and np.all((p_novel >= 0) & (p_novel <= 1))


def test_transform_fast_path_equals_the_checked_one(rng):
    """Check that a float64 array (no scikit-learn checks) transforms exactly as
    a list or float32 rows (checked), and that NaN or a wrong width still fail."""
    X, y = classes_of(rng, 4, 3, 6)
    whitener = TwoCovarianceWhitener().fit(X, y)
    expected = whitener.transform(X.tolist())
    np.testing.assert_array_equal(whitener.transform(X), expected)
    np.testing.assert_array_equal(whitener.transform(X[:1]),
                                  whitener.transform(X[:1].tolist()))
    with pytest.raises(ValueError, match="NaN"):
        whitener.transform(np.where(np.eye(12, 6) > 0, np.nan, X))
    with pytest.raises(ValueError, match="features"):
        whitener.transform(X[:, :5])


@pytest.mark.parametrize("solver", ["eigen", "gram"])
def test_fit_holds_one_residual_matrix_beside_the_unit_rows(rng, solver):
    """Check that fit's peak allocation stays within 2.5 times the rows' size
    (the unit rows, the residuals computed in place of the class means'
    rows, then the d x d factors): a second copy of the residuals would make
    it 3.1."""
    import tracemalloc

    y = np.repeat(np.arange(100), 40)
    X = rng.normal(size=(100, 64))[y] + rng.normal(size=(4000, 64))
    tracemalloc.start()
    try:
        TwoCovarianceWhitener(solver=solver).fit(X, y)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= 2.5 * X.nbytes, peak / X.nbytes


def test_span_map_saved_as_one_product_still_transforms(rng, tmp_path):
    """Check that a span whitener whose map inside the span is one n x n
    matrix (the layout earlier versions saved) transforms as the factored
    map does, and survives saving."""
    from sklearn_flowr.head._plda import _reflect
    from sklearn_flowr.saving import load, save

    X, y = classes_of(rng, 6, 4, 40)
    whitener = TwoCovarianceWhitener(solver="span").fit(X, y)
    queries = rng.normal(size=(5, 40)) + 3.0
    expected = whitener.transform(queries)
    chol, rotation = whitener._scalings[2]
    n = chol.shape[0]
    dense = linalg.solve_triangular(chol.T, _reflect(rotation, np.eye(n)), lower=False)
    old = clone(whitener)
    vars(old).update(vars(whitener))
    old._scalings = (*whitener._scalings[:2], dense, whitener._scalings[3])
    np.testing.assert_allclose(old.transform(queries), expected, rtol=1e-10,
                               atol=1e-12)
    np.testing.assert_allclose(old.transform(queries[:1]), expected[:1],
                               rtol=1e-10, atol=1e-12)
    save(old, tmp_path / "old.skops")
    np.testing.assert_array_equal(load(tmp_path / "old.skops").transform(queries),
                                  old.transform(queries))


@pytest.mark.parametrize("solver", ["span", "gram", "eigen"])
def test_a_failed_refit_leaves_the_whitener_as_it_was(rng, monkeypatch, solver):
    """Check that an interrupt after the estimates (while the attributes are
    set) and a refused refit of another width leave the fitted whitener's
    attributes and transform exactly as before."""
    import sklearn_flowr.head._two_covariance as module

    y = np.repeat(np.arange(8), 3)
    centres = rng.normal(size=(12, 40))
    X = centres[y] + 0.5 * rng.normal(size=(24, 40))
    other = centres[y + 4] + 0.5 * rng.normal(size=(24, 40))
    queries = rng.normal(size=(3, 40))
    whitener = TwoCovarianceWhitener(solver=solver).fit(X, y)
    before, attributes = whitener.transform(queries), dict(vars(whitener))

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as patched:
        patched.setattr(module, "prior_variances", interrupt)
        with pytest.raises(KeyboardInterrupt):
            whitener.fit(other, y)
    with pytest.raises(ValueError, match="all zeros"):
        whitener.fit(np.zeros((24, 30)), y)
    assert vars(whitener).keys() == attributes.keys()
    assert all(vars(whitener)[name] is value for name, value in attributes.items())
    np.testing.assert_array_equal(whitener.transform(queries), before)
