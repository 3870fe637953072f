"""FeCAM: class means and one shrunk covariance per class."""

from numbers import Real

import numpy as np
from scipy.linalg import pinvh
from sklearn.utils._param_validation import Interval

from .._core import unit_rows
from ._base import THRESHOLD_CONSTRAINTS, OpenWorldBaseline, fill_doc
from ._mahalanobis import COVARIANCE_FLOOR, MahalanobisPlusPlusClassifier
from ._prototypes import PrototypeBaseline

__all__ = ["FeCAMClassifier"]

# Most bytes the per-class matrices (n_classes x n_features^2 float64) take.
MAX_COVARIANCE_BYTES = 2**31


@fill_doc
class FeCAMClassifier(PrototypeBaseline):
    """Nearest class by the Mahalanobis distance of each class's own shrunk
    covariance, on Tukey-transformed, L2-normalised features (FeCAM).

    Rows become ``u``, ``sign(x) |x|^power`` scaled to unit length; class ``n``
    has the mean ``mu_n`` and shrunk correlation matrix ``C_n`` of its rows. A
    row gets the class of the smallest ``D_n(u) = (u - mu_n)^T C_n^+ (u -
    mu_n)``; novelty score: ``min_n D_n(u)`` (``inf`` while no class exists).

    Parameters
    ----------
    power : float > 0, default=0.5
        Tukey's exponent (the paper's 0.5; 1 keeps the rows).
    shrinkage : float >= 0, default=1.0
        The paper's ``gamma_1 = gamma_2``.
    %(params)s

    Attributes
    ----------
    %(prototype_attrs)s

    References
    ----------
    .. [1] D. Goswami, Y. Liu, B. Twardowski and J. van de Weijer, "FeCAM:
       Exploiting the Heterogeneity of Class Distributions in Exemplar-Free
       Continual Learning", NeurIPS, 2023.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_flowr.baselines import FeCAMClassifier
    >>> X = np.array([[4.0, 0.2], [4.0, 0.0], [0.3, 4.0], [0.0, 4.0]])
    >>> fecam = FeCAMClassifier().fit(X, ["a", "a", "b", "b"])
    >>> fecam.predict([[3.0, 0.1], [0.1, 3.0]])
    array(['a', 'b'], dtype=object)
    """

    _parameter_constraints: dict = {
        **THRESHOLD_CONSTRAINTS,
        "power": [Interval(Real, 0, None, closed="neither")],
        "shrinkage": [Interval(Real, 0, None, closed="left")],
    }
    _stream = OpenWorldBaseline._stream  # a class's C_n changes with its rows
    _from_distances = MahalanobisPlusPlusClassifier._from_distances

    def __init__(self, *, power=0.5, shrinkage=1.0, threshold=None,
                 novel_label="auto"):
        self.power = power
        self.shrinkage = shrinkage
        self.threshold = threshold
        self.novel_label = novel_label

    def _features(self, X):
        return unit_rows(np.sign(X) * np.abs(X) ** self.power)

    def _start(self, X, y_index, labels, *, fitting):
        super()._start(X, y_index, labels, fitting=fitting)
        self._grams = np.zeros((0, X.shape[1], X.shape[1]))

    def _grow(self):
        n_classes, (n_old, n_features, _) = self.n_classes_, self._grams.shape
        if n_classes > n_old:
            if n_classes * n_features**2 * 8 > MAX_COVARIANCE_BYTES:
                raise ValueError(
                    f"FeCAMClassifier keeps a {n_features} x {n_features} matrix "
                    f"per class: {n_classes} classes take more than "
                    f"{MAX_COVARIANCE_BYTES / 2**30:.3g} GiB. Reduce the dimension "
                    "(PCA) or use MahalanobisPlusPlusClassifier.")
            self._grams = np.concatenate(
                [self._grams, np.zeros((n_classes - n_old, n_features, n_features))])
        super()._grow()

    def _checkpoint(self, index):
        undo_means, grams = super()._checkpoint(index), self._grams
        rows = np.unique(index[index < grams.shape[0]])
        saved = grams[rows].copy()

        def undo():
            undo_means()
            grams[rows] = saved

        return undo

    def _learn_centred(self, X, index):
        super()._learn_centred(X, index)
        for n in np.unique(index):
            self._grams[n] += X[index == n].T @ X[index == n]

    def _squared_distances(self, X, means):
        distances = np.full((X.shape[0], means.shape[0]), np.inf)
        eye = np.eye(X.shape[1])
        for n in np.flatnonzero(self._counts):
            count, total = self._counts[n], self._sums[n]
            covariance = ((self._grams[n] - np.outer(total, total) / count)
                          / max(count - 1.0, 1.0))
            off = covariance * (1.0 - eye)
            covariance += self.shrinkage * (
                np.mean(np.diag(covariance)) * eye
                + max(off.sum() / max(np.count_nonzero(off), 1), 0.0) * (1.0 - eye))
            covariance += COVARIANCE_FLOOR * eye
            scale = np.sqrt(np.diag(covariance))
            diff = X - means[n]
            distances[:, n] = np.einsum(
                "ij,ij->i", diff @ pinvh(covariance / np.outer(scale, scale)), diff)
        return np.maximum(distances, 0.0, out=distances)
