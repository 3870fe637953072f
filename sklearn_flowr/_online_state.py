"""Growable float64 per-class state of the CRP-Gaussian head, with its caches.

The head's estimator validates input, keeps the labels and speaks
scikit-learn; this object only keeps numbers, per class index: natural
parameters ``(q_n, lam_n)``, observation and CRP counts,
and, per class, the coefficients that make ``log N(z; m_n, v_n) + log(c_n - a)``
one dot product with ``[z, ||z||**2, 1]`` (see ``_core._gaussian``). Buffers grow
by doubling, incrementally when large (``_class_buffers``), so instantiating a
class and updating one are amortised O(d), and a prediction is one matrix
product against the cached coefficients: O(N d).

Row ``N`` of the coefficient buffer (just after the ``N`` known classes) always
holds the novel class, so the joint log-likelihood of a batch against all
``N + 1`` columns is a single contiguous GEMM.

With full covariances (``covariance="full"``) the state lives in the basis
where the noise is ``I`` and the prior diagonal (``_core._covariance``): rows
are mapped into it on the way in, class means and variances back on the way
out; everything in between is the diagonal head unchanged.

Everything here is float64, on purpose: the natural parameters are running
sums over a stream (``q_n`` adds ``z / sigma`` per row, ``lam_n`` adds
``1 / sigma``), and in float32 a class seen 10^6 times keeps about one
significant digit of its last updates; the cached coefficients subtract
nearly equal terms (``||z||^2 / v - 2 z.m / v + ||m||^2 / v`` is an
expanded square) and would lose the rest. Large batches (``fit``, long
streams, big predictions) are processed in chunks of rows or classes whose
temporaries stay within ``_CHUNK_ELEMENTS``, so ``fit`` of the full-covariance
head peaks near its state plus a few tens of megabytes, not at a multiple of
its input.
"""

import numpy as np

from ._class_buffers import ClassBuffers, growth_window
from ._core import (
    add_observations,
    crp_log_normaliser,
    crp_log_numerator,
    crp_log_numerators,
    estimate_concentration,
    log_density_coef,
    log_density_features,
    recalibrate_novel_column,
    resolve_covariances,
)
from ._stream_scores import StreamScoring
from ._streaming import chunk_slices, group_sums


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


