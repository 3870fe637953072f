"""Heads that merge, and ``fit`` on a Dask array through per-chunk statistics.

A fitted head is a function of per-class statistics of its rows
(``_class_moments``): merging two heads combines those statistics and builds
the head that ``fit`` on both sets of rows gives; ``fit`` on a Dask array
computes them per chunk on Dask's scheduler, combines them the same way and
builds the head once. Dask is imported only when the input is a Dask
collection, so ``import sklearn_flowr`` never imports it.
"""

import sys

import numpy as np
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_array, column_or_1d

from ._class_moments import (
    combine_moments,
    moments_of_rows,
    needs_fourth_moments,
    needs_scatter,
    resolve_hyper_parameters,
)
from ._core import add_observations
from ._labels import check_new_labels, resolve_novel_label
from ._online_base import _check_magnitude, _unchanged_on_error
from ._online_state import new_head_state
from ._params import _same, check_params_unchanged, snapshot_params

__all__ = ["fit_dask", "fit_moments", "is_dask_collection", "merge_heads"]


def is_dask_collection(value):
    """Whether ``value`` is a Dask collection, without importing Dask (a Dask
    collection cannot exist unless Dask is imported already)."""
    dask = sys.modules.get("dask")
    return dask is not None and dask.is_dask_collection(value)


# The most values ``fit`` keeps for merge (float64: 64 MB).
MAX_KEPT_VALUES = 2**23


def fit_moments(head, X, y_index, n_classes):
    """What the head keeps of its first rows for :func:`merge_heads`: their
    moments when some estimate needs more than class sizes and means, else
    ``None`` (the natural parameters hold those)."""
    if not needs_scatter(head.sigma, head.prior_mean, head.prior_var):
        return None
    fourth = needs_fourth_moments(head.covariance, head.sigma)
    d = X.shape[1]
    if fourth and n_classes * d * d > MAX_KEPT_VALUES:
        # Per-class scatter and fourth moments are O(N d^2): beyond the cap
        # they would outweigh the head (N = 10k, d = 512: 21 GB). Such a head
        # merges with sigma, prior_mean and prior_var given.
        return None
    return moments_of_rows(X, y_index, n_classes, fourth=fourth)


# -------------------------------------------------------------------- merging
def merge_heads(head, other):
    """``head.merge(other)``: see ``CRPGaussianClassifier.merge``."""
    if type(other) is not type(head):
        raise TypeError(f"merge takes another {type(head).__name__}; got "
                        f"{type(other).__name__}.")
    for name, part in (("self", head), ("other", other)):
        if not part.__sklearn_is_fitted__():
            raise NotFittedError(f"merge needs two fitted heads; {name} is not "
                                 "fitted: call fit first.")
        check_params_unchanged(part, part._fitted_params,
                               runtime=part._runtime_params)
    params, others = head.get_params(deep=False), other.get_params(deep=False)
    differ = [f"{name}: {params[name]!r} != {others[name]!r}" for name in params
              if not _same(params[name], others[name])]
    if differ:
        raise ValueError(
            "merge needs heads with the same parameters (the merged head is "
            f"what fit with them gives on both heads' rows); they differ in "
            f"{', '.join(differ)}. Set them alike and fit again.")
    if head.n_features_in_ != other.n_features_in_:
        raise ValueError(f"merge needs heads of the same n_features_in_; got "
                         f"{head.n_features_in_} and {other.n_features_in_}.")
    names = [getattr(part, "feature_names_in_", None) for part in (head, other)]
    if (names[0] is None) != (names[1] is None) or (
            names[0] is not None and not np.array_equal(names[0], names[1])):
        raise ValueError("merge needs heads fitted on the same feature names "
                         "(or both on arrays without names).")
    if (head.classes_.dtype.kind in "biuf") != (other.classes_.dtype.kind in "biuf"):
        raise ValueError(
            f"merge cannot pool labels of dtype {head.classes_.dtype} and "
            f"{other.classes_.dtype}: numeric and string labels cannot be mixed.")
    parts = [_moments_of_head(part, name)
             for name, part in (("self", head), ("other", other))]
    frozen = np.concatenate([head.frozen_classes_, other.frozen_classes_])
    moments = combine_moments(*parts)
    # An "auto" novel label is resolved from the union, as fit resolves it.
    check_new_labels(moments["labels"],
                     resolve_novel_label(head.novel_label, moments["labels"]))
    # A class frozen in either head stays frozen (``freeze_classes`` is a
    # choice about later labels, which merging keeps).
    frozen_labels = np.concatenate([head.classes_, other.classes_])[frozen]
    merged = clone(head)
    install_moments(merged, moments, n_features=head.n_features_in_,
                    feature_names=None if names[0] is None else names[0].copy(),
                    frozen=np.isin(moments["labels"], frozen_labels))
    return merged


