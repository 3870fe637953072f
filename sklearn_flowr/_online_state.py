"""Growable float64 per-class state of the CRP-Gaussian head, with its caches.

The head's estimator validates input and speaks scikit-learn; this object only
keeps numbers: natural parameters ``(q_n, lam_n)``, observation and CRP counts,
and, per class, the coefficients that make ``log N(z; m_n, v_n) + log(c_n - a)``
one dot product with ``[z, ||z||**2, 1]`` (see ``_core._gaussian``). Buffers grow
by doubling, so instantiating a class and updating one are amortised O(d), and
a prediction is one matrix product against the cached coefficients: O(N d).

Row ``N`` of the coefficient buffer (just after the ``N`` known classes) always
holds the novel class, so the joint log-likelihood of a batch against all
``N + 1`` columns is a single contiguous GEMM.

With full covariances (``covariance="full"``) the state lives in the basis
where the noise is ``I`` and the prior diagonal (``_core._covariance``): rows
are mapped into it on the way in, class means and variances back on the way
out; everything in between is the diagonal head unchanged.
"""

import numpy as np

from ._core import (
    crp_log_normaliser,
    crp_log_numerators,
    log_density_coef,
    log_density_features,
    log_softmax,
)

# Elements of the per-chunk temporaries in ``stream``: bounds memory whatever
# the sequence length or number of classes (~32 MB of float64).
_CHUNK_ELEMENTS = 4_000_000
_MAX_CHUNK_ROWS = 512


