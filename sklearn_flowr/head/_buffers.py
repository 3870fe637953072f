"""Per-class buffers of the head's state that grow without pausing a stream:
capacity doubles, large buffers copied into the next a chunk per learning call."""

import numpy as np

# Buffers of fewer elements are copied at once (a few ms); else at least
# this many rows per learning call.
_INCREMENTAL_ELEMENTS = 1 << 21
_ROWS_PER_CALL = 64


class ClassBuffers:
    """Storage base of ``ClassState`` (which sets ``n_features``,
    ``prior_precision``, ``prior_coef``, ``n_classes`` and ``crp_total``)."""

    _BUFFERS = ("nat_mean", "n_obs", "crp_count", "frozen", "joint_coef", "group")
    _WITH_NOVEL = ("joint_coef", "group")  # one spare row: the novel class
    # The buffers being filled for the next capacity (None: no growth under
    # way) and how many rows they hold.
    _next = None
    _moved = 0

    def _new_buffers(self, capacity):
        return {
            "nat_mean": np.empty((capacity, self.n_features)),
            "n_obs": np.zeros(capacity),
            "crp_count": np.zeros(capacity),
            "frozen": np.zeros(capacity, dtype=bool),
            "joint_coef": np.empty((capacity + 1,
                                    self.n_features + 1 + self.isotropic)),
            "group": np.zeros(capacity + 1, dtype=np.intp),
        }

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
                    capacity * (2 * self.n_features + 4) < _INCREMENTAL_ELEMENTS):
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
        known = index[index < self.n_classes]
        if known.shape[0] > 1:
            known = np.unique(known)
        return self._checkpoint_rows(np.append(known, self.n_classes))

    def _checkpoint_rows(self, rows):
        """The undo of changes to ``rows`` (the novel class's last)."""
        buffers = {name: getattr(self, name) for name in self._BUFFERS}
        known = rows[:-1]
        saved = {name: buffer[rows if name in self._WITH_NOVEL else known].copy()
                 for name, buffer in buffers.items()}
        n, crp_total = self.n_classes, self.crp_total

        def undo():
            for name, buffer in buffers.items():
                buffer[rows if name in self._WITH_NOVEL else known] = saved[name]
                setattr(self, name, buffer)
            self.n_classes, self.crp_total = n, crp_total
            self._drop_growth()

        return undo

    def __getstate__(self):
        # The used rows, copied (the live buffers and a growth stay as they are).
        state = self.__dict__.copy()
        for name in self._BUFFERS:
            n = self.n_classes + (name in self._WITH_NOVEL)
            state[name] = state[name][:n].copy()
        state.pop("_next", None)
        state.pop("_moved", None)
        return state
