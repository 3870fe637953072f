"""The two-covariance model's estimates and maps (the maths of
:class:`~sklearn_flowr.head.TwoCovarianceWhitener`), and its refits without a
fold of the rows, computed in the span of all the rows."""

import numpy as np
from scipy import linalg, optimize

from .._core import group_sums
from .._core import unit_rows as unit_length
from ._blas import scipy_blas_on_one_thread

__all__ = ["apply_map", "check_counts", "cheapest_solver", "class_means", "estimate",
           "map_inside", "map_span", "prior_variances", "resolve_solver", "span_refit",
           "unit_rows"]


def estimate(Z, y_index, counts, alpha, solver, n_features=None):
    """``mu0``, the map ``A`` (a matrix or factored), ``t``, ``nu``, the
    noise shrinkage ``alpha`` (given, or None: ``"dof"``'s) of the unit rows
    ``Z`` of classes ``y_index`` (``counts`` rows each) by ``solver``, and the
    rows' coordinates in the span (``"span"``; else None).

    ``Z`` may hold the rows' coordinates in an orthonormal basis of a subspace
    that holds them, of the ``n_features`` dimensions of their space: ``nu``
    and ``alpha`` are those of the whole space, and in its part outside the
    basis ``W = alpha nu I`` and ``t = 0`` (``A``, ``t`` and ``mu0`` are then
    in the basis)."""
    n, m = Z.shape
    d = m if n_features is None else n_features
    n_classes = counts.shape[0]
    means = class_means(Z, y_index, counts)
    prior_mean = means.mean(axis=0)  # mu0: every class counts once
    dof = n - n_classes
    prior_dof = min(d, dof)  # the target's weight, at most the data's
    if alpha is None:
        alpha = prior_dof / (prior_dof + dof)
    if alpha == 0 and dof < d:  # S has rank n - K < d: W is singular
        _cholesky(np.zeros((1, 1)))
    rows = None
    if solver == "span":
        scalings, between, nu, rows = _span_fit(Z, y_index, counts, prior_mean,
                                                alpha, dof, d)
    else:
        residual = means[y_index]
        np.subtract(Z, residual, out=residual)  # one temporary the size of Z
        noise = residual.T @ residual  # (n - K) S, one product
        del residual  # (before the d x d factorisations)
        nu = np.trace(noise) / dof / d
        _check_noise(nu, d)
        noise *= (1.0 - alpha) / dof
        noise.flat[:: m + 1] += alpha * nu  # W = (1-a) S + a nu I
        chol = _cholesky(noise)  # W = L L^T
        whitened = linalg.solve_triangular(chol, (means - prior_mean).T,
                                           lower=True)  # m x K: L^-1 (m - mu0)
        if solver == "gram":
            reflectors, between = _gram_rotation(whitened, n_classes - 1)
            scalings = (chol, reflectors, None, 1.0)
        else:
            rotation, between = _eigen_rotation(whitened, n_classes - 1)
            scalings = linalg.solve_triangular(chol.T, rotation, lower=False)
    return prior_mean, scalings, between, nu, alpha, rows


def check_counts(n, n_classes):
    """Refuse rows that cannot estimate the noise and the prior."""
    if n_classes < 2 or n <= n_classes:
        raise ValueError(
            "TwoCovarianceWhitener needs at least two classes and a class "
            f"with two rows; got {n} rows of {n_classes} class(es).")


def prior_variances(between, counts, prior_floor, spectrum="sample"):
    """``beta``: the class means' prior variances in the whitened space, from
    ``t``, the eigenvalues of the whitened means' covariance (``K - 1``
    degrees of freedom in ``d`` dimensions), less the noise of a mean of
    ``k_h`` rows, ``1/k_h`` (``k_h`` the harmonic mean of the class sizes
    ``counts``); at least ``prior_floor`` times the larger of the largest
    ``beta`` and ``1/k_h``.

    ``spectrum="sample"``: ``beta = t - 1/k_h`` in each direction.
    ``"spiked"``: the eigenvalues above the Marchenko-Pastur edge
    ``s (1 + sqrt(d / (K - 1)))^2`` of the bulk variance ``s`` are spikes
    whose variance is the one that gives their sample eigenvalue (the BBP
    map, inverted); every other direction, those the means do not span
    included, gets ``s``: what the trace leaves once the spikes take their
    variances. With fewer classes than dimensions the means' noise fills
    their ``K - 1`` sample directions (``t`` about ``d / (K - 1)`` times its
    share), so ``"sample"`` takes noise for spread there and puts the spread
    of the classes outside their span at the floor; ``"spiked"`` takes a
    spectrum with no eigenvalue above the edge for an isotropic prior."""
    noise = np.mean(1.0 / counts)
    variance = (_spiked_variances(between, counts.shape[0] - 1)
                if spectrum == "spiked" else between)
    beta = variance - noise
    return np.maximum(beta, prior_floor * max(beta.max(), noise))


