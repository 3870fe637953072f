"""Per-class row buffers that grow without pausing a stream, and their journal.

The head's state keeps one row per class in each of a few arrays
(``ClassBuffers._BUFFERS``), with spare rows so that a new class costs
amortised O(d). A prediction needs each array in one piece (one matrix
product), so growing means copying every row into a larger array. Copied at
once, that is one long pause in a stream of short steps (tens of
milliseconds at 10^4 classes, proportionally more beyond). Large buffers
therefore grow *incrementally*: once three quarters full, arrays of twice the
capacity are allocated and every learning call copies a chunk of rows into
them (at least four rows per class it adds, so the copy is complete before the
current arrays fill up); rows changed after they were copied are copied again.
When the current arrays are full the next ones take over at the cost of the
last chunk. Capacity still doubles, so memory stays within a few times the
classes' size, and NumPy's lazily mapped pages keep the untouched part free.
Buffers with no spare row at all -- sized exactly by ``fit`` or by unpickling,
which keep no slack -- have nothing to spread the copy over: their first new
class copies them at once (10 ms at 10^4 classes and d=128), and later
growths are incremental.

Learning is all-or-nothing (``_online_base``): :meth:`ClassBuffers.checkpoint`
returns the undo of what learning rows of some classes changes in place.
"""

import numpy as np

# Buffers of fewer elements (rows x width, over all arrays) are copied at once
# when they grow: at most a few milliseconds.
_INCREMENTAL_ELEMENTS = 1 << 21
# Rows copied into the next buffers per learning call, at least.
_ROWS_PER_CALL = 64


def growth_window(capacity, n_classes):
    """Whether buffers of ``capacity`` rows holding ``n_classes`` classes are
    three quarters used or more, but not full: when a growth may start."""
    return 3 * capacity <= 4 * n_classes < 4 * capacity


