"""The held-out scores ``predict``'s novel label is calibrated on: each of
``fit``'s rows scored by the model fitted on the other folds of the rows."""

import warnings
from math import ceil

import numpy as np
from sklearn.base import clone
from sklearn.utils import _safe_indexing

from .._core import novel_log_odds, selected_rows
from ..validation import caller_stacklevel
from ._state import state_for_params

__all__ = ["N_FOLDS", "NO_SCORES", "as_float64", "can_reject", "clone_refit",
           "cross_fit_scores", "fit_transform", "fold_log_odds", "fold_of_rows",
           "fold_state", "held_log_odds", "refit_scores", "scored_folds",
           "state_scores", "warn_if_too_few_scores"]

# Folds of the calibration scores of ``fit``: each row is scored by the model
# fitted on the other folds, hyper-parameters and whitener included (with them
# fixed, a leave-one-out pass flags 9% of held-out digits at alpha=0.05 with a
# full noise covariance estimated from the same rows; 5 folds, 4.6%).
N_FOLDS = 5
# Held-out scores that suffice: folds are scored in order until this many
# rows are, as each fold costs a fit on the other folds' rows (the
# whitener's too, which can cost more than the head). With 150 a fit's
# false-novel rate varies by about 0.018 at alpha=0.05 around its expected
# value, which is at most alpha.
ENOUGH_SCORES = 150
NO_SCORES = np.zeros(0)
# Elements of a block of held-out rows, and of its scores against every class
# (0.5 MB of float64 each): small whatever the numbers of classes and features.
_BLOCK_ELEMENTS = 1 << 16


def fold_of_rows(y_index):
    """Fold of each row: its position among its class's rows plus the class's
    index, modulo ``N_FOLDS``. Every class is spread over the folds, and the
    classes start at different folds: holding one fold out takes a row from
    some classes only (with two rows a class, none is left with one row
    everywhere; the rows of one-row classes are spread over the folds)."""
    order = np.argsort(y_index, kind="stable")
    starts = np.searchsorted(y_index[order], y_index[order])
    fold = np.empty(y_index.shape[0], dtype=np.intp)
    fold[order] = (np.arange(y_index.shape[0]) - starts + y_index[order]) % N_FOLDS
    return fold


def scored_folds(fold):
    """The folds that are scored, in order, until ``ENOUGH_SCORES`` rows are."""
    sizes = np.bincount(fold, minlength=N_FOLDS)
    return [k for k in range(N_FOLDS)
            if sizes[k] and sizes[:k].sum() < ENOUGH_SCORES]


def cross_fit_scores(y, fold_scores):
    """Sorted novel log-odds of held-out rows of classes ``y``:
    ``fold_scores(train, held)`` (boolean masks of the rows) scores a fold's
    rows under the model fitted on ``train`` (folds of :func:`scored_folds`);
    none when a fold's rows cannot be fitted (too few classes or rows to
    estimate the prior, the noise or the whitener)."""
    fold = fold_of_rows(np.unique(y, return_inverse=True)[1].reshape(-1))
    scores = []
    for k in scored_folds(fold):
        held = fold == k
        try:
            scores.append(fold_scores(~held, held))
        except ValueError:
            return NO_SCORES
    return np.sort(np.concatenate(scores)) if scores else NO_SCORES


def fold_state(X, y, params, rows=None):
    """The state ``fit`` builds on rows ``X`` of classes ``y`` (labels, with
    gaps; ``rows``: the indices of the rows of ``X`` they label, read without a
    copy of them): hyper-parameters estimated again, CRP counts as ``fit``
    sets them."""
    labels, index = np.unique(y, return_inverse=True)
    index = index.reshape(-1)
    state = state_for_params(X, index, labels.shape[0], params, rows=rows)[0]
    state.learn(X, index, labels.shape[0], rows)
    if params["known_count"] != "observed":
        state.set_crp_counts(float(params["known_count"]))
    return state


def state_scores(X, y, params):
    """``fold_scores`` of the head's maths (``params``, as ``model_params``
    gives them) on rows ``X`` in its coordinates."""
    def fold_scores(train, held):
        rows = np.flatnonzero(train)  # read in place: no copy of a fold's rows
        return held_log_odds(fold_state(X, y[rows], params, rows), X,
                             np.flatnonzero(held))
    return fold_scores