def _moments_of_head(head, name):
    """The moments of the rows a head was conditioned on, with its labels."""
    state = head._state
    count = state.class_count().copy()
    if np.any(count == 0):
        raise ValueError(
            f"merge combines the rows heads learned from; {name} has classes "
            f"{head.classes_[count == 0].tolist()} given as embeddings "
            "(fit_class_embeddings), which carry no rows.")
    if needs_scatter(head.sigma, head.prior_mean, head.prior_var):
        kept = getattr(head, "_fit_moments", None)
        fix = ("give sigma, prior_mean and prior_var as numbers (e.g. the "
               "fitted sigma_, prior_mean_ and prior_var_): then merge adds "
               "the rows of every class exactly, online ones included.")
        if kept is None:
            raise ValueError(
                "merge re-estimates the 'auto' sigma, prior_mean and prior_var "
                f"from the statistics of the rows that fit saw, which {name} "
                "does not keep (saved by an older version, or a full-covariance "
                "head whose per-class moments, n_classes x d^2 values, exceed "
                f"{MAX_KEPT_VALUES}): {fix}")
        if kept["count"].shape != count.shape or not np.array_equal(
                kept["count"], count):
            raise ValueError(
                "merge re-estimates the 'auto' sigma, prior_mean and prior_var "
                f"from the statistics of the rows that fit saw, but {name} has "
                "learned rows since (partial_fit or open_world_step), whose "
                f"scatter it does not keep. Merge heads straight after fit, or {fix}")
        return {"labels": head.classes_.copy(),
                **{key: np.copy(value) for key, value in kept.items()}}
    # Fixed prior and noise: the natural parameters hold the class sums,
    # q_n = q0 + sum_i u_i / sigma in the state's basis u = (z - shift) @ T.
    n = state.n_classes
    sums = (state.nat_mean[:n] - state.prior_nat_mean) * state.sigma
    mean = sums / count[:, None]
    if state.basis is not None:
        mean = mean @ state.basis_inverse
    if state.basis_shift is not None:
        mean = mean + state.basis_shift
    return {"labels": head.classes_.copy(), "count": count, "mean": mean}


def install_moments(head, moments, *, n_features, feature_names=None,
                    frozen=None):
    """Make ``head`` the head ``fit`` gives on rows with these moments.

    Parameters
    ----------
    head : CRPGaussianClassifier
        Fitted in place; its earlier state is replaced (and kept if this
        fails).
    moments : dict
        With ``labels``, sorted (``fit``'s order of ``classes_``).
    n_features : int
    feature_names : ndarray or None, default=None
    frozen : ndarray of bool of shape (n_classes,) or None, default=None
    """
    head._validate_params()
    params = head.get_params(deep=False)
    labels = moments["labels"]
    n_classes = labels.shape[0]
    with _unchanged_on_error(head):
        resolved = resolve_hyper_parameters(moments, params)
        state, hyper, b = new_head_state(
            np.empty((0, n_features)), np.empty(0, dtype=np.intp), n_classes,
            a=float(head.a), covariance=head.covariance,
            class_prior=head.class_prior, known_count=head.known_count,
            noise_shrinkage=float(head.noise_shrinkage), **resolved)
        count = moments["count"]
        state.add_classes(n_classes)
        # The conjugate update with each class's sum, n * mean, as ``fit``
        # makes it with the sum of its rows.
        sums = count[:, None] * state.to_basis(moments["mean"])
        state.nat_mean[:n_classes], state.precision[:n_classes] = add_observations(
            state.nat_mean[:n_classes], state.precision[:n_classes], sums,
            count[:, None], state.sigma)
        state.n_obs[:n_classes] = count
        if frozen is not None:
            state.frozen[:n_classes] = frozen
        # Last: it refreshes every class's cached coefficients (and drops any
        # buffer growth that the rows written above would have to follow).
        state.set_crp_counts(count if head.known_count == "observed"
                             else float(head.known_count))
        head.n_features_in_ = n_features
        if feature_names is None:
            head.__dict__.pop("feature_names_in_", None)
        else:
            head.feature_names_in_ = feature_names
        head._start_labels(labels)
        head._registry.add(labels)
        head._state = state
        head.prior_mean_, head.prior_var_ = hyper.prior_mean, hyper.prior_var
        head.sigma_, head.b_ = hyper.sigma, b
        head._fitted_params = snapshot_params(head)
        head._fit_moments = (
            {key: value for key, value in moments.items() if key != "labels"}
            if needs_scatter(head.sigma, head.prior_mean, head.prior_var) else None)
    return head


