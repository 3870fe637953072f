"""The distinct precisions ``lam`` of the head's diagonal classes: class ``n``
(novel last) uses row ``group[n]`` and shares its ``-1/(2 v)`` row of ``quad``
in the scores, so a class stores only its ``m/v`` and constant."""

import numpy as np

from ._buffers import ClassBuffers


class VarianceTable(ClassBuffers):
    """Buffers of ``ClassState`` and the table of its first ``n_rows`` rows
    ``precision_rows`` (T, p) and ``quad`` (T, p); rows past them are zero."""

    def _start_table(self):
        self.precision_rows = np.zeros((4, self.prior_precision.shape[0]))
        self.quad = np.zeros_like(self.precision_rows)
        self.n_rows = 0
        self._row_index = {}  # a row's bytes -> its place

    def class_precision(self, index):
        """``lam`` of the classes ``index`` (novel: ``n_classes``), (k, p)."""
        if self.isotropic:  # one number a class: no table
            return self.precision[index]
        return self.precision_rows[self.group[index]]

    def nat_means(self, index):
        """``q = m lam`` of the known classes ``index``, (k, d): isotropic, the
        stored sums; else from their coefficients, ``m / v`` times ``v lam = 1 +
        sigma lam`` (rounded: 1e-16 relative an update)."""
        if self.isotropic:
            return self.nat_mean[index]
        return self.joint_coef[index, : self.n_features] * (
            1.0 + self.sigma * self.class_precision(index))

    def _row_ids(self, precision):
        """The rows holding ``precision`` (k, p) (or one class's), new ones
        added."""
        if precision.ndim == 1 or precision.shape[0] == 1:  # one class
            found = self._row_index.get(precision.tobytes())
            return (self._add_rows(precision.reshape(1, -1))[0] if found is None
                    else found)
        # Rows by their bytes (np.unique(axis=0) sorts d-field records: 100x slower).
        keys = [row.tobytes() for row in precision]
        first = {}  # a distinct row -> where it first occurs
        for j, key in enumerate(keys):
            first.setdefault(key, j)
        # Room first: making it drops rows no class uses yet, found or not.
        self._make_room(len(first))
        new = [j for key, j in first.items() if key not in self._row_index]
        if new:
            self._add_rows(precision[new])
        return np.array([self._row_index[key] for key in keys])

    def _add_rows(self, precision):
        """Add rows absent from the table; their places."""
        self._make_room(precision.shape[0])
        ids = self.n_rows + np.arange(precision.shape[0])
        self.precision_rows[ids] = precision
        self.quad[ids] = self._quad(precision)
        self.n_rows += precision.shape[0]
        self._row_index.update((row.tobytes(), int(j))
                               for j, row in zip(ids, precision, strict=True))
        return ids

    def _make_room(self, n_new):
        """Room for ``n_new`` rows: new arrays without the rows no class uses
        (the others renumbered, ``group`` too), doubled if still short."""
        if self.n_rows + n_new <= self.precision_rows.shape[0]:
            return
        n = self.n_classes + 1
        ids = self.group[:n]
        live = np.unique(ids[ids < self.n_rows])
        remap = np.zeros(max(self.n_rows, 1), dtype=np.intp)
        remap[live] = np.arange(live.shape[0])
        self.group = self.group.copy()  # a checkpoint keeps the old arrays
        self.group[:n] = remap[np.minimum(ids, remap.shape[0] - 1)]
        size = 2 * (live.shape[0] + n_new) + 4
        for name in ("precision_rows", "quad"):
            table = np.zeros((size, self.precision_rows.shape[1]))
            table[: live.shape[0]] = getattr(self, name)[live]
            setattr(self, name, table)
        self.n_rows = live.shape[0]
        self._index_rows()
        self._drop_growth()  # its copies hold the old ids

    def _quad(self, precision):
        """-1/(2 v), v = 1/lam + sigma: the factor of u**2 in the log density."""
        return -0.5 / (1.0 / precision + self.sigma)

    def _index_rows(self):
        self._row_index = {row.tobytes(): j
                           for j, row in enumerate(self.precision_rows[: self.n_rows])}

    def checkpoint(self, index):
        undo_rows = super().checkpoint(index)
        if self.isotropic:
            return undo_rows
        saved = self.precision_rows, self.quad, self.n_rows, self.group

        def undo():
            undo_rows()
            self.precision_rows, self.quad, self.n_rows, self.group = saved
            for table in saved[:2]:  # rows are only appended in place
                table[self.n_rows:] = 0.0
            self._index_rows()

        return undo

    def __getstate__(self):
        state = super().__getstate__()
        del state["_row_index"], state["quad"]  # both follow from precision_rows
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        if "quad" not in state:
            self.quad = np.zeros_like(self.precision_rows)
            self.quad[: self.n_rows] = self._quad(self.precision_rows[: self.n_rows])
        self._index_rows()
        super().__setstate__(state)
