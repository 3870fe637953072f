"""Gaussian class embeddings in natural parameters, and their predictive density.

A class ``n`` keeps ``q_n`` (shape (d,)) and ``lam_n`` (shape (1,) when
isotropic, (d,) when diagonal). The shared prior over class means is
``N(mu0, diag(s0))``, i.e. ``q0 = mu0 / s0`` and ``lam0 = 1 / s0``; the class
noise is ``Sigma_eps = sigma * I``. Conditioning on an embedding ``z`` of class
``n`` adds ``z / sigma`` to ``q_n`` and ``1 / sigma`` to ``lam_n``.

The posterior predictive of class ``n`` is ``N(m_n, diag(v_n))`` with
``m_n = q_n / lam_n`` and ``v_n = 1 / lam_n + sigma``. Its log density is
affine in the *features* ``[z, z**2, 1]`` (``||z||**2`` instead of ``z**2``
when isotropic), so scoring many rows against many classes is one matrix
product ``features @ coef.T`` -- the O(N d) cost the design asks for.
"""

import math

import numpy as np

from ._namespace import get_namespace

_LOG_2PI = math.log(2.0 * math.pi)


def condition_on(prior_nat_mean, prior_precision, Z, onehot, sigma):
    """Condition the shared prior on labelled embeddings.

    Parameters
    ----------
    prior_nat_mean : array of shape (d,) or (n_classes, d)
        ``q`` before conditioning (``q0`` for classes instantiated here).
    prior_precision : array of shape (p,) or (n_classes, p), p in {1, d}
        ``lam`` before conditioning.
    Z : array of shape (n_samples, d)
        Embeddings.
    onehot : array of shape (n_samples, n_classes)
        Class membership (weights are allowed).
    sigma : float
        Class-noise variance ``Sigma_eps = sigma * I``.

    Returns
    -------
    nat_mean : array of shape (n_classes, d)
        ``q_n = q_prior + sum_i onehot[i, n] z_i / sigma``.
    precision : array of shape (n_classes, p)
        ``lam_n = lam_prior + sum_i onehot[i, n] / sigma``.
    """
    xp = get_namespace(Z, onehot)
    onehot_t = xp.matrix_transpose(onehot)
    counts = xp.sum(onehot_t, axis=-1, keepdims=True)
    return add_observations(prior_nat_mean, prior_precision, onehot_t @ Z, counts,
                            sigma)


def add_observations(nat_mean, precision, sums, counts, sigma, *, out=None):
    """The conjugate update: condition classes on the sums of their rows.

    The one place the update is written; :func:`condition_on`, the head's
    online state and its prefix states all call it.

    Parameters
    ----------
    nat_mean : array of shape (..., d)
        ``q`` before the update.
    precision : array of shape (..., p), p in {1, d}
        ``lam`` before the update.
    sums : array of shape (..., d)
        Sum of the new rows of each class.
    counts : array or float, broadcastable to (..., 1)
        Number of new rows of each class (weights are allowed).
    sigma : float
        Class-noise variance ``Sigma_eps = sigma * I``.
    out : (ndarray, ndarray), default=None
        NumPy only: where to write the two results (``nat_mean`` and
        ``precision`` themselves for an update in place).

    Returns
    -------
    nat_mean : array of shape (..., d)
        ``q + sums / sigma``.
    precision : array of shape (..., p)
        ``lam + counts / sigma``.
    """
    # q_n += sum z / sigma, lam_n += n / sigma (docs/design.rst, section 1).
    if out is not None:
        if precision.shape == (1,) and isinstance(counts, float):
            # One isotropic class (the online step): the same float64 sum
            # in a Python float costs a tenth of a one-element ufunc.
            out[1][0] = float(precision[0]) + counts / sigma
        else:
            np.add(precision, counts / sigma, out=out[1])
        return np.add(nat_mean, sums / sigma, out=out[0]), out[1]
    return nat_mean + sums / sigma, precision + counts / sigma


def predictive_moments(nat_mean, precision, sigma):
    """Mean ``m = q / lam`` and variance ``v = 1 / lam + sigma`` of the predictive."""
    return nat_mean / precision, 1.0 / precision + sigma


