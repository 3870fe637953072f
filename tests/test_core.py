"""Tests of the array-API maths in ``sklearn_flowr._core``."""

import itertools

import numpy as np
import pytest
import torch
from numpy.testing import assert_allclose, assert_array_equal
from scipy.special import logsumexp as scipy_logsumexp
from scipy.stats import multivariate_normal
from sklearn.covariance import shrunk_covariance

from sklearn_flowr import CRPGaussianClassifier
from sklearn_flowr._core import (
    add_observations,
    concentration_from_raw,
    condition_on,
    crp_log_prior,
    estimate_prior,
    log_density_coef,
    log_density_features,
    log_softmax,
    logsumexp,
    moments_of_rows,
    raw_from_concentration,
    resolve_hyper_parameters,
    softmax_rows_inplace,
)
from sklearn_flowr._core._empirical_bayes import (
    estimate_concentration,
    noise_var_of,
    pitman_yor_log_likelihood,
)


def estimate_noise_var(X, y_index, n_classes):
    """The head's estimate of sigma from rows ``X`` of classes ``y_index``."""
    return noise_var_of(moments_of_rows(X, y_index, n_classes))


@pytest.mark.parametrize("fourth, pooled", [(False, False), (True, True),
                                            (True, False)])
def test_moments_of_selected_rows_equal_those_of_their_copy(rng, fourth, pooled):
    """Check that the moments of the rows ``rows`` names, read a chunk at a
    time (past one chunk of rows), equal those of their copy exactly."""
    X = rng.normal(size=(3000, 100))
    rows = np.sort(rng.permutation(3000)[:2200])
    y_index = rng.integers(0, 40, size=2200)
    got = moments_of_rows(X, y_index, 40, fourth=fourth, pooled=pooled, rows=rows)
    want = moments_of_rows(X[rows], y_index, 40, fourth=fourth, pooled=pooled)
    assert got.keys() == want.keys()
    for key in want:
        np.testing.assert_array_equal(got[key], want[key], err_msg=key)


@pytest.mark.parametrize("a, b", [(0.0, 1.0), (0.5, 0.3), (0.9, -0.5), (0.2, 7.0)])
def test_crp_prior_normalises(a, b):
    """Check that the known and novel masses of the Pitman-Yor prior sum to one."""
    counts = np.array([1.0, 3.0, 2.5, 7.0])
    log_known, log_novel = crp_log_prior(counts, counts.sum(), 4, a=a, b=b)
    assert np.exp(log_known).sum() + np.exp(log_novel) == pytest.approx(1.0)


def test_crp_prior_matches_pitman_yor_formula():
    """Check the masses against (c_n - a)/(k + b) and (b + a N)/(k + b)."""
    a, b = 0.5, 1.5
    counts = np.array([2.0, 5.0])
    log_known, log_novel = crp_log_prior(counts, 7.0, 2, a=a, b=b)
    np.testing.assert_allclose(np.exp(log_known), (counts - a) / (7 + b))
    assert np.exp(log_novel) == pytest.approx((b + a * 2) / (7 + b))


def test_crp_prior_empty_gives_novel_all_mass():
    """Check that with no class instantiated the novel class has probability 1."""
    _, log_novel = crp_log_prior(np.zeros(0), 0.0, 0, a=0.5, b=-0.2)
    assert log_novel == 0.0


def test_uniform_class_prior():
    """Check that the uniform ablation gives every column mass 1/(N+1)."""
    log_known, log_novel = crp_log_prior(
        np.array([1.0, 9.0, 3.0]), 13.0, 3, a=0.5, b=1.0, class_prior="uniform"
    )
    np.testing.assert_allclose(np.exp(log_known), 0.25)
    assert np.exp(log_novel) == pytest.approx(0.25)


def test_pitman_yor_likelihood_matches_sequential_crp():
    """Check the EPPF against the product of sequential seating probabilities."""
    a, b = 0.3, 1.7
    sequence = [0, 0, 1, 0, 2, 1, 1, 3, 0]
    log_p, counts = 0.0, []
    for table in sequence:
        k = sum(counts)
        if table == len(counts):
            log_p += np.log((b + a * len(counts)) / (k + b)) if counts else 0.0
            counts.append(1)
        else:
            log_p += np.log((counts[table] - a) / (k + b))
            counts[table] += 1
    assert pitman_yor_log_likelihood(counts, a, b) == pytest.approx(log_p)


