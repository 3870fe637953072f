"""Full class-noise and prior covariances, reduced to the diagonal head in the
whitening basis (the two-covariance PLDA model)."""

import numpy as np
from scipy import linalg
from sklearn.utils import Bunch

from ..validation import MAX_ABS_INPUT


def check_covariance(matrix, n_features, name):
    """A symmetric positive-definite (n_features, n_features) float64 array."""
    matrix = np.asarray(matrix, dtype=np.float64)
    if matrix.shape != (n_features, n_features):
        raise ValueError(
            f"{name} as a matrix must have shape ({n_features}, {n_features}); "
            f"got {matrix.shape}."
        )
    if not np.all(np.isfinite(matrix)):
        raise ValueError(f"{name} must be finite.")
    if not np.allclose(matrix, matrix.T, rtol=1e-10, atol=1e-12 * np.abs(
            matrix).max()):
        raise ValueError(f"{name} must be a symmetric matrix.")
    if np.linalg.eigvalsh(matrix)[0] <= 0:
        raise ValueError(f"{name} must be positive definite.")
    return matrix


def whitening_basis(noise_cov, prior_cov):
    """``(T, s0_u, T^-1)`` with ``T.T @ noise_cov @ T = I`` and
    ``T.T @ prior_cov @ T = diag(s0_u)`` (a generalised eigenproblem); a row
    maps to ``(z - mu0) @ T``."""
    prior_values, basis = linalg.eigh(prior_cov, noise_cov)
    return basis, prior_values, basis.T @ noise_cov


def prior_array(value, n_features, name, *, matrix=False):
    """``prior_mean`` (n_features,) or ``prior_var`` (1,), (n_features,) or,
    when ``matrix``, (n_features, n_features), checked."""
    array = np.asarray(value, dtype=np.float64)
    if matrix and array.ndim == 2:
        return check_covariance(array, n_features, name)
    if array.ndim == 0:
        array = np.full(1 if name == "prior_var" else n_features, float(array))
    if array.ndim != 1 or array.shape[0] not in (1, n_features):
        shapes = f"({n_features},)" + (
            f" or ({n_features}, {n_features})" if matrix else ""
        )
        raise ValueError(
            f"{name} must be a float or an array of shape {shapes}; got shape "
            f"{np.shape(value)}."
        )
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} must be finite.")
    if name == "prior_mean" and np.abs(array).max() > MAX_ABS_INPUT:
        raise ValueError(
            f"prior_mean holds values up to {np.abs(array).max():.3g} in "
            f"magnitude; the head scores values up to {MAX_ABS_INPUT:g} "
            "(squared distances overflow float64 beyond)."
        )
    if name == "prior_mean" and array.shape[0] == 1 and n_features != 1:
        array = np.full(n_features, array[0])
    return array


def _as_matrix(value, n_features):
    """A (1,), (d,) or (d, d) variance as a (d, d) covariance."""
    if value.ndim == 2:
        return value
    return np.diag(np.broadcast_to(value, (n_features,)).astype(np.float64))


def resolve_covariances(n_features, *, covariance, sigma, prior_mean, prior_var):
    """A Bunch of a head's resolved ``sigma``, ``prior_mean`` and ``prior_var``
    (checked), ``state_prior``, ``state_sigma`` and ``basis`` (None or
    ``(mu0, T, T_inv)``)."""
    full = covariance == "full"
    if np.ndim(sigma) == 0:
        sigma = float(sigma)
        if full:
            sigma = sigma * np.eye(n_features)
    elif not full:
        raise ValueError(
            "sigma is a matrix: a full class-noise covariance needs "
            "covariance='full'."
        )
    else:
        sigma = check_covariance(sigma, n_features, "sigma")
    prior_mean = prior_array(prior_mean, n_features, "prior_mean")
    prior_var = prior_array(prior_var, n_features, "prior_var", matrix=full)
    if prior_var.ndim == 1 and not np.all(prior_var > 0):
        raise ValueError("prior_var must be positive.")
    hyper = Bunch(sigma=sigma, prior_mean=prior_mean, prior_var=prior_var,
                  state_prior=(prior_mean, prior_var), state_sigma=sigma, basis=None)
    if full:
        prior_var = _as_matrix(prior_var, n_features)
        hyper.prior_var = prior_var
        basis, basis_var, inverse = whitening_basis(sigma, prior_var)
        hyper.state_prior = (np.zeros(n_features), basis_var)
        hyper.state_sigma = 1.0
        hyper.basis = (prior_mean, basis, inverse)
    return hyper
