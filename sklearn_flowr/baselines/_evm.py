"""The Extreme Value Machine on cosine distances, learned online."""

from numbers import Integral, Real

import numpy as np
from sklearn.utils._param_validation import Interval

from ._base import OpenWorldBaseline
from ._weibull import fit_weibull, weibull_inclusion

__all__ = ["EVMClassifier"]

# Elements of the per-chunk distance matrices (~32 MB of float64).
_CHUNK_ELEMENTS = 4_000_000
# Margins below this are raised to it: a zero margin (the same direction in
# two classes) has no logarithm, and the Weibull fit needs one.
_MIN_MARGIN = 1e-12


class EVMClassifier(OpenWorldBaseline):
    """Extreme Value Machine: per-point Weibull models of the class margin.

    Every stored point ``x_i`` of class ``n`` models how far its class
    extends: a Weibull with location 0 is fitted by maximum likelihood to the
    ``tail_size`` smallest margins ``m_ij = d(x_i, x_j) / 2`` to points ``x_j``
    of the other classes, with ``d`` the cosine distance ``1 - cos(x_i, x_j)``.
    The probability that ``x`` is included in ``x_i``'s class is

    ``Psi_i(x) = exp(-(d(x_i, x) / lambda_i)^kappa_i)``,

    a class's score is the largest ``Psi_i`` over its points, the prediction
    is the class with the largest score, and the novelty score is
    ``1 - max_n max_{i in n} Psi_i(x)``.

    Learning a row of class ``c`` stores it as a point (and fits its Weibull)
    and gives every point of the other classes one more negative; the points
    whose tail changed are refitted, all at once (see
    :func:`~sklearn_flowr.baselines._weibull.fit_weibull`).

    Parameters
    ----------
    tail_size : int, default=10
        Number of smallest margins each Weibull is fitted to (the paper's 10).
        A point with fewer negatives uses all it has.
    threshold : float in [0, 1], default=0.5
        Novelty score at or above which :meth:`predict` and
        ``open_world_step``'s ``y_pred`` declare a row novel, i.e. every
        inclusion probability is at most ``1 - threshold``.
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
    points_ : ndarray of shape (n_points, n_features)
        Every learned row, scaled to unit length.
    point_class_ : ndarray of shape (n_points,)
        Index into ``classes_`` of each point's class.
    weibull_shape_ : ndarray of shape (n_points,)
        ``kappa_i``; ``inf`` when all margins of the tail are equal (a step).
    weibull_scale_ : ndarray of shape (n_points,)
        ``lambda_i``; ``inf`` while the point has no negative.
    novel_label_ : object
        Label used for the novel class.
    n_features_in_ : int
        Number of features seen during ``fit``.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during ``fit`` (only when ``X`` has string
        column names).

    Notes
    -----
    ``novelty_score`` and ``open_world_step``'s ``p_novel`` are
    ``1 - max Psi_i(x)``: one minus the largest inclusion probability (1 while
    no class exists).

    Edge cases, by definition here: a point without negatives (while only its
    class exists) includes everything (``lambda = inf``, ``Psi = 1``), so a
    single class never flags a row as novel; a point whose tail margins are
    all equal, such as a point with one negative, gets a step at that margin
    (``Psi = 1`` closer than it, ``exp(-1)`` on it, 0 beyond), the limit of
    the maximum-likelihood fit; margins are floored at 1e-12. A zero vector
    has cosine distance 1 to everything. When every class score is 0 the
    best known class is that of the nearest point.

    Deviations from Rudd et al.: no extreme-vector reduction (set cover) is
    done, so every learned row is kept and a prediction costs O(n_points d);
    the Weibulls are plain two-parameter maximum-likelihood fits with
    location 0 rather than libMR's translated fits; distances are cosine, as
    in the FLOWR protocol.

    References
    ----------
    .. [1] E. Rudd, L. Jain, W. Scheirer and T. Boult, "The Extreme Value
       Machine", IEEE TPAMI, 2018.
    .. [2] J. Willes, J. Harrison, A. Harakeh, C. Finn, M. Pavone and
       S. Waslander, "Bayesian Embeddings for Few-Shot Open World
       Recognition", IEEE TPAMI, 2022 (EVM baseline, tail size 10).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_flowr.baselines import EVMClassifier
    >>> X = np.array([[1.0, 0.0], [1.0, 0.1], [0.0, 1.0], [0.1, 1.0]])
    >>> evm = EVMClassifier().fit(X, [0, 0, 1, 1])
    >>> evm.predict([[1.0, 0.05], [0.05, 1.0], [-1.0, -1.0]])
    array([ 0,  1, -1])
    >>> evm.novelty_score([[1.0, 0.05]]) < 0.5
    array([ True])
    """

    _parameter_constraints: dict = {
        "tail_size": [Interval(Integral, 1, None, closed="left")],
        "threshold": [Interval(Real, 0, 1, closed="both")],
        "novel_label": "no_validation",
    }

    def __init__(self, *, tail_size=10, threshold=0.5, novel_label="auto"):
        self.tail_size = tail_size
        self.threshold = threshold
        self.novel_label = novel_label

    # ------------------------------------------------------------------ hooks
    def _start(self, X, y_index, labels, *, fitting):
        self._points = np.zeros((0, X.shape[1]))
        self._point_class = np.zeros(0, dtype=np.intp)
        self._tails = np.zeros((0, self.tail_size))
        self._shape = np.zeros(0)
        self._scale = np.zeros(0)

    def _learn(self, X, index):
        new_points = _unit_rows(X)
        n_old = self._points.shape[0]
        changed = np.zeros(n_old, dtype=bool)
        # The old tails are merged into a copy and every array is replaced,
        # never written in place: a step interrupted half-way leaves the
        # arrays it started from intact (O(n_points x tail_size), less than
        # the step's own O(n_points x d)).
        tails = self._tails.copy()
        # The old points' tails take in the new points of other classes.
        step = max(1, _CHUNK_ELEMENTS // new_points.shape[0])
        for start in range(0, n_old, step):
            rows = slice(start, start + step)
            margins = self._margins(self._points[rows], self._point_class[rows],
                                    new_points, index)
            merged = _smallest(np.hstack([tails[rows], margins]), self.tail_size)
            changed[rows] = np.any(merged != tails[rows], axis=1)
            tails[rows] = merged
        points = np.vstack([self._points, new_points])
        point_class = np.concatenate([self._point_class, index])
        # The new points' tails against every point of another class.
        new_tails = np.empty((new_points.shape[0], self.tail_size))
        step = max(1, _CHUNK_ELEMENTS // points.shape[0])
        for start in range(0, new_points.shape[0], step):
            rows = slice(start, start + step)
            new_tails[rows] = _smallest(
                self._margins(new_points[rows], index[rows], points, point_class),
                self.tail_size,
            )
        tails = np.vstack([tails, new_tails])
        refit = np.r_[np.flatnonzero(changed), n_old + np.arange(new_points.shape[0])]
        shape = np.concatenate([self._shape, np.empty(new_points.shape[0])])
        scale = np.concatenate([self._scale, np.empty(new_points.shape[0])])
        shape[refit], scale[refit] = fit_weibull(tails[refit])
        self._points, self._point_class = points, point_class
        self._tails, self._shape, self._scale = tails, shape, scale

    def _score(self, X):
        n_rows = X.shape[0]
        known_index = np.full(n_rows, -1, dtype=np.intp)
        score = np.ones(n_rows)
        if self._points.shape[0] == 0:
            return known_index, score
        order = np.argsort(self._point_class, kind="stable")
        sorted_class = self._point_class[order]
        starts = np.flatnonzero(np.r_[True, sorted_class[1:] != sorted_class[:-1]])
        present = sorted_class[starts]
        units = _unit_rows(X)
        step = max(1, _CHUNK_ELEMENTS // self._points.shape[0])
        for start in range(0, n_rows, step):
            rows = slice(start, start + step)
            distance = _cosine_distances(units[rows], self._points)
            psi = weibull_inclusion(distance, self._shape, self._scale)
            # Class score: the largest inclusion probability of its points.
            class_score = np.maximum.reduceat(psi[:, order], starts, axis=1)
            best = np.argmax(class_score, axis=1)
            best_score = class_score[np.arange(best.shape[0]), best]
            nearest = self._point_class[np.argmin(distance, axis=1)]
            known_index[rows] = np.where(best_score > 0, present[best], nearest)
            score[rows] = 1.0 - best_score
        return known_index, score

    def _declares_novel(self, score):
        return score >= self.threshold

    # ---------------------------------------------------------------- helpers
    def _margins(self, points, point_class, others, other_class):
        """Half cosine distances to points of other classes (``inf`` within a
        class), floored at ``_MIN_MARGIN``."""
        margins = np.maximum(_cosine_distances(points, others) / 2.0, _MIN_MARGIN)
        margins[point_class[:, None] == other_class[None, :]] = np.inf
        return margins

    # -------------------------------------------------------------- attributes
    @property
    def points_(self):
        return self._fitted("points_")._points

    @property
    def point_class_(self):
        return self._fitted("point_class_")._point_class

    @property
    def weibull_shape_(self):
        return self._fitted("weibull_shape_")._shape

    @property
    def weibull_scale_(self):
        return self._fitted("weibull_scale_")._scale


def _unit_rows(X):
    """Rows scaled to unit length; zero rows stay zero."""
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    return X / np.where(norms > 0, norms, 1.0)


def _cosine_distances(units, others):
    """``1 - cos`` between unit rows, clipped to [0, 2] against rounding."""
    return np.clip(1.0 - units @ others.T, 0.0, 2.0)


def _smallest(values, k):
    """The ``k`` smallest values of each row, sorted, padded with ``inf``."""
    if values.shape[1] > k:
        values = np.partition(values, k - 1, axis=1)[:, :k]
    elif values.shape[1] < k:
        pad = np.full((values.shape[0], k - values.shape[1]), np.inf)
        values = np.hstack([values, pad])
    return np.sort(values, axis=1)
