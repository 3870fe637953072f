"""Empirical-Bayes ``sigma``, ``mu0``, ``s0`` and ``b`` of a head from the
statistics ("moments") of its labelled rows: a dict of per-class ``count``,
``mean``, ``scatter_trace`` and, for a full noise, ``scatter``, ``cube``,
``quartic`` and ``unit`` (the power of two the last two are measured in)."""

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.special import gammaln
from sklearn.covariance import shrunk_covariance

from ._streaming import group_sums, selected_rows

# Floors relative to the feature scale (identical class means would give
# s0 = 0, repeated rows sigma = 0); separated classes have a small noise.
_PRIOR_VAR_FLOOR = 1e-3
_NOISE_VAR_FLOOR = 1e-6
_SMALLEST_NORMAL = float(np.finfo(np.float64).tiny)
# Rows of residuals at a time (2 MB of float64): no temporary the size of X.
_CHUNK_ELEMENTS = 1 << 18


def class_means(X, y_index, n_classes, rows=None):
    """Mean row of each class, shape (n_classes, n_features), and class sizes;
    ``rows``: the indices of the rows of ``X`` that ``y_index`` labels
    (default all)."""
    present, group, _ = group_sums(X, y_index, rows)  # (np.add.at: 20x slower)
    sums = group
    if present.shape[0] < n_classes:
        sums = np.zeros((n_classes, X.shape[1]))
        sums[present] = group
    sizes = np.bincount(y_index, minlength=n_classes)
    sums /= sizes[:, None]  # (in place: 0 / 0 for an absent class, as before)
    return sums, sizes


def moments_of_rows(X, y_index, n_classes, *, fourth=False, pooled=False,
                    rows=None):
    """The statistics of rows ``X`` of the classes ``y_index`` (each of
    ``range(n_classes)`` occurs); ``fourth``: the full-noise entries, per class or,
    when ``pooled``, summed (without ``cube``). ``rows``: the indices of the rows
    of ``X`` that ``y_index`` labels (default all), read a chunk at a time
    (per-class ``fourth`` entries take every residual at once: a copy)."""
    if rows is not None and fourth and not pooled:
        X, rows = X[rows], None
    d = X.shape[1]
    if n_classes == 0:  # an empty chunk
        empty = {"count": np.zeros(0), "mean": np.zeros((0, d)),
                 "scatter_trace": np.zeros(0)}
        if fourth:
            empty.update(scatter=np.zeros((0, d, d)), cube=np.zeros((0, d)),
                         quartic=np.zeros(0), unit=1.0)
        return empty
    means, sizes = class_means(X, y_index, n_classes, rows)
    moments = {"count": sizes.astype(np.float64), "mean": means}
    if fourth and not pooled:  # per class: every residual at once
        residual = means[y_index]
        np.subtract(X, residual, out=residual)  # one temporary of the size of X
        squares = np.einsum("ij,ij->i", residual, residual)
        moments.update(_fourth_moments(residual, squares, y_index, n_classes))
    else:
        squares = np.empty(y_index.shape[0])
        scatter, peak = np.zeros((d, d)) if fourth else None, 0.0
        step = max(1, _CHUNK_ELEMENTS // d)
        for start in range(0, y_index.shape[0], step):
            chunk = slice(start, start + step)
            residual = selected_rows(X, rows, chunk) - means[y_index[chunk]]
            squares[chunk] = np.einsum("ij,ij->i", residual, residual)
            if fourth:
                scatter += residual.T @ residual
                peak = max(peak, float(np.abs(residual).max()))
        if fourth:
            unit = _unit_above(peak)
            scaled_squares = squares / unit**2
            moments.update(scatter=scatter[None], unit=unit,
                           quartic=np.array([scaled_squares @ scaled_squares]))
    moments["scatter_trace"] = np.bincount(y_index, squares, n_classes)
    return moments


def moments_for_params(params, X, y_index, n_classes, rows=None):
    """The statistics of rows ``X`` (``rows`` of them: :func:`moments_of_rows`)
    that the "auto" entries of a head's ``params`` need: the class counts alone
    when only ``b`` is "auto"."""
    counts = np.bincount(y_index, minlength=n_classes)
    if not needs_scatter(params):
        return {"count": counts.astype(np.float64)}
    if isinstance(params["sigma"], str):  # one row per class fails first
        noise_degrees_of_freedom(counts, params["covariance"])
    fourth = needs_fourth_moments(params["covariance"], params["sigma"])
    return moments_of_rows(X, y_index, n_classes, pooled=True, fourth=fourth,
                           rows=rows)


def _unit_above(peak):
    """The smallest power of two above every ``|r| <= peak``: r / unit is exact."""
    return float(np.ldexp(1.0, np.frexp(peak)[1])) if peak > 0 else 1.0


def _fourth_moments(residual, squares, y_index, n_classes):
    """Per-class scatter matrices, ``sum ||r||^2 r`` and ``sum ||r||^4`` of
    residuals."""
    unit = _unit_above(float(max(residual.max(), -residual.min())))  # no temporary
    scaled_squares = squares / unit**2
    order = np.argsort(y_index, kind="stable")
    bounds = np.searchsorted(y_index[order], np.arange(n_classes + 1))
    scatter = np.stack([residual[order[lo:hi]].T @ residual[order[lo:hi]]
                        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)])
    cube = np.zeros((n_classes, residual.shape[1]))
    np.add.at(cube, y_index, scaled_squares[:, None] * (residual / unit))
    return {"scatter": scatter, "cube": cube, "unit": unit,
            "quartic": np.bincount(y_index, scaled_squares**2, n_classes)}