def test_concentration_estimate_maximises_likelihood():
    """Check that the estimated b beats every point of a dense grid."""
    counts = np.array([12, 7, 5, 3, 1, 1])
    a = 0.4
    b_hat = estimate_concentration(counts, a)
    grid = np.linspace(-a + 1e-3, 50, 5000)
    best_grid = max(pitman_yor_log_likelihood(counts, a, b) for b in grid)
    assert pitman_yor_log_likelihood(counts, a, b_hat) >= best_grid - 1e-9


def test_softplus_parametrisation_round_trips():
    """Check that b = -a + softplus(raw) inverts exactly and keeps b > -a."""
    for a, b in itertools.product([0.0, 0.5, 0.9], [-0.4, 0.0, 3.0, 80.0]):
        if b <= -a:
            continue
        raw = raw_from_concentration(b, a)
        assert float(concentration_from_raw(np.asarray(raw), a)) == pytest.approx(b)
    assert float(concentration_from_raw(np.asarray(-20.0), 0.5)) > -0.5


def test_log_density_matches_scipy(rng):
    """Check the GEMM form of the predictive density against scipy."""
    d, sigma = 4, 0.7
    nat_mean = rng.normal(size=(3, d))
    for precision in (rng.uniform(0.5, 3, size=(3, 1)), rng.uniform(0.5, 3, (3, d))):
        Z = rng.normal(size=(6, d))
        coef = log_density_coef(nat_mean, precision, sigma)
        got = log_density_features(Z, isotropic=precision.shape[1] == 1) @ coef.T
        for n in range(3):
            mean = nat_mean[n] / precision[n]
            var = np.broadcast_to(1 / precision[n] + sigma, (d,))
            expected = multivariate_normal(mean, np.diag(var)).logpdf(Z)
            np.testing.assert_allclose(got[:, n], expected, rtol=1e-12)


def test_condition_on_adds_natural_parameters(rng):
    """Check q = q0 + sum z / sigma and lam = lam0 + n / sigma per class."""
    Z = rng.normal(size=(5, 3))
    onehot = np.eye(2)[[0, 1, 1, 0, 1]]
    q, lam = condition_on(np.ones(3), np.array([2.0]), Z, onehot, 0.5)
    np.testing.assert_allclose(q[1], 1 + Z[[1, 2, 4]].sum(0) / 0.5)
    np.testing.assert_allclose(lam[:, 0], [2 + 2 / 0.5, 2 + 3 / 0.5])


@pytest.mark.parametrize("prior_var", [np.array([2.0]), np.array([0.5, 1.0, 4.0])])
def test_add_observations_gives_the_textbook_posterior(rng, prior_var):
    """Check that conditioning the prior on rows, at once or one at a time,
    gives the posterior of a Gaussian mean: 1/v = 1/s0 + n/sigma,
    m = v (mu0/s0 + sum z/sigma)."""
    Z, mu0, sigma = rng.normal(size=(6, 3)), rng.normal(size=3), 0.7
    q, lam = add_observations(mu0 / prior_var, 1.0 / prior_var, Z.sum(0), 6.0, sigma)
    post_var = 1.0 / (1.0 / prior_var + 6 / sigma)
    np.testing.assert_allclose(1.0 / lam, post_var)
    np.testing.assert_allclose(q / lam, post_var * (mu0 / prior_var + Z.sum(0) / sigma))
    q_row, lam_row = mu0 / prior_var, 1.0 / prior_var
    for z in Z:
        q_row, lam_row = add_observations(q_row, lam_row, z, 1.0, sigma)
    np.testing.assert_allclose(q_row, q)
    np.testing.assert_allclose(lam_row, lam)


def test_logsumexp_matches_scipy_and_handles_masked_rows(rng):
    """Check logsumexp against scipy, and that an all -inf row gives -inf."""
    x = rng.normal(scale=300, size=(4, 7))
    np.testing.assert_allclose(logsumexp(x), scipy_logsumexp(x, axis=-1))
    masked = np.full((1, 3), -np.inf)
    with np.errstate(divide="ignore"):
        assert logsumexp(masked)[0] == -np.inf
    np.testing.assert_allclose(np.exp(log_softmax(x)).sum(-1), 1.0)


