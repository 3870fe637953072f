"""Empirical-Bayes ``sigma``, ``mu0``, ``s0`` and ``b`` of a head fitted on plain
features (user guide, "Empirical Bayes for a standalone head"). NumPy/SciPy
only: runs once per ``fit``.
"""

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.special import gammaln

# Floors relative to feature_scale(X): identical class means would give
# s0 = 0, repeated rows sigma = 0. Well separated classes legitimately have a
# within-class variance far below the total, hence the lower noise floor.
_PRIOR_VAR_FLOOR = 1e-3
_NOISE_VAR_FLOOR = 1e-6
_SMALLEST_NORMAL = float(np.finfo(np.float64).tiny)


def feature_scale(X):
    """The unit of every variance floor: the mean feature variance of ``X``
    (else its mean square, else 1), at least the smallest normal float64.

    Examples
    --------
    >>> import numpy as np
    >>> feature_scale(np.array([[0.0], [0.5]]))
    0.0625
    >>> feature_scale(np.array([[3.0], [3.0]]))  # constant: its mean square
    9.0
    """
    X = np.asarray(X, dtype=np.float64)
    for statistic in (_mean_feature_variance, _mean_square):
        scale = float(statistic(X))
        if np.isfinite(scale) and scale > 0:
            return max(scale, _SMALLEST_NORMAL)
    return 1.0


# Elements of the temporaries of feature_scale (~8 MB).
_CHUNK_ELEMENTS = 1 << 20


def _row_chunks(X):
    step = max(1, _CHUNK_ELEMENTS // max(1, X.shape[1]))
    return [X[start : start + step] for start in range(0, X.shape[0], step)]


def _mean_feature_variance(X):
    """``np.mean(X.var(axis=0))``, chunk by chunk for a large ``X``."""
    if X.size <= _CHUNK_ELEMENTS:
        return np.mean(X.var(axis=0))
    mean = X.mean(axis=0)
    squares = np.zeros(X.shape[1])
    for chunk in _row_chunks(X):
        deviation = chunk - mean
        squares += np.einsum("ij,ij->j", deviation, deviation)
    return np.mean(squares / X.shape[0])


def _mean_square(X):
    """``np.mean(X * X)``, chunk by chunk for a large ``X``."""
    if X.size <= _CHUNK_ELEMENTS:
        return np.mean(X * X)
    return sum(np.einsum("ij,ij->", chunk, chunk) for chunk in _row_chunks(X)) / X.size


def _relative_floor(relative, X):
    """``relative`` times :func:`feature_scale` of ``X``, kept normal."""
    return max(relative * feature_scale(X), _SMALLEST_NORMAL)


def noise_var_floor(X):
    """Smallest within-class variance allowed for data ``X`` (``sigma``,
    ``Sigma_eps``, Sup-E's ``s_n``): ``1e-6`` times :func:`feature_scale`.

    Examples
    --------
    >>> import numpy as np
    >>> noise_var_floor(np.array([[0.0], [2.0]]))
    1e-06
    """
    return _relative_floor(_NOISE_VAR_FLOOR, X)


def class_means(X, y_index, n_classes):
    """Mean row of each class, shape (n_classes, n_features), and class sizes."""
    sums = np.zeros((n_classes, X.shape[1]))
    np.add.at(sums, y_index, X)
    sizes = np.bincount(y_index, minlength=n_classes)
    return sums / sizes[:, None], sizes


def within_class_residuals(X, y_index, n_classes, what, fix=""):
    """Rows minus their class mean (one temporary of the size of ``X``) and the
    degrees of freedom; ``what`` and ``fix`` frame the error of one row per class."""
    dof = X.shape[0] - n_classes
    if dof < 1:
        raise ValueError(
            f"{what}, which needs a class with at least 2 samples; got "
            f"{X.shape[0]} sample(s) in {n_classes} class(es).{fix}")
    means, _ = class_means(X, y_index, n_classes)
    residual = means[y_index]
    del means
    return np.subtract(X, residual, out=residual), dof


def estimate_prior(X, y_index, n_classes):
    """``mu0`` (n_features,), the mean of the class means, and ``s0`` (float),
    their variance averaged over features, floored at ``1e-3`` times
    :func:`feature_scale`; ``y_index`` holds class indices."""
    means, _ = class_means(X, y_index, n_classes)
    prior_mean = means.mean(axis=0)
    spread = float(np.mean(means.var(axis=0)))
    return prior_mean, max(spread, _relative_floor(_PRIOR_VAR_FLOOR, X))


def estimate_noise_var(X, y_index, n_classes):
    """The empirical-Bayes ``sigma``: the pooled within-class variance
    ``sum ||x_i - xbar_n||^2 / ((n_samples - n_classes) d)``, floored at
    :func:`noise_var_floor`.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[0.0, 0.0], [0.2, 0.0], [4.0, 4.0], [4.0, 4.4]])
    >>> round(estimate_noise_var(X, np.array([0, 0, 1, 1]), 2), 6)
    0.025
    """
    residual, dof = within_class_residuals(
        X, y_index, n_classes, "sigma='auto' estimates the class noise from the "
        "within-class variance", fix=" Give sigma as a float (the paper uses "
        "sigma=0.5 on meta-learned embeddings).")
    pooled = float(np.einsum("ij,ij->", residual, residual)) / (dof * X.shape[1])
    return max(pooled, noise_var_floor(X))


def pitman_yor_log_likelihood(counts, a, b):
    """Log probability of a partition with block sizes ``counts`` (each
    ``> a``) under the Pitman-Yor CRP (Pitman 1995): ``sum_{i<K} log(b + i a)
    - log (b+1)_{n-1} + sum_k log (1-a)_{c_k - 1}``, real counts allowed."""
    counts = np.asarray(counts, dtype=np.float64)
    n_blocks = counts.shape[0]
    total = counts.sum()
    new_blocks = np.log(b + a * np.arange(1, n_blocks)).sum()
    normaliser = gammaln(b + total) - gammaln(b + 1.0)
    within = (gammaln(counts - a) - gammaln(1.0 - a)).sum()
    return float(new_blocks - normaliser + within)


def estimate_concentration(counts, a, *, bounds=(1e-6, 1e6)):
    """Maximum-likelihood concentration ``b > -a`` of the Pitman-Yor CRP for
    class sizes ``counts``; ``b + a`` searched in ``bounds`` (finite even for
    one class or all singletons)."""
    counts = np.asarray(counts, dtype=np.float64)

    def negative(log_shift):
        return -pitman_yor_log_likelihood(counts, a, np.exp(log_shift) - a)

    lo, hi = np.log(bounds[0]), np.log(bounds[1])
    result = minimize_scalar(negative, bounds=(lo, hi), method="bounded",
                             options={"xatol": 1e-10})
    return float(np.exp(result.x) - a)