_FOURTH = ("scatter", "cube", "quartic")


def needs_scatter(params):
    """Whether the head's ``params`` estimate its prior or noise from the rows'
    spread (``b="auto"`` needs the class sizes only)."""
    return any(isinstance(params[name], str)
               for name in ("sigma", "prior_mean", "prior_var"))


def combine_moments(first, second):
    """The record of the union of two records' rows (a class in both is
    pooled), its labels sorted; the entries both have."""
    labels, inverse = np.unique(
        np.concatenate([first["labels"], second["labels"]]), return_inverse=True)
    inverse = inverse.reshape(-1)
    split = first["labels"].shape[0]
    keys = [key for key in ("count", "mean", "scatter_trace", *_FOURTH)
            if key in first and key in second]
    one = _spread(first, inverse[:split], labels.shape[0], keys)
    two = _spread(second, inverse[split:], labels.shape[0], keys)
    # A class in one part only has count 0 in the other: every correction
    # below then vanishes exactly and its moments are copied.
    n_one, n_two = one["count"], two["count"]
    total = n_one + n_two
    delta = two["mean"] - one["mean"]
    union = {"labels": labels, "count": total,
             "mean": one["mean"] + delta * (n_two / total)[:, None]}
    between = n_one * n_two / total  # Chan et al.'s n_a n_b / n
    if "scatter_trace" in keys:
        union["scatter_trace"] = (one["scatter_trace"] + two["scatter_trace"]
                                  + between * np.einsum("ij,ij->i", delta, delta))
    if "scatter" in keys:
        union.update(_combine_fourth(one, two, delta, n_one / total,
                                     n_two / total, between))
    return union


def _spread(moments, index, n_classes, keys):
    """The entries ``keys`` of ``moments`` on the rows ``index`` of zeros."""
    out = {}
    for key in keys:
        value = moments[key]
        out[key] = np.zeros((n_classes, *value.shape[1:]))
        out[key][index] = value
    if "unit" in moments:
        out["unit"] = moments["unit"]
    return out


def _combine_fourth(one, two, delta, w_one, w_two, between):
    """Scatter matrices, third and fourth moments about the pooled mean."""
    unit = max(one["unit"], two["unit"])
    moved = []
    # Each part's residuals about the pooled mean are r - d, d = pooled - own.
    for part, shift in ((one, delta * w_two[:, None]), (two, -delta * w_one[:, None])):
        ratio = part["unit"] / unit  # a power of two: exact rescaling
        cube, quartic = part["cube"] * ratio**3, part["quartic"] * ratio**4
        d = shift / unit
        s = part["scatter"] / unit**2
        ss = part["scatter_trace"] / unit**2
        n = part["count"]
        sd = np.einsum("nij,nj->ni", s, d)
        dd = np.einsum("ij,ij->i", d, d)
        # sum ||r - d||^2 (r - d) and sum ||r - d||^4, using sum r = 0.
        moved.append((
            cube - 2.0 * sd - (ss + n * dd)[:, None] * d,
            quartic + 4.0 * np.einsum("ij,ij->i", d, sd) + n * dd**2
            - 4.0 * np.einsum("ij,ij->i", cube, d) + 2.0 * ss * dd,
        ))
    return {
        "scatter": one["scatter"] + two["scatter"]
        + between[:, None, None] * delta[:, :, None] * delta[:, None, :],
        "cube": moved[0][0] + moved[1][0],
        "quartic": moved[0][1] + moved[1][1],
        "unit": unit,
    }


