"""The CRP-Gaussian head: FLOWR's open-world classifier on feature vectors.

:class:`CRPGaussianClassifier` is the estimator (``_classifier``); its
per-class state (``_state``, on growable buffers ``_buffers``) holds the
natural parameters and the cached scores; ``_moments`` and ``_merge`` pool
per-class statistics (``merge``, Dask); ``_discovery`` is the unlabelled
stream and ``correct``; ``_proba`` the open-world probability output.
"""

from ._classifier import CRPGaussianClassifier
from ._empirical import empirical_bayes_head
from ._proba import OpenWorldProba, ProbabilisticOpenWorldClassifier

__all__ = [
    "CRPGaussianClassifier",
    "OpenWorldProba",
    "ProbabilisticOpenWorldClassifier",
    "empirical_bayes_head",
]