def test_numpy_and_torch_agree(rng):
    """Check that the same functions give the same numbers on torch tensors."""
    nat_mean, precision = rng.normal(size=(3, 4)), rng.uniform(1, 2, size=(3, 1))
    Z, counts = rng.normal(size=(5, 4)), np.array([1.0, 2.0, 4.0])
    as_t = torch.from_numpy
    for xp_args, to_np in (
        ((nat_mean, precision, Z, counts), np.asarray),
        ((as_t(nat_mean), as_t(precision), as_t(Z), as_t(counts)), lambda t: t.numpy()),
    ):
        q, lam, z, c = xp_args
        coef = log_density_coef(q, lam, 0.5)
        dens = log_density_features(z, isotropic=True) @ coef.T
        log_known, log_novel = crp_log_prior(c, c.sum(), 3, a=0.5, b=1.2)
        result = [to_np(v) for v in (dens, log_softmax(dens), log_known, log_novel)]
        if to_np is np.asarray:
            expected = result
        else:
            for got, want in zip(result, expected, strict=True):
                np.testing.assert_allclose(got, want, rtol=1e-12)


def test_torch_gradients_reach_prior_and_concentration():
    """Check autograd through density and CRP prior (double-precision gradcheck)."""
    torch.manual_seed(0)
    Z = torch.randn(4, 3, dtype=torch.float64)
    onehot = torch.eye(2, dtype=torch.float64)[[0, 1, 1, 0]]

    def loss(prior_mean, log_prior_var, beta_raw):
        lam0 = torch.exp(-log_prior_var).reshape(1)
        q, lam = condition_on(prior_mean * lam0, lam0, Z, onehot, 0.5)
        coef = log_density_coef(q, lam, 0.5)
        b = concentration_from_raw(beta_raw, 0.5)
        log_known, log_novel = crp_log_prior(
            onehot.sum(0), torch.tensor(4.0, dtype=torch.float64), 2, a=0.5, b=b
        )
        scores = log_density_features(Z, isotropic=True) @ coef.T + log_known
        scores = torch.cat([scores, torch.zeros(4, 1, dtype=torch.float64)
                            + log_novel], dim=1)
        return log_softmax(scores)[:, 0].sum()

    inputs = (torch.randn(3, dtype=torch.float64, requires_grad=True),
              torch.tensor(0.3, dtype=torch.float64, requires_grad=True),
              torch.tensor(0.1, dtype=torch.float64, requires_grad=True))
    assert torch.autograd.gradcheck(loss, inputs)


def test_estimate_prior_uses_class_means(rng):
    """Check mu0 = mean of class means and s0 = mean variance of class means."""
    X = rng.normal(size=(30, 3))
    y = np.repeat([0, 1, 2], 10)
    mean, var = estimate_prior(X, y, 3)
    means = np.stack([X[y == k].mean(0) for k in range(3)])
    np.testing.assert_allclose(mean, means.mean(0))
    assert var == pytest.approx(means.var(0).mean())


def test_estimate_prior_floors_a_single_class(rng):
    """Check that one class (zero spread) gives a small positive prior variance."""
    X = rng.normal(size=(10, 3))
    _, var = estimate_prior(X, np.zeros(10, dtype=int), 1)
    assert var > 0


def brute_force_pooled_variance(X, y):
    """Pooled within-class variance per feature, averaged, by explicit loops."""
    labels = sorted(set(y.tolist()))
    total = 0.0
    for label in labels:
        rows = [X[i] for i in range(len(y)) if y[i] == label]
        centre = [sum(row[j] for row in rows) / len(rows) for j in range(X.shape[1])]
        for row in rows:
            total += sum((row[j] - centre[j]) ** 2 for j in range(X.shape[1]))
    return total / (len(y) - len(labels)) / X.shape[1]


def test_estimate_noise_var_is_pooled_within_class_variance(rng):
    """Check that sigma is the pooled within-class variance, unequal class sizes."""
    y = np.array([0] * 3 + [1] * 11 + [2] * 1 + [3] * 6)
    X = rng.normal(scale=2.0, size=(y.shape[0], 4)) + 10.0 * y[:, None]
    sigma = estimate_noise_var(X, y, 4)
    assert sigma == pytest.approx(brute_force_pooled_variance(X, y), rel=1e-12)


def test_estimate_noise_var_ignores_the_class_means(rng):
    """Check that moving whole classes leaves sigma unchanged."""
    X = rng.normal(size=(40, 3))
    y = np.repeat(np.arange(4), 10)
    shifted = X + rng.normal(scale=100.0, size=(4, 3))[y]
    assert estimate_noise_var(shifted, y, 4) == pytest.approx(
        estimate_noise_var(X, y, 4), rel=1e-9
    )


def test_estimate_noise_var_floors_repeated_rows(rng):
    """Check that classes of identical rows give a small positive sigma."""
    centres = rng.normal(scale=3.0, size=(3, 5))
    y = np.repeat(np.arange(3), 4)
    sigma = estimate_noise_var(centres[y], y, 3)
    assert 0 < sigma == pytest.approx(1e-6 * centres[y].var(axis=0).mean())


