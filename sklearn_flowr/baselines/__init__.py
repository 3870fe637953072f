"""Open-world few-shot baselines on feature vectors.

Every baseline works on embeddings (e.g. from a Sup-FC or Sup-E encoder) and
shares the online interface of :class:`~sklearn_flowr.CRPGaussianClassifier`,
so the evaluation protocol runs every method through the same loop:

- ``fit(X, y)`` learns from labelled data (and forgets earlier state);
- ``partial_fit(X, y)`` conditions on labelled rows, unseen labels create
  classes, and an unfitted estimator starts empty;
- ``open_world_step(X, y)`` predicts each row with the state before it, then
  learns its label, and returns a :class:`~sklearn.utils.Bunch` of arrays
  ``y_pred``, ``y_known``, ``p_novel`` (a novelty score: higher = more likely
  novel, a probability where the method has one) and ``is_novel``;
- ``predict(X)`` and ``novelty_score(X)`` score a batch at the current state.

Methods:

- :class:`NCMClassifier`: nearest class mean; score = distance to it.
- :class:`ProtoNetClassifier`: softmax over negative squared distances to the
  prototypes; score = 1 - max class probability.
- :class:`PEELERClassifier`: Gaussian class embeddings with a learned diagonal
  precision; score = smallest normalised Mahalanobis distance.
- :class:`EVMClassifier`: Extreme Value Machine on cosine distances; score =
  1 - largest Weibull inclusion probability.
- :class:`DPMeansClassifier`: NCM with a distance threshold (DP-means); an
  unlabelled ``open_world_step(X)`` opens a provisional class for each row
  beyond it, so it also discovers classes.
"""

from ._dpmeans import DPMeansClassifier
from ._evm import EVMClassifier
from ._ncm import NCMClassifier
from ._peeler import PEELERClassifier
from ._protonet import ProtoNetClassifier

__all__ = [
    "DPMeansClassifier",
    "EVMClassifier",
    "NCMClassifier",
    "PEELERClassifier",
    "ProtoNetClassifier",
]
