"""The head's per-class state: scores' coefficients (natural parameters follow),
counts (float64), in the basis where the noise is ``I`` and the prior diagonal."""

import math

import numpy as np
from scipy.special import expit

from .._core import (
    MAX_LOG_ODDS,
    add_observations,
    chunk_slices,
    crp_log_normaliser,
    crp_log_numerator,
    crp_log_numerators,
    group_sums,
    grouped_log_density,
    log_density_coef,
    log_density_features,
    log_softmax,
    moments_for_params,
    needs_moments,
    novel_log_odds,
    prefix_states,
    recalibrate_novel_column,
    resolve_covariances,
    resolve_hyper_parameters,
    selected_rows,
)
from ..validation import MAX_ABS_INPUT
from ._variance_table import VarianceTable

# Temporaries of a chunk of rows or classes: 0.5 MB of float64 each.
_CHUNK_ELEMENTS = 1 << 16


def state_for_params(X, y_index, n_classes, params, *, moments=None, rows=None):
    """A state without classes for the head's ``get_params()`` ("auto" ones
    estimated from rows ``X`` of the classes ``y_index``, or their
    ``moments``), the resolved covariances and ``b``; ``rows``: the indices of
    the rows of ``X`` that ``y_index`` labels (default all)."""
    a, b = float(params["a"]), params["b"]
    known_count, covariance = params["known_count"], params["covariance"]
    if b != "auto" and not (b > -a and np.isfinite(b)):
        raise ValueError(f"b={b} must be finite and greater than -a={-a}.")
    if known_count != "observed" and not known_count > a:
        raise ValueError(f"known_count={known_count} must exceed a={a}: a class "
                         "needs c_n > a to have prior mass.")
    if moments is None and needs_moments(params):
        moments = moments_for_params(params, X, y_index, n_classes, rows)
    resolved = resolve_hyper_parameters(moments, params)
    b = float(resolved.pop("b"))
    hyper = resolve_covariances(X.shape[1], covariance=covariance, **resolved)
    _check_variance_range(hyper)
    state = ClassState(*hyper.state_prior, sigma=hyper.state_sigma, a=a, b=b,
                       class_prior=params["class_prior"], basis=hyper.basis)
    return state, hyper, b


def _check_variance_range(hyper):
    """Refuse variances outside the range float64 scores (1e-200 to 1e200):
    estimated ones from features of a tiny or huge scale."""
    low, high = 1.0 / MAX_ABS_INPUT**2, MAX_ABS_INPUT**2
    for name in ("sigma", "prior_var"):
        value = np.asarray(getattr(hyper, name), dtype=np.float64)
        values = np.linalg.eigvalsh(value) if value.ndim == 2 else value
        if not (low <= values.min() and values.max() <= high):
            small = values.min() < low
            raise ValueError(
                f"{name} comes to {values.min() if small else values.max():.3g}, "
                f"outside the variances float64 scores ({low:g} to {high:g}): the "
                f"features' scale is too {'small' if small else 'large'} (their "
                f"squares {'underflow' if small else 'overflow'}). Rescale them, "
                "e.g. with StandardScaler.")


def state_of_embeddings(means, variances, y_index, params, frozen):
    """:func:`state_for_params` holding classes given as ``N(mean, variance)``,
    in the sorted order of their labels' ``y_index``."""
    n_classes = y_index.shape[0]
    state, hyper, b = state_for_params(means, y_index, n_classes, params)
    order = np.argsort(y_index)
    state.add_classes(n_classes, nat_mean=means[order] / variances[order],
                      precision=1.0 / variances[order],
                      crp_count=float(params["known_count"]), frozen=frozen)
    return state, hyper, b


def check_class_embeddings(classes, means, variances, *, covariance, **given):
    """Classes and (n_classes, 1) variances for ``fit_class_embeddings``,
    checked, and hyper-parameters ``given`` that need no samples."""
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
    missing = [f"{k}={v!r}" for k, v in given.items() if isinstance(v, str)]
    if missing:
        raise ValueError(
            "fit_class_embeddings needs a numeric known_count, b and sigma "
            f"(got {', '.join(missing)}): there are no observed samples "
            "to estimate them from."
        )
    return classes, variances


