"""Class statistics of embeddings and the prior that starts meta-training, on
:mod:`sklearn_flowr._core`'s empirical Bayes (and its floors).
"""

from __future__ import annotations

import numpy as np

from .._core import class_means, estimate_prior, noise_var_floor

__all__ = ["class_statistics", "initial_prior"]


def class_statistics(Z, y_index, n_classes: int):
    """Mean ``mu_n`` and isotropic variance ``s_n`` of each class's embeddings
    (floored as the head's class noise is).

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
    """The prior ``(mu0, s0)`` meta-training starts from: the mean of the class
    ``means`` and the mean over dimensions of their variance (floored).

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
