"""The CRP-Gaussian head: the estimator (``_classifier``), its per-class state
(``_state``, ``_buffers``), ``merge`` and Dask (``_merge``), the unlabelled
stream (``_discovery``) and the open-world probabilities (``_proba``)."""

from ._classifier import CRPGaussianClassifier
from ._empirical import empirical_bayes_head
from ._proba import OpenWorldProba
from ._two_covariance import TwoCovarianceWhitener
from ._whitened import WhitenedCRPClassifier

__all__ = [
    "CRPGaussianClassifier",
    "OpenWorldProba",
    "TwoCovarianceWhitener",
    "WhitenedCRPClassifier",
    "empirical_bayes_head",
]
