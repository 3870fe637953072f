"""Full class-noise and prior covariances, reduced to the diagonal head in the
whitening basis (the two-covariance PLDA model; user guide, "Full covariances").
"""

import numpy as np
from sklearn.covariance import ledoit_wolf_shrinkage, shrunk_covariance
from sklearn.utils import Bunch

from ._empirical_bayes import (
    _PRIOR_VAR_FLOOR,
    _relative_floor,
    class_means,
    estimate_noise_var,
    estimate_prior,
    noise_var_floor,
    within_class_residuals,
)

# The estimators' input range, which a given prior mean must respect too.
_MAX_ABS_MEAN = 1e100


def _shrunk(centred, covariance, *, overwrite=False):
    """Ledoit-Wolf shrinkage of ``covariance`` towards ``mean(eig) * I``,
    its intensity estimated on ``centred`` rescaled to unit peak (no overflow)."""
    peak = float(max(centred.max(), -centred.min())) if centred.size else 0.0
    if np.isfinite(peak) and peak > 0:
        unit = np.divide(centred, peak, out=centred if overwrite else None)
    else:
        unit = centred
    shrinkage = ledoit_wolf_shrinkage(unit, assume_centered=True)
    return shrunk_covariance(covariance, shrinkage)


def _floored(covariance, floor):
    """Symmetrise and raise eigenvalues below ``floor`` to it (positive definite)."""
    values, vectors = np.linalg.eigh((covariance + covariance.T) / 2.0)
    return (vectors * np.maximum(values, floor)) @ vectors.T


def estimate_noise_covariance(X, y_index, n_classes, *, extra_shrinkage=0.0):
    """Pooled within-class covariance (full ``Sigma_eps``), Ledoit-Wolf shrunk,
    then by ``extra_shrinkage`` towards ``mean(eig) * I``, eigenvalues floored.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[0.0, 0.0], [2.0, 0.0], [5.0, 5.0], [7.0, 5.0]])
    >>> estimate_noise_covariance(X, np.array([0, 0, 1, 1]), 2).round(3)
    array([[2., 0.],
           [0., 0.]])
    """
    residual, dof = within_class_residuals(
        X, y_index, n_classes, "covariance='full' estimates the class noise from "
        "the within-class scatter")
    covariance = _shrunk(residual, residual.T @ residual / dof, overwrite=True)
    del residual
    if extra_shrinkage:
        covariance = shrunk_covariance(covariance, extra_shrinkage)
    return _floored(covariance, noise_var_floor(X))


def estimate_prior_covariance(X, y_index, n_classes):
    """Mean ``(n_features,)`` and shrunk, floored covariance ``(n_features,
    n_features)`` of the class means: the prior ``N(mu0, S0)``.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[0.0, 0.0], [0.0, 0.2], [4.0, 0.0], [4.0, 0.2]])
    >>> mean, cov = estimate_prior_covariance(X, np.array([0, 0, 1, 1]), 2)
    >>> mean
    array([2. , 0.1])
    >>> bool(np.all(np.linalg.eigvalsh(cov) > 0))
    True
    """
    means, _ = class_means(X, y_index, n_classes)
    prior_mean = means.mean(axis=0)
    centred = means - prior_mean
    covariance = _shrunk(centred, centred.T @ centred / n_classes)
    return prior_mean, _floored(covariance, _relative_floor(_PRIOR_VAR_FLOOR, X))


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
    ``T.T @ prior_cov @ T = diag(s0_u)``; a row maps to ``(z - mu0) @ T``.

    Examples
    --------
    >>> import numpy as np
    >>> noise, prior = np.array([[2.0, 0.5], [0.5, 1.0]]), np.diag([4.0, 9.0])
    >>> T, s0, T_inv = whitening_basis(noise, prior)
    >>> bool(np.allclose(T.T @ noise @ T, np.eye(2)))
    True
    >>> bool(np.allclose(T.T @ prior @ T, np.diag(s0)))
    True
    >>> bool(np.allclose(T @ T_inv, np.eye(2)))
    True
    """
    noise_values, noise_vectors = np.linalg.eigh(noise_cov)
    whiten = noise_vectors / np.sqrt(noise_values)
    prior_values, rotation = np.linalg.eigh(whiten.T @ prior_cov @ whiten)
    basis = whiten @ rotation
    return basis, prior_values, basis.T @ noise_cov


def prior_array(value, n_features, name, *, matrix=False):
    """``prior_mean`` (n_features,) or ``prior_var`` (1,), (n_features,) or,
    when ``matrix``, (n_features, n_features), checked; None for "auto"."""
    if isinstance(value, str):
        return None
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
    if name == "prior_mean" and np.abs(array).max() > _MAX_ABS_MEAN:
        raise ValueError(
            f"prior_mean holds values up to {np.abs(array).max():.3g} in "
            f"magnitude; the head scores values up to {_MAX_ABS_MEAN:g} "
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


def _estimate_prior(X, y_index, n_classes, *, full):
    """Empirical-Bayes ``(mu0, s0)``: ``s0`` of shape (1,) or, when ``full``,
    (n_features, n_features)."""
    if n_classes < 2:
        raise ValueError(
            "Estimating the prior ('auto') needs at least 2 classes in "
            f"the first batch; got {n_classes} class. Give prior_mean, "
            "prior_var and b."
        )
    if full:
        return estimate_prior_covariance(X, y_index, n_classes)
    mean_hat, var_hat = estimate_prior(X, y_index, n_classes)
    return mean_hat, np.array([var_hat])


def scale_prior_var(X, y_index, n_classes, *, covariance, prior_var, prior_scale):
    """The head's ``prior_var``: itself when ``prior_scale == 1``, else
    ``prior_scale`` times the estimated ("auto") ``s0``."""
    if prior_scale == 1.0:
        return prior_var
    if not isinstance(prior_var, str):
        raise ValueError(
            f"prior_scale={prior_scale} scales the estimated prior variance "
            "(prior_var='auto'), but prior_var is given: scale the given "
            "prior_var instead and leave prior_scale=1.0."
        )
    _, var_hat = _estimate_prior(X, y_index, n_classes, full=covariance == "full")
    return prior_scale * var_hat


def resolve_covariances(X, y_index, n_classes, *, covariance, sigma, prior_mean,
                        prior_var, need_classes, noise_shrinkage=0.0):
    """A Bunch of a head's ``sigma``, ``prior_mean``, ``prior_var`` ("auto" ones
    estimated), ``state_prior``, ``state_sigma`` and ``basis`` (None or
    ``(mu0, T, T_inv)``).
    """
    full = covariance == "full"
    n_features = X.shape[1]
    if isinstance(sigma, str):  # "auto"
        sigma = (estimate_noise_covariance(X, y_index, n_classes,
                                           extra_shrinkage=noise_shrinkage)
                 if full else estimate_noise_var(X, y_index, n_classes))
    elif np.ndim(sigma) == 0:
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
    if prior_var is not None and prior_var.ndim == 1 and not np.all(prior_var > 0):
        raise ValueError("prior_var must be positive.")
    if prior_mean is None or prior_var is None or need_classes:
        mean_hat, var_hat = _estimate_prior(X, y_index, n_classes, full=full)
        prior_mean = mean_hat if prior_mean is None else prior_mean
        prior_var = var_hat if prior_var is None else prior_var
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