def _spiked_variances(between, dof):
    """The population variances of the eigenvalues ``between`` of a sample
    covariance of ``dof`` degrees of freedom: spikes and a bulk, the spikes
    taken from the top while one lies above the Marchenko-Pastur edge of the
    bulk that the others leave."""
    d = between.shape[0]
    ratio = d / dof
    order = np.argsort(between)[::-1]
    t = between[order]
    spikes, bulk = 0, t.sum() / d
    while spikes < min(dof, d - 1) and t[spikes] > bulk * (1 + np.sqrt(ratio)) ** 2:
        spikes += 1
        bulk = _bulk_of(t, spikes, ratio)
    variances = np.full(d, bulk)
    variances[:spikes] = _spike_variances(t[:spikes], bulk, ratio)
    out = np.empty(d)
    out[order] = variances
    return out


def _spike_variances(top, bulk, ratio):
    """The variances ``l`` of spikes of sample eigenvalues ``top`` over a
    bulk ``bulk``: the root ``l > bulk`` of ``t = l + ratio bulk l / (l -
    bulk)`` (BBP), ``l = bulk (1 + sqrt(ratio))`` at the edge."""
    unit = max(float(np.max(top, initial=0.0)), bulk)  # l is of degree 1
    if not unit > 0:
        return np.zeros_like(top)
    top, bulk = top / unit, bulk / unit  # (squares neither overflow nor vanish)
    c = top + bulk * (1.0 - ratio)
    return unit * (c + np.sqrt(np.maximum(c * c - 4.0 * top * bulk, 0.0))) / 2


def _bulk_of(t, spikes, ratio):
    """The bulk variance ``s`` that the trace leaves to the ``d - spikes``
    other directions once the first ``spikes`` eigenvalues ``t`` (sorted)
    take their variances: the root of ``(d - spikes) s + sum(l(t_j, s)) =
    sum(t)`` (a spike's eigenvalue holds some of the bulk's mass, ``t -
    l``), increasing in ``s`` while ``spikes <= d / ratio``: between the
    others' mean (``l <= t``) and ``sum(t) / (d - spikes)``."""
    d, total = t.shape[0], t.sum()
    low, high = t[spikes:].sum() / (d - spikes), total / (d - spikes)

    def excess(bulk):
        spiked = _spike_variances(t[:spikes], bulk, ratio).sum()
        return (d - spikes) * bulk + spiked - total
    # No spike holds any of the bulk's mass, or the rest is zero to rounding
    # (means spanning fewer directions), where excess(low) <= 0 rounds up.
    if not high > low or excess(low) >= 0:
        return low
    return optimize.brentq(excess, low, high, xtol=1e-14 * high, rtol=1e-12)


def span_refit(rows, y, n_features, alpha, prior_floor, solver="auto",
               spectrum="sample"):
    """``refit(train, held)``: the prior variances and the whitened rows
    ``train`` (each as its class's whitened mean: the same class sums, for a
    head that reads only those) and ``held`` (boolean masks) of the model
    fitted on the rows ``train`` alone, from ``rows``: the coordinates of
    every unit row (labels ``y``) in an orthonormal basis of a subspace that
    holds them all, of ``n_features`` dimensions in all (a fit's span,
    ``n < d``).

    The model is the one a whitener fitted on those rows estimates, in
    coordinates rotated among those of equal prior variance (the bulk's or
    the floor, where the means give no eigenvalue),
    which a head with unit noise and the prior ``N(0, s diag(beta))`` (``s``
    a scalar) cannot tell apart; a head with another prior mean or
    variances can. A refit costs ``O(n^3)`` instead of the
    ``O(d n^2)`` of a fit in the whole space. ``solver``: the refits'
    (``"auto"``: the cheapest by shape in the span); ``spectrum``: the
    prior's (:func:`prior_variances`)."""
    y = np.asarray(y).reshape(-1)
    n_basis = rows.shape[1]

    def refit(train, held):
        classes, y_index, counts = np.unique(y[train], return_inverse=True,
                                             return_counts=True)
        y_index = y_index.reshape(-1)
        Z = rows[train]
        check_counts(Z.shape[0], classes.shape[0])
        chosen = resolve_solver(solver, Z.shape[0], classes.shape[0], n_basis)
        with scipy_blas_on_one_thread():
            prior_mean, scalings, between, _, _, fitted = estimate(
                Z, y_index, counts, alpha, chosen, n_features)
            # The head reads the train rows' class sums only: their classes'
            # whitened means (the map is affine) cost one row a class.
            means = class_means(fitted if fitted is not None else Z, y_index,
                                 counts)
            U = (map_inside(means, scalings[2]) if fitted is not None
                 else apply_map(scalings, means - prior_mean))[y_index]
            U_held = apply_map(scalings, rows[held] - prior_mean)
        beta = prior_variances(_padded(between, n_features), counts,
                               prior_floor, spectrum)
        return beta, _padded(U, n_features), _padded(U_held, n_features)
    return refit


