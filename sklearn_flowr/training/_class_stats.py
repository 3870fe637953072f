"""Class statistics of embeddings and the prior that starts meta-training, on
:mod:`sklearn_flowr._core`'s empirical Bayes (and its floors)."""

import numpy as np

from .._core import class_means, estimate_prior, noise_var_floor

__all__ = ["class_statistics", "initial_prior"]


def class_statistics(Z, y_index, n_classes: int):
    """Mean ``mu_n`` and isotropic variance ``s_n`` of each class's embeddings
    (floored as the head's class noise is)."""
    Z = np.asarray(Z, dtype=np.float64)
    means, sizes = class_means(Z, y_index, n_classes)
    spread = np.bincount(y_index, weights=((Z - means[y_index]) ** 2).mean(axis=1),
                         minlength=n_classes)
    return means, np.maximum(spread / sizes, noise_var_floor(Z))


def initial_prior(means):
    """The prior ``(mu0, s0)`` meta-training starts from: the mean of the class
    ``means`` and the mean over dimensions of their variance (floored)."""
    means = np.asarray(means, dtype=np.float64)
    n_classes = means.shape[0]
    return estimate_prior(means, np.arange(n_classes), n_classes)