def test_estimate_noise_var_needs_a_repeated_class(rng):
    """Check that one sample per class raises a clear error naming sigma."""
    with pytest.raises(ValueError, match="Give sigma as a float"):
        estimate_noise_var(rng.normal(size=(3, 2)), np.arange(3), 3)


def test_softmax_rows_inplace_matches_scipy(rng):
    """Check the in-place softmax against scipy, same memory."""
    from scipy.special import softmax

    x = rng.normal(scale=200, size=(5, 9))
    expected = softmax(x, axis=1)
    out = softmax_rows_inplace(x)
    assert out is x
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-300)


def test_softmax_rows_inplace_equals_the_torch_kernels(rng):
    """Check that the NumPy softmax equals the torch passes it replaced (shift,
    clamp at -700, exp, divide) to 1e-12, on rows with underflowing entries."""
    x = np.concatenate([rng.normal(scale=s, size=(20, 300))
                        for s in (0.1, 10.0, 1000.0)])
    view = torch.from_numpy(x.copy())
    view.sub_(view.amax(dim=1, keepdim=True)).clamp_(min=-700.0).exp_()
    expected = (view / view.sum(dim=1, keepdim=True)).numpy()
    np.testing.assert_allclose(softmax_rows_inplace(x), expected, rtol=1e-12,
                               atol=1e-300)


@pytest.mark.parametrize("d", [1, 3, 40])
@pytest.mark.parametrize("amount", [0.0, 0.37, 1.0])
def test_shrunk_covariance_is_the_mix_towards_mean_eigenvalue(rng, d, amount):
    """Check that scikit-learn's shrunk_covariance, which the full head uses for
    its shrinkage, is ``(1 - s) C + s mean(eig) I`` (the trace kept) on random
    SPD matrices, to 1e-12."""
    A = rng.normal(size=(d, d + 2))
    C = A @ A.T / d
    expected = (1.0 - amount) * C + amount * np.trace(C) / d * np.eye(d)
    out = shrunk_covariance(C, amount)
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=0)
    assert np.trace(out) == pytest.approx(np.trace(C), rel=1e-12)


@pytest.mark.parametrize("covariance", ["isotropic", "full"])
def test_fit_estimates_what_the_statistics_of_its_rows_give(rng, covariance):
    """Check that fit's "auto" sigma, prior and b are, bit for bit, the
    estimates of its rows' statistics: one implementation of each estimate
    serves fit, merge and Dask."""
    y = np.repeat(np.arange(6), 5)
    X = rng.normal(scale=3.0, size=(6, 4))[y] + rng.normal(size=(30, 4))
    head = CRPGaussianClassifier(covariance=covariance, prior_scale=2.0,
                                 noise_shrinkage=0.0).fit(X, y)
    moments = moments_of_rows(X, y, 6, fourth=covariance == "full", pooled=True)
    resolved = resolve_hyper_parameters(moments, head.get_params())
    for name in ("sigma", "prior_mean", "prior_var", "b"):
        np.testing.assert_array_equal(getattr(head, name + "_"), resolved[name],
                                      err_msg=name)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_unit_rows_hold_for_rows_of_any_finite_scale(dtype):
    """Check that rows scaled to unit length are right for rows whose squares
    underflow or overflow the dtype, or whose length itself exceeds it
    (np.linalg.norm gives 0 or inf there), and that zero rows stay zero."""
    from sklearn_flowr._core import unit_rows

    info = np.finfo(dtype)
    direction = np.array([3.0, -4.0, 0.0, 12.0]) / 13
    scales = [float(info.tiny) * 2**8, float(info.tiny) ** 0.5 / 10, 1.0,
              float(info.max) ** 0.5 * 10, float(info.max) / 13]
    rows = [direction * s for s in scales]
    rows.append(np.full(4, float(info.max) * 0.9))  # its length exceeds max
    X = np.vstack([*rows, np.zeros(4)]).astype(dtype)
    expected = np.vstack([np.tile(direction, (5, 1)), np.full(4, 0.5)])
    with np.errstate(all="ignore"):
        naive = X / np.linalg.norm(X, axis=1, keepdims=True)
    assert not np.allclose(naive[:-1], expected)  # the problem
    U = unit_rows(X)
    tol = 10 * info.eps
    assert_allclose(U[:-1], expected, rtol=tol, atol=tol)
    assert_array_equal(U[-1], 0)
