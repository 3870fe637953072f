"""Growable float64 per-class state of the CRP-Gaussian head, with its caches.

The head's estimator validates input, keeps the labels and speaks
scikit-learn; this object only keeps numbers, per class index: natural
parameters ``(q_n, lam_n)``, observation and CRP counts,
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
    MAX_LOG_ODDS,
    add_observations,
    crp_log_normaliser,
    crp_log_numerators,
    estimate_concentration,
    log_density_coef,
    log_density_features,
    log_softmax,
    novel_log_odds,
    recalibrate_novel_column,
    resolve_covariances,
)
from ._streaming import chunk_slices, group_sums, prefix_states


def new_head_state(X, y_index, n_classes, *, a, b, sigma, prior_mean, prior_var,
                   covariance, class_prior, known_count, noise_shrinkage=0.0):
    """A fresh state from the head's hyper-parameters, checked against each
    other; "auto" values are estimated from ``X`` (empirical Bayes).

    Returns
    -------
    state : OnlineClassState
        Without classes.
    hyper : Bunch
        The resolved covariances (``prior_mean``, ``prior_var``, ``sigma``
        in the rows' frame; see ``_core.resolve_covariances``).
    b : float
        The concentration in use.
    """
    if b != "auto" and not (b > -a and np.isfinite(b)):
        raise ValueError(f"b={b} must be finite and greater than -a={-a}.")
    if known_count != "observed" and not known_count > a:
        raise ValueError(f"known_count={known_count} must exceed a={a}: a class "
                         "needs c_n > a to have prior mass.")
    # sigma, mu0, s0 and, for full covariances, the basis where the noise is I
    # and the prior diagonal.
    hyper = resolve_covariances(
        X, y_index, n_classes, covariance=covariance, sigma=sigma,
        prior_mean=prior_mean, prior_var=prior_var, need_classes=b == "auto",
        noise_shrinkage=noise_shrinkage,
    )
    b = estimate_concentration(np.bincount(y_index), a) if b == "auto" else float(b)
    state = OnlineClassState(*hyper.state_prior, sigma=hyper.state_sigma, a=a, b=b,
                             class_prior=class_prior, basis=hyper.basis)
    return state, hyper, b


def check_class_embeddings(classes, means, variances, *, covariance, **given):
    """Check class embeddings ``(classes, means, variances)`` for the head, and
    that the hyper-parameters ``given`` (``known_count``, ``b``, ``sigma``)
    need no samples.

    Returns
    -------
    classes : ndarray of shape (n_classes,)
    variances : ndarray of shape (n_classes, 1)
    """
    classes = np.asarray(classes)
    variances = np.asarray(variances, dtype=np.float64).reshape(-1, 1)
    if classes.ndim != 1 or np.unique(classes).shape[0] != classes.shape[0]:
        raise ValueError("classes must be a 1-d array of distinct labels.")
    if not (classes.shape[0] == means.shape[0] == variances.shape[0]):
        raise ValueError(
            f"classes ({classes.shape[0]}), means ({means.shape[0]}) and "
            f"variances ({variances.shape[0]}) must have one row per class."
        )
    if not np.all(np.isfinite(variances) & (variances > 0)):
        raise ValueError("variances must be positive and finite.")
    if covariance != "isotropic":
        raise ValueError(
            "fit_class_embeddings takes isotropic class variances; it "
            f"does not support covariance={covariance!r}."
        )
    # Class embeddings carry no samples: nothing to estimate the
    # concentration, the class noise or the observed counts from.
    missing = [f"{k}={v!r}" for k, v in given.items() if isinstance(v, str)]
    if missing:
        raise ValueError(
            "fit_class_embeddings needs a numeric known_count, b and sigma "
            f"(got {', '.join(missing)}): there are no observed samples "
            "to estimate them from."
        )
    return classes, variances


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
                 basis=None):
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
        self._allocate(4)
        self._refresh_novel()

    # ------------------------------------------------------------------ storage
    _BUFFERS = ("nat_mean", "precision", "n_obs", "crp_count", "frozen",
                "joint_coef")

    def _allocate(self, capacity):
        d, p = self.n_features, self.prior_precision.shape[0]
        self.nat_mean = np.empty((capacity, d))
        self.precision = np.empty((capacity, p))
        self.n_obs = np.zeros(capacity)
        self.crp_count = np.zeros(capacity)
        self.frozen = np.zeros(capacity, dtype=bool)
        # One spare row for the novel class.
        self.joint_coef = np.empty((capacity + 1, self.prior_coef.shape[0]))

    def _grow(self, needed):
        capacity = self.n_obs.shape[0]
        if needed <= capacity:
            return
        old = [getattr(self, name) for name in self._BUFFERS]
        self._allocate(max(needed, 2 * capacity))
        for name, prev in zip(self._BUFFERS, old, strict=True):
            rows = self.n_classes + (name == "joint_coef")
            getattr(self, name)[:rows] = prev[:rows]

    def checkpoint(self, index):
        """A callable that undoes what learning rows of classes ``index`` does.

        Learning appends classes (past ``n_classes``, or into grown buffers)
        and rewrites the rows of the classes it touches plus the novel row of
        ``joint_coef``. The undo keeps the buffers, the counters and a copy of
        those rows: O(touched x d) to take, instead of a copy of all classes.

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
        n = self.n_classes
        if index.shape[0] == 1:  # the online hot path: no sort
            rows = index if index[0] < n else index[:0]
        else:
            rows = np.unique(index[index < n])
        coef_rows = np.append(rows, n)  # and the novel class's row
        buffers = [(name, getattr(self, name)) for name in self._BUFFERS]
        saved = [buffer[coef_rows if name == "joint_coef" else rows].copy()
                 for name, buffer in buffers]
        crp_total = self.crp_total

        def undo():
            for (name, buffer), values in zip(buffers, saved, strict=True):
                buffer[coef_rows if name == "joint_coef" else rows] = values
                setattr(self, name, buffer)
            self.n_classes, self.crp_total = n, crp_total

        return undo

    def compact(self):
        """Shrink buffers to the used size (for pickling)."""
        for name in self._BUFFERS:
            rows = self.n_classes + (name == "joint_coef")
            setattr(self, name, getattr(self, name)[:rows].copy())

    def __getstate__(self):
        self.compact()
        return self.__dict__.copy()

    def add_classes(self, n_new, *, nat_mean=None, precision=None,
                    crp_count=0.0, frozen=False):
        """Instantiate ``n_new`` classes at the prior (``q0, lam0``, zero
        counts), or at given natural parameters of the rows' frame (known-known
        classes of the large context; states without a basis only)."""
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
        """Condition classes ``index`` on rows ``Z`` (in the state's basis);
        frozen classes are skipped."""
        if index.shape[0] == 1:
            self._update_one(Z[0], int(index[0]), crp_increment)
            return
        live = ~self.frozen[index]
        if not live.all():
            Z, index = Z[live], index[live]
        if index.shape[0] == 0:
            return
        classes, sums, counts = group_sums(Z, index)
        self.nat_mean[classes], self.precision[classes] = add_observations(
            self.nat_mean[classes], self.precision[classes], sums, counts[:, None],
            self.sigma)
        self.n_obs[classes] += counts
        self.crp_count[classes] += crp_increment * counts
        self.crp_total += crp_increment * float(counts.sum())
        self._refresh(classes)

    def _update_one(self, z, i, crp_increment=1.0):
        """The same conjugate update for a single row, without the grouping."""
        if self.frozen[i]:
            return
        self.nat_mean[i], self.precision[i] = add_observations(
            self.nat_mean[i], self.precision[i], z, 1.0, self.sigma)
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

    def class_count(self):
        """Rows each class was conditioned on, shape (N,) (a view)."""
        return self.n_obs[: self.n_classes]

    def crp_counts(self):
        """CRP counts ``c_n``, shape (N,) (a view)."""
        return self.crp_count[: self.n_classes]

    def freeze(self, frozen=True):
        """Keep the classes instantiated so far fixed (or release them)."""
        self.frozen[: self.n_classes] = frozen

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

    def learn(self, Z, index, n_classes):
        """Condition on rows of the classes ``index``; the state first grows to
        ``n_classes`` classes (new ones at the prior)."""
        self.add_classes(n_classes - self.n_classes)
        self.update(self.to_basis(Z), index)

    def set_crp_counts(self, counts):
        """Replace the CRP counts (pseudo-counts of classes learned in ``fit``)."""
        n = self.n_classes
        self.crp_count[:n] = counts
        self.crp_total = float(np.sum(self.crp_count[:n]))
        self._refresh(np.arange(n))

    # ------------------------------------------------------------------ scoring
    def features(self, Z):
        return log_density_features(Z, isotropic=self.isotropic)

    def joint_log_numerators(self, Z, novelty_map=None):
        """``log N(z; m_n, v_n) + log numerator_n`` for the N classes and novel.

        The row constant ``-log(k + b)`` (or ``-log(N + 1)``) is left out: it
        cancels in the softmax. Shape (n_samples, n_classes + 1), novel last;
        ``novelty_map`` (slope, intercept) maps the novel column's log-odds.
        """
        scores = self._joint_log_numerators(self.to_basis(Z))
        if novelty_map is None or self.n_classes == 0:
            return scores
        return recalibrate_novel_column(scores, *novelty_map)

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

    def stream(self, Z, index, is_new_class, novelty_map=None):
        """Predict each row with the state before it, then learn it.

        Parameters
        ----------
        Z : ndarray of shape (n_rows, d)
        index : ndarray of shape (n_rows,)
            Class index of each row; classes beyond ``n_classes`` are new, in
            order of first appearance.
        is_new_class : ndarray of shape (n_rows,) of bool
            The row is the first of a class that did not exist before it.
        novelty_map : (slope, intercept) or None, default=None
            Platt map of the novel log-odds (``recalibrate_novel_column``),
            applied to every row's scores before the decision.

        Returns
        -------
        known_index : ndarray of shape (n_rows,)
            Best instantiated class (-1 when none exists yet).
        p_novel : ndarray of shape (n_rows,)
            Posterior probability of the novel class.
        pred_novel : ndarray of shape (n_rows,) of bool
            The novel class is the maximum a posteriori decision.
        log_odds : ndarray of shape (n_rows,)
            ``log P(novel) - log P(known)``, in the order of ``p_novel`` but
            without its rounding to 1 (``novel_log_odds``).
        """
        Z = self.to_basis(Z)
        if Z.shape[0] == 1:
            scored = self._score_one(Z, novelty_map)
            self.add_classes(int(is_new_class[0]))
            self._update_one(Z[0], int(index[0]))
            return scored
        n_rows = Z.shape[0]
        known_index = np.empty(n_rows, dtype=np.intp)
        p_novel = np.empty(n_rows)
        pred_novel = np.empty(n_rows, dtype=bool)
        log_odds = np.empty(n_rows)
        for rows in chunk_slices(
            index, n_classes=self.n_classes + int(is_new_class.sum()),
            width=self.joint_coef.shape[1],
        ):
            first_new = self.n_classes
            self.add_classes(int(is_new_class[rows].sum()))
            (known_index[rows], p_novel[rows], pred_novel[rows],
             log_odds[rows]) = self._score_chunk(
                Z[rows], index[rows], is_new_class[rows], first_new, novelty_map
            )
            self.update(Z[rows], index[rows])
        return known_index, p_novel, pred_novel, log_odds

    def _score_one(self, Z, novelty_map=None):
        """A lone row sees exactly the cached state: no prefix sums needed."""
        n = self.n_classes
        if n == 0:
            return (np.array([-1]), np.array([1.0]), np.array([True]),
                    np.array([MAX_LOG_ODDS]))
        scores = self._joint_log_numerators(Z)
        if novelty_map is not None:
            scores = recalibrate_novel_column(scores, *novelty_map)
        scores = scores[0]
        best = int(np.argmax(scores[:n]))
        pred_novel = scores[n] > scores[best]
        # At 10^4 classes the exponentials cost as much as the mat-vec. Terms
        # below exp(-37) / (N + 1) add up to less than half an ulp of the
        # normaliser (which is >= 1), so they are skipped.
        cutoff = -37.0 - np.log(n + 1.0)
        shifted = scores - max(scores[best], scores[n])
        p_novel = np.exp(shifted[n]) / np.exp(shifted[shifted > cutoff]).sum()
        # The known mass relative to the best known class, which it always
        # holds: exact however far the novel class is ahead.
        known = scores[:n] - scores[best]
        log_known = scores[best] + np.log(np.exp(known[known > cutoff]).sum())
        log_odds = np.clip(scores[n] - log_known, -MAX_LOG_ODDS, MAX_LOG_ODDS)
        return (np.array([best]), np.array([p_novel]), np.array([pred_novel]),
                np.array([log_odds]))

    def _score_chunk(self, Z, index, is_new_class, first_new, novelty_map=None):
        """Scores of one chunk against the states each row really sees.

        Classes the chunk does not touch are scored through the cached GEMM;
        the states of touched classes come from ``_streaming.prefix_states``
        (rows of frozen classes change nothing) and are scored with one GEMM.
        """
        n_classes = self.n_classes
        features = self.features(Z)
        scores = features @ self.joint_coef[: n_classes + 1].T
        table = prefix_states(Z, index, live=~self.frozen[index])
        touched, seen = table.touched, table.seen
        nat_mean, precision = add_observations(
            self.nat_mean[table.owner], self.precision[table.owner], table.sums,
            table.counts[:, None], self.sigma)
        state_density = features @ log_density_coef(nat_mean, precision, self.sigma).T
        density = np.take_along_axis(state_density, table.pick, axis=1)

        # Per-row CRP prior: counts and N as they stand before each row.
        classes_before = first_new + np.cumsum(is_new_class) - is_new_class
        log_known, log_novel = self._log_numerators(
            self.crp_count[touched] + seen, classes_before
        )
        # Classes not instantiated before a row have no mass at that row.
        exists = (touched < first_new) | (seen > 0)
        scores[:, touched] = np.where(exists, density + log_known, -np.inf)
        scores[:, -1] = features @ self.prior_coef + log_novel
        if novelty_map is not None:
            scores = recalibrate_novel_column(scores, *novelty_map)

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
        log_odds = novel_log_odds(scores)
        return known_index, np.exp(log_softmax(scores)[:, -1]), pred_novel, log_odds
