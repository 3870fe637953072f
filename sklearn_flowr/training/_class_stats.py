"""Class statistics of embeddings and the prior that starts meta-training.

One way to turn labelled embeddings (or Sup-E's learned class parameters)
into the class table ``(mu_n, s_n)`` and the prior ``(mu0, s0)``, used by the
training stages, :meth:`~._heads.FLOWRMetaModule.from_sup_e` and the
benchmarks. Both build on :mod:`sklearn_flowr._core`'s empirical Bayes, with
its floors: a class variance is floored like the pooled class noise
(``estimate_noise_var``), the prior variance like ``estimate_prior``'s.
"""

from __future__ import annotations

import numpy as np

from .._core import class_means, estimate_prior, noise_var_floor

__all__ = ["class_statistics", "initial_prior"]


def class_statistics(Z, y_index, n_classes: int):
    """Mean and isotropic variance of each class's embeddings.

    Parameters
    ----------
    Z : ndarray of shape (n_samples, embedding_dim)
    y_index : ndarray of shape (n_samples,)
        Class index of each row, in ``range(n_classes)``; every class occurs.
    n_classes : int

    Returns
    -------
    means : ndarray of shape (n_classes, embedding_dim)
        ``mu_n``.
    variances : ndarray of shape (n_classes,)
        ``s_n``, the mean over dimensions of the (biased) variance of the
        class's rows around its mean, floored at ``1e-6`` times the mean
        feature variance of ``Z`` (and at ``1e-12``), the floor of the
        empirical-Bayes class noise: a class of repeated rows would otherwise
        have ``s_n = 0``.

    Examples
    --------
    >>> import numpy as np
    >>> Z = np.array([[0.0, 0.0], [0.2, 0.0], [4.0, 4.0], [4.0, 4.4]])
    >>> means, variances = class_statistics(Z, np.array([0, 0, 1, 1]), 2)
    >>> means
    array([[0.1, 0. ],
           [4. , 4.2]])
    >>> variances.round(6)
    array([0.005, 0.02 ])
    """
    Z = np.asarray(Z, dtype=np.float64)
    means, sizes = class_means(Z, y_index, n_classes)
    spread = np.bincount(y_index, weights=((Z - means[y_index]) ** 2).mean(axis=1),
                         minlength=n_classes)
    return means, np.maximum(spread / sizes, noise_var_floor(Z))


def initial_prior(means):
    """The prior ``(mu0, s0)`` meta-training starts from: empirical Bayes on
    the class means.

    Parameters
    ----------
    means : array-like of shape (n_classes, embedding_dim)
        Class means ``mu_n`` (of embeddings, or Sup-E's learned ones).

    Returns
    -------
    prior_mean : ndarray of shape (embedding_dim,)
        ``mu0``, the mean of the class means.
    prior_var : float
        ``s0``, the mean over dimensions of their variance, floored as
        :func:`sklearn_flowr._core.estimate_prior` floors it.

    Examples
    --------
    >>> import numpy as np
    >>> prior_mean, prior_var = initial_prior(np.array([[0.0, 1.0], [2.0, 3.0]]))
    >>> prior_mean, prior_var
    (array([1., 2.]), 1.0)
    """
    means = np.asarray(means, dtype=np.float64)
    n_classes = means.shape[0]
    return estimate_prior(means, np.arange(n_classes), n_classes)
