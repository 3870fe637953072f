"""Per-class statistics of labelled rows, combined exactly (``merge``, Dask),
and the head's empirical-Bayes estimates from them (user guide, "Heads that
merge"). A record is a dict of arrays: ``labels``, ``count``, ``mean``,
``scatter_trace`` and, for a full noise, ``scatter``, ``cube``, ``quartic``
and ``unit`` (the power of two the last two are measured in)."""

import numpy as np
from sklearn.covariance import shrunk_covariance

from .._core import estimate_concentration
from .._core._covariance import _floored, _shrunk
from .._core._empirical_bayes import (
    _NOISE_VAR_FLOOR,
    _PRIOR_VAR_FLOOR,
    _SMALLEST_NORMAL,
)

_FOURTH = ("scatter", "cube", "quartic")


def needs_scatter(sigma, prior_mean, prior_var):
    """Whether estimating the head's prior or noise needs more than class
    sizes and means: any of them "auto" (the floors need the spread of the
    rows; ``b="auto"`` needs the sizes only)."""
    return any(isinstance(value, str) for value in (sigma, prior_mean, prior_var))


def needs_fourth_moments(covariance, sigma):
    """Whether the Ledoit-Wolf shrinkage of an estimated full noise is needed."""
    return covariance == "full" and isinstance(sigma, str)


def moments_of_rows(X, y_index, n_classes, *, fourth=False):
    """The record (without ``labels``) of rows ``X`` of the classes ``y_index``
    (each of ``range(n_classes)`` occurs); ``fourth``: the full-noise entries.

    Examples
    --------
    >>> import numpy as np
    >>> m = moments_of_rows(np.array([[0.0], [2.0], [5.0]]), np.array([0, 0, 1]), 2)
    >>> m["count"], m["mean"].ravel(), m["scatter_trace"]
    (array([2., 1.]), array([1., 5.]), array([2., 0.]))
    """
    d = X.shape[1]
    if n_classes == 0:  # an empty chunk
        empty = {"count": np.zeros(0), "mean": np.zeros((0, d)),
                 "scatter_trace": np.zeros(0)}
        if fourth:
            empty.update(scatter=np.zeros((0, d, d)), cube=np.zeros((0, d)),
                         quartic=np.zeros(0), unit=1.0)
        return empty
    # One sort, then sums over each class's run of rows (as ``group_sums``).
    order = np.argsort(y_index, kind="stable")
    starts = np.searchsorted(y_index[order], np.arange(n_classes))
    count = np.diff(np.r_[starts, y_index.shape[0]]).astype(np.float64)
    rows = X[order]
    mean = np.add.reduceat(rows, starts, axis=0) / count[:, None]
    residual = rows - np.repeat(mean, count.astype(np.intp), axis=0)
    squares = np.einsum("ij,ij->i", residual, residual)
    moments = {"count": count, "mean": mean,
               "scatter_trace": np.add.reduceat(squares, starts)}
    if fourth:
        moments.update(_fourth_moments(residual, squares, starts))
    return moments


def _fourth_moments(residual, squares, starts):
    """Scatter matrices, ``sum ||r||^2 r`` and ``sum ||r||^4`` per class, of
    residuals sorted by class (class ``c``'s from ``starts[c]``)."""
    peak = float(np.max(np.abs(residual)))
    # The smallest power of two above every |r|: r / unit is exact.
    unit = float(np.ldexp(1.0, np.frexp(peak)[1])) if peak > 0 else 1.0
    scaled = residual / unit
    scaled_squares = squares / unit**2
    bounds = np.r_[starts, residual.shape[0]]
    scatter = np.stack([residual[lo:hi].T @ residual[lo:hi]
                        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)])
    return {"scatter": scatter,
            "cube": np.add.reduceat(scaled_squares[:, None] * scaled, starts, axis=0),
            "quartic": np.add.reduceat(scaled_squares**2, starts), "unit": unit}


def combine_moments(first, second):
    """The record of the union of two records' rows (a class in both is
    pooled), its labels sorted; the entries both have.

    Examples
    --------
    >>> import numpy as np
    >>> rows = np.array([[0.0], [2.0], [4.0], [9.0]])
    >>> y = np.array([0, 0, 0, 1])
    >>> a = {"labels": np.array([0]), **moments_of_rows(rows[:2], y[:2], 1)}
    >>> b = {"labels": np.array([0, 1]),
    ...      **moments_of_rows(rows[2:], np.array([0, 1]), 2)}
    >>> union = combine_moments(a, b)
    >>> union["count"], union["mean"].ravel(), union["scatter_trace"]
    (array([3., 1.]), array([2., 9.]), array([8., 0.]))
    """
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


# ----------------------------------------------------------------- estimates
# Each mirrors its row-based twin in ``_core`` (named in its docstring), which
# ``fit`` uses; tests/test_merge_dask.py checks they agree.
def _totals(moments):
    """Rows, the mean row and the total scatter trace of all classes."""
    count, mean = moments["count"], moments["mean"]
    n = float(count.sum())
    grand = count @ mean / n
    centred = mean - grand
    total = float(moments["scatter_trace"].sum()
                  + count @ np.einsum("ij,ij->i", centred, centred))
    return n, grand, total


