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
# ``(d / scale)^shape`` from which ``Psi = exp(-that)`` is 0 in float64
# (``exp(-745.2)`` rounds to 0; 750 leaves room for the rounding of the power).
_PSI_ZERO = 750.0
# Most rows in one chunk of a stream (see ``EVMClassifier._chunk_rows``).
_MAX_CHUNK_ROWS = 512


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
    :func:`~sklearn_flowr.baselines._weibull.fit_weibull`). ``open_world_step``
    does the same for a chunk of rows at once: it finds every step at which a
    point's tail changes and fits all those tails in one call, then scores
    each row with the Weibulls of the step before it: the results of
    predicting and learning row by row, up to the rounding of the distances.

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
            margins = _margins(_cosine_distances(self._points[rows], new_points),
                               self._point_class[rows], index)
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
                _margins(_cosine_distances(new_points[rows], points), index[rows],
                         point_class),
                self.tail_size,
            )
        tails = np.vstack([tails, new_tails])
        refit = np.r_[np.flatnonzero(changed), n_old + np.arange(new_points.shape[0])]
        shape = np.concatenate([self._shape, np.empty(new_points.shape[0])])
        scale = np.concatenate([self._scale, np.empty(new_points.shape[0])])
        shape[refit], scale[refit] = fit_weibull(tails[refit])
        self._points, self._point_class = points, point_class
        self._tails, self._shape, self._scale = tails, shape, scale

    def _stream(self, X, index, is_new):
        """Predict-then-learn, vectorised by chunks of rows.

        Equals :meth:`_score` then :meth:`_learn` row by row (the base class's
        loop), with one Weibull fit per chunk for every tail that changes in
        it (see :meth:`_stream_chunk`) instead of one fit per row.
        """
        units = _unit_rows(X)
        n_rows = X.shape[0]
        known_index = np.empty(n_rows, dtype=np.intp)
        score = np.empty(n_rows)
        start = 0
        while start < n_rows:
            rows = slice(start, start + self._chunk_rows())
            known_index[rows], score[rows] = self._stream_chunk(units[rows],
                                                                index[rows])
            start = rows.stop
        return known_index, score, self._is_novel(known_index, score)

    def _chunk_rows(self):
        """Rows per stream chunk: its matrices of (n_points + rows) x (rows +
        tail_size) elements stay within ``_CHUNK_ELEMENTS / 16`` (2 MB of
        float64, so that they stay in the CPU's cache; docs/results.rst has
        the timings of other sizes). The per-point comparisons go in blocks
        of their own."""
        rows = np.arange(1, _MAX_CHUNK_ROWS + 1)
        fits = ((self._points.shape[0] + rows) * (rows + self.tail_size)
                <= _CHUNK_ELEMENTS // 16)
        return int(rows[fits][-1]) if fits[0] else 1

    def _stream_chunk(self, units, index):
        """Score each unit row with the state before it, then learn it.

        A point's tail (its ``tail_size`` smallest margins) changes at step
        ``t`` only when the margin ``m`` to row ``t`` is smaller than the
        tail's largest, i.e. when fewer than ``tail_size`` of the margins the
        point holds before step ``t`` are ``<= m``. All (point, step) pairs
        are tested at once by comparing each point's candidate margins with
        each other; every tail a change creates, and every new row's first
        tail, is fitted in one :func:`fit_weibull` call. Row ``t`` is then
        scored with, for each point, the last Weibull fitted before it.

        Parameters
        ----------
        units : ndarray of shape (n_rows, n_features)
            Rows scaled to unit length, in stream order.
        index : ndarray of shape (n_rows,)
            Class index of each row.

        Returns
        -------
        known_index : ndarray of shape (n_rows,)
            Best known class index (-1 while no point exists).
        score : ndarray of shape (n_rows,)
            Novelty score.
        """
        k = self.tail_size
        n_old, n_rows = self._points.shape[0], units.shape[0]
        points = np.vstack([self._points, units])
        point_class = np.concatenate([self._point_class, index])
        n_points = points.shape[0]
        step = np.arange(n_rows)
        born = np.r_[np.full(n_old, -1), step]  # the step a point is learned at
        distance = _cosine_distances(units, points)  # (n_rows, n_points)
        # later[t, q]: the margin row t gives point q if q exists before step
        # t (an old point, or a row learned earlier in the chunk), else inf.
        later = _margins(distance, index, point_class)
        later[:, n_old:][step[None, :] >= step[:, None]] = np.inf
        # A new point's first tail: the old points and the earlier rows, i.e.
        # its own row of ``later`` (margins are symmetric).
        first_tails = _smallest(later, k)
        tails = np.vstack([self._tails, first_tails])  # (n_points, k)
        # Margins learned after a point's birth that can enter its tail.
        when, point = np.nonzero(later < np.ascontiguousarray(tails[:, -1]))
        by_point = np.argsort(point, kind="stable")  # by point, then step
        point, when = point[by_point], when[by_point]
        owners, owner = np.unique(point, return_inverse=True)
        count = np.bincount(owner, minlength=owners.shape[0])
        slot = np.arange(point.shape[0]) - (np.cumsum(count) - count)[owner]
        width = int(count.max(initial=0))
        value = np.full((owners.shape[0], width), np.inf)
        value[owner, slot] = later[when, point]
        # Margins <= m the point holds before m's step: its tail at the chunk's
        # start and its earlier candidates (the others exceed that tail).
        held = _margins_held(value, tails[owners])
        enters = held[owner, slot] < k
        point, when, owner, slot = (a[enters] for a in (point, when, owner, slot))
        upto = np.where(np.arange(width)[None, :] <= slot[:, None], value[owner],
                        np.inf)
        new_tails = _smallest(np.hstack([tails[point], upto]), k)
        new_shape, new_scale = fit_weibull(np.vstack([first_tails, new_tails]))
        # Weibull j < n_points is point j's at the chunk's start (or birth);
        # n_points + e is change e's (changes sorted by point, then step).
        shape = np.concatenate([self._shape, new_shape])
        scale = np.concatenate([self._scale, new_scale])
        n_changes = np.bincount(point, minlength=n_points)
        first_change = n_points + np.cumsum(n_changes) - n_changes
        # The Weibull of point q in force at step t is q's unless q changes
        # in the chunk: then it is the last change before t (if any).
        moved = np.flatnonzero(n_changes)
        in_force = None
        if moved.size:
            changes = np.zeros((moved.shape[0], n_rows), dtype=np.intp)
            changes[np.searchsorted(moved, point), when] = 1
            n_before = np.cumsum(changes, axis=1) - changes
            in_force = (moved, np.where(n_before == 0, moved[:, None],
                                        first_change[moved, None] + n_before - 1).T)
        exists = born[None, :] < step[:, None]  # (n_rows, n_points)
        psi = _leading_inclusion(distance, shape, scale, exists, in_force)
        # Points not learned yet are out of reach (only the chunk's own rows'
        # columns hold such entries).
        distance[:, n_old:][~exists[:, n_old:]] = np.inf
        known_index, score = _decide(distance, psi, point_class)
        empty = ~exists.any(axis=1)
        known_index[empty], score[empty] = -1, 1.0
        last = np.where(n_changes > 0, first_change + n_changes - 1,
                        np.arange(n_points))
        changed = n_changes > 0
        tails[changed] = new_tails[last[changed] - n_points]
        self._points, self._point_class, self._tails = points, point_class, tails
        self._shape, self._scale = shape[last], scale[last]
        return known_index, score

    def _score(self, X):
        n_rows = X.shape[0]
        known_index = np.full(n_rows, -1, dtype=np.intp)
        score = np.ones(n_rows)
        if self._points.shape[0] == 0:
            return known_index, score
        units = _unit_rows(X)
        step = max(1, _CHUNK_ELEMENTS // self._points.shape[0])
        for start in range(0, n_rows, step):
            rows = slice(start, start + step)
            distance = _cosine_distances(units[rows], self._points)
            psi = _leading_inclusion(distance, self._shape, self._scale)
            known_index[rows], score[rows] = _decide(distance, psi,
                                                     self._point_class)
        return known_index, score

    def _declares_novel(self, score):
        return score >= self.threshold

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


def _margins_held(value, tails):
    """For each candidate margin ``value[p, i]`` of point ``p`` (its ``i``-th
    in stream order; ``inf`` pads), how many margins ``<=`` it the point
    holds before it: its earlier candidates and its tail ``tails[p]``.

    The comparison tensors, (points x width x (width + tail_size)), go in
    blocks of points of at most ``_CHUNK_ELEMENTS`` elements.
    """
    n_owners, width = value.shape
    before = np.arange(width)[None, :] < np.arange(width)[:, None]
    held = np.empty((n_owners, width), dtype=np.intp)
    step = max(1, _CHUNK_ELEMENTS // max(1, width * (width + tails.shape[1])))
    for start in range(0, n_owners, step):
        block = slice(start, start + step)
        candidate = value[block, :, None]
        held[block] = (np.sum((value[block, None, :] <= candidate) & before, axis=2)
                       + np.sum(tails[block, None, :] <= candidate, axis=2))
    return held


def _leading_inclusion(distance, shape, scale, exists=None, in_force=None):
    """``weibull_inclusion`` where it can decide a row, 0 elsewhere.

    :func:`_decide` reads only each row's largest ``Psi`` and the classes
    that reach it. ``Psi = exp(-(d / scale)^shape)`` exceeds ``exp(-1)``
    exactly where ``d < scale``, so in a row with such a point every point
    at ``d >= scale`` is below the row's largest and is left at 0 (the
    exponentials of most stored points are never taken). A row without one
    needs every ``Psi`` that is not 0, and ``Psi`` is exactly 0 in float64
    from ``(d / scale)^shape >= 750`` on (``exp(-745.2)`` rounds to 0), i.e.
    beyond the point's reach ``scale * 750^(1 / shape)``: only the points
    within reach are evaluated. The decision is the one the full matrix
    gives, to the bit.

    Parameters
    ----------
    distance : ndarray of shape (n_rows, n_points)
    shape, scale : ndarray of shape (n_weibulls,)
        The Weibulls; point q's is q (``n_weibulls >= n_points``), but for
        the points of ``in_force``.
    exists : ndarray of bool, shape (n_rows, n_points), or None
        The points each row may use (the others get 0); None: all.
    in_force : (ndarray of shape (n_moved,), ndarray of shape (n_rows, n_moved))
        or None
        Points whose Weibull changes from row to row, and the Weibull of
        each at each row; None: none.
    """
    n_points = distance.shape[1]
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        reach = scale * _PSI_ZERO ** (1.0 / shape)
        near = distance < scale[:n_points]
        if in_force is not None:
            moved, weibull = in_force
            near[:, moved] = distance[:, moved] < scale[weibull]
    if exists is not None:
        near &= exists
    everywhere = np.flatnonzero(~near.any(axis=1))
    if everywhere.size:
        far_distance = distance[everywhere]
        far = far_distance <= reach[:n_points]
        if in_force is not None:
            far[:, moved] = far_distance[:, moved] <= reach[weibull[everywhere]]
        near[everywhere] = far if exists is None else far & exists[everywhere]
    # Index arrays of the few evaluated entries: boolean masks would scan
    # the whole matrix once per array they index.
    rows, points = np.nonzero(near)
    index = points
    if in_force is not None:
        slot = np.full(n_points, -1)
        slot[moved] = np.arange(moved.shape[0])
        changing = slot[points] >= 0
        index = points.copy()
        index[changing] = weibull[rows[changing], slot[points[changing]]]
    psi = np.zeros(distance.shape)
    psi[rows, points] = weibull_inclusion(distance[rows, points], shape[index],
                                          scale[index])
    return psi


def _decide(distance, psi, point_class):
    """Best known class index and novelty score of each row.

    A class's score is the largest ``Psi`` of its points; the best class is
    the one with the largest score, or the nearest point's when every score
    is 0. ``distance`` and ``psi`` have shape (n_rows, n_points); a point
    left out of a row has distance ``inf`` and ``Psi`` 0 there.
    """
    rows = np.arange(psi.shape[0])
    first = np.argmax(psi, axis=1)
    best_score = psi[rows, first]
    known_index = point_class[first]
    # Classes tied at a row's largest score: the smallest class index wins
    # (the order of the classes' scores). Ties are rare: only their rows
    # are searched.
    tied = np.flatnonzero(((psi == best_score[:, None]).sum(axis=1) > 1)
                          & (best_score > 0))
    if tied.size:
        known_index[tied] = np.where(psi[tied] == best_score[tied, None],
                                     point_class, np.iinfo(np.intp).max).min(axis=1)
    unreached = np.flatnonzero(best_score <= 0)
    if unreached.size:
        known_index[unreached] = point_class[np.argmin(distance[unreached], axis=1)]
    return known_index, 1.0 - best_score


def _margins(distance, point_class, other_class):
    """Half cosine distances of points to points of other classes (``inf``
    within a class), floored at ``_MIN_MARGIN``; ``distance`` has shape
    (n_points, n_others)."""
    margin = np.multiply(distance, 0.5)  # (d / 2 exactly)
    np.maximum(margin, _MIN_MARGIN, out=margin)
    margin[point_class[:, None] == other_class[None, :]] = np.inf
    return margin


def _unit_rows(X):
    """Rows scaled to unit length; zero rows stay zero."""
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    return X / np.where(norms > 0, norms, 1.0)


def _cosine_distances(units, others):
    """``1 - cos`` between unit rows, clipped to [0, 2] against rounding."""
    distance = units @ others.T
    np.subtract(1.0, distance, out=distance)
    return np.clip(distance, 0.0, 2.0, out=distance)


def _smallest(values, k):
    """The ``k`` smallest values of each row, sorted, padded with ``inf``."""
    if values.shape[1] > k:
        values = np.partition(values, k - 1, axis=1)[:, :k]
    elif values.shape[1] < k:
        pad = np.full((values.shape[0], k - values.shape[1]), np.inf)
        values = np.hstack([values, pad])
    return np.sort(values, axis=1)