class OnlineClassState(StreamScoring, ClassBuffers):
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
        self._refresh(slice(start, stop))
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

    def _refresh(self, rows):
        """Recompute the cached coefficients of classes ``rows`` (a slice, or
        sorted distinct indices), in place and in chunks of bounded size."""
        if not isinstance(rows, slice):
            if rows.shape[0] and rows[-1] - rows[0] + 1 == rows.shape[0]:
                rows = slice(int(rows[0]), int(rows[-1]) + 1)  # a range: views
            else:
                for chunk in _chunks(rows.shape[0], self.joint_coef.shape[1]):
                    index = rows[chunk]
                    coef = np.empty((index.shape[0], self.joint_coef.shape[1]))
                    self._coef_into(coef, index)
                    self.joint_coef[index] = coef
                return
        for chunk in _chunks(rows.stop - rows.start, self.joint_coef.shape[1]):
            block = slice(rows.start + chunk.start, rows.start + chunk.stop)
            self._coef_into(self.joint_coef[block], block)

    def _coef_into(self, out, rows):
        log_density_coef(self.nat_mean[rows], self.precision[rows], self.sigma,
                         out=out)
        out[:, -1] += self._log_numerators(self.crp_count[rows], self.n_classes)[0]

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
        classes = self._accumulate(Z, index, crp_increment)
        self._refresh(classes)
        self._mirror(classes)

    def _accumulate(self, Z, index, crp_increment=1.0):
        """The conjugate update of the natural parameters and counts, without
        the refresh of the cached coefficients; returns the classes changed."""
        live = ~self.frozen[index]
        if not live.all():
            Z, index = Z[live], index[live]
        if index.shape[0] == 0:
            return index
        classes, sums, counts = group_sums(Z, index)
        self.nat_mean[classes], self.precision[classes] = add_observations(
            self.nat_mean[classes], self.precision[classes], sums, counts[:, None],
            self.sigma)
        self.n_obs[classes] += counts
        self.crp_count[classes] += crp_increment * counts
        self.crp_total += crp_increment * float(counts.sum())
        return classes

    def _update_one(self, z, i, crp_increment=1.0):
        """The same conjugate update for a single row, without the grouping."""
        if self.frozen[i]:
            return
        nat_mean, precision = self.nat_mean[i], self.precision[i]
        add_observations(nat_mean, precision, z, 1.0, self.sigma,
                         out=(nat_mean, precision))
        self.n_obs[i] += 1.0
        count = float(self.crp_count[i]) + crp_increment
        self.crp_count[i] = count
        self.crp_total += crp_increment
        coef = log_density_coef(nat_mean, precision, self.sigma,
                                out=self.joint_coef[i])
        coef[-1] += crp_log_numerator(count, a=self.a, class_prior=self.class_prior)
        if self._next is not None:
            self._mirror(i)

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
        self._drop_growth()
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
        ``n_classes`` classes (new ones at the prior).

        Rows are mapped to the basis and summed chunk by chunk, and the
        classes they touch refreshed once at the end: the temporaries stay
        within ``_CHUNK_ELEMENTS`` however many rows ``fit`` brings.
        """
        self.add_classes(n_classes - self.n_classes)
        if index.shape[0] == 1:
            self._update_one(self.to_basis(Z)[0], int(index[0]))
        else:
            touched = [self._accumulate(self.to_basis(Z[rows]), index[rows])
                       for rows in _chunks(index.shape[0], Z.shape[1])]
            classes = np.unique(np.concatenate(touched))
            self._refresh(classes)
            self._mirror(classes)
        self._advance_growth(index.shape[0])

    def move(self, Z, source, target):
        """Move rows ``Z`` (rows' frame) from the classes ``source`` to the
        classes ``target`` (index arrays, one entry per row): the conjugate
        update with the rows' sums and counts taken out of one class and put
        into the other, CRP counts alike. Used by the head's ``correct``;
        frozen classes are moved too (the caller decides)."""
        self._drop_growth()
        U = self.to_basis(np.asarray(Z, dtype=np.float64))
        changed = []
        for index, sign in ((source, -1.0), (target, 1.0)):
            classes, sums, counts = group_sums(U, index)
            self.nat_mean[classes], self.precision[classes] = add_observations(
                self.nat_mean[classes], self.precision[classes], sign * sums,
                sign * counts[:, None], self.sigma)
            self.n_obs[classes] += sign * counts
            self.crp_count[classes] += sign * counts
            self.crp_total += sign * float(counts.sum())
            changed.append(classes)
        self._refresh(np.unique(np.concatenate(changed)))

    def remove_class(self, i):
        """Delete class ``i``: later classes move up one place."""
        self._drop_growth()
        n = self.n_classes
        self.crp_total -= float(self.crp_count[i])
        for name in self._BUFFERS:
            buffer = getattr(self, name)
            stop = n + 1 if name == "joint_coef" else n
            buffer[i:stop - 1] = buffer[i + 1:stop].copy()
        self.n_classes = n - 1
        # The CRP numerators depend on the number of classes.
        self._refresh(slice(0, self.n_classes))
        self._refresh_novel()

    def set_crp_counts(self, counts):
        """Replace the CRP counts (pseudo-counts of classes learned in ``fit``)."""
        self._drop_growth()
        n = self.n_classes
        self.crp_count[:n] = counts
        self.crp_total = float(np.sum(self.crp_count[:n]))
        self._refresh(slice(0, n))

    # ------------------------------------------------------------------ scoring
    def features(self, Z):
        return log_density_features(Z, isotropic=self.isotropic)

    def joint_log_numerators(self, Z, novelty_map=None):
        """``log N(z; m_n, v_n) + log numerator_n`` for the N classes and novel.

        The row constant ``-log(k + b)`` (or ``-log(N + 1)``) is left out: it
        cancels in the softmax. Shape (n_samples, n_classes + 1), novel last;
        ``novelty_map`` (slope, intercept) maps the novel column's log-odds.
        """
        coef = self.joint_coef[: self.n_classes + 1]
        if Z.shape[0] == 1:
            # A matrix-vector product: BLAS gemv beats gemm on one row.
            scores = coef.dot(self._row_features(Z[0])[0])[None, :]
        else:
            scores = self._scores(Z, coef)
        if novelty_map is None or self.n_classes == 0:
            return scores
        return recalibrate_novel_column(scores, *novelty_map)

    def _scores(self, Z, coef):
        """``features(Z) @ coef.T`` with the features made in chunks of rows."""
        if Z.shape[0] * Z.shape[1] <= _CHUNK_ELEMENTS:
            return self.features(self.to_basis(Z)) @ coef.T
        scores = np.empty((Z.shape[0], coef.shape[0]))
        for rows in _chunks(Z.shape[0], Z.shape[1]):
            scores[rows] = self.features(self.to_basis(Z[rows])) @ coef.T
        return scores

    def _row_features(self, z):
        """Features of one row ``z`` (in the rows' frame), shape (width,), and
        the row in the state's basis (their first ``n_features`` entries)."""
        features = np.empty(self.joint_coef.shape[1])
        if self.basis is None and self.basis_shift is not None:
            # Centre straight into the features: no temporary row.
            row = np.subtract(z, self.basis_shift, out=features[: self.n_features])
        else:
            row = self.to_basis(z)
        return log_density_features(row, isotropic=self.isotropic, out=features), row

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
        if Z.shape[0] == 1:
            best, p_novel, pred_novel, log_odds = self.step_one(
                Z[0], int(index[0]), bool(is_new_class[0]), novelty_map)
            return (np.array([best]), np.array([p_novel]), np.array([pred_novel]),
                    np.array([log_odds]))
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
            U = self.to_basis(Z[rows])
            (known_index[rows], p_novel[rows], pred_novel[rows],
             log_odds[rows]) = self._score_chunk(
                U, index[rows], is_new_class[rows], first_new, novelty_map
            )
            self.update(U, index[rows])
        self._advance_growth(n_rows)
        return known_index, p_novel, pred_novel, log_odds

    def step_one(self, z, i, is_new, novelty_map=None, undo=None):
        """:meth:`stream` of one row ``z`` (rows' frame) of class ``i`` (a new
        class ``i == n_classes`` when ``is_new``): a lone row sees exactly the
        cached state, so it is scored with one matrix-vector product, then
        learned. ``undo``: a list to which the undo of the changes is
        appended before they are made (the online hot path's checkpoint).
        Returns :meth:`stream`'s four values of the row as Python scalars."""
        features, row = self._row_features(z)
        scored = self._score_one(features, novelty_map)
        if undo is not None:
            undo.append(self.checkpoint_one(i))
        if is_new:
            self.add_classes(1)
        self._update_one(row, i)
        # A growth under way, or one to start: only a new class can enter the
        # window (every learning call starts a growth it finds due; after an
        # undo drops one, the next new class starts it again).
        if self._next is not None or (is_new and growth_window(
                self.n_obs.shape[0], self.n_classes)):
            self._advance_growth(1)
        return scored


# Temporaries of a chunk of rows or classes: ~8 MB of float64 each.
_CHUNK_ELEMENTS = 1 << 18


def _chunks(n_rows, width):
    """Consecutive slices of ``range(n_rows)`` of at most ``_CHUNK_ELEMENTS /
    width`` rows each (one at least)."""
    step = max(1, _CHUNK_ELEMENTS // max(1, width))
    return [slice(start, min(n_rows, start + step))
            for start in range(0, n_rows, step)]