def feature_scale_of(moments):
    """The unit of every variance floor: the mean feature variance of the
    rows, else their mean square, else 1 (at least the smallest normal)."""
    count, mean = moments["count"], moments["mean"]
    n, d = float(count.sum()), mean.shape[1]
    grand = count @ mean / n
    centred = mean - grand
    total = float(moments["scatter_trace"].sum()
                  + count @ np.einsum("ij,ij->i", centred, centred))
    for scale in (total / (n * d), (total + n * float(grand @ grand)) / (n * d)):
        if np.isfinite(scale) and scale > 0:
            return max(scale, _SMALLEST_NORMAL)
    return 1.0


def _floor(relative, moments):
    return max(relative * feature_scale_of(moments), _SMALLEST_NORMAL)


def noise_degrees_of_freedom(count, covariance):
    """``n_samples - n_classes`` of classes of sizes ``count``, or the error
    of one row per class (the noise cannot be estimated)."""
    n_classes = count.shape[0]
    n_samples = int(round(float(count.sum())))
    if n_samples - n_classes < 1:
        what = "covariance='full'" if covariance == "full" else "sigma='auto'"
        raise ValueError(
            f"{what} estimates the class noise from the within-class "
            "variance, which needs a class with at least 2 samples; got "
            f"{n_samples} sample(s) in {n_classes} class(es). Give sigma as a "
            "float (the paper uses sigma=0.5 on meta-learned embeddings).")
    return float(count.sum()) - n_classes


def noise_var_of(moments):
    """The empirical-Bayes ``sigma``: the pooled within-class variance,
    floored at ``1e-6`` times the feature scale."""
    d = moments["mean"].shape[1]
    pooled = float(moments["scatter_trace"].sum()) / (
        noise_degrees_of_freedom(moments["count"], "isotropic") * d)
    return max(pooled, _floor(_NOISE_VAR_FLOOR, moments))


def noise_covariance_of(moments, *, extra_shrinkage=0.0):
    """The full ``Sigma_eps``: the pooled within-class covariance, Ledoit-Wolf
    shrunk, then by ``extra_shrinkage`` towards ``mean(eig) * I``, floored."""
    dof = noise_degrees_of_freedom(moments["count"], "full")
    covariance = _ledoit_wolf(moments, dof)
    if extra_shrinkage:
        covariance = shrunk_covariance(covariance, extra_shrinkage)
    return _floored(covariance, _floor(_NOISE_VAR_FLOOR, moments))


def _ledoit_wolf(moments, dof):
    """The pooled scatter of ``moments`` over ``dof``, Ledoit-Wolf shrunk."""
    scatter, unit = moments["scatter"].sum(axis=0), moments["unit"]
    shrinkage = _ledoit_wolf_shrinkage(float(moments["count"].sum()),
                                       scatter / unit**2,
                                       float(moments["quartic"].sum()))
    return shrunk_covariance(scatter / dof, shrinkage)


def _ledoit_wolf_shrinkage(n_samples, scatter, quartic):
    """``sklearn.covariance.ledoit_wolf_shrinkage`` of centred rows ``R`` from
    ``scatter = R.T @ R`` and ``quartic = sum_i ||r_i||^4`` (no rows needed)."""
    n_features = scatter.shape[0]
    if n_features == 1:
        return 0.0
    trace = float(np.trace(scatter)) / n_samples
    mu = trace / n_features
    delta_ = float(np.sum(scatter**2)) / n_samples**2
    beta = (quartic / n_samples - delta_) / (n_features * n_samples)
    delta = (delta_ - 2.0 * mu * trace + n_features * mu**2) / n_features
    beta = min(beta, delta)
    return 0.0 if beta == 0 else beta / delta


def _floored(covariance, floor):
    """Symmetrise and raise eigenvalues below ``floor`` to it."""
    values, vectors = np.linalg.eigh((covariance + covariance.T) / 2.0)
    return (vectors * np.maximum(values, floor)) @ vectors.T


