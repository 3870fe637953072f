"""The Extreme Value Machine on cosine distances, learned online."""

from numbers import Integral, Real

import numpy as np
from sklearn.utils._param_validation import Interval

from .._core import unit_rows
from ._base import OpenWorldBaseline, fill_doc
from ._weibull import fit_weibull, weibull_inclusion

__all__ = ["EVMClassifier"]

# Elements of the per-chunk distance matrices (~32 MB of float64).
_CHUNK_ELEMENTS = 4_000_000
# Floor of the margins: the Weibull fit takes their logarithm.
_MIN_MARGIN = 1e-12
# ``(d / scale)^shape`` from which ``exp(-that)`` is 0 in float64 (745.2, and
# room for the rounding of the power).
_PSI_ZERO = 750.0
# Most rows in one chunk of a stream (see ``EVMClassifier._chunk_rows``).
_MAX_CHUNK_ROWS = 512


@fill_doc
class EVMClassifier(OpenWorldBaseline):
    """Extreme Value Machine: every learned point ``x_i`` fits a Weibull to its
    ``tail_size`` smallest half cosine distances to other classes' points;
    ``Psi_i(x) = exp(-(d(x_i, x) / lambda_i)^kappa_i)``. A row gets the class
    of the largest ``Psi_i``; novelty score ``1 - max_i Psi_i(x)`` (1 while no
    class exists).

    Parameters
    ----------
    tail_size : int >= 1, default=10
        Smallest margins each Weibull is fitted to (the paper's 10).
    threshold : float in [0, 1], default=0.5
        Novelty score at or above which a row is declared novel.
    %(novel_label)s

    Attributes
    ----------
    %(classes_)s
    points_ : ndarray of shape (n_points, n_features)
        Every learned row, scaled to unit length.
    point_class_ : ndarray of shape (n_points,)
        Index into ``classes_`` of each point's class.
    weibull_shape_ : ndarray of shape (n_points,)
        ``kappa_i``; ``inf`` when all margins of the tail are equal (a step).
    weibull_scale_ : ndarray of shape (n_points,)
        ``lambda_i``; ``inf`` while the point has no negative.
    %(fitted_)s

    References
    ----------
    .. [1] E. Rudd, L. Jain, W. Scheirer and T. Boult, "The Extreme Value
       Machine", IEEE TPAMI, 2018.
    .. [2] %(willes)s (EVM baseline, tail size 10).

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
    _empty_score = 1.0

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
        new_points = unit_rows(X)
        n_old = self._points.shape[0]
        changed = np.zeros(n_old, dtype=bool)
        # Arrays are replaced, never written in place: an interrupted step
        # leaves the ones it started from intact.
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
        """Predict-then-learn by chunks of rows: equals ``_score`` then ``_learn``
        row by row, with one Weibull fit per chunk."""
        units = unit_rows(X)
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
        """Rows per stream chunk: its (n_points + rows) x (rows + tail_size)
        matrices stay within 2 MB, in the CPU's cache (docs/results.rst)."""
        rows = np.arange(1, _MAX_CHUNK_ROWS + 1)
        fits = ((self._points.shape[0] + rows) * (rows + self.tail_size)
                <= _CHUNK_ELEMENTS // 16)
        return int(rows[fits][-1]) if fits[0] else 1

    def _stream_chunk(self, units, index):
        """Score each unit row with the state before it, then learn it; the best
        known class index (-1: no point yet) and novelty score of each row."""
        # A point's tail changes at step t only when fewer than tail_size of
        # the margins it holds before t are <= the margin m to row t: all
        # (point, step) pairs are tested at once, every new tail is fitted in
        # one fit_weibull call, and row t is scored with each point's last
        # Weibull before t.
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
        units = unit_rows(X)
        step = max(1, _CHUNK_ELEMENTS // self._points.shape[0])
        for start in range(0, n_rows, step):
            rows = slice(start, start + step)
            distance = _cosine_distances(units[rows], self._points)
            psi = _leading_inclusion(distance, self._shape, self._scale)
            known_index[rows], score[rows] = _decide(distance, psi,
                                                     self._point_class)
        return known_index, score

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
    """For each candidate margin ``value[p, i]`` of point ``p`` (``inf`` pads),
    how many margins ``<=`` it the point holds before it (earlier ones, tail)."""
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
    """``weibull_inclusion`` where it can decide a row's largest ``Psi``, 0
    elsewhere; ``in_force``: (moved points, their Weibull at each row)."""
    # Psi > exp(-1) exactly where d < scale: in a row with such a point, the
    # points at d >= scale cannot be its largest. Otherwise Psi is exactly 0
    # beyond the reach scale * 750^(1 / shape). The decision is the full
    # matrix's, to the bit.
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
    """Best known class index (largest ``Psi``, else nearest point) and
    novelty score of each row."""
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
    """Half cosine distances to points of other classes (``inf`` within a
    class), floored at ``_MIN_MARGIN``."""
    margin = np.multiply(distance, 0.5)  # (d / 2 exactly)
    np.maximum(margin, _MIN_MARGIN, out=margin)
    margin[point_class[:, None] == other_class[None, :]] = np.inf
    return margin


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
