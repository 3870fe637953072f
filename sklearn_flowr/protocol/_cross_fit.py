"""Fit the Platt map of P(novel) on classes the encoder has not seen, by
cross-fitting over class-disjoint folds (docs/user_guide.rst, "Cross-fitted
calibration")."""

from __future__ import annotations

import warnings
from numbers import Real

import numpy as np
from sklearn.base import clone
from sklearn.utils import Bunch, _safe_indexing, column_or_1d
from sklearn.utils._param_validation import Interval, StrOptions, validate_params

from ..calibration import check_rows, novelty_log_odds, split_known_queries
from ..model_selection import class_disjoint_folds
from ..validation import resolve_novel_label
from ._calibrate import (
    RUN_OPTIONS,
    calibration_tasks,
    fit_novelty_map,
    small_context_sizes,
)
from ._evaluate import evaluate_online
from .sampling import resolve_seed

__all__ = ["cross_fit_novelty_calibration", "cross_fit_plan"]

_KNOWN_QUERY_SHARE = [Interval(Real, 0, 0.5, closed="right")]


@validate_params({"setting": [StrOptions({"small", "large"})],
                  "known_query_share": _KNOWN_QUERY_SHARE},
                 prefer_skip_nested_validation=True)
def cross_fit_plan(cv, X, y, *, setting: str, known_query_share: float = 0.25,
                   random_state=None) -> list:
    """The rows each class-disjoint fold trains on and queries, and its seed.

    Parameters
    ----------
    cv : int, cross-validation generator or iterable
        As :func:`~sklearn_flowr.model_selection.class_disjoint_folds` takes it.
    X : array-like of shape (n_samples, ...)
    y : ndarray of shape (n_samples,)
    setting : {"small", "large"}
    known_query_share : float in (0, 0.5], default=0.25
        Large context: share of each training class's rows queried, not fitted.
    random_state : int, Generator, RandomState or None, default=None

    Returns
    -------
    plan : list of :class:`~sklearn.utils.Bunch`
        Per fold: ``fit_rows``, ``query_rows``, ``n_held_classes``, ``seed``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_flowr.protocol import cross_fit_plan
    >>> y = np.repeat([0, 1, 2, 3], 4)
    >>> plan = cross_fit_plan(2, np.zeros((16, 1)), y, setting="large",
    ...                       random_state=0)
    >>> [(len(p.fit_rows), len(p.query_rows)) for p in plan]
    [(6, 10), (6, 10)]
    """
    y = column_or_1d(y)
    folds = class_disjoint_folds(cv, X, y,
                                 min_held_classes=2 if setting == "small" else 1)
    seed = resolve_seed(random_state)
    plan = []
    for number, (train, held) in enumerate(folds):
        rng = np.random.default_rng([seed, number])
        fold_seed = int(rng.integers(2**31 - 1))
        if setting == "small":
            fit_rows, query_rows = train, held
        else:
            fit_rows, known_rows = split_known_queries(y, train, known_query_share, rng)
            query_rows = np.concatenate([known_rows, held])
        plan.append(Bunch(fit_rows=fit_rows, query_rows=query_rows,
                          n_held_classes=int(np.unique(y[held]).shape[0]),
                          seed=fold_seed))
    return plan


@validate_params(
    {**RUN_OPTIONS, "known_query_share": _KNOWN_QUERY_SHARE,
     "accuracy_tolerance": [Interval(Real, 0, 1, closed="both"), None]},
    prefer_skip_nested_validation=True)
