"""Mahalanobis++: L2-normalised features, class means, one shared covariance."""

import numpy as np
from scipy.linalg import cholesky, solve_triangular
from sklearn.covariance import shrunk_covariance

from .._core import unit_rows
from ._base import OpenWorldBaseline, fill_doc
from ._prototypes import PrototypeBaseline

__all__ = ["MahalanobisPlusPlusClassifier"]

# Added to the covariances' diagonal: the features have unit length, so an
# absolute floor keeps a covariance of equal rows invertible.
COVARIANCE_FLOOR = 1e-9


@fill_doc
class MahalanobisPlusPlusClassifier(PrototypeBaseline):
    """Nearest class mean by the Mahalanobis distance of one shared covariance,
    on L2-normalised features (Mahalanobis++).

    Rows become ``u = x / ||x||``; class ``n`` has the mean ``mu_n`` of its
    rows, all share the pooled within-class covariance ``S`` shrunk as
    :func:`sklearn.covariance.oas` does. A row gets the class of the smallest
    ``D_n(u) = (u - mu_n)^T S^-1 (u - mu_n)``; novelty score ``min_n D_n(u)``.

    Parameters
    ----------
    %(params)s

    Attributes
    ----------
    %(prototype_attrs)s
    covariance_ : ndarray of shape (n_features, n_features)
        The shrunk shared covariance ``S`` (of the normalised rows).

    References
    ----------
    .. [1] M. Mueller and M. Hein, "Mahalanobis++: Improving OOD Detection via
       Feature Normalization", ICML, 2025.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_flowr.baselines import MahalanobisPlusPlusClassifier
    >>> X = np.array([[1.0, 0.1], [1.0, -0.1], [0.1, 1.0], [-0.1, 1.0]])
    >>> maha = MahalanobisPlusPlusClassifier().fit(X, [0, 0, 1, 1])
    >>> maha.predict([[2.0, 0.0], [0.0, 3.0]])
    array([0, 1])
    """

    # S changes with every row: the stream predicts and learns row by row.
    _stream = OpenWorldBaseline._stream

    def _features(self, X):
        return unit_rows(X)

    def _start(self, X, y_index, labels, *, fitting):
        super()._start(X, y_index, labels, fitting=fitting)
        self._gram = np.zeros((X.shape[1], X.shape[1]))

    def _learn_centred(self, X, index):
        super()._learn_centred(X, index)
        self._gram = self._gram + X.T @ X

    def _squared_distances(self, X, means):
        if not self._counts.any():  # no row yet: no covariance
            return np.full((X.shape[0], means.shape[0]), np.inf)
        factor = cholesky(self.covariance_, lower=True)
        return super()._squared_distances(
            solve_triangular(factor, X.T, lower=True).T,
            solve_triangular(factor, means.T, lower=True).T)

    def _from_distances(self, distances):
        return np.min(distances, axis=1)

    @property
    def covariance_(self):
        present = self._fitted("covariance_")._counts > 0
        sums, counts = self._sums[present], self._counts[present]
        n_rows, n_features = counts.sum(), self._gram.shape[0]
        # sum_n sum_i (u_i - mu_n)(u_i - mu_n)^T / N from the sums.
        covariance = (self._gram - (sums / counts[:, None]).T @ sums) / n_rows
        # sklearn.covariance.oas's shrinkage, from S alone.
        mean_square, mu = np.mean(covariance**2), np.trace(covariance) / n_features
        den = (n_rows + 1.0) * (mean_square - mu**2 / n_features)
        shrinkage = 1.0 if den <= 0 else min((mean_square + mu**2) / den, 1.0)
        covariance = shrunk_covariance(covariance, shrinkage)
        covariance.flat[:: n_features + 1] += COVARIANCE_FLOOR
        return covariance
