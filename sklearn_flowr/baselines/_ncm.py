"""Nearest class mean (NCM) with online means: the simplest open-world baseline."""

from numbers import Real

import numpy as np
from sklearn.utils._param_validation import Interval

from ._prototypes import PrototypeBaseline

__all__ = ["NCMClassifier"]


class NCMClassifier(PrototypeBaseline):
    """Nearest class mean classifier with a distance novelty score.

    Each class is the mean of its rows (Euclidean), updated online; a row gets
    the class of the nearest mean. The novelty score is the Euclidean distance
    to that nearest mean: far from every mean, more likely novel.

    Parameters
    ----------
    threshold : float or None, default=None
        Distance at or beyond which :meth:`predict` and ``open_world_step``'s
        ``y_pred`` declare a row novel. ``None`` never declares a row novel
        while a class exists (NCM alone has no threshold; the evaluation
        protocol sets one on the scores, at a fixed novelty true-positive
        rate). A row is always novel while no class exists.
    novel_label : object, default="auto"
        Label returned for the novel class: ``"novel"`` for string labels, -1
        (or one below the smallest label) for numeric ones. It may not occur
        in ``y``.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Known labels: sorted in ``fit``, new ones appended in order of arrival.
    n_classes_ : int
        Number of known classes.
    class_count_ : ndarray of shape (n_classes,)
        Rows each class was learned from.
    class_mean_ : ndarray of shape (n_classes, n_features)
        Class means ``mu_n``.
    novel_label_ : object
        Label used for the novel class.
    n_features_in_ : int
        Number of features seen during ``fit``.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during ``fit`` (only when ``X`` has string
        column names).

    See Also
    --------
    ProtoNetClassifier : softmax over the same distances, thresholded.
    sklearn.neighbors.NearestCentroid : the closed-world batch version.

    Notes
    -----
    ``novelty_score`` and ``open_world_step``'s ``p_novel`` are the distance
    ``min_n ||x - mu_n||`` (``inf`` while no class exists): a score, not a
    probability.

    References
    ----------
    .. [1] T. Mensink, J. Verbeek, F. Perronnin and G. Csurka, "Distance-based
       image classification: generalizing to new classes at near-zero cost",
       IEEE TPAMI, 2013.
    .. [2] J. Willes, J. Harrison, A. Harakeh, C. Finn, M. Pavone and
       S. Waslander, "Bayesian Embeddings for Few-Shot Open World
       Recognition", IEEE TPAMI, 2022 (NCM baseline, section 6).

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

    _parameter_constraints: dict = {
        "threshold": [Interval(Real, 0, None, closed="left"), None],
        "novel_label": "no_validation",
    }
    _empty_score = np.inf

    def __init__(self, *, threshold=None, novel_label="auto"):
        self.threshold = threshold
        self.novel_label = novel_label

    def _from_distances(self, distances):
        # Distances are squared Euclidean.
        return np.sqrt(np.min(distances, axis=1))

    def _declares_novel(self, score):
        if self.threshold is None:
            return np.zeros(score.shape[0], dtype=bool)
        return score >= self.threshold
