"""Heads from per-class moments: ``merge``, and ``fit`` on a Dask array chunk
by chunk (Dask imported only for one)."""

import functools
import sys

import numpy as np
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_array, column_or_1d

from .._core import (
    combine_moments,
    moments_of_rows,
    needs_fourth_moments,
    needs_scatter,
    novel_log_odds,
)
from ..base import all_or_nothing
from ..validation import (
    check_magnitude,
    check_new_labels,
    check_params_unchanged,
    check_targets,
    params_equal,
    resolve_novel_label,
)
from ._cross_fit import NO_SCORES, fold_of_rows, scored_folds
from ._decision import with_scores
from ._discovery import merged_discoveries
from ._state import state_for_params
from ._whitened import model_params, refuse_whitened, shared_whitener

# The most values ``fit`` keeps for merge (float64: 64 MB).
MAX_KEPT_VALUES = 2**23


def kept_moments(params, X, y_index, n_classes):
    """The moments of ``fit``'s rows that ``merge`` re-estimates "auto" ``sigma``
    and priors from (None when none is "auto": the state holds the sums)."""
    if not needs_scatter(params):
        return None
    fourth = needs_fourth_moments(params["covariance"], params["sigma"])
    if fourth and n_classes * X.shape[1] ** 2 > MAX_KEPT_VALUES:
        return None  # O(N d^2) would outweigh the head
    return moments_of_rows(X, y_index, n_classes, fourth=fourth)


def check_mergeable(head, other):
    """Refuse heads ``merge`` cannot pool; the feature names (or None)."""
    if type(other) is not type(head):
        raise TypeError(f"merge takes another {type(head).__name__}; got "
                        f"{type(other).__name__}.")
    for name, part in (("head", head), ("other", other)):
        if not part.__sklearn_is_fitted__():
            raise NotFittedError(f"merge needs two fitted heads; {name} is "
                                 "not fitted: call fit first.")
        check_params_unchanged(part, part._fitted_params,
                               runtime=part._runtime_params)
        if part._discovered["provisional"]:
            raise ValueError(
                f"merge cannot pool the provisional classes "
                f"{part._discovered['provisional']} of {name}: each head numbers "
                "the classes it opens by itself, so equal labels need not be one "
                "class. Give them their true labels with correct() first.")
    params, others = head.get_params(deep=False), other.get_params(deep=False)
    differ = [f"{name}: {params[name]!r} != {others[name]!r}" for name in params
              if not params_equal(params[name], others[name])]
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
            names[0] is not None and not np.array_equal(*names)):
        raise ValueError("merge needs heads fitted on the same feature names "
                         "(or both on arrays without names).")
    check_new_labels(other.classes_, None, head.classes_)  # one kind of label
    return names[0]


def merged_parts(head, other):
    """What the merged head installs: the moments of both heads' rows, their
    feature names, which classes stay frozen (frozen in either head), the
    pooled discoveries and calibration scores."""
    names = check_mergeable(head, other)
    moments = combine_moments(moments_of_head(head, "self"),
                              moments_of_head(other, "other"))
    labels = moments["labels"]
    # An "auto" novel label is resolved from the union, as fit resolves it.
    check_new_labels(labels, resolve_novel_label(head.novel_label, labels))
    frozen = np.concatenate([head.classes_[head.frozen_classes_],
                             other.classes_[other.frozen_classes_]])
    return {"moments": moments, "n_features": head.n_features_in_,
            "feature_names": None if names is None else names.copy(),
            "frozen": np.isin(labels, frozen),
            "discovered": merged_discoveries(head._discovered, other._discovered),
            "conformal": with_scores(head._conformal, other._conformal)}


def moments_of_head(head, name):
    """The moments of the rows a fitted head was conditioned on, with labels."""
    state = head._state
    count = state.class_count().copy()
    if np.any(count == 0):
        raise ValueError(
            f"merge combines the rows heads learned from; {name} has classes "
            f"{head.classes_[count == 0].tolist()} given as embeddings "
            "(fit_class_embeddings), which carry no rows.")
    if needs_scatter(model_params(head)):
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
    # Fixed prior and noise: q_n = q0 + sum_i u_i / sigma holds the class sums.
    n = state.n_classes
    mean = ((state.nat_means(slice(0, n)) - state.prior_nat_mean) * state.sigma
            / count[:, None])
    if state.basis is not None:
        mean = mean @ state.basis_inverse
    return {"labels": head.classes_.copy(), "count": count,
            "mean": mean + state.basis_shift}


def state_of_moments(moments, params, n_features, *, frozen=None):
    """The state ``fit`` builds on rows with these moments (``params``: the
    head's ``get_params()``), its resolved covariances and ``b``."""
    count = moments["count"]
    n_classes = count.shape[0]
    state, hyper, b = state_for_params(
        np.empty((0, n_features)), np.empty(0, dtype=np.intp), n_classes, params,
        moments=moments)
    state.add_classes(n_classes)
    # The conjugate update with each class's sum, as ``fit`` makes it.
    state.add_sums(np.arange(n_classes),
                   count[:, None] * state.to_basis(moments["mean"]), count)
    if frozen is not None:
        state.freeze(frozen)
    state.set_crp_counts(count if params["known_count"] == "observed"
                         else float(params["known_count"]))
    return state, hyper, b