def log_density_coef(nat_mean, precision, sigma, *, out=None):
    """Coefficients that make the predictive log density a dot product.

    Parameters
    ----------
    nat_mean : array of shape (..., n_classes, d)
        ``q_n``.
    precision : array of shape (..., n_classes, p), p in {1, d}
        ``lam_n``; ``p == 1`` is the isotropic case.
    sigma : float
        Class-noise variance.
    out : ndarray of shape (n_classes, d + p + 1), default=None
        NumPy only: write the coefficients here (a view of a larger buffer
        may be given) and return it. The temporaries are then one array of
        the shape of ``nat_mean`` and one of ``precision``: no concatenation,
        so a chunk of classes refreshes in place within a bounded memory.

    Returns
    -------
    coef : array of shape (..., n_classes, d + p + 1)
        ``[m/v, -1/(2 v), -(d log 2 pi + sum log v + sum m**2 / v) / 2]`` so that
        ``log N(z; m_n, diag(v_n)) = log_density_features(z) . coef[n]``.
    """
    if out is not None:
        return _log_density_coef_into(out, nat_mean, precision, sigma)
    xp = get_namespace(nat_mean, precision)
    mean, var = predictive_moments(nat_mean, precision, sigma)
    inv_var = 1.0 / var
    weight = mean * inv_var
    d = nat_mean.shape[-1]
    # Isotropic: var has one entry that stands for all d features.
    log_det = xp.sum(xp.log(var), axis=-1) * (d / var.shape[-1])
    const = -0.5 * (d * _LOG_2PI + log_det + xp.sum(mean * weight, axis=-1))
    return xp.concat([weight, -0.5 * inv_var, const[..., None]], axis=-1)


def _log_density_coef_into(out, nat_mean, precision, sigma):
    """:func:`log_density_coef` written into ``out``, the same operations in
    NumPy with in-place steps (results equal to rounding: the sum of
    ``m**2 / v`` is a dot product here)."""
    if nat_mean.ndim == 1 and precision.shape[0] == 1:
        # One isotropic class (the online step): v is a float, and the
        # d-vector work is one ufunc and a dot product: m / v = q / (lam v),
        # sum m**2 / v = q . (m / v) / lam.
        d = nat_mean.shape[0]
        lam = float(precision[0])
        var = 1.0 / lam + sigma  # v = 1 / lam + sigma
        inv_var = 1.0 / var
        weight = np.multiply(nat_mean, inv_var / lam, out=out[:d])
        out[d] = -0.5 * inv_var
        out[d + 1] = -0.5 * (d * _LOG_2PI + d * math.log(var)
                             + nat_mean.dot(weight) / lam)
        return out
    d, p = nat_mean.shape[-1], precision.shape[-1]
    weight = out[..., :d]
    mean, var = predictive_moments(nat_mean, precision, sigma)
    half_inv_var = out[..., d : d + p]
    np.divide(1.0, var, out=half_inv_var)
    np.multiply(mean, half_inv_var, out=weight)
    log_det = np.log(var, out=var).sum(axis=-1) * (d / p)
    quad = np.einsum("...i,...i->...", mean, weight)
    out[..., -1] = -0.5 * (d * _LOG_2PI + log_det + quad)
    half_inv_var *= -0.5
    return out


def log_density_features(Z, *, isotropic, out=None):
    """Features ``[z, z**2 (or ||z||**2 when isotropic), 1]`` of each row.

    Parameters
    ----------
    Z : array of shape (..., d)
    isotropic : bool
    out : ndarray of shape (..., d + p + 1), default=None
        NumPy only: write the features here and return it. A one-row ``Z``
        may be ``out[:d]`` itself (the online step centres its row there).

    Returns
    -------
    features : array of shape (..., d + p + 1)
    """
    if out is not None:
        d = Z.shape[-1]
        if Z.ndim == 1:  # one row: plain slices, a dot product
            if Z.base is not out:  # else Z is out[:d], filled by the caller
                out[:d] = Z
            if isotropic:
                out[d] = Z.dot(Z)
            else:
                np.multiply(Z, Z, out=out[d : 2 * d])
            out[-1] = 1.0
            return out
        out[..., :d] = Z
        if isotropic:
            out[..., d] = np.einsum("...i,...i->...", Z, Z)
        else:
            np.multiply(Z, Z, out=out[..., d : 2 * d])
        out[..., -1] = 1.0
        return out
    xp = get_namespace(Z)
    square = Z * Z
    if isotropic:
        square = xp.sum(square, axis=-1, keepdims=True)
    return xp.concat([Z, square, xp.ones_like(Z[..., :1])], axis=-1)
