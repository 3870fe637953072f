"""Full class-noise and prior covariances, reduced to the diagonal head.

The paper's model allows any class noise ``Sigma_eps``; FLOWR fixes
``Sigma_eps = sigma I``. Meta-trained embeddings are far from isotropic (on
glyphs a few directions hold most of the within-class scatter), and an
isotropic ``sigma`` then weighs every direction alike: a nearest-mean distance
in the whitened space ranks novel classes better than the isotropic head on the
raw one. With a full shared noise covariance ``W`` and a full prior covariance
``S0`` of the class means the model is still exact and conjugate, and a single
change of basis

    u = (z - mu0) @ T,   T.T @ W @ T = I,   T.T @ S0 @ T = diag(s0_u)

turns it into FLOWR's own head with ``mu0 = 0``, a diagonal prior ``s0_u`` and
isotropic noise ``sigma = 1``: the class posteriors stay diagonal (both
precisions are diagonal in that basis), an update stays O(d) after the O(d^2)
change of basis of its row, and the posterior over classes is unchanged by the
basis (the Jacobian ``|det T|`` is common to every class and the novel class).
This is the two-covariance (PLDA) model of Ioffe (2006) and Prince & Elder
(2007) with FLOWR's CRP prior on top.

The empirical-Bayes estimates are Ledoit-Wolf shrunk towards a multiple of the
identity, so that few training classes (five on digits) still give a full-rank
prior. NumPy/SciPy only: this runs once per ``fit``.
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
)

# The estimators' input range (``_online_base.MAX_ABS_INPUT``), which a given
# prior mean must respect as the rows do.
_MAX_ABS_MEAN = 1e100


def _shrunk(centred, covariance, *, overwrite=False):
    """Ledoit-Wolf shrinkage of ``covariance`` towards ``mean(eig) * I``.

    The shrinkage intensity does not depend on the units, but its estimate
    sums fourth powers of ``centred``: at 1e90 those overflow. It is computed
    on ``centred`` divided by its largest magnitude (in place with
    ``overwrite``: a caller done with ``centred`` saves a copy of the rows).
    """
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
    """Pooled within-class covariance (full ``Sigma_eps``), shrunk.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    y_index : ndarray of shape (n_samples,)
        Class index of each row, in ``range(n_classes)``; every class occurs.
    n_classes : int
    extra_shrinkage : float in [0, 1], default=0.0
        Further shrinkage towards ``mean(eig) * I`` after Ledoit-Wolf's,
        ``(1 - extra_shrinkage) * W + extra_shrinkage * mean(eig) * I``
        (:func:`sklearn.covariance.shrunk_covariance`). Ledoit-Wolf only
        corrects the sampling error of the estimate, which is small with many
        training rows; new classes on an embedding trained on these classes
        are not squeezed in the directions where the training classes are
        (``CRPGaussianClassifier``'s ``noise_shrinkage``; docs/user_guide.rst,
        "The noise covariance of new classes").

    Returns
    -------
    ndarray of shape (n_features, n_features)
        ``sum_n sum_{i in n} (x_i - xbar_n)(x_i - xbar_n)^T / (n_samples -
        n_classes)``, Ledoit-Wolf shrunk towards a multiple of the identity,
        eigenvalues floored at ``1e-6`` times the mean feature variance of
        ``X`` (``feature_scale``), so that it scales with ``X``.

    Raises
    ------
    ValueError
        When ``n_samples == n_classes``: no within-class scatter to estimate.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[0.0, 0.0], [2.0, 0.0], [5.0, 5.0], [7.0, 5.0]])
    >>> estimate_noise_covariance(X, np.array([0, 0, 1, 1]), 2).round(3)
    array([[2., 0.],
           [0., 0.]])
    """
    n_samples, n_features = X.shape
    dof = n_samples - n_classes
    if dof < 1:
        raise ValueError(
            "covariance='full' estimates the class noise from the within-class "
            "scatter, which needs a class with at least 2 samples; got "
            f"{n_samples} sample(s) in {n_classes} class(es)."
        )
    means, _ = class_means(X, y_index, n_classes)
    # One temporary of the size of X: the residuals, made in place.
    residual = means[y_index]
    del means
    np.subtract(X, residual, out=residual)
    covariance = _shrunk(residual, residual.T @ residual / dof, overwrite=True)
    del residual
    if extra_shrinkage:
        covariance = shrunk_covariance(covariance, extra_shrinkage)
    return _floored(covariance, noise_var_floor(X))


def estimate_prior_covariance(X, y_index, n_classes):
    """Mean and full covariance of the class means (the prior ``N(mu0, S0)``).

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    y_index : ndarray of shape (n_samples,)
    n_classes : int
        At least 2.

    Returns
    -------
    prior_mean : ndarray of shape (n_features,)
        The unweighted mean of the class means.
    prior_cov : ndarray of shape (n_features, n_features)
        Their covariance, Ledoit-Wolf shrunk towards a multiple of the identity
        and floored as :func:`estimate_prior`'s ``s0`` (``1e-3`` times the mean
        feature variance of ``X``).

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
    """The basis in which the noise is ``I`` and the prior is diagonal.

    Parameters
    ----------
    noise_cov : ndarray of shape (d, d)
        ``Sigma_eps``, symmetric positive definite.
    prior_cov : ndarray of shape (d, d)
        ``S0``, symmetric positive definite.

    Returns
    -------
    basis : ndarray of shape (d, d)
        ``T`` with ``T.T @ noise_cov @ T = I`` and ``T.T @ prior_cov @ T``
        diagonal: a row ``z`` maps to ``(z - mu0) @ T``.
    prior_var : ndarray of shape (d,)
        The diagonal of ``T.T @ prior_cov @ T``: ``s0`` in the new basis.
    inverse : ndarray of shape (d, d)
        ``T^-1 = T.T @ noise_cov``, which maps back: ``z = mu0 + u @ T^-1``.

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
    """A float, (n_features,) array or, when ``matrix``, an (n_features,
    n_features) covariance -- or None for "auto".

    A float ``prior_var`` becomes shape (1,) (isotropic), a float
    ``prior_mean`` shape (n_features,).
    """
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
    """The head's ``prior_var`` with its ``prior_scale`` applied.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    y_index : ndarray of shape (n_samples,)
    n_classes : int
    covariance : {"isotropic", "full"}
    prior_var : float, array-like or "auto"
        The head's parameter.
    prior_scale : float
        Factor on the estimated ("auto") ``s0``.

    Returns
    -------
    prior_var : float, array-like or "auto"
        ``prior_var`` itself when ``prior_scale == 1``; otherwise
        ``prior_scale`` times the empirical-Bayes ``s0`` of
        :func:`resolve_covariances` (shape (1,), or (n_features, n_features)
        when ``covariance="full"``), which then uses it as given.

    Raises
    ------
    ValueError
        ``prior_scale != 1`` with a given ``prior_var``: the scale applies to
        the estimate only (a given ``s0`` is scaled by whoever gives it).
    """
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
    """Fix ``sigma``, ``mu0`` and ``s0`` (estimating the "auto" ones) for a head.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    y_index : ndarray of shape (n_samples,)
    n_classes : int
    covariance : {"isotropic", "full"}
    sigma, prior_mean, prior_var : float, array-like or "auto"
        The head's parameters.
    need_classes : bool
        Something else estimated from the classes (``b="auto"``) needs two or
        more of them.
    noise_shrinkage : float in [0, 1], default=0.0
        Extra shrinkage of an estimated ("auto") full noise covariance
        (:func:`estimate_noise_covariance`); a given ``sigma`` is used as it is.

    Returns
    -------
    hyper : dict-like with attributes
        ``sigma``, ``prior_mean``, ``prior_var`` (the head's fitted
        attributes), ``state_prior`` (``(mu0, s0)`` of the state's basis),
        ``state_sigma`` and ``basis`` (``None``, or ``(mu0, T, T_inv)``).
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