# ----------------------------------------------------------------------- Dask
def is_dask_collection(value):
    """Whether ``value`` is a Dask collection, without importing Dask."""
    dask = sys.modules.get("dask")
    return dask is not None and dask.is_dask_collection(value)


def dask_moments(X, y, *, fourth, novel_label):
    """Moments (with labels) of Dask arrays ``X`` and ``y``: per chunk on the
    active Dask scheduler, combined pairwise, and the number of features."""
    import dask
    import dask.array as da

    X, y = _dask_inputs(da, X, y)
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
    check_new_labels(labels, resolve_novel_label(novel_label, labels))
    return moments, X.shape[1]


def dask_cross_fit_scores(X, y, labels, params, *, fourth):
    """:func:`~._cross_fit.cross_fit_scores` of Dask arrays' rows (of the
    sorted ``labels``): each fold's state from the moments of the other
    folds' chunks, then the fold's rows scored chunk by chunk."""
    import dask
    import dask.array as da

    X, y = _dask_inputs(da, X, y)
    fold = fold_of_rows(np.searchsorted(labels, np.asarray(y.compute())))
    folds = scored_folds(fold)
    fold = da.from_array(fold, chunks=(X.chunks[0],))
    chunks = list(zip(X.to_delayed().ravel(), y.to_delayed(), fold.to_delayed(),
                      strict=True))

    def rows_of(x_block, y_block, f_block, k, held):
        keep = (f_block == k) == held
        return np.asarray(x_block)[keep], np.asarray(y_block)[keep]

    def moments_without(k):
        blocks = [dask.delayed(lambda *a: _block_moments(
            *rows_of(*a, k, False), fourth=fourth))(*chunk) for chunk in chunks]
        return dask.delayed(functools.reduce)(combine_moments, blocks)

    (all_moments,) = dask.compute([moments_without(k) for k in folds])
    try:
        states = [state_of_moments(m, params, X.shape[1])[0] for m in all_moments]
    except ValueError:
        return NO_SCORES

    def scores(x_block, y_block, f_block):
        out = [novel_log_odds(state.joint_log_numerators(
            rows_of(x_block, y_block, f_block, k, True)[0]))
            for k, state in zip(folds, states, strict=True)]
        return np.concatenate(out)

    blocks = [dask.delayed(scores)(*chunk) for chunk in chunks]
    return np.sort(np.concatenate(dask.compute(*blocks)))


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
    check_magnitude(X)
    y = np.asarray(y_block)
    if y.shape[0]:
        check_targets(y)
    labels, y_index = np.unique(y, return_inverse=True)
    return {"labels": labels,
            **moments_of_rows(X, y_index.reshape(-1), labels.shape[0],
                              fourth=fourth)}


class MergeableHead:
    """``merge`` of :class:`CRPGaussianClassifier` (a mixin: the pooling is here)."""

    def merge(self, other):
        """The head ``fit`` on both heads' rows gives (neither changes); heads
        with "auto" ``sigma`` or priors merge straight after ``fit``.

        Parameters
        ----------
        other : CRPGaussianClassifier
            A fitted head with the same parameters and features.

        Returns
        -------
        merged : CRPGaussianClassifier
            A new fitted head; ``classes_`` are the sorted union.
        """
        parts, merged = merged_parts(self, other), clone(self)
        if self.covariance == "whitened":
            merged.whitener_ = shared_whitener(self, other)
        return merged._install(**parts)

    def _fit_dask(self, X, y):
        """``fit`` on Dask arrays: the moments chunk by chunk."""
        self._validate_params()
        refuse_whitened(self, "a Dask array (compute it first)")
        return self._install(*dask_moments(
            X, y, fourth=needs_fourth_moments(self.covariance, self.sigma),
            novel_label=self.novel_label), rows=(X, y))

    def _install(self, moments, n_features, *, feature_names=None, frozen=None,
                 discovered=None, conformal=NO_SCORES, rows=None):
        """Become the head ``fit`` gives on rows with these ``moments`` (Dask
        ``rows``: their cross-fitted scores; else ``conformal``)."""
        labels = moments["labels"]
        with all_or_nothing(self):
            self._take_state(*state_of_moments(
                moments, model_params(self), n_features, frozen=frozen))
            self._discovered = discovered or self._discovered
            self.n_features_in_ = n_features
            self.__dict__.pop("feature_names_in_", None)
            if feature_names is not None:
                self.feature_names_in_ = feature_names
            self._start_labels(labels)
            self._registry.add(labels)
            kept = {key: value for key, value in moments.items() if key != "labels"}
            self._fit_moments = kept if needs_scatter(model_params(self)) else None
            self._conformal = conformal if rows is None else dask_cross_fit_scores(
                *rows, labels, model_params(self),
                fourth=needs_fourth_moments(self.covariance, self.sigma))
        return self
