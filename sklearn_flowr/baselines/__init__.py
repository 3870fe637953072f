"""Open-world few-shot baselines on feature vectors (embeddings).

They share the online interface of :class:`~sklearn_flowr.CRPGaussianClassifier`
(``fit``, ``partial_fit``, ``open_world_step``, ``predict``), so the evaluation
protocol runs every method through the same loop; ``novelty_score(X)`` is
each method's score (higher = more likely novel), ``open_world_step``'s
``p_novel``.
"""

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
