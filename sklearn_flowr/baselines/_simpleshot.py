"""SimpleShot: centre, L2-normalise, nearest class mean."""

import numpy as np
from sklearn.metrics.pairwise import euclidean_distances

from .._core import group_sums, unit_rows
from ._base import StoredRowsBaseline, fill_doc

__all__ = ["SimpleShotClassifier"]


@fill_doc
class SimpleShotClassifier(StoredRowsBaseline):
    """Nearest class mean on centred, L2-normalised features (SimpleShot):
    ``u = (x - m) / ||x - m||``, ``m`` the mean learned row; novelty score
    ``min_n ||u - p_n||``, ``p_n`` the mean ``u`` of class ``n``.

    Parameters
    ----------
    %(params)s

    Attributes
    ----------
    centre_ : ndarray of shape (n_features,)
        The mean ``m`` of the learned rows.
    %(attrs)s

    References
    ----------
    .. [1] Y. Wang, W.-L. Chao, K. Q. Weinberger and L. van der Maaten,
       "SimpleShot: Revisiting Nearest-Neighbor Classification for Few-Shot
       Learning", arXiv:1911.04623, 2019 (CL2N features).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_flowr.baselines import SimpleShotClassifier
    >>> X = np.array([[1.0, 0.0], [2.0, 0.0], [0.0, 1.0], [0.0, 2.0]])
    >>> shot = SimpleShotClassifier().fit(X, [0, 0, 1, 1])
    >>> shot.centre_
    array([0.75, 0.75])
    >>> shot.predict([[3.0, 0.5], [0.5, 3.0]])
    array([0, 1])
    """

    def _score_rows(self, X):
        centre = self._rows.mean(axis=0)
        classes, sums, counts = group_sums(unit_rows(self._rows - centre),
                                           self._row_class)
        distances = euclidean_distances(unit_rows(X - centre), sums / counts[:, None])
        best = np.argmin(distances, axis=1)
        return classes[best], distances[np.arange(X.shape[0]), best]

    @property
    def centre_(self):
        return self._fitted("centre_")._rows.mean(axis=0)
