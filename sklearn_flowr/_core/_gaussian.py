"""Gaussian classes in natural parameters ``q_n = m_n lam_n`` (d,) and
``lam_n`` ((1,) isotropic or (d,)), and their predictive ``N(m_n, 1 / lam_n +
sigma)``, whose log density is affine in the features ``[z, z**2, 1]``."""

import math

import numpy as np

from ._namespace import get_namespace

_LOG_2PI = math.log(2.0 * math.pi)


def condition_on(prior_nat_mean, prior_precision, Z, onehot, sigma):
    """``(q, lam)`` (n_classes, d), (n_classes, p) conditioned on rows ``Z``
    (n_samples, d) with class weights ``onehot`` (n_samples, n_classes)."""
    xp = get_namespace(Z, onehot)
    onehot_t = xp.matrix_transpose(onehot)
    counts = xp.sum(onehot_t, axis=-1, keepdims=True)
    return add_observations(prior_nat_mean, prior_precision, onehot_t @ Z, counts,
                            sigma)


def add_observations(nat_mean, precision, sums, counts, sigma, *, out=None):
    """The conjugate update ``(q + sums / sigma, lam + counts / sigma)``; NumPy
    ``out=(q_out, lam_out)`` writes in place."""
    # q_n += sum z / sigma, lam_n += n / sigma (docs/design.rst, section 1).
    if out is not None:
        if precision.shape == (1,) and isinstance(counts, float):
            # One isotropic class (the online step): a float is 10x faster.
            out[1][0] = float(precision[0]) + counts / sigma
        else:
            np.add(precision, counts / sigma, out=out[1])
        return np.add(nat_mean, sums / sigma, out=out[0]), out[1]
    return nat_mean + sums / sigma, precision + counts / sigma


def predictive_moments(nat_mean, precision, sigma):
    """Mean ``m = q / lam`` and variance ``v = 1 / lam + sigma`` of the predictive."""
    return nat_mean / precision, 1.0 / precision + sigma


def log_density_coef(nat_mean, precision, sigma, *, out=None):
    """Coefficients ``[m/v, -1/(2 v), -(d log 2 pi + sum log v + sum m**2 / v) / 2]``
    (..., d + p + 1) of ``log N(z; m_n, diag(v_n))`` in :func:`log_density_features`;
    NumPy ``out`` is filled in place."""
    if isinstance(nat_mean, np.ndarray) and nat_mean.ndim == 1 and precision.size == 1:
        return _one_isotropic_coef(nat_mean, float(precision[0]), sigma, out)
    xp = get_namespace(nat_mean, precision)
    mean, var = predictive_moments(nat_mean, precision, sigma)
    inv_var = 1.0 / var
    weight = mean * inv_var
    d = nat_mean.shape[-1]
    # Isotropic: var has one entry that stands for all d features.
    log_det = xp.sum(xp.log(var), axis=-1) * (d / var.shape[-1])
    const = -0.5 * (d * _LOG_2PI + log_det + xp.sum(mean * weight, axis=-1))
    coef = xp.concat([weight, -0.5 * inv_var, const[..., None]], axis=-1)
    if out is None:
        return coef
    out[...] = coef
    return out


def _one_isotropic_coef(nat_mean, lam, sigma, out=None):
    """:func:`log_density_coef` of one isotropic class (the online step): ``v``
    is a float, ``m / v = q / (lam v)``, ``sum m**2 / v = q . (m / v) / lam``."""
    d = nat_mean.shape[0]
    var = 1.0 / lam + sigma
    out = np.empty(d + 2) if out is None else out
    weight = np.multiply(nat_mean, 1.0 / (var * lam), out=out[:d])
    out[d] = -0.5 / var
    out[d + 1] = -0.5 * (d * _LOG_2PI + d * math.log(var) + nat_mean.dot(weight) / lam)
    return out


def grouped_log_density(features, coef, quad, group, *, out=None):
    """``features @ coef.T`` plus, when ``quad`` (g, d) has rows, ``(u**2 @ quad.T)[...,
    group]``: log densities and constants of rows ``features = [u, 1]`` (or ``[u,
    ||u||**2, 1]``) under classes ``coef = [m/v, const]`` (or ``[m/v, -1/(2 v),
    const]``) sharing the rows ``-1/(2 v)`` of ``quad`` by ``group``."""
    scores = (coef.dot(features) if features.ndim == 1
              else np.dot(features, coef.T, out=out))
    if quad.shape[0]:
        u = features[..., :-1]
        scores += np.dot(u * u, quad.T)[..., group]
    return scores


def log_density_features(Z, *, isotropic):
    """Features ``[z, z**2 (||z||**2 when isotropic), 1]`` (..., d + p + 1) of rows
    ``Z``."""
    xp = get_namespace(Z)
    square = Z * Z
    if isotropic:
        square = xp.sum(square, axis=-1, keepdims=True)
    return xp.concat([Z, square, xp.ones_like(Z[..., :1])], axis=-1)