def check_novelty_map(value):
    """``novelty_calibration`` as ``(slope, intercept)`` floats, or None."""
    if value is None:
        return None
    pair = np.asarray(value, dtype=object).ravel()
    try:
        slope, intercept = (float(v) for v in pair)
    except (TypeError, ValueError):
        raise ValueError(
            "novelty_calibration must be None or (slope, intercept), two "
            f"numbers; got {value!r}.") from None
    if not (np.isfinite(slope) and np.isfinite(intercept) and slope > 0):
        raise ValueError(
            "novelty_calibration needs a finite slope > 0 and a finite "
            f"intercept (a map that keeps the order of P(novel)); got {value!r}.")
    return slope, intercept


class ClassState(VarianceTable):
    """Sufficient statistics of the classes, the prior ``mu0`` (d,) and ``s0``
    ((1,) or (d,)), noise and CRP; rows ``z`` are kept as ``(z - shift) @ T``
    (``basis``) or centred on ``mu0`` (``None``). A class (novel last) is
    stored as its scores' ``joint_coef = [m/v, const + log numerator]`` (``q``
    follows: :meth:`nat_means`) and its row ``group`` of the table of precisions
    ``lam`` (:class:`VarianceTable`); isotropic: ``[m/v, -1/(2 v), ...]`` and
    ``lam``."""

    def __init__(self, prior_mean, prior_var, *, sigma, a, b, class_prior,
                 basis=None):
        if basis is None:
            self.basis_shift = np.array(prior_mean, dtype=np.float64, copy=True)
            self.basis = self.basis_inverse = None
            prior_mean = np.zeros_like(self.basis_shift)
        else:
            self.basis_shift, self.basis, self.basis_inverse = basis
        # Densities of z = densities of u = (z - shift) @ T times |det T|.
        self.log_jacobian = (0.0 if self.basis is None
                             else float(np.linalg.slogdet(self.basis)[1]))
        self.sigma, self.a, self.b = float(sigma), float(a), float(b)
        self.class_prior = class_prior
        self.prior_precision = 1.0 / np.asarray(prior_var, dtype=np.float64)
        self.prior_nat_mean = np.asarray(prior_mean, np.float64) * self.prior_precision
        self.isotropic = self.prior_precision.shape[0] == 1
        self.n_features = self.prior_nat_mean.shape[0]
        self.prior_coef = log_density_coef(
            self.prior_nat_mean[None], self.prior_precision[None], self.sigma)[0]
        self.n_classes = 0
        self.crp_total = 0.0
        self._allocate(4)
        self._start_table()
        self._refresh_novel()

    def _scores(self, features, out=None):
        """Log densities plus log numerators of rows ``features`` (:meth:`features`)
        under the cached classes and the novel one."""
        n = self.n_classes + 1
        if self.isotropic:  # the table unused
            return (self.joint_coef[:n].dot(features) if features.ndim == 1
                    else np.dot(features, self.joint_coef[:n].T, out=out))
        return grouped_log_density(features, self.joint_coef[:n],
                                   self.quad[: self.n_rows], self.group[:n], out=out)

    def features(self, Z):
        """Rows ``Z`` in the basis as ``[u, 1]`` (isotropic: ``[u, ||u||**2, 1]``)."""
        d = self.n_features
        features = np.empty((*Z.shape[:-1], d + 1 + self.isotropic))
        u = features[..., :d]
        if self.basis is None:
            np.subtract(Z, self.basis_shift, out=u)
        else:
            u[...] = self.to_basis(Z)
        if self.isotropic:
            features[..., d] = u.dot(u) if Z.ndim == 1 else np.vecdot(u, u)
        features[..., -1] = 1.0
        return features

    def add_classes(self, n_new, *, nat_mean=None, precision=None,
                    crp_count=0.0, frozen=False):
        """Add ``n_new`` classes at the prior, or at natural parameters given in
        the rows' frame (states without a basis)."""
        if n_new == 0:
            return
        if nat_mean is not None:
            if self.basis is not None:
                raise ValueError("Natural parameters of the rows' frame need a "
                                 "state without a basis.")
            # q = m lam in the rows' frame is (m - shift) lam centred.
            nat_mean = nat_mean - self.basis_shift * np.reshape(precision,
                                                                 (n_new, -1))
        start, stop = self.n_classes, self.n_classes + n_new
        self._grow(stop)
        self.n_obs[start:stop] = 0.0
        self.crp_count[start:stop] = crp_count
        self.crp_total += float(np.sum(self.crp_count[start:stop]))
        self.frozen[start:stop] = frozen
        self.n_classes = stop
        if nat_mean is None:  # at the prior: its coefficients as they are
            if self.isotropic:
                self.nat_mean[start:stop] = self.prior_nat_mean
            self._store(slice(start, stop), self.prior_coef[None],
                        self.prior_precision[None], crp_log_numerator(
                            float(crp_count), a=self.a, class_prior=self.class_prior))
        else:
            self._refresh(np.arange(start, stop), nat_mean, np.broadcast_to(
                precision, (n_new, self.prior_precision.shape[0])))
        self._refresh_novel()

    def _log_numerators(self, counts, n_classes):
        """CRP numerators; a count not above ``a`` (a class not instantiated
        yet) has no mass."""
        if (counts > self.a).all():
            return crp_log_numerators(counts, n_classes, a=self.a, b=self.b,
                                      class_prior=self.class_prior)
        with np.errstate(divide="ignore", invalid="ignore"):
            log_known, log_novel = crp_log_numerators(
                counts, n_classes, a=self.a, b=self.b, class_prior=self.class_prior)
        return np.where(counts > self.a, log_known, -np.inf), log_novel

    def _store(self, index, coef, precision, log_numerator):
        """Cache classes ``index``: :func:`log_density_coef` rows ``coef`` (k or 1,
        or one class's), their precisions (None: theirs) and CRP log numerators."""
        if self.isotropic:  # [m/v, -1/(2 v), const] as they are
            self.joint_coef[index] = coef
        else:
            self.joint_coef[index, :-1] = coef[..., : self.n_features]
            self.joint_coef[index, -1] = coef[..., -1]
        if precision is None:  # the classes keep their stored precisions
            pass
        elif self.isotropic:
            self.precision[index] = precision
        else:
            self.group[index] = self._row_ids(precision)
        self.joint_coef[index, -1] += log_numerator

    def _refresh(self, rows, nat_mean=None, precision=None):
        """Store the sorted classes ``rows`` at ``(q, lam)`` (default: theirs)
        with their present CRP counts."""
        if nat_mean is not None and self.isotropic:
            self.nat_mean[rows] = nat_mean
        for chunk in _chunks(rows.shape[0], self.prior_coef.shape[0]):
            index = rows[chunk]
            lam = self.class_precision(index) if precision is None else precision[chunk]
            q = self.nat_means(index) if nat_mean is None else nat_mean[chunk]
            self._store(index, log_density_coef(q, lam, self.sigma),
                        None if precision is None else lam,
                        self._log_numerators(self.crp_count[index], self.n_classes)[0])

    def _refresh_novel(self, *, precision=True):
        """Cache the novel class (``precision=False``: its precision as stored)."""
        n = self.n_classes
        self._store(slice(n, n + 1), self.prior_coef[None],
                    self.prior_precision[None] if precision else None,
                    self._log_numerators(np.zeros(0), n)[1])

    def update(self, U, index, *, sign=1.0, skip_frozen=True):
        """``q_n += u / sigma``, ``lam_n += 1 / sigma``, ``c_n += 1`` of classes
        ``index`` with rows ``U`` (``sign=-1`` takes them out)."""
        if skip_frozen:
            live = ~self.frozen[index]
            if not live.all():
                U, index = U[live], index[live]
        if index.shape[0] == 0:
            return
        classes, sums, counts = group_sums(U, index)
        self.add_sums(classes, sign * sums, sign * counts)

    def add_sums(self, classes, sums, counts):
        """The conjugate update of ``classes`` with their rows' sums and counts."""
        nat_mean, precision = add_observations(
            self.nat_means(classes), self.class_precision(classes), sums,
            counts[:, None], self.sigma)
        self.n_obs[classes] += counts
        self.crp_count[classes] += counts
        self.crp_total += float(counts.sum())
        self._refresh(classes, nat_mean, precision)
        self._mirror(classes)

    def learn(self, Z, index, n_classes, rows=None):
        """Condition on rows ``Z`` (the indices ``rows`` of them, read a chunk at
        a time) of the classes ``index`` (``n_classes`` in all)."""
        self.add_classes(n_classes - self.n_classes)
        for chunk in _chunks(index.shape[0], Z.shape[1]):
            self.update(self.to_basis(selected_rows(Z, rows, chunk)), index[chunk])
        self._advance_growth(index.shape[0])

    def move(self, Z, source, target):
        """Move rows ``Z`` from the classes ``source`` to ``target``."""
        self._drop_growth()
        U = self.to_basis(np.asarray(Z, dtype=np.float64))
        self.update(U, source, sign=-1.0, skip_frozen=False)
        self.update(U, target, skip_frozen=False)

    def remove_class(self, i):
        """Delete class ``i``: later classes move up one place."""
        self._drop_growth()
        n = self.n_classes
        self.crp_total -= float(self.crp_count[i])
        for name in self._BUFFERS:
            buffer = getattr(self, name)
            stop = n + 1 if name in self._WITH_NOVEL else n
            buffer[i:stop - 1] = buffer[i + 1:stop].copy()
        self.n_classes = n - 1
        self._refresh_novel()  # its CRP numerator depends on the number of classes

    def set_crp_counts(self, counts):
        """Replace the CRP counts (pseudo-counts of classes learned in ``fit``)."""
        self._drop_growth()
        n = self.n_classes
        self.crp_count[:n] = counts
        self.crp_total = float(np.sum(self.crp_count[:n]))
        self._refresh(np.arange(n))

    def freeze(self, frozen=True):
        """Keep the classes instantiated so far fixed (or release them)."""
        self._drop_growth()
        self.frozen[: self.n_classes] = frozen

    def to_basis(self, Z):
        """Rows in the state's basis."""
        centred = Z - self.basis_shift
        return centred if self.basis is None else centred @ self.basis

    def class_mean(self):
        """Posterior means ``m_n`` of the classes, in the rows' frame."""
        n = self.n_classes
        mean = self.nat_means(slice(0, n)) / self.class_precision(slice(0, n))
        return self.basis_shift + (mean if self.basis is None
                                   else mean @ self.basis_inverse)

    def class_var(self):
        """Marginal posterior variances of the class means, shape (N, d)."""
        n = self.n_classes
        var = 1.0 / self.class_precision(slice(0, n))
        if self.basis is None:
            return np.broadcast_to(var, (n, self.n_features)).copy()
        # diag(T_inv.T @ diag(var) @ T_inv), one class per row.
        return var @ (self.basis_inverse * self.basis_inverse)

    def joint_log_numerators(self, Z, novelty_map=None):
        """``log N(z; m_n, v_n) + log numerator_n``, (n_samples, n_classes + 1),
        novel last, up to :meth:`log_normaliser`."""
        scores = np.empty((Z.shape[0], self.n_classes + 1))
        for rows in _chunks(Z.shape[0], Z.shape[1]):
            self._scores(self.features(Z[rows]), out=scores[rows])
        if novelty_map is None or self.n_classes == 0:
            return scores
        return recalibrate_novel_column(scores, *novelty_map)

    def log_normaliser(self):
        """The row constant left out of :meth:`joint_log_numerators`."""
        return self.log_jacobian + float(crp_log_normaliser(
            np.asarray(self.crp_total), self.n_classes, b=self.b,
            class_prior=self.class_prior))

    def stream(self, Z, index, is_new_class, novelty_map=None):
        """Predict each row with the state before it, then learn it under
        ``index``: per row the best class (-1: none), P(novel), the novel
        decision and P(novel)'s log-odds."""
        if Z.shape[0] == 1:
            best, p_novel, novel, log_odds = self.step(
                Z[0], int(index[0]), bool(is_new_class[0]), novelty_map)
            return (np.array([best]), np.array([p_novel]), np.array([novel]),
                    np.array([log_odds]))
        n_rows = Z.shape[0]
        out = (np.empty(n_rows, dtype=np.intp), np.empty(n_rows),
               np.empty(n_rows, dtype=bool), np.empty(n_rows))
        for rows in chunk_slices(
                index, n_classes=self.n_classes + int(is_new_class.sum()),
                width=self.prior_coef.shape[0]):
            first_new = self.n_classes
            self.add_classes(int(is_new_class[rows].sum()))
            features = self.features(Z[rows])
            scored = self._score_chunk(features, index[rows], is_new_class[rows],
                                       first_new, novelty_map)
            for target, values in zip(out, scored, strict=True):
                target[rows] = values
            self.update(features[:, : self.n_features], index[rows])
        self._advance_growth(n_rows)
        return out

    def step(self, z, i, is_new, novelty_map=None):
        """:meth:`stream` of one row: :meth:`_scores`, then :meth:`add_sums`'s
        formulas for one class; the four values as scalars."""
        features = self.features(z)
        scores = self._scores(features)
        if novelty_map is not None and self.n_classes:
            scores = recalibrate_novel_column(scores, *novelty_map)
        scored = _decide_row(scores)
        if is_new:
            self.add_classes(1)
        if not self.frozen[i]:
            self.n_obs[i] += 1.0
            self.crp_count[i] += 1.0
            self.crp_total += 1.0
            log_numerator = crp_log_numerator(float(self.crp_count[i]), a=self.a,
                                              class_prior=self.class_prior)
            precision, u = self.class_precision(i), features[: self.n_features]
            if self.isotropic:  # in place: q, lam and the cached row
                nat_mean = self.nat_mean[i]
                add_observations(nat_mean, precision, u, 1.0, self.sigma,
                                 out=(nat_mean, precision))
                log_density_coef(nat_mean, precision, self.sigma,
                                 out=self.joint_coef[i])[-1] += log_numerator
            else:  # lam: a row of the table, not written
                nat_mean, precision = add_observations(
                    self.nat_means(i), precision, u, 1.0, self.sigma)
                self._store(i, log_density_coef(nat_mean, precision, self.sigma),
                            precision, log_numerator)
            if self._next is not None:
                self._mirror(np.array([i]))
        self._advance_growth(1)
        return scored

    def _score_chunk(self, features, index, is_new_class, first_new,
                     novelty_map=None):
        """Scores of a chunk against the states each row sees: cached ones and
        its prefix states, one GEMM each."""
        n_classes = self.n_classes
        U = features[:, : self.n_features]
        scores = self._scores(features)
        table = prefix_states(U, index, live=~self.frozen[index])
        touched, seen = table.touched, table.seen
        nat_mean, precision = add_observations(
            self.nat_means(table.owner), self.class_precision(table.owner), table.sums,
            table.counts[:, None], self.sigma)
        full = log_density_features(U, isotropic=self.isotropic)  # [u, u**2, 1]
        state_density = full @ log_density_coef(nat_mean, precision, self.sigma).T
        density = np.take_along_axis(state_density, table.pick, axis=1)
        # Per-row CRP prior: counts and N as they stand before each row.
        classes_before = first_new + np.cumsum(is_new_class) - is_new_class
        log_known, log_novel = self._log_numerators(
            self.crp_count[touched] + seen, classes_before)
        # Classes not instantiated before a row have no mass at that row.
        exists = (touched < first_new) | (seen > 0)
        scores[:, touched] = np.where(exists, density + log_known, -np.inf)
        scores[:, -1] = full @ self.prior_coef + log_novel
        if novelty_map is not None:
            scores = recalibrate_novel_column(scores, *novelty_map)
        rows = np.arange(U.shape[0])
        known_index = np.full(U.shape[0], -1, dtype=np.intp)
        if n_classes:
            best = np.argmax(scores[:, :-1], axis=1)
            has_class = np.isfinite(scores[rows, best])  # a row before every class
            known_index[has_class] = best[has_class]
            # Ties go to the known class, as np.argmax does in ``predict``.
            pred_novel = scores[:, -1] > scores[rows, best]
        else:
            pred_novel = np.ones(U.shape[0], dtype=bool)
        log_odds = novel_log_odds(scores)  # P(novel) = expit(its log-odds)
        return known_index, expit(log_odds), pred_novel, log_odds