class ClassBuffers:
    """Mixin of ``OnlineClassState``: the growable per-class arrays.

    The host defines ``n_features``, ``prior_precision`` (its length is the
    width of ``precision``), ``prior_coef`` (the width of ``joint_coef``) and
    keeps ``n_classes`` and ``crp_total``.
    """

    _BUFFERS = ("nat_mean", "precision", "n_obs", "crp_count", "frozen",
                "joint_coef")
    # The arrays being filled for the next capacity (name -> array) and how
    # many rows they hold; None while no growth is under way. Class-level
    # defaults: states pickled before incremental growth load without them.
    _next = None
    _moved = 0

    def _new_buffers(self, capacity):
        d, p = self.n_features, self.prior_precision.shape[0]
        return {
            "nat_mean": np.empty((capacity, d)),
            "precision": np.empty((capacity, p)),
            "n_obs": np.zeros(capacity),
            "crp_count": np.zeros(capacity),
            "frozen": np.zeros(capacity, dtype=bool),
            # One spare row for the novel class.
            "joint_coef": np.empty((capacity + 1, self.prior_coef.shape[0])),
        }

    def _allocate(self, capacity):
        for name, buffer in self._new_buffers(capacity).items():
            setattr(self, name, buffer)

    @property
    def capacity(self):
        """Classes the buffers hold before they must grow."""
        return self.n_obs.shape[0]

    def _copy_rows(self, target, start, stop):
        for name in self._BUFFERS:
            target[name][start:stop] = getattr(self, name)[start:stop]

    def _grow(self, needed):
        """Make room for ``needed`` classes: the next buffers take over (the
        rows not copied yet are copied now), or, without them, larger ones
        are filled at once."""
        capacity = self.capacity
        if needed <= capacity:
            return
        target, start = self._next, self._moved
        if target is None or target["n_obs"].shape[0] < needed:
            target, start = self._new_buffers(max(needed, 2 * capacity)), 0
        n = self.n_classes
        self._copy_rows(target, start, n)
        target["joint_coef"][n] = self.joint_coef[n]  # the novel class
        self._next, self._moved = None, 0
        for name in self._BUFFERS:
            setattr(self, name, target[name])

    def _advance_growth(self, n_rows):
        """After a learning call of ``n_rows`` rows: copy a chunk of rows into
        the next buffers, starting them once three quarters are used."""
        if self._next is None:
            capacity = self.n_obs.shape[0]
            # Full buffers (sized exactly by ``fit`` or a pickle) grow at
            # once on their next class: nothing to spread the copy over.
            if not growth_window(capacity, self.n_classes) or (
                    capacity * (2 * self.n_features + 4) < _INCREMENTAL_ELEMENTS):
                return
            self._next, self._moved = self._new_buffers(2 * capacity), 0
        start = self._moved
        stop = min(self.n_classes, start + max(_ROWS_PER_CALL, 4 * n_rows))
        self._copy_rows(self._next, start, stop)
        self._moved = stop

    def _mirror(self, rows):
        """Copy rows changed in place (an int or an index array) into the
        next buffers where those already hold them."""
        target = self._next
        if target is None:
            return
        if not isinstance(rows, (int, np.integer)):
            rows = rows[rows < self._moved]
            if rows.shape[0] == 0:
                return
        elif rows >= self._moved:
            return
        for name in self._BUFFERS:
            target[name][rows] = getattr(self, name)[rows]

    def _drop_growth(self):
        """Forget the next buffers (a change they would have to follow)."""
        self._next, self._moved = None, 0

    def checkpoint(self, index):
        """A callable that undoes what learning rows of classes ``index`` does.

        Learning appends classes (past ``n_classes``, or into grown buffers)
        and rewrites the rows of the classes it touches plus the novel row of
        ``joint_coef``. The undo keeps the buffers, the counters and a copy of
        those rows: O(touched x d) to take, instead of a copy of all classes.
        It also drops a growth under way, whose copied rows may have followed
        the changes.

        Parameters
        ----------
        index : ndarray of shape (n_rows,)
            Class index of each row about to be learned; indices from
            ``n_classes`` on are classes about to be added.

        Returns
        -------
        undo : callable
            Puts the state back as it is now.
        """
        if index.shape[0] == 1:  # the online hot path: no sort
            return self.checkpoint_one(int(index[0]))
        return self._checkpoint_rows(np.unique(index[index < self.n_classes]))

    def checkpoint_one(self, i):
        """:meth:`checkpoint` of one row of class ``i`` (``n_classes``: a class
        about to be added)."""
        if i < self.n_classes:
            return self._checkpoint_class(i)
        return self._checkpoint_rows(slice(0, 0))

    def _checkpoint_rows(self, rows):
        """:meth:`checkpoint` that saves the rows ``rows`` (a slice or sorted
        distinct indices of existing classes)."""
        n = self.n_classes
        buffers = [(name, getattr(self, name)) for name in self._BUFFERS]
        saved = [buffer[rows].copy() for _, buffer in buffers]
        joint_coef = buffers[-1][1]
        novel = joint_coef[n].copy()
        crp_total = self.crp_total

        def undo():
            for (name, buffer), values in zip(buffers, saved, strict=True):
                buffer[rows] = values
                setattr(self, name, buffer)
            joint_coef[n] = novel
            self.n_classes, self.crp_total = n, crp_total
            self._drop_growth()

        return undo

    def _checkpoint_class(self, i):
        """The undo of learning one row of the existing class ``i``: only its
        rows change (no class is added, so neither the buffers nor the novel
        row nor the frozen flags do)."""
        nat_mean, precision, n_obs, crp_count, joint_coef = (
            self.nat_mean, self.precision, self.n_obs, self.crp_count,
            self.joint_coef)
        # (an element of a 1-d buffer is a copy already; so is one precision
        # of an isotropic state, as a float: cheaper than a one-entry copy)
        saved = (nat_mean[i].copy(),
                 precision.item(i, 0) if precision.shape[1] == 1
                 else precision[i].copy(),
                 n_obs[i], crp_count[i], joint_coef[i].copy())
        n, crp_total = self.n_classes, self.crp_total

        def undo():
            (nat_mean[i], precision[i], n_obs[i], crp_count[i],
             joint_coef[i]) = saved
            self.n_classes, self.crp_total = n, crp_total
            self._drop_growth()

        return undo

    def compact(self):
        """Shrink buffers to the used size (for pickling)."""
        self._drop_growth()
        for name in self._BUFFERS:
            rows = self.n_classes + (name == "joint_coef")
            setattr(self, name, getattr(self, name)[:rows].copy())

    def __getstate__(self):
        self.compact()
        state = self.__dict__.copy()
        state.pop("_next", None)
        state.pop("_moved", None)
        return state
