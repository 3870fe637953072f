"""Per-class buffers of the head's state that grow without pausing a stream:
capacity doubles, large buffers copied into the next a chunk per learning call."""

import numpy as np

# Buffers of fewer elements (1 MB of float64) are copied at once; else at
# least this many rows per learning call. A copy's cost is mostly the first
# touch of the new pages: 10 MB took 30 ms in one call on a virtual machine
# whose page faults are slow, a pause a stream should not see.
_INCREMENTAL_ELEMENTS = 1 << 17
_ROWS_PER_CALL = 64


class ClassBuffers:
    """Storage base of ``ClassState`` (which sets ``n_features``,
    ``prior_precision``, ``prior_coef``, ``n_classes`` and ``crp_total``)."""

    _BUFFERS = ("nat_mean", "precision", "n_obs", "crp_count", "frozen", "joint_coef",
                "group")
    _WITH_NOVEL = ("precision", "joint_coef", "group")  # a spare row: the novel class
    # The buffers being filled for the next capacity (None: no growth under
    # way) and how many rows they hold.
    _next = None
    _moved = 0

    def _new_buffers(self, capacity):
        return {
            # lam of isotropic classes (diagonal ones: rows of the variance table)
            # q of isotropic classes (exact sums; diagonal ones: from joint_coef)
            "nat_mean": np.empty((capacity, self.n_features * self.isotropic)),
            "precision": np.empty((capacity + 1, int(self.isotropic))),
            "n_obs": np.zeros(capacity),
            "crp_count": np.zeros(capacity),
            "frozen": np.zeros(capacity, dtype=bool),
            "joint_coef": np.empty((capacity + 1,
                                    self.n_features + 1 + self.isotropic)),
            "group": np.zeros(capacity + 1, dtype=np.intp),
        }

    def class_count(self):
        """Rows each class was conditioned on, shape (N,) (a view)."""
        return self.n_obs[: self.n_classes]

    def crp_counts(self):
        """CRP counts ``c_n``, shape (N,) (a view)."""
        return self.crp_count[: self.n_classes]

    def _allocate(self, capacity):
        for name, buffer in self._new_buffers(capacity).items():
            setattr(self, name, buffer)

    def _copy_rows(self, target, start, stop):
        for name in self._BUFFERS:
            target[name][start:stop] = getattr(self, name)[start:stop]

    def _grow(self, needed):
        """Make room for ``needed`` classes: the next buffers take over (rows
        not copied yet are copied now), or larger ones are filled at once."""
        capacity = self.n_obs.shape[0]
        if needed <= capacity:
            return
        target, start = self._next, self._moved
        if target is None or target["n_obs"].shape[0] < needed:
            target, start = self._new_buffers(max(needed, 2 * capacity)), 0
        n = self.n_classes
        self._copy_rows(target, start, n)
        for name in self._WITH_NOVEL:
            target[name][n] = getattr(self, name)[n]
        self._next, self._moved = None, 0
        for name in self._BUFFERS:
            setattr(self, name, target[name])

    def _advance_growth(self, n_rows):
        """After learning ``n_rows`` rows: copy a chunk of rows into the next
        buffers, starting them once three quarters are used."""
        if self._next is None:
            capacity = self.n_obs.shape[0]
            if not 3 * capacity <= 4 * self.n_classes < 4 * capacity or (
                    capacity * (self.n_features + 4) < _INCREMENTAL_ELEMENTS):
                return
            self._next, self._moved = self._new_buffers(2 * capacity), 0
        start = self._moved
        stop = min(self.n_classes, start + max(_ROWS_PER_CALL, 4 * n_rows))
        self._copy_rows(self._next, start, stop)
        self._moved = stop

    def _mirror(self, rows):
        """Copy rows changed in place (an index array) into the next buffers
        where those already hold them."""
        if self._next is None:
            return
        rows = rows[rows < self._moved]
        for name in self._BUFFERS:
            self._next[name][rows] = getattr(self, name)[rows]

    def _drop_growth(self):
        """Forget the next buffers (a change they would have to follow)."""
        self._next, self._moved = None, 0

    def checkpoint(self, index):
        """The undo of learning rows of the classes ``index``."""
        n = self.n_classes
        if index.shape[0] == 1 and index[0] < n:  # one row of a known class
            return self._checkpoint_class(int(index[0]))
        rows = np.unique(index[index < n])
        buffers = [getattr(self, name) for name in self._BUFFERS]
        # The novel class's row too: new classes move it.
        where = [np.append(rows, n) if name in self._WITH_NOVEL else rows
                 for name in self._BUFFERS]
        saved = [buffer[at] for buffer, at in zip(buffers, where, strict=True)]
        crp_total = self.crp_total

        def undo():
            for name, buffer, at, values in zip(self._BUFFERS, buffers, where, saved,
                                                strict=True):
                buffer[at] = values
                setattr(self, name, buffer)
            self.n_classes, self.crp_total = n, crp_total
            self._drop_growth()

        return undo

    def _checkpoint_class(self, i):
        """:meth:`checkpoint` of one row of the known class ``i``."""
        # What a row changes (numpy scalars are copies already).
        buffers = (self.nat_mean, self.precision, self.joint_coef, self.n_obs,
                   self.crp_count, self.group)
        rows = (buffers[0][i].copy(), buffers[1][i].copy(), buffers[2][i].copy(),
                *(buffer[i] for buffer in buffers[3:]))
        crp_total = self.crp_total

        def undo():
            for buffer, row in zip(buffers, rows, strict=True):
                buffer[i] = row
            self.crp_total = crp_total
            self._drop_growth()

        return undo

    def __getstate__(self):
        # The used rows, copied (the live buffers and a growth stay as they are);
        # isotropic: without the scores' coefficients, a cache of the exact sums.
        state = self.__dict__.copy()
        for name in self._BUFFERS:
            n = self.n_classes + (name in self._WITH_NOVEL)
            state[name] = state[name][:n].copy()
        for name in ("joint_coef" if self.isotropic else "", "_next", "_moved"):
            state.pop(name, None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        if "joint_coef" not in state:  # rebuilt from the sums (not written:
            n = self.n_classes  # loaded arrays may be read-only)
            self.joint_coef = np.empty((n + 1, self.n_features + 1 + self.isotropic))
            self._refresh(np.arange(n), None if self.isotropic else self.nat_mean)
            self._refresh_novel(precision=False)
            if not self.isotropic:  # (saved with the sums by an earlier release)
                self.nat_mean = np.empty((n, 0))
