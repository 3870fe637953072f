"""Open-world few-shot baselines on embeddings, with the online interface of
:class:`~sklearn_flowr.CRPGaussianClassifier` and a ``novelty_score(X)``."""

from ._dpmeans import DPMeansClassifier
from ._evm import EVMClassifier
from ._fecam import FeCAMClassifier
from ._knn import KNNClassifier
from ._mahalanobis import MahalanobisPlusPlusClassifier
from ._ncm import NCMClassifier
from ._peeler import PEELERClassifier
from ._protonet import ProtoNetClassifier
from ._ranpac import RanPACClassifier
from ._simpleshot import SimpleShotClassifier

__all__ = [
    "DPMeansClassifier",
    "EVMClassifier",
    "FeCAMClassifier",
    "KNNClassifier",
    "MahalanobisPlusPlusClassifier",
    "NCMClassifier",
    "PEELERClassifier",
    "ProtoNetClassifier",
    "RanPACClassifier",
    "SimpleShotClassifier",
]
