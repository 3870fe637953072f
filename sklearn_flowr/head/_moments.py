"""Per-class statistics of labelled rows (``_core.moments_of_rows``, with
``labels``) combined exactly, for ``merge`` and Dask (user guide, "Heads that
merge")."""

import numpy as np

_FOURTH = ("scatter", "cube", "quartic")


def needs_scatter(sigma, prior_mean, prior_var):
    """Whether estimating the head's prior or noise needs more than class
    sizes and means: any of them "auto" (the floors need the spread of the
    rows; ``b="auto"`` needs the sizes only)."""
    return any(isinstance(value, str) for value in (sigma, prior_mean, prior_var))


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