def feature_scale_of(moments):
    """``_empirical_bayes.feature_scale`` of the rows: their mean feature
    variance, else their mean square, else 1."""
    n, grand, total = _totals(moments)
    d = moments["mean"].shape[1]
    for scale in (total / (n * d), (total + n * float(grand @ grand)) / (n * d)):
        if np.isfinite(scale) and scale > 0:
            return max(scale, _SMALLEST_NORMAL)
    return 1.0


def _floor(relative, moments):
    return max(relative * feature_scale_of(moments), _SMALLEST_NORMAL)


def _dof(moments, what):
    n_classes = moments["count"].shape[0]
    n_samples = int(round(float(moments["count"].sum())))
    if n_samples - n_classes < 1:
        raise ValueError(
            f"{what} estimates the class noise from the within-class "
            "variance, which needs a class with at least 2 samples; got "
            f"{n_samples} sample(s) in {n_classes} class(es). Give sigma as a "
            "float (the paper uses sigma=0.5 on meta-learned embeddings)."
        )
    return float(moments["count"].sum()) - n_classes


def noise_var_of(moments):
    """``estimate_noise_var``: the pooled within-class variance, floored."""
    d = moments["mean"].shape[1]
    pooled = float(moments["scatter_trace"].sum()) / (
        _dof(moments, "sigma='auto'") * d)
    return max(pooled, _floor(_NOISE_VAR_FLOOR, moments))


def noise_covariance_of(moments, *, extra_shrinkage=0.0):
    """``estimate_noise_covariance``: the pooled within-class covariance,
    Ledoit-Wolf shrunk, floored."""
    dof = _dof(moments, "covariance='full'")
    scatter = moments["scatter"].sum(axis=0)
    unit = moments["unit"]
    shrinkage = _ledoit_wolf_shrinkage(float(moments["count"].sum()),
                                       scatter / unit**2,
                                       float(moments["quartic"].sum()))
    covariance = shrunk_covariance(scatter / dof, shrinkage)
    if extra_shrinkage:
        covariance = shrunk_covariance(covariance, extra_shrinkage)
    return _floored(covariance, _floor(_NOISE_VAR_FLOOR, moments))


def _ledoit_wolf_shrinkage(n_samples, scatter, quartic):
    """``sklearn.covariance.ledoit_wolf_shrinkage`` of centred rows ``R``
    from ``scatter = R.T @ R`` and ``quartic = sum_i ||r_i||^4``, the only
    statistics its formula reads (``beta_`` is ``sum (X**2).T @ X**2``)."""
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


def prior_of(moments, *, full, spread=True):
    """``_covariance._estimate_prior``: the mean of the class means and their
    spread, shape (1,) or, when ``full``, their shrunk covariance (``None``
    without ``spread``: a given ``prior_var`` needs only the class means)."""
    means = moments["mean"]
    n_classes = means.shape[0]
    if n_classes < 2:
        raise ValueError(
            "Estimating the prior ('auto') needs at least 2 classes in "
            f"the first batch; got {n_classes} class. Give prior_mean, "
            "prior_var and b."
        )
    prior_mean = means.mean(axis=0)
    if not spread:
        return prior_mean, None
    floor = _floor(_PRIOR_VAR_FLOOR, moments)
    if full:
        centred = means - prior_mean
        covariance = _shrunk(centred, centred.T @ centred / n_classes)
        return prior_mean, _floored(covariance, floor)
    spread = float(np.mean(means.var(axis=0)))
    return prior_mean, np.array([max(spread, floor)])


def resolve_hyper_parameters(moments, params):
    """``b``, ``sigma``, ``prior_mean`` and ``prior_var`` for rows with these
    moments and the head's ``params``: "auto" ones estimated as ``fit`` does."""
    full = params["covariance"] == "full"
    prior_var, scale = params["prior_var"], float(params["prior_scale"])
    if scale != 1.0 and not isinstance(prior_var, str):
        raise ValueError(
            f"prior_scale={scale} scales the estimated prior variance "
            "(prior_var='auto'), but prior_var is given: scale the given "
            "prior_var instead and leave prior_scale=1.0."
        )
    resolved = {"sigma": params["sigma"], "prior_mean": params["prior_mean"],
                "prior_var": prior_var, "b": params["b"]}
    if isinstance(params["sigma"], str):
        resolved["sigma"] = (
            noise_covariance_of(moments,
                                extra_shrinkage=float(params["noise_shrinkage"]))
            if full else noise_var_of(moments))
    if any(isinstance(resolved[k], str) for k in ("prior_mean", "prior_var", "b")):
        mean_hat, var_hat = prior_of(moments, full=full,
                                     spread=isinstance(prior_var, str))
        if isinstance(resolved["prior_mean"], str):
            resolved["prior_mean"] = mean_hat
        if isinstance(prior_var, str):
            resolved["prior_var"] = scale * var_hat if scale != 1.0 else var_hat
    if isinstance(resolved["b"], str):
        resolved["b"] = estimate_concentration(moments["count"], float(params["a"]))
    return resolved
