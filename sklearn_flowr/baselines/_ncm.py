"""Nearest class mean (NCM) with online means: the simplest open-world baseline."""

import numpy as np

from ._base import fill_doc
from ._prototypes import PrototypeBaseline

__all__ = ["NCMClassifier"]


@fill_doc
class NCMClassifier(PrototypeBaseline):
    """Nearest class mean classifier with a distance novelty score.

    Each class is the mean of its rows, updated online; a row gets the class
    of the nearest mean, and its novelty score is the Euclidean distance to
    that mean (``inf`` while no class exists).

    Parameters
    ----------
    %(params)s

    Attributes
    ----------
    %(prototype_attrs)s

    See Also
    --------
    sklearn.neighbors.NearestCentroid : the closed-world batch version.

    References
    ----------
    .. [1] T. Mensink, J. Verbeek, F. Perronnin and G. Csurka, "Distance-based
       image classification: generalizing to new classes at near-zero cost",
       IEEE TPAMI, 2013.
    .. [2] %(willes)s (NCM baseline, section 6).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_flowr.baselines import NCMClassifier
    >>> X = np.array([[0.0, 0.0], [0.0, 2.0], [4.0, 0.0]])
    >>> ncm = NCMClassifier(threshold=3.0).fit(X, [0, 0, 1])
    >>> ncm.novelty_score([[0.0, 1.0], [0.0, 9.0]])
    array([0., 8.])
    >>> ncm.predict([[0.0, 1.0], [0.0, 9.0]])
    array([ 0, -1])
    >>> ncm.open_world_step([[0.0, 9.0], [0.0, 9.5]], [2, 2]).y_pred
    array([-1,  2])
    """

    def _from_distances(self, distances):
        # Distances are squared Euclidean.
        return np.sqrt(np.min(distances, axis=1))