def _padded(V, n_features):
    """``V`` with zero columns (or entries) up to ``n_features``."""
    out = np.zeros(V.shape[:-1] + (n_features,))
    out[..., : V.shape[-1]] = V
    return out


def class_means(V, y_index, counts):
    """Each class's mean of the rows ``V`` (every class has rows: in order)."""
    return group_sums(V, y_index)[1] / counts[:, None]


def unit_rows(X):
    """``x / ||x||``; a zero row has no direction, so it is refused."""
    zero = ~np.any(X, axis=1)
    if zero.any():
        raise ValueError(
            f"TwoCovarianceWhitener scales rows to unit length; rows "
            f"{np.flatnonzero(zero)[:5].tolist()} are all zeros.")
    return unit_length(X)


# Rows of a class closer than this (relative to their unit length) are copies.
_IDENTICAL = 1e-8


def _check_noise(nu, d):
    """Refuse a class noise of rounding size: the unit rows' spread about
    their class means (``d nu``, their mean squared distance) under
    ``_IDENTICAL ** 2`` of their squared length, 1."""
    if not nu * d > _IDENTICAL**2:
        raise ValueError(
            "The rows of every class are identical (to 1e-8 of their length) "
            "after scaling to unit length: the class noise cannot be "
            "estimated. Give each class rows that differ.")


def _cholesky(noise):
    try:
        chol = linalg.cholesky(noise, lower=True)
    except linalg.LinAlgError:
        chol = None
    # A pivot at rounding level: W is singular in float64 (S of rank n - K < d).
    if chol is None or np.diag(chol).min() ** 2 <= (
            noise.shape[0] * np.finfo(np.float64).eps * np.diag(noise).max()):
        raise ValueError(
            "The class noise W is singular (fewer within-class degrees of "
            "freedom than features): use noise_shrinkage > 0.")
    return chol


def resolve_solver(solver, n, n_classes, d):
    """The solver that fits ``n`` rows of ``n_classes`` classes in ``d``
    dimensions: ``"auto"``'s cheapest, and the eigen solver for a span that
    is the whole space (``n >= d``)."""
    if solver == "auto":
        solver = cheapest_solver(n, n_classes, d)
    return "eigen" if solver == "span" and n >= d else solver


def cheapest_solver(n, n_classes, d):
    """The solver of fewest floating-point operations (rough counts) for the
    fit and the transform of its rows (``fit_transform``)."""
    common = n * d**2 + d**3 / 3 + n_classes * d**2  # scatter, chol, means
    # A row costs 2 d^2 through the eigen solver's A, d^2 + 4 d (K - 1)
    # through the Gram's factors (a triangular solve, K - 1 reflectors): past
    # a few hundred classes the Gram's cheaper fit is lost in transforming
    # the rows.
    gram_rows = (d**2 + 4 * d * (n_classes - 1)) * n
    if n < d:  # the span's fit gives the fit rows' coordinates too
        span = 2 * d * n**2 + 6 * n**3 + 4 * n**2 * n_classes
        if span < common + gram_rows:
            return "span"
    costs = {"eigen": common + 6 * d**3 + 2 * n * d**2,  # eigh, A; the rows
             "gram": common + 2 * n_classes * d**2 + 5 * n_classes**3 + gram_rows}
    return min(costs, key=costs.get)


def _eigen_rotation(whitened, dof_between):
    """``U`` and ``t`` of ``T = M M^T / (K - 1)`` by its eigen-decomposition."""
    between, rotation = np.linalg.eigh(whitened @ whitened.T / dof_between)
    return rotation, np.maximum(between, 0.0)


