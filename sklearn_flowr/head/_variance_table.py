"""Storage of the head's cached scores: ``[m/v, const]`` per class and the
rows ``-1/(2 v)`` shared by classes of the same variance (diagonal classes)."""

import numpy as np

from .._core import log_density_coef
from ._buffers import ClassBuffers


class VarianceTable(ClassBuffers):
    """Buffers of ``ClassState`` with ``group`` (the row of ``quad`` of each
    class, novel last) and the table ``quad`` of its first ``n_quad`` rows."""

    _BUFFERS = (*ClassBuffers._BUFFERS, "group")
    _WITH_NOVEL = ("joint_coef", "group")

    def _new_buffers(self, capacity):
        buffers = super()._new_buffers(capacity)
        buffers["joint_coef"] = np.empty((capacity + 1,
                                          self.n_features + 1 + self.isotropic))
        buffers["group"] = np.zeros(capacity + 1, dtype=np.intp)
        return buffers

    def _grow(self, needed):
        novel = self.group[self.n_classes]
        super()._grow(needed)
        self.group[self.n_classes] = novel

    def checkpoint(self, index):
        undo_rows, quad, n_quad = super().checkpoint(index), self.quad, self.n_quad
        if self.isotropic:  # no table
            return undo_rows

        def undo():
            undo_rows()
            quad[n_quad:] = 0.0  # the table as it was: rows are only added to it
            self.quad, self.n_quad = quad, n_quad
            self._index_quad()
            # Each class finds its own -1/(2 v) row again (ids may have changed).
            n, d = self.n_classes, self.n_features
            coef = np.vstack([log_density_coef(self.nat_mean[:n], self.precision[:n],
                                               self.sigma), self.prior_coef])
            self.group[: n + 1] = self._quad_ids(coef[:, d:-1])

        return undo

    def __getstate__(self):
        state = super().__getstate__()
        state["group"] = self.group[: self.n_classes + 1].copy()
        del state["_quad_index"]
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._index_quad()

    def _index_quad(self):
        self._quad_index = {row.tobytes(): j
                            for j, row in enumerate(self.quad[: self.n_quad])}

    def _set_coef(self, index, coef):
        """Cache :func:`log_density_coef` rows ``coef`` (k, d + p + 1), numerators
        added, of the classes ``index`` (k,) or a slice."""
        if self.isotropic:
            self.joint_coef[index] = coef
            return
        d = self.n_features
        self.joint_coef[index, :d] = coef[:, :d]
        self.joint_coef[index, d] = coef[:, -1]
        self.group[index] = self._quad_ids(coef[:, d:-1])

    def _split(self, coef):
        """:func:`log_density_coef` rows ``coef`` as :func:`grouped_log_density`'s
        ``coef, quad, group`` (each row its own group)."""
        if self.isotropic:
            return coef, self.quad[:0], None
        d = self.n_features
        return (np.delete(coef, np.s_[d:-1], axis=1), coef[:, d:-1],
                np.arange(coef.shape[0]))

    def _quad_ids(self, quad):
        """The rows of ``self.quad`` equal to ``quad`` (k, p), new ones added."""
        if quad.shape[0] == 1:  # one class (the online step)
            key = quad.tobytes()
            found = self._quad_index.get(key)
            if found is None:
                if self.n_quad == self.quad.shape[0]:
                    self._make_quad_room(1)
                found = self._quad_index[key] = self.n_quad
                self.quad[found] = quad[0]
                self.n_quad += 1
            return found
        unique, inverse = np.unique(quad, axis=0, return_inverse=True)
        ids = np.array([self._quad_index.get(row.tobytes(), -1) for row in unique],
                       dtype=np.intp)
        new = ids < 0
        if new.any():
            ids[new] = self._add_quad(unique[new])
        return ids[inverse.reshape(-1)]

    def _add_quad(self, rows):
        """Add rows absent from ``quad``; their places."""
        self._make_quad_room(rows.shape[0])
        ids = self.n_quad + np.arange(rows.shape[0])
        self.quad[ids] = rows
        self.n_quad += rows.shape[0]
        self._quad_index.update((row.tobytes(), int(j))
                                for j, row in zip(ids, rows, strict=True))
        return ids

    def _make_quad_room(self, n_new):
        """Room for ``n_new`` rows in ``quad``: the rows no class uses dropped
        (the others renumbered), and the table doubled if still short."""
        if self.n_quad + n_new <= self.quad.shape[0]:
            return
        n, n_used = self.n_classes + 1, self.n_quad
        ids = self.group[:n]
        # Rows of classes being added hold no id yet.
        live = np.unique(ids[(ids >= 0) & (ids < n_used)])
        remap = np.zeros(max(n_used, 1), dtype=np.intp)
        remap[live] = np.arange(live.shape[0])
        self.group[:n] = remap[np.clip(ids, 0, remap.shape[0] - 1)]
        quad = np.zeros((2 * (live.shape[0] + n_new) + 16, self.quad.shape[1]))
        quad[: live.shape[0]] = self.quad[live]
        self.quad, self.n_quad = quad, live.shape[0]
        self._index_quad()
        self._drop_growth()  # its copies hold the old ids