def _decide_row(scores):
    """:meth:`ClassState._score_chunk`'s four values of one row, as scalars."""
    n = scores.shape[0] - 1
    if n == 0:
        return -1, 1.0, True, MAX_LOG_ODDS
    known = scores[:n]
    best = int(known.argmax())
    top, novel = known.item(best), scores.item(n)
    if not (math.isfinite(top) and math.isfinite(novel)):
        batch = scores[None]
        return (best, float(np.exp(log_softmax(batch)[0, -1])), novel > top,
                float(novel_log_odds(batch)[0]))
    # log sum_n exp(known_n), shifted only beyond +-600 (no overflow); exponents
    # clamped at -700 spare exp its slow subnormal path.
    shift = 0.0 if -600.0 <= top <= 600.0 else top
    if shift:
        known -= shift
    np.maximum(known, -700.0, out=known)
    log_known = shift + math.log(np.add.reduce(np.exp(known, out=known)))
    log_odds = min(max(novel - log_known, -MAX_LOG_ODDS), MAX_LOG_ODDS)
    return best, float(expit(log_odds)), novel > top, log_odds


def _chunks(n_rows, width):
    """Slices of ``range(n_rows)`` of ``_CHUNK_ELEMENTS / width`` rows (>= 1)."""
    step = max(1, _CHUNK_ELEMENTS // max(1, width))
    return [slice(start, min(n_rows, start + step))
            for start in range(0, n_rows, step)]