def _gram_rotation(whitened, dof_between):
    """``U`` (as Householder reflectors: first the ``r <= K - 1`` directions
    the means span, up to sign, then the rest) and ``t`` from ``M^T M``."""
    gram, vectors = np.linalg.eigh(whitened.T @ whitened / dof_between)
    keep = gram > 1e-10 * gram.max()
    spanned = whitened @ (vectors[:, keep] / np.sqrt(gram[keep] * dof_between))
    between = np.zeros(whitened.shape[0])
    between[: spanned.shape[1]] = gram[keep]
    return linalg.qr(spanned, mode="raw")[0], between


def _span_fit(Z, y_index, counts, prior_mean, alpha, dof, d):
    """The model in the span of the centred rows (``n < m``, ``Z``'s columns),
    where ``S`` and the means live; in its complement ``W = alpha nu I`` and
    ``t = 0`` (``nu`` of ``d`` dimensions). Also the rows' coordinates in the
    span (``R^T``)."""
    n, m = Z.shape
    # Q = [inside, outside] as n Householder reflectors: Q^T v costs O(d n).
    # Q^T (Z - mu0)^T = [R; 0]: the rows' coordinates are R^T, the class
    # means' the means of theirs.
    reflectors, upper = linalg.qr((Z - prior_mean).T, mode="raw",
                                  overwrite_a=True, check_finite=False)
    rows = upper.T
    mean_inside = class_means(rows, y_index, counts)
    residual = rows - mean_inside[y_index]
    nu = np.sum(residual**2) / dof / d  # trace(S) / d: S is zero outside
    _check_noise(nu, d)
    noise = (1.0 - alpha) * (residual.T @ residual / dof)
    noise[np.diag_indices(n)] += alpha * nu
    chol = _cholesky(noise)
    whitened = linalg.solve_triangular(chol, mean_inside.T, lower=True)
    # The rotation from the K x K Gram matrix (K < n), as an n x n matrix.
    # The inside map L^-T Q stays factored too: forming it costs O(n^3), more
    # than mapping the class means and queries a fit maps through it.
    rotation, between = _gram_rotation(whitened, counts.shape[0] - 1)
    scalings = (None, reflectors, (chol, rotation), 1.0 / np.sqrt(alpha * nu))
    return scalings, np.concatenate([between, np.zeros(m - n)]), nu, rows


def _reflect(reflectors, V):
    """``V Q`` for ``Q`` given as Householder reflectors ``(qr, tau)``."""
    qr, tau = reflectors
    if tau.shape[0] == 0:  # no reflector (class means all equal): Q = I
        return np.array(V, dtype=np.float64)
    if not qr.flags.writeable:  # LAPACK writes to it (and restores it)
        qr = np.array(qr, order="F")
    result = linalg.lapack.dormqr("L", "T", qr, tau, np.asfortranarray(V.T),
                                  lwork=max(1, 64 * V.shape[0]))
    return result[0].T


def apply_map(scalings, V):
    """``V A``: ``A`` a matrix, or factored: whiten by ``L`` (if any), rotate
    by the reflectors ``Q``, map the first ``r`` coordinates (if a map is
    given), scale the rest."""
    if isinstance(scalings, np.ndarray):
        return V.astype(scalings.dtype, copy=False) @ scalings
    chol, reflectors, inside_map, outside_scale = scalings
    if chol is not None:
        V = linalg.solve_triangular(chol, V.T, lower=True,
                                     check_finite=False).T
    coordinates = _reflect(reflectors, V)
    if inside_map is None:  # (the Gram solver's A = L^-T Q)
        return coordinates
    n = reflectors[1].shape[0]  # one reflector a dimension of the span
    return map_span(coordinates[:, :n], coordinates[:, n:], inside_map,
                     outside_scale)


def map_inside(inside, inside_map):
    """The span solver's whitened coordinates in the span, ``V L^-T Q``, from
    the rows' coordinates there ``V`` (``inside_map``: ``(L, Q)``, ``Q`` as
    Householder reflectors; a whitener saved by an earlier version holds the
    product itself, an n x n matrix)."""
    if isinstance(inside_map, np.ndarray):
        return inside @ inside_map
    chol, rotation = inside_map
    return _reflect(rotation, linalg.solve_triangular(
        chol, inside.T, lower=True, check_finite=False).T)


def map_span(inside, outside, inside_map, outside_scale):
    """The span solver's whitened rows from their coordinates in the span and
    outside it."""
    return np.hstack([map_inside(inside, inside_map), outside * outside_scale])