# ----------------------------------------------------------------------- Dask
def fit_dask(head, X, y):
    """``head.fit(X, y)`` with ``X`` or ``y`` a Dask array: per-chunk moments
    on the active Dask scheduler, combined pairwise, then one head."""
    import dask
    import dask.array as da

    head._validate_params()
    X, y = _dask_inputs(da, X, y)
    fourth = needs_fourth_moments(head.covariance, head.sigma)
    blocks = [dask.delayed(_block_moments)(x_block, y_block, fourth=fourth)
              for x_block, y_block in zip(X.to_delayed().ravel(), y.to_delayed(),
                                          strict=True)]
    while len(blocks) > 1:  # a balanced tree of pairwise combinations
        pairs = [dask.delayed(combine_moments)(blocks[i], blocks[i + 1])
                 for i in range(0, len(blocks) - 1, 2)]
        blocks = pairs + blocks[len(blocks) - len(blocks) % 2:]
    (moments,) = dask.compute(blocks[0])
    labels = moments["labels"]
    if labels.shape[0] == 0:
        raise ValueError(f"Found array with 0 sample(s) (shape={X.shape}) while a "
                         "minimum of 1 is required.")
    check_new_labels(labels, resolve_novel_label(head.novel_label, labels))
    return install_moments(head, moments, n_features=X.shape[1])


def _dask_inputs(da, X, y):
    """``X`` (n_samples, n_features) and ``y`` (n_samples,) as Dask arrays
    with the same row chunks and ``X`` whole along its columns."""
    if not isinstance(X, da.Array):
        if is_dask_collection(X):
            raise TypeError(
                f"fit takes a Dask array of embeddings, not a {type(X).__name__}; "
                "convert it, e.g. with .to_dask_array(lengths=True).")
        X = da.from_array(check_array(X, dtype=np.float64), chunks=(
            y.chunks[0] if isinstance(y, da.Array) else -1, -1))
    if X.ndim != 2:
        raise ValueError(f"Expected a 2D array, got a {X.ndim}D Dask array of "
                         f"shape {X.shape}.")
    if any(np.isnan(size) for size in X.shape):
        raise ValueError("fit needs the Dask array's chunk sizes; call "
                         "X.compute_chunk_sizes() first.")
    X = X.rechunk({1: -1})
    if not isinstance(y, da.Array):
        y = column_or_1d(np.asarray(y))
    if y.ndim != 1 or y.shape[0] != X.shape[0]:
        raise ValueError(f"y must have shape ({X.shape[0]},) like X's rows; got "
                         f"{y.shape}.")
    if not isinstance(y, da.Array):
        return X, da.from_array(y, chunks=(X.chunks[0],))
    return X, y.rechunk((X.chunks[0],))


def _block_moments(x_block, y_block, *, fourth):
    """Checked moments (with labels) of one chunk of rows."""
    X = check_array(x_block, dtype=np.float64, ensure_min_samples=0)
    _check_magnitude(X)
    y = np.asarray(y_block)
    if y.shape[0] and y.dtype.kind not in "biuU":
        check_classification_targets(y)
    labels, y_index = np.unique(y, return_inverse=True)
    return {"labels": labels,
            **moments_of_rows(X, y_index.reshape(-1), labels.shape[0],
                              fourth=fourth)}