def prior_of(moments, *, full, spread=True, one_class=False):
    """``mu0``, the mean of the class means, and ``s0``, their variance (1,)
    or, when ``full``, shrunk covariance, floored at ``1e-3`` times the
    feature scale (``None`` without ``spread``); one class needs ``one_class``."""
    means = moments["mean"]
    n_classes = means.shape[0]
    if n_classes < 2 and not one_class:
        raise ValueError(
            "Estimating the prior ('auto') needs at least 2 classes in "
            f"the first batch; got {n_classes} class. Give prior_mean, "
            "prior_var and b.")
    prior_mean = means.mean(axis=0)
    if not spread:
        return prior_mean, None
    floor = _floor(_PRIOR_VAR_FLOOR, moments)
    if full:
        spread = moments_of_rows(means, np.zeros(n_classes, np.intp), 1,
                                 fourth=True, pooled=True)
        return prior_mean, _floored(_ledoit_wolf(spread, n_classes), floor)
    return prior_mean, np.array([max(float(np.mean(means.var(axis=0))), floor)])


def needs_fourth_moments(covariance, sigma):
    """Whether the Ledoit-Wolf shrinkage of an estimated full noise is needed."""
    return covariance == "full" and isinstance(sigma, str)


def needs_moments(params):
    """Whether the head's ``params`` leave an estimate to the rows."""
    return any(isinstance(params[name], str)
               for name in ("sigma", "prior_mean", "prior_var", "b"))


def resolve_hyper_parameters(moments, params):
    """``b``, ``sigma``, ``prior_mean`` and ``prior_var`` of the head's
    ``params`` (its ``get_params()``), the "auto" ones estimated from the
    rows' ``moments`` and ``prior_scale`` applied."""
    full = params["covariance"] == "full"
    prior_var, scale = params["prior_var"], float(params["prior_scale"])
    if scale != 1.0 and not isinstance(prior_var, str):
        raise ValueError(
            f"prior_scale={scale} scales the estimated prior variance "
            "(prior_var='auto'), but prior_var is given: scale the given "
            "prior_var instead and leave prior_scale=1.0.")
    resolved = {name: params[name]
                for name in ("sigma", "prior_mean", "prior_var", "b")}
    if isinstance(params["sigma"], str):
        resolved["sigma"] = (
            noise_covariance_of(moments,
                                extra_shrinkage=float(params["noise_shrinkage"]))
            if full else noise_var_of(moments))
    if any(isinstance(resolved[k], str) for k in ("prior_mean", "prior_var")):
        mean_hat, var_hat = prior_of(moments, full=full,
                                     spread=isinstance(prior_var, str))
        if isinstance(resolved["prior_mean"], str):
            resolved["prior_mean"] = mean_hat
        if isinstance(prior_var, str):
            resolved["prior_var"] = scale * var_hat if scale != 1.0 else var_hat
    if isinstance(resolved["b"], str):
        resolved["b"] = estimate_concentration(moments["count"], float(params["a"]))
    return resolved


# Estimates from rows, for training's class statistics.
def noise_var_floor(X):
    """Smallest within-class variance allowed for rows ``X``."""
    one_class = moments_of_rows(X, np.zeros(X.shape[0], np.intp), 1)
    return _floor(_NOISE_VAR_FLOOR, one_class)


def estimate_prior(X, y_index, n_classes):
    """:func:`prior_of` the rows ``X`` of the classes ``y_index``: ``mu0``
    (n_features,) and ``s0`` (float)."""
    prior_mean, prior_var = prior_of(moments_of_rows(X, y_index, n_classes),
                                     full=False, one_class=True)
    return prior_mean, float(prior_var[0])


def pitman_yor_log_likelihood(counts, a, b):
    """Log probability of a partition with block sizes ``counts`` (each ``> a``)
    under the Pitman-Yor CRP (Pitman 1995), real counts allowed."""
    counts = np.asarray(counts, dtype=np.float64)
    n_blocks = counts.shape[0]
    total = counts.sum()
    new_blocks = np.log(b + a * np.arange(1, n_blocks)).sum()
    normaliser = gammaln(b + total) - gammaln(b + 1.0)
    within = (gammaln(counts - a) - gammaln(1.0 - a)).sum()
    return float(new_blocks - normaliser + within)


def estimate_concentration(counts, a, *, bounds=(1e-6, 1e6)):
    """Maximum-likelihood concentration ``b > -a`` of the Pitman-Yor CRP for
    class sizes ``counts``; ``b + a`` searched in ``bounds``."""
    counts = np.asarray(counts, dtype=np.float64)

    def negative(log_shift):
        return -pitman_yor_log_likelihood(counts, a, np.exp(log_shift) - a)

    result = minimize_scalar(negative, bounds=(np.log(bounds[0]), np.log(bounds[1])),
                             method="bounded", options={"xatol": 1e-10})
    return float(np.exp(result.x) - a)