def cross_fit_novelty_calibration(estimator, X, y, *, cv=2,
                                  noise_shrinkages=None,
                                  accuracy_tolerance: float | None = 0.01,
                                  n_tasks: int = 200,
                                  n_query: int = 10,
                                  n_known_query_classes: int | None = None,
                                  known_query_share: float = 0.25,
                                  n_jobs: int | None = None,
                                  random_state=None,
                                  targets: str = "platt") -> Bunch:
    """Fit the Platt map of P(novel) on folds of classes held out of training:
    each fold trains a clone of ``estimator`` (no map) once and runs tasks of
    its held-out classes through its head; all first sightings fit one map.

    Parameters
    ----------
    estimator : FLOWRClassifier
        Only its parameters are used; not modified.
    X : array-like of shape (n_samples, ...)
        Training inputs, as ``estimator.fit`` takes them.
    y : array-like of shape (n_samples,)
    cv : int, cross-validation generator or iterable, default=2
        Folds over whole classes, as :func:`cross_fit_plan` takes them.
    noise_shrinkages : list of float in [0, 1] or None, default=None
        Candidates of the full head's ``noise_shrinkage``, run on the same
        tasks; None: the estimator's own.
    accuracy_tolerance : float in [0, 1] or None, default=0.01
        The best H-measure is chosen among candidates within this of the best
        accuracy (None: among all).
    n_tasks : int, default=200
        Tasks per fold.
    n_query : int, default=10
        Query rows per class.
    n_known_query_classes : int or None, default=None
        Large context: known classes queried per task (None: all).
    known_query_share : float in (0, 0.5], default=0.25
        As :func:`cross_fit_plan` takes it.
    n_jobs : int or None, default=None
        Parallel workers of :func:`evaluate_online`.
    random_state : int, Generator, RandomState or None, default=None
        Seeds the folds' models, known-query rows and tasks.
    targets : {"platt", "hard"}, default="platt"
        As :func:`calibrate_novelty` takes it.

    Returns
    -------
    result : :class:`~sklearn.utils.Bunch`
        :func:`calibrate_novelty`'s, ``n_folds``, ``noise_shrinkage`` and per
        candidate ``h_measures`` and ``accuracies`` (folds' means).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.datasets import load_digits
    >>> from sklearn_flowr import FLOWRClassifier
    >>> from sklearn_flowr.protocol import cross_fit_novelty_calibration
    >>> X, y = load_digits(return_X_y=True)
    >>> X = (X / 16).astype("f4")
    >>> from sklearn_flowr.training import MetaTraining, SupE
    >>> clf = FLOWRClassifier(backbone="mlp", embedding_dim=8,
    ...                       pretrain=SupE(epochs=2),
    ...                       meta=MetaTraining(epochs=1, episodes_per_epoch=5,
    ...                                         n_way=3, n_unknown=1),
    ...                       random_state=0, verbose=0)
    >>> out = cross_fit_novelty_calibration(clf, X, y, cv=2, n_tasks=20,
    ...                                     noise_shrinkages=[0.0, 0.2],
    ...                                     random_state=0)
    >>> out.n_folds, out.noise_shrinkage in (0.0, 0.2), sorted(out.h_measures)
    (2, True, [0.0, 0.2])
    """
    y = check_rows(X, y)
    if noise_shrinkages is not None:
        values = np.asarray(noise_shrinkages, dtype=object).ravel()
        if values.size == 0 or not all(
                isinstance(v, Real) and not isinstance(v, bool) and 0 <= v <= 1
                for v in values):
            raise ValueError("noise_shrinkages must be a non-empty list of numbers "
                             f"in [0, 1]; got {noise_shrinkages!r}.")
    params = estimator.get_params()
    setting, covariance = params["setting"], params.get("head__covariance", "full")
    if noise_shrinkages is not None and covariance != "full":
        raise ValueError("noise_shrinkages are candidates for the full head's "
                         f"noise covariance; the estimator has covariance="
                         f"{covariance!r}. Use head__covariance='full'.")
    plan = cross_fit_plan(cv, X, y, setting=setting,
                          known_query_share=known_query_share,
                          random_state=random_state)
    if noise_shrinkages is not None and setting == "small":
        _warn_one_support_class(plan)
    template = _fold_template(estimator, y)
    candidates = ([None] if noise_shrinkages is None
                  else [float(v) for v in np.ravel(noise_shrinkages)])
    reports = {value: [] for value in candidates}
    for fold in plan:
        base = clone(template).set_params(random_state=fold.seed)
        y_fit, y_query = y[fold.fit_rows], y[fold.query_rows]
        n_novel = (small_context_sizes(fold.n_held_classes)[1]
                   if setting == "small" else fold.n_held_classes)
        tasks = calibration_tasks(setting, y_query, min(5, n_novel), n_query,
                                  n_tasks, fold.seed, known=np.unique(y_fit),
                                  n_known_query=n_known_query_classes)
        Z = None
        for value in candidates:
            # Another head on the fold model; reuse_encoder trains it once.
            model = (base if value is None else
                     clone(base).set_params(head__noise_shrinkage=value))
            model.fit(_safe_indexing(X, fold.fit_rows), y_fit)
            if Z is None:
                Z = model.transform(_safe_indexing(X, fold.query_rows))
            head = model.prior_head_ if setting == "small" else model.head_
            reports[value].append(evaluate_online(
                head, Z, y_query, tasks, setting=setting, n_jobs=n_jobs,
                return_rows=True, probability=True))
    means = {value: float(np.mean([r.h_measure for r in runs]))
             for value, runs in reports.items()}
    mean_accuracies = {value: float(np.mean([r.accuracy for r in runs]))
                       for value, runs in reports.items()}
    best = _choose_shrinkage(means, mean_accuracies, accuracy_tolerance)
    result = fit_novelty_map(
        np.concatenate([novelty_log_odds(r.rows) for r in reports[best]]),
        np.concatenate([r.rows.is_novel for r in reports[best]]),
        targets=targets, remedy="hold out more classes per fold")
    result.n_folds = len(plan)
    result.noise_shrinkage = (params.get("head__noise_shrinkage")
                              if best is None else best)
    result.h_measures = None if noise_shrinkages is None else means
    result.accuracies = None if noise_shrinkages is None else mean_accuracies
    return result


