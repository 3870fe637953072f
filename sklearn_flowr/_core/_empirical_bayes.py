"""Empirical-Bayes estimates for a head fitted on plain features.

Without meta-training there is nothing to learn the prior from but the data, so
the head sets ``sigma`` to the pooled within-class variance, ``mu0`` to the
mean of the class means, ``s0`` to their spread, and ``b`` to the maximiser of
the Pitman-Yor (Ewens-Pitman) likelihood of the observed class sizes. The three
estimates are independent of each other (``s0`` is the raw spread of the class
means, not corrected by ``sigma``), so their order does not matter and a given
float ``sigma`` leaves ``mu0`` and ``s0`` exactly as they were. NumPy/SciPy
only: this runs once per ``fit``.
"""

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.special import gammaln

# Relative floor on the prior variance: one class (or identical class means)
# would otherwise give s0 = 0 and a degenerate novel-class predictive.
_PRIOR_VAR_FLOOR = 1e-3
# Relative floor on the class-noise variance: classes of repeated rows would
# otherwise give sigma = 0 and an infinite likelihood precision. It is far
# below the prior's floor because well separated classes legitimately have a
# within-class variance many orders below the total variance of X.
_NOISE_VAR_FLOOR = 1e-6
# The last resort of the relative floors: no absolute variance (1e-12 was one)
# may override the data's own scale, only the smallest normal float64.
_SMALLEST_NORMAL = float(np.finfo(np.float64).tiny)


def feature_scale(X):
    """The unit of every variance floor: the mean feature variance of ``X``.

    Floors are relative to it, so that the estimates scale as ``X**2`` and
    the head predicts the same on ``X * 1e-7`` as on ``X`` (an absolute floor
    such as 1e-12 overrode the estimates of small-scale data). Data that do
    not vary fall back on their mean square, then on 1; the result is at least
    the smallest normal float64, whose reciprocal is finite.

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


# Rows x features of the temporaries of :func:`feature_scale` (~8 MB).
_CHUNK_ELEMENTS = 1 << 20


def _row_chunks(X):
    step = max(1, _CHUNK_ELEMENTS // max(1, X.shape[1]))
    return [X[start : start + step] for start in range(0, X.shape[0], step)]


def _mean_feature_variance(X):
    """``np.mean(X.var(axis=0))``, chunk by chunk of rows for a large ``X``
    (``fit`` of a large head: no temporary of the size of ``X``)."""
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
    """Smallest class-noise variance allowed for data ``X``: ``1e-6`` times its
    mean feature variance (:func:`feature_scale`), which scales with ``X``.

    Every estimate of a within-class variance (``sigma``, ``Sigma_eps``, the
    class variances ``s_n`` that seed meta-training) is floored here, so that
    a class of repeated rows never gets an infinite likelihood precision.

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


def estimate_prior(X, y_index, n_classes):
    """Mean and isotropic spread of the class means.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    y_index : ndarray of shape (n_samples,)
        Class index of each row, in ``range(n_classes)``.
    n_classes : int

    Returns
    -------
    prior_mean : ndarray of shape (n_features,)
        ``mu0``, the unweighted mean of the class means.
    prior_var : float
        ``s0``, the mean over features of the variance of the class means,
        floored at ``1e-3`` times the mean feature variance of ``X``
        (:func:`feature_scale`). Isotropic, so that a prediction is a single
        matrix product.
    """
    means, _ = class_means(X, y_index, n_classes)
    prior_mean = means.mean(axis=0)
    spread = float(np.mean(means.var(axis=0)))
    return prior_mean, max(spread, _relative_floor(_PRIOR_VAR_FLOOR, X))


def estimate_noise_var(X, y_index, n_classes):
    """Pooled within-class variance, averaged over features.

    The empirical-Bayes ``sigma``: the unbiased pooled estimate
    ``sum_n sum_{i in n} ||x_i - xbar_n||^2 / ((n_samples - n_classes) d)`` of
    the variance of ``N(mu_n, sigma I)`` observations around their class mean.
    It uses only deviations from the class means, so it does not depend on the
    prior ``(mu0, s0)`` and can be estimated before it.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    y_index : ndarray of shape (n_samples,)
        Class index of each row, in ``range(n_classes)``; every class occurs.
    n_classes : int

    Returns
    -------
    float
        ``sigma``, floored at ``1e-6`` times the mean feature variance of
        ``X`` (:func:`feature_scale`) so that it is positive.

    Raises
    ------
    ValueError
        When ``n_samples == n_classes`` (one row per class): no within-class
        variance can be estimated.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[0.0, 0.0], [0.2, 0.0], [4.0, 4.0], [4.0, 4.4]])
    >>> round(estimate_noise_var(X, np.array([0, 0, 1, 1]), 2), 6)
    0.025
    """
    n_samples, n_features = X.shape
    dof = n_samples - n_classes
    if dof < 1:
        raise ValueError(
            "sigma='auto' estimates the class noise from the within-class "
            "variance, which needs a class with at least 2 samples; got "
            f"{n_samples} sample(s) in {n_classes} class(es). Give sigma as a "
            "float (the paper uses sigma=0.5 on meta-learned embeddings)."
        )
    means, _ = class_means(X, y_index, n_classes)
    residual = X - means[y_index]
    pooled = float(np.einsum("ij,ij->", residual, residual)) / (dof * n_features)
    return max(pooled, noise_var_floor(X))


def pitman_yor_log_likelihood(counts, a, b):
    """Log probability of a partition with the given block sizes (Pitman 1995).

    ``log p = sum_{i<K} log(b + i a) - log (b+1)_{n-1}
    + sum_k log (1-a)_{c_k - 1}``, with rising factorials written through
    ``gammaln`` so real-valued counts are accepted.

    Parameters
    ----------
    counts : array-like of shape (K,)
        Block sizes (class counts), each ``> a``.
    a : float
        Discount in [0, 1).
    b : float
        Concentration, ``> -a``.

    Returns
    -------
    float
    """
    counts = np.asarray(counts, dtype=np.float64)
    n_blocks = counts.shape[0]
    total = counts.sum()
    new_blocks = np.log(b + a * np.arange(1, n_blocks)).sum()
    normaliser = gammaln(b + total) - gammaln(b + 1.0)
    within = (gammaln(counts - a) - gammaln(1.0 - a)).sum()
    return float(new_blocks - normaliser + within)


def estimate_concentration(counts, a, *, bounds=(1e-6, 1e6)):
    """Maximum-likelihood concentration ``b`` of the Pitman-Yor CRP.

    Parameters
    ----------
    counts : array-like of shape (K,)
        Observed class sizes.
    a : float
        Discount in [0, 1).
    bounds : tuple of float, default=(1e-6, 1e6)
        Range searched for ``b + a``. One class drives the optimum to the
        lower end, all-singleton classes to the upper end; the bounds keep
        ``b`` finite in both cases.

    Returns
    -------
    float
        ``b``, with ``b > -a``.
    """
    counts = np.asarray(counts, dtype=np.float64)

    def negative(log_shift):
        return -pitman_yor_log_likelihood(counts, a, np.exp(log_shift) - a)

    lo, hi = np.log(bounds[0]), np.log(bounds[1])
    result = minimize_scalar(negative, bounds=(lo, hi), method="bounded",
                             options={"xatol": 1e-10})
    return float(np.exp(result.x) - a)
