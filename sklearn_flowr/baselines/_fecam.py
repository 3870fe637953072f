"""FeCAM: class means and one shrunk covariance per class."""

from numbers import Real

import numpy as np
from scipy.linalg import pinvh
from sklearn.utils._param_validation import Interval

from ._base import OpenWorldBaseline, unit_rows
from ._docstrings import fill_doc
from ._mahalanobis import COVARIANCE_FLOOR, MahalanobisPlusPlusClassifier
from ._prototypes import PrototypeBaseline

__all__ = ["FeCAMClassifier"]

# Most bytes the per-class covariances (n_classes x n_features^2 float64) may
# take; beyond, learning a class is refused.
MAX_COVARIANCE_BYTES = 2**31


@fill_doc
class FeCAMClassifier(PrototypeBaseline):
    """Nearest class by the Mahalanobis distance of each class's own shrunk
    covariance, on Tukey-transformed, L2-normalised features (FeCAM).

    Rows go through Tukey's ladder of powers, ``sign(x) |x|^power``, and are
    scaled to unit length. Class ``n`` has the mean ``mu_n`` and the sample
    covariance ``S_n`` of its rows, shrunk as in the paper,
    ``S_n + shrinkage * (v_1 I + v_2 (1 - I))`` (``v_1``: mean variance,
    ``v_2``: mean non-zero covariance), then normalised to a correlation
    matrix ``C_n``. A row gets the class of the smallest
    ``D_n(u) = (u - mu_n)^T C_n^+ (u - mu_n)``; its novelty score is
    ``min_n D_n(u)``.

    Parameters
    ----------
    power : float > 0, default=0.5
        Tukey's exponent (the paper's 0.5; 1 leaves the rows as they are).
    shrinkage : float >= 0, default=1.0
        The paper's ``gamma_1 = gamma_2``.
    %(threshold)s
    %(novel_label)s

    Attributes
    ----------
    %(prototype_attrs)s

    See Also
    --------
    MahalanobisPlusPlusClassifier : one shared covariance (O(d^2) memory).

    Notes
    -----
    %(score_notes)s It is ``inf`` while no class exists.

    %(exact_online)s: the state is each class's sum, count and sum of outer
    products, n_classes x n_features^2 floats. Learning a class that takes
    them beyond 2 GiB (e.g. 160 classes at d = 1280) raises a ValueError:
    reduce the dimension (PCA) or use :class:`MahalanobisPlusPlusClassifier`.
    Each prediction inverts every class's matrix (O(n_classes x
    n_features^3); a stream pays it per row). A class of one row has
    ``C_n = I``; for features with negative values the signed power is this
    implementation's (the paper's features are non-negative).

    References
    ----------
    .. [1] D. Goswami, Y. Liu, B. Twardowski and J. van de Weijer, "FeCAM:
       Exploiting the Heterogeneity of Class Distributions in
       Exemplar-Free Continual Learning", NeurIPS, 2023.

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
        "power": [Interval(Real, 0, None, closed="neither")],
        "shrinkage": [Interval(Real, 0, None, closed="left")],
        "threshold": [Interval(Real, 0, None, closed="left"), None],
        "novel_label": "no_validation",
    }
    _empty_score = np.inf
    # Each class's matrix changes with its rows: row by row.
    _stream = OpenWorldBaseline._stream
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
        n_classes, n_features = self.n_classes_, self._grams.shape[1]
        if n_classes > self._grams.shape[0]:
            if n_classes * n_features**2 * 8 > MAX_COVARIANCE_BYTES:
                raise ValueError(
                    f"FeCAMClassifier keeps one {n_features} x {n_features} "
                    f"matrix per class: {n_classes} classes need "
                    f"{n_classes * n_features**2 * 8 / 2**30:.1f} GiB, beyond "
                    f"{MAX_COVARIANCE_BYTES / 2**30:g} GiB. Reduce the features' "
                    "dimension (e.g. PCA) or use MahalanobisPlusPlusClassifier.")
            self._grams = np.concatenate([self._grams, np.zeros(
                (n_classes - self._grams.shape[0], n_features, n_features))])
        super()._grow()

    def _checkpoint(self, index):
        undo_means = super()._checkpoint(index)
        grams = self._grams
        rows = np.unique(index[index < grams.shape[0]])
        saved = grams[rows].copy()

        def undo():
            undo_means()
            grams[rows] = saved

        return undo

    def _learn_centred(self, X, index):
        super()._learn_centred(X, index)
        for n in np.unique(index):
            rows = X[index == n]
            self._grams[n] += rows.T @ rows

    def _squared_distances(self, X, means):
        distances = np.full((X.shape[0], means.shape[0]), np.inf)
        eye = np.eye(X.shape[1])
        for n in np.flatnonzero(self._counts > 0):
            count, total = self._counts[n], self._sums[n]
            covariance = ((self._grams[n] - np.outer(total, total) / count)
                          / max(count - 1.0, 1.0))
            off = covariance * (1.0 - eye)
            covariance += self.shrinkage * (
                np.mean(np.diag(covariance)) * eye
                + off.sum() / max(np.count_nonzero(off), 1) * (1.0 - eye))
            covariance += COVARIANCE_FLOOR * eye
            scale = np.sqrt(np.diag(covariance))
            diff = X - means[n]
            distances[:, n] = np.einsum(
                "ij,ij->i", diff @ pinvh(covariance / np.outer(scale, scale)), diff)
        return np.maximum(distances, 0.0, out=distances)
