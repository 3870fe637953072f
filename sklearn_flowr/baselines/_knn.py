"""k nearest neighbours on L2-normalised features (deep kNN novelty score)."""

from numbers import Integral

import numpy as np
from sklearn.metrics.pairwise import euclidean_distances
from sklearn.utils._param_validation import Interval

from .._core import unit_rows
from ._base import THRESHOLD_CONSTRAINTS, StoredRowsBaseline, fill_doc

__all__ = ["KNNClassifier"]


@fill_doc
class KNNClassifier(StoredRowsBaseline):
    """Nearest learned row on L2-normalised features; novelty score: the
    distance to the ``n_neighbors``-th nearest learned row (deep kNN).

    Parameters
    ----------
    n_neighbors : int >= 1, default=1
        ``k`` of the score (``min(k, n_rows)`` while fewer rows are learned).
    %(params)s

    Attributes
    ----------
    %(attrs)s

    References
    ----------
    .. [1] Y. Sun, Y. Ming, X. Zhu and Y. Li, "Out-of-Distribution Detection
       with Deep Nearest Neighbors", ICML, 2022.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_flowr.baselines import KNNClassifier
    >>> knn = KNNClassifier().fit(np.array([[1.0, 0.0], [0.0, 2.0]]), ["a", "b"])
    >>> knn.predict([[3.0, 0.1], [0.1, 3.0]])
    array(['a', 'b'], dtype=object)
    >>> knn.novelty_score([[3.0, 0.0], [-1.0, 0.0]]).round(4)  # 0 and sqrt(2)
    array([0.    , 1.4142])
    """

    _parameter_constraints: dict = {
        **THRESHOLD_CONSTRAINTS,
        "n_neighbors": [Interval(Integral, 1, None, closed="left")],
    }

    def __init__(self, *, n_neighbors=1, threshold=None, novel_label="auto"):
        self.n_neighbors = n_neighbors
        self.threshold = threshold
        self.novel_label = novel_label

    def _stored(self, X):
        return unit_rows(X)

    def _score_rows(self, X):
        distances = euclidean_distances(unit_rows(X), self._rows)
        k = min(self.n_neighbors, distances.shape[1])
        score = np.partition(distances, k - 1, axis=1)[:, k - 1]
        return self._row_class[np.argmin(distances, axis=1)], score