class OnlineClassState:
    """Sufficient statistics of all instantiated classes plus the shared prior.

    Parameters
    ----------
    prior_mean : ndarray of shape (d,)
        ``mu0``.
    prior_var : ndarray of shape (1,) or (d,)
        ``s0``; one entry means an isotropic prior.
    sigma : float
        Class-noise variance.
    a, b : float
        CRP discount and concentration.
    class_prior : {"crp", "uniform"}
    label_dtype : numpy dtype
        Initial dtype of the label buffer (widened when needed).
    basis : tuple of ndarray or None, default=None
        ``(shift, T, T_inv)``: rows ``z`` are stored and scored as
        ``(z - shift) @ T``; ``prior_mean``, ``prior_var`` and ``sigma`` are
        those of that basis. ``None``: rows are only centred on ``prior_mean``
        (``shift = mu0``, ``T = I``).

    Notes
    -----
    Scores expand the quadratic ``||z - m||^2`` into ``||z||^2 - 2 z.m +
    ||m||^2`` (one GEMM for all classes), which loses the digits of ``z``'s
    distance from the origin of the frame. In a frame centred on ``mu0`` the
    precision depends on the distance from the prior mean, not from the
    origin, so shifting the data (and the prior with it) leaves the results
    unchanged to float64 rounding.
    """

    def __init__(self, prior_mean, prior_var, *, sigma, a, b, class_prior,
                 label_dtype, basis=None):
        if basis is None:
            # Centre on the prior mean; the state's prior mean is then zero.
            self.basis_shift = np.array(prior_mean, dtype=np.float64, copy=True)
            self.basis = self.basis_inverse = None
            prior_mean = np.zeros_like(self.basis_shift)
        else:
            self.basis_shift, self.basis, self.basis_inverse = basis
        # Densities of z = densities of u = (z - shift) @ T times |det T|.
        self.log_jacobian = (0.0 if self.basis is None
                             else float(np.linalg.slogdet(self.basis)[1]))
        self.sigma = float(sigma)
        self.a = float(a)
        self.b = float(b)
        self.class_prior = class_prior
        self.prior_precision = 1.0 / np.asarray(prior_var, dtype=np.float64)
        self.prior_nat_mean = np.asarray(prior_mean, np.float64) * self.prior_precision
        self.isotropic = self.prior_precision.shape[0] == 1
        self.n_features = self.prior_nat_mean.shape[0]
        self.prior_coef = log_density_coef(
            self.prior_nat_mean[None], self.prior_precision[None], self.sigma
        )[0]
        self.n_classes = 0
        self.crp_total = 0.0
        self._allocate(4, np.dtype(label_dtype))
        self._refresh_novel()

    # ------------------------------------------------------------------ storage
    def _allocate(self, capacity, label_dtype):
        d, p = self.n_features, self.prior_precision.shape[0]
        self.nat_mean = np.empty((capacity, d))
        self.precision = np.empty((capacity, p))
        self.n_obs = np.zeros(capacity)
        self.crp_count = np.zeros(capacity)
        self.frozen = np.zeros(capacity, dtype=bool)
        # One spare row for the novel class.
        self.joint_coef = np.empty((capacity + 1, self.prior_coef.shape[0]))
        self.labels = np.empty(capacity, dtype=label_dtype)
        self.label_index = {}

    def _grow(self, needed):
        capacity = self.labels.shape[0]
        if needed <= capacity:
            return
        new_capacity = max(needed, 2 * capacity)
        old = (self.nat_mean, self.precision, self.n_obs, self.crp_count,
               self.frozen, self.joint_coef, self.labels)
        index = self.label_index
        self._allocate(new_capacity, self.labels.dtype)
        self.label_index = index
        n = self.n_classes
        for new, prev in zip(
            (self.nat_mean, self.precision, self.n_obs, self.crp_count,
             self.frozen, self.joint_coef, self.labels), old, strict=True
        ):
            rows = n + 1 if new is self.joint_coef else n
            new[:rows] = prev[:rows]

    def compact(self):
        """Shrink buffers to the used size (for pickling)."""
        n = self.n_classes
        self.nat_mean = self.nat_mean[:n].copy()
        self.precision = self.precision[:n].copy()
        self.n_obs = self.n_obs[:n].copy()
        self.crp_count = self.crp_count[:n].copy()
        self.frozen = self.frozen[:n].copy()
        self.joint_coef = self.joint_coef[: n + 1].copy()
        self.labels = self.labels[:n].copy()

    def __getstate__(self):
        self.compact()
        state = self.__dict__.copy()
        # Rebuilt from ``labels``; dict keys of arbitrary label types do not
        # travel well through skops.
        del state["label_index"]
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.label_index = {
            label: i for i, label in enumerate(self.labels[: self.n_classes].tolist())
        }

    # ------------------------------------------------------------------ labels
    def widen_label_dtype(self, new_labels):
        """Widen the label buffer so that ``new_labels`` fit (e.g. longer str)."""
        dtype = np.result_type(self.labels.dtype, np.asarray(new_labels).dtype)
        if dtype != self.labels.dtype:
            self.labels = self.labels.astype(dtype)

    def add_classes(self, new_labels, *, nat_mean=None, precision=None,
                    crp_count=0.0, frozen=False):
        """Instantiate classes at the prior (``q0, lam0``, zero counts), or at
        given natural parameters of the rows' frame (known-known classes of the
        large context; states without a basis only)."""
        n_new = len(new_labels)
        if n_new == 0:
            return
        if nat_mean is not None:
            if self.basis is not None:
                raise ValueError("Natural parameters of the rows' frame need a "
                                 "state without a basis.")
            if self.basis_shift is not None:
                # q = m lam in the rows' frame is (m - shift) lam centred.
                nat_mean = nat_mean - self.basis_shift * np.reshape(precision,
                                                                 (n_new, -1))
        start = self.n_classes
        stop = start + n_new
        self._grow(stop)
        self.nat_mean[start:stop] = (self.prior_nat_mean if nat_mean is None
                                     else nat_mean)
        self.precision[start:stop] = (self.prior_precision if precision is None
                                      else precision)
        self.n_obs[start:stop] = 0.0
        self.crp_count[start:stop] = crp_count
        self.crp_total += float(np.sum(self.crp_count[start:stop]))
        self.frozen[start:stop] = frozen
        self.labels[start:stop] = new_labels
        for offset, label in enumerate(np.asarray(new_labels).tolist()):
            self.label_index[label] = start + offset
        self.n_classes = stop
        self._refresh(np.arange(start, stop))
        self._refresh_novel()

    # ------------------------------------------------------------------ updates
    def _log_numerators(self, counts, n_classes):
        """CRP numerators; a class whose count is not above ``a`` has no mass
        (only a class not instantiated yet has such a count)."""
        positive = counts > self.a
        if positive.all():
            return crp_log_numerators(counts, n_classes, a=self.a, b=self.b,
                                      class_prior=self.class_prior)
        with np.errstate(divide="ignore", invalid="ignore"):
            log_known, log_novel = crp_log_numerators(
                counts, n_classes, a=self.a, b=self.b, class_prior=self.class_prior
            )
        return np.where(positive, log_known, -np.inf), log_novel

    def _refresh(self, index):
        coef = log_density_coef(self.nat_mean[index], self.precision[index], self.sigma)
        coef[:, -1] += self._log_numerators(self.crp_count[index], self.n_classes)[0]
        self.joint_coef[index] = coef

    def _refresh_novel(self):
        row = self.prior_coef.copy()
        row[-1] += self._log_numerators(np.zeros(0), self.n_classes)[1]
        self.joint_coef[self.n_classes] = row

    def update(self, Z, index, *, crp_increment=1.0):
        """Condition classes ``index`` on rows ``Z``; frozen classes are skipped.

        Sums per class through one sort and ``np.add.reduceat``: O(n d), and no
        (n_rows x n_classes) one-hot matrix.
        """
        if index.shape[0] == 1:
            self._update_one(Z[0], int(index[0]), crp_increment)
            return
        live = ~self.frozen[index]
        if not live.all():
            Z, index = Z[live], index[live]
        if index.shape[0] == 0:
            return
        order = np.argsort(index, kind="stable")
        sorted_index = index[order]
        starts = np.flatnonzero(np.r_[True, sorted_index[1:] != sorted_index[:-1]])
        classes = sorted_index[starts]
        sizes = np.diff(np.r_[starts, sorted_index.shape[0]]).astype(np.float64)
        sums = np.add.reduceat(Z[order], starts, axis=0)
        # q_n += sum z / sigma, lam_n += count / sigma (docs/design.rst, section 1).
        self.nat_mean[classes] += sums / self.sigma
        self.precision[classes] += sizes[:, None] / self.sigma
        self.n_obs[classes] += sizes
        self.crp_count[classes] += crp_increment * sizes
        self.crp_total += crp_increment * float(sizes.sum())
        self._refresh(classes)

    def _update_one(self, z, i, crp_increment):
        """The same conjugate update for a single row, without the grouping."""
        if self.frozen[i]:
            return
        self.nat_mean[i] += z / self.sigma
        self.precision[i] += 1.0 / self.sigma
        self.n_obs[i] += 1.0
        self.crp_count[i] += crp_increment
        self.crp_total += crp_increment
        self._refresh(np.array([i]))

    def to_basis(self, Z):
        """Rows in the state's basis (``Z`` itself without a basis)."""
        if self.basis_shift is None:  # states pickled before centring
            return Z
        centred = Z - self.basis_shift
        return centred if self.basis is None else centred @ self.basis

    def class_mean(self):
        """Posterior means ``m_n`` of the classes, in the rows' basis."""
        n = self.n_classes
        mean = self.nat_mean[:n] / self.precision[:n]
        if self.basis_shift is None:
            return mean
        if self.basis is None:
            return self.basis_shift + mean
        return self.basis_shift + mean @ self.basis_inverse

    def class_var(self):
        """Marginal posterior variances of the class means, shape (N, d)."""
        n = self.n_classes
        var = 1.0 / self.precision[:n]
        if self.basis is None:
            return np.broadcast_to(var, (n, self.n_features)).copy()
        # diag(T_inv.T @ diag(var) @ T_inv), one class per row.
        return var @ (self.basis_inverse * self.basis_inverse)

    def learn(self, Z, labels, y_index):
        """Condition on labelled rows; labels not known yet become classes,
        in the order of ``labels``."""
        Z = self.to_basis(Z)
        self.widen_label_dtype(labels)
        new = np.array([lbl not in self.label_index for lbl in labels.tolist()],
                       dtype=bool)
        self.add_classes(labels[new])
        index = np.array([self.label_index[lbl] for lbl in labels.tolist()])
        self.update(Z, index[y_index])

    def set_crp_counts(self, counts):
        """Replace the CRP counts (pseudo-counts of classes learned in ``fit``)."""
        n = self.n_classes
        self.crp_count[:n] = counts
        self.crp_total = float(np.sum(self.crp_count[:n]))
        self._refresh(np.arange(n))

    # ------------------------------------------------------------------ scoring
    def features(self, Z):
        return log_density_features(Z, isotropic=self.isotropic)

    def joint_log_numerators(self, Z):
        """``log N(z; m_n, v_n) + log numerator_n`` for the N classes and novel.

        The row constant ``-log(k + b)`` (or ``-log(N + 1)``) is left out: it
        cancels in the softmax. Shape (n_samples, n_classes + 1), novel last.
        """
        return self._joint_log_numerators(self.to_basis(Z))

    def _joint_log_numerators(self, Z):
        features = self.features(Z)
        coef = self.joint_coef[: self.n_classes + 1]
        if features.shape[0] == 1:
            # A matrix-vector product: BLAS gemv beats gemm on one row.
            return (coef @ features[0])[None, :]
        return features @ coef.T

    def log_normaliser(self):
        """The row constant left out of :meth:`joint_log_numerators` (and the
        basis' log-Jacobian, common to all columns)."""
        return self.log_jacobian + float(crp_log_normaliser(
            np.asarray(self.crp_total), self.n_classes, b=self.b,
            class_prior=self.class_prior,
        ))

    def stream(self, Z, labels, y_index):
        """Predict each row with the state before it, then learn it.

        Parameters
        ----------
        Z : ndarray of shape (n_rows, d)
        labels : ndarray of shape (n_labels,)
            Distinct labels of the rows (validated by the caller).
        y_index : ndarray of shape (n_rows,)
            Position of each row's label in ``labels``.

        Returns
        -------
        known_index : ndarray of shape (n_rows,)
            Best instantiated class (-1 when none exists yet).
        p_novel : ndarray of shape (n_rows,)
            Posterior probability of the novel class.
        pred_novel : ndarray of shape (n_rows,) of bool
            The novel class is the maximum a posteriori decision.
        is_new_class : ndarray of shape (n_rows,) of bool
            The row is the first of a class that did not exist before it.
        """
        Z = self.to_basis(Z)
        if Z.shape[0] == 1:
            return (*self._score_one(Z), *self._learn_one(Z, labels))
        self.widen_label_dtype(labels)
        # Classes that exist keep their index; new ones get the next indices
        # in order of first appearance, as row-by-row learning would give them.
        first_row = np.unique(y_index, return_index=True)[1]
        exists = np.array([lbl in self.label_index for lbl in labels.tolist()],
                          dtype=bool)
        new_first_rows = np.sort(first_row[~exists])
        new_labels = labels[y_index[new_first_rows]]
        index_of_label = np.empty(labels.shape[0], dtype=np.intp)
        index_of_label[exists] = [self.label_index[lbl]
                                  for lbl in labels[exists].tolist()]
        index_of_label[y_index[new_first_rows]] = self.n_classes + np.arange(
            new_first_rows.shape[0]
        )
        index = index_of_label[y_index]
        is_new_class = np.zeros(Z.shape[0], dtype=bool)
        is_new_class[new_first_rows] = True

        n_rows = Z.shape[0]
        known_index = np.empty(n_rows, dtype=np.intp)
        p_novel = np.empty(n_rows)
        pred_novel = np.empty(n_rows, dtype=bool)
        start = 0
        while start < n_rows:
            stop = self._chunk_stop(index, start, n_rows)
            rows = slice(start, stop)
            n_new = int(is_new_class[rows].sum())
            first_new = self.n_classes
            self.add_classes(new_labels[: n_new])
            new_labels = new_labels[n_new:]
            known_index[rows], p_novel[rows], pred_novel[rows] = self._score_chunk(
                Z[rows], index[rows], is_new_class[rows], first_new
            )
            self.update(Z[rows], index[rows])
            start = stop
        return known_index, p_novel, pred_novel, is_new_class

    def _score_one(self, Z):
        """A lone row sees exactly the cached state: no prefix sums needed."""
        scores = self._joint_log_numerators(Z)[0]
        n = self.n_classes
        if n == 0:
            return np.array([-1]), np.array([1.0]), np.array([True])
        best = int(np.argmax(scores[:n]))
        pred_novel = scores[n] > scores[best]
        # At 10^4 classes the exponentials cost as much as the mat-vec. Terms
        # below exp(-37) / (N + 1) add up to less than half an ulp of the
        # normaliser (which is >= 1), so they are skipped.
        shifted = scores - max(scores[best], scores[n])
        kept = shifted[shifted > -37.0 - np.log(n + 1.0)]
        p_novel = np.exp(shifted[n]) / np.exp(kept).sum()
        return np.array([best]), np.array([p_novel]), np.array([pred_novel])

    def _learn_one(self, Z, labels):
        index = self.label_index.get(labels.tolist()[0])
        is_new = index is None
        if is_new:
            self.widen_label_dtype(labels)
            self.add_classes(labels)
            index = self.n_classes - 1
        self._update_one(Z[0], index, 1.0)
        return (np.array([is_new]),)

    def _chunk_stop(self, index, start, n_rows):
        width = self.joint_coef.shape[1]
        stop = start + min(
            _MAX_CHUNK_ROWS, max(1, _CHUNK_ELEMENTS // (self.n_classes + 2))
        )
        stop = min(stop, n_rows)
        # The per-row statistics of touched classes cost rows * touched * width.
        while stop - start > 1:
            touched = np.unique(index[start:stop]).shape[0]
            if (stop - start) * touched * width <= _CHUNK_ELEMENTS:
                break
            stop = start + (stop - start) // 2
        return stop

    def _score_chunk(self, Z, index, is_new_class, first_new):
        """Scores of one chunk against the states each row really sees.

        Classes the chunk does not touch are scored through the cached GEMM.
        A touched class ``j`` goes through ``n_j + 1`` states in the chunk
        (after 0, 1, ..., ``n_j`` of its rows); all states of all touched
        classes form a table of ``n_rows + n_touched`` natural parameters
        (prefix sums of each class's rows), scored with one GEMM, and each
        row picks the state of class ``j`` that precedes it. Cost
        O(rows x (rows + touched) x d), no (rows x touched x d) tensor.
        """
        n_classes = self.n_classes
        features = self.features(Z)
        scores = features @ self.joint_coef[: n_classes + 1].T

        touched, row_class = np.unique(index, return_inverse=True)
        n_touched = touched.shape[0]
        live = ~self.frozen[index]  # rows of frozen classes change nothing
        onehot = (row_class[:, None] == np.arange(n_touched)) & live[:, None]
        # seen[t, j]: rows of class j before row t (the state row t sees).
        seen = np.cumsum(onehot, axis=0) - onehot

        # State table: class j's block starts at offset[j]; entry k of the
        # block is the class after its first k rows of the chunk.
        changes = onehot.sum(axis=0)
        offset = np.r_[0, np.cumsum(changes + 1)[:-1]]
        order = np.flatnonzero(live)[np.argsort(row_class[live], kind="stable")]
        group = row_class[order]
        group_first = (np.cumsum(changes) - changes)[group]  # in ``order``
        rank = np.arange(order.shape[0]) - group_first
        cumulative = np.cumsum(Z[order], axis=0)
        before = np.vstack([np.zeros((1, Z.shape[1])), cumulative])[group_first]
        state_rows = offset[group] + rank + 1
        n_states = int(changes.sum()) + n_touched
        sums = np.zeros((n_states, Z.shape[1]))
        sums[state_rows] = cumulative - before
        counts = np.zeros(n_states)
        counts[state_rows] = rank + 1.0
        owner = np.repeat(touched, changes + 1)
        nat_mean = self.nat_mean[owner] + sums / self.sigma
        precision = self.precision[owner] + counts[:, None] / self.sigma
        state_density = features @ log_density_coef(nat_mean, precision, self.sigma).T
        density = np.take_along_axis(state_density, offset + seen, axis=1)

        # Per-row CRP prior: counts and N as they stand before each row.
        classes_before = first_new + np.cumsum(is_new_class) - is_new_class
        log_known, log_novel = self._log_numerators(
            self.crp_count[touched] + seen, classes_before
        )
        # Classes not instantiated before a row have no mass at that row.
        exists = (touched < first_new) | (seen > 0)
        scores[:, touched] = np.where(exists, density + log_known, -np.inf)
        scores[:, -1] = features @ self.prior_coef + log_novel

        known_index = np.full(Z.shape[0], -1, dtype=np.intp)
        if n_classes:
            best = np.argmax(scores[:, :-1], axis=1)
            # A row that precedes every class has no known candidate.
            has_class = np.isfinite(scores[np.arange(Z.shape[0]), best])
            known_index[has_class] = best[has_class]
            # Ties go to the known class, as np.argmax does in ``predict``.
            pred_novel = scores[:, -1] > scores[np.arange(Z.shape[0]), best]
        else:
            pred_novel = np.ones(Z.shape[0], dtype=bool)
        return known_index, np.exp(log_softmax(scores)[:, -1]), pred_novel