def fold_log_odds(X, y, X_held, params):
    """Novel log-odds of ``X_held`` under the state ``fit`` builds on rows
    ``X`` of classes ``y`` (:func:`fold_state`)."""
    return held_log_odds(fold_state(X, y, params), X_held)


def held_log_odds(state, X, rows=None):
    """Novel log-odds of rows ``X`` (the indices ``rows`` of them; default
    all) under ``state``, a block of rows at a time: a block's rows and its
    scores against every class are its only temporaries."""
    n_rows = X.shape[0] if rows is None else rows.shape[0]
    step = max(1, _BLOCK_ELEMENTS // max(state.n_classes + 1, X.shape[1]))
    return np.concatenate([
        novel_log_odds(state.joint_log_numerators(
            selected_rows(X, rows, slice(start, start + step))))
        for start in range(0, n_rows, step)] or [NO_SCORES])


def refit_scores(refit, y, head_scores):
    """``fold_scores`` of a whitener fitted again without each fold
    (``refit(train, held)``: its prior variances and the whitened rows of
    both, as :func:`clone_refit` gives them) and a head:
    ``head_scores(prior_var, U_train, y_train, U_held)``, the held-out rows'
    novel log-odds of the head fitted on the other rows."""
    y = np.asarray(y).reshape(-1)

    def fold_scores(train, held):
        prior_var, U, U_held = refit(train, held)
        return head_scores(prior_var, U, y[train], U_held)
    return fold_scores


def clone_refit(whitener, X, y, *, fit_rows=None):
    """``refit(train, held)`` of any whitener: a clone of it fitted on the
    rows ``train`` of ``X`` (the input's coordinates), its ``prior_var_``,
    and the rows ``train`` and ``held`` it whitens. ``fit_rows(whitener, X,
    y)`` fits it and gives the train rows (None: :func:`fit_transform`; a
    head that reads only class sums can take each row as its class's
    whitened mean)."""
    y = np.asarray(y).reshape(-1)
    fit_rows = fit_transform if fit_rows is None else fit_rows

    def refit(train, held):
        fitted = clone(whitener)
        with warnings.catch_warnings():  # fit's labels, checked and warned of
            warnings.filterwarnings("ignore", message="The number of unique classes")
            U = fit_rows(fitted, _safe_indexing(X, train), y[train])
        return (np.asarray(fitted.prior_var_, dtype=np.float64), as_float64(U),
                as_float64(fitted.transform(_safe_indexing(X, held))))
    return refit


def fit_transform(whitener, X, y):
    """``whitener`` fitted on rows ``X`` of classes ``y`` and the rows
    whitened (by ``fit_transform`` where it has one, as Pipeline does)."""
    U = (whitener.fit_transform(X, y) if hasattr(whitener, "fit_transform")
         else whitener.fit(X, y).transform(X))
    if not hasattr(whitener, "prior_var_"):
        raise ValueError(
            "WhitenedCRPClassifier's whitener must set prior_var_ (the prior "
            f"variances of the class means in its output) in fit; {whitener!r} "
            "does not.")
    return U


def as_float64(U):
    """Whitened rows as the head's float64 maths reads them: float32 ones (the
    whitener keeps a network's precision) cast here, where the head's checks
    would take a slower path to do it."""
    if isinstance(U, np.ndarray) and U.dtype == np.float32:
        return U.astype(np.float64)
    return U


def can_reject(n_calibration, alpha):
    """Whether the smallest p-value ``1 / (n + 1)`` reaches ``alpha``."""
    return alpha * (n_calibration + 1) >= 1.0


def warn_if_too_few_scores(head, n_rows=None):
    """Warn (at the user's call) when ``head`` has too few calibration scores
    to reach its ``novelty_alpha`` (``n_rows``: those of the ``fit`` that
    gave them, if any)."""
    alpha, n_scores = head.novelty_alpha, head.conformal_scores_.shape[0]
    if alpha is not None and not can_reject(n_scores, alpha):
        given = (f"the head has {n_scores} calibration scores" if n_rows is None
                 else f"fit's {n_rows} rows gave {n_scores} calibration scores")
        warnings.warn(
            f"{given}, fewer than the {ceil(1 / alpha - 1)} that "
            f"novelty_alpha={alpha} needs: predict's novel label is the argmax "
            "over the classes and the novel class, which does not keep the "
            "false-novel rate, until labelled rows add scores. Fit more rows, "
            "or read P(novel) from predict_proba.", UserWarning,
            stacklevel=caller_stacklevel())