def _fold_template(estimator, y):
    """The estimator each fold clones: no map or checkpoints, ``y``'s novel label."""
    params = estimator.get_params(deep=False)
    fold_params = {"calibration": None, "checkpoint_dir": None}
    # Built from the parameters, not cloned: a consumed generator of folds
    # cannot be copied.
    template = type(estimator)(**{**params, **{name: value for name, value in
                                             fold_params.items() if name in params}})
    head = template.get_params().get("head")
    if head is not None:  # its own novel_label, or a wrapped head's
        params = head.get_params()
        key = "novel_label" if "novel_label" in params else "head__novel_label"
        novel = resolve_novel_label(params[key], np.unique(y))
        template.set_params(head=clone(head).set_params(**{key: novel}))
    return template


def _warn_one_support_class(plan):
    """Warn where small-context folds make tasks of one support class."""
    if min(small_context_sizes(fold.n_held_classes)[0] for fold in plan) < 2:
        warnings.warn(
            "noise_shrinkage is chosen on small-context tasks of one support "
            "class (a fold holds out fewer than 3 classes): they cannot show "
            "the accuracy a wider noise costs between known classes, and the "
            "choice can cost the deployed model several accuracy points. Hold "
            "out 3 or more classes per fold, or choose noise_shrinkage on "
            "validation classes (select_head_params).", UserWarning,
            stacklevel=3)


def _choose_shrinkage(h_measures, accuracies, accuracy_tolerance):
    """The best H-measure within ``accuracy_tolerance`` of the best accuracy;
    ties go to the smaller shrinkage."""
    eligible = list(h_measures)
    if accuracy_tolerance is not None:
        floor = max(accuracies.values()) - accuracy_tolerance
        eligible = [value for value in eligible if accuracies[value] >= floor]
    return max(eligible, key=lambda v: (h_measures[v], -(v or 0.0)))
