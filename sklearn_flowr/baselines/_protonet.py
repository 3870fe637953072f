"""Thresholded prototypical network: softmax over distances to class means."""

from numbers import Real

import numpy as np
from sklearn.utils._param_validation import Interval

from ._base import fill_doc
from ._prototypes import PrototypeBaseline

__all__ = ["ProtoNetClassifier"]


@fill_doc
class ProtoNetClassifier(PrototypeBaseline):
    """Prototypical-network classifier with a thresholded novelty probability.

    ``p(n | x) ∝ exp(-||x - mu_n||^2)`` over the online class means; novelty
    score ``1 - max_n p(n | x)``: it only compares known classes (with one
    class nothing is novel).

    Parameters
    ----------
    threshold : float in [0, 1], default=0.5
        Novelty score at or above which a row is declared novel.
    %(novel_label)s

    Attributes
    ----------
    %(prototype_attrs)s

    See Also
    --------
    NCMClassifier : the same prototypes with a distance score.

    References
    ----------
    .. [1] J. Snell, K. Swersky and R. Zemel, "Prototypical Networks for
       Few-shot Learning", NeurIPS, 2017.
    .. [2] %(willes)s (thresholded ProtoNet baseline).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_flowr.baselines import ProtoNetClassifier
    >>> X = np.array([[0.0, 0.0], [2.0, 0.0]])
    >>> proto = ProtoNetClassifier().fit(X, [0, 1])
    >>> proto.novelty_score([[0.0, 0.0], [1.0, 0.0]]).round(4)
    array([0.018, 0.5  ])
    >>> proto.predict([[0.0, 0.0], [1.0, 0.0]])
    array([ 0, -1])
    """

    _parameter_constraints: dict = {
        "threshold": [Interval(Real, 0, 1, closed="both")],
        "novel_label": "no_validation",
    }
    _empty_score = 1.0

    def __init__(self, *, threshold=0.5, novel_label="auto"):
        self.threshold = threshold
        self.novel_label = novel_label

    def _from_distances(self, distances):
        # max_n softmax(-D)_n = 1 / sum_n exp(-(D_n - min D)); classes without
        # rows have D = inf and add exp(-inf) = 0.
        shifted = distances - np.min(distances, axis=1, keepdims=True)
        return 1.0 - 1.0 / np.exp(-shifted).sum(axis=1)
