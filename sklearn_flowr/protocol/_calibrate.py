"""Fit the Platt map of P(novel) on open-world tasks of the training classes
(docs/user_guide.rst, "Calibrating P(novel)")."""

from __future__ import annotations

import copy
import warnings
from numbers import Integral

import numpy as np
from scipy.special import expit
from sklearn.base import clone
from sklearn.utils import Bunch, column_or_1d
from sklearn.utils._param_validation import Interval, StrOptions, validate_params

from ..calibration import (
    SCORE_CLIP,
    check_rows,
    clip_log_odds,
    novelty_log_odds,
    platt_fit,
)
from ..metrics import expected_calibration_error
from ..validation import caller_stacklevel, resolve_novel_label
from ._evaluate import evaluate_online
from .sampling import LargeContextTasks, SmallContextTasks, resolve_seed

__all__ = ["calibrate_novelty", "small_context_sizes"]

# The run options calibrate_novelty and cross_fit_novelty_calibration share.
RUN_OPTIONS = {
    "n_tasks": [Interval(Integral, 1, None, closed="left")],
    "n_query": [Interval(Integral, 1, None, closed="left")],
    "n_known_query_classes": [Interval(Integral, 1, None, closed="left"), None],
    "n_jobs": [Interval(Integral, None, -1, closed="right"),
               Interval(Integral, 1, None, closed="left"), None],
    "targets": [StrOptions({"platt", "hard"})],
}

def small_context_sizes(n_classes):
    """The paper's 10 support + 5 novel classes, in proportion below 15 classes.

    Examples
    --------
    >>> from sklearn_flowr.protocol import small_context_sizes
    >>> small_context_sizes(88), small_context_sizes(5)
    ((10, 5), (3, 2))
    """
    if n_classes >= 15:
        return 10, 5
    n_novel = max(1, round(n_classes / 3))
    return n_classes - n_novel, n_novel


def _uncalibrated(estimator, y):
    """A copy of ``estimator`` without its map, its novel label fixed from ``y``."""
    out = copy.deepcopy(estimator)
    params = out.get_params(deep=False)
    if "novelty_calibration" in params:
        out.set_params(novelty_calibration=None)
    if "novel_label" in params:
        novel = getattr(out, "novel_label_", None)
        out.set_params(novel_label=resolve_novel_label(
            params["novel_label"], np.unique(y)) if novel is None else novel)
    return out


def _large_context_episodes(estimator, X, y, n_novel, n_query, n_known_query,
                            n_tasks, seed):
    """A clone refitted on half the rows of all but ``n_novel`` classes, and
    the tasks querying the rest."""
    rng = np.random.default_rng([seed, 2])
    labels = np.unique(y)
    novel = rng.choice(labels, n_novel, replace=False)
    fit_rows, query_rows = [], []
    for label in labels:
        rows = rng.permutation(np.flatnonzero(y == label))
        if label in novel:
            query_rows.append(rows)
        else:
            half = rows.shape[0] // 2
            fit_rows.append(rows[:half])
            query_rows.append(rows[half:])
    fit_rows, query_rows = np.concatenate(fit_rows), np.concatenate(query_rows)
    known = np.setdiff1d(labels, novel)
    # Every known class keeps floor(rows / 2) >= 1 rows to fit when it has 2.
    if np.unique(y[fit_rows]).shape[0] < known.shape[0]:
        raise ValueError("calibrate_novelty(setting='large') needs at least 2 rows "
                         "in every class (one to fit, one to query).")
    refit = clone(estimator)
    # The deployed head's hyper-parameters, not estimates from fewer classes
    # (a whitened head's live in its whitener's coordinates, which the refit
    # estimates afresh with everything else, as WhitenedCRPClassifier's does).
    whitened = refit.get_params().get("covariance") == "whitened"
    fixed = {name: getattr(estimator, name + "_") for name in
             ("prior_mean", "prior_var", "sigma", "b")
             if name in refit.get_params() and hasattr(estimator, name + "_")
             and not whitened}
    fitted = refit.set_params(**fixed).fit(X[fit_rows], y[fit_rows])
    if callable(getattr(estimator, "freeze_classes", None)) and \
            bool(np.all(estimator.frozen_classes_)):
        fitted.freeze_classes(True)  # as the deployed head's known classes
    tasks = calibration_tasks("large", y[query_rows], n_novel, n_query, n_tasks,
                              seed, known=known, n_known_query=n_known_query)
    return fitted, X[query_rows], y[query_rows], tasks


def calibration_tasks(setting, y, n_novel, n_query, n_tasks, seed, *, known=None,
                      n_known_query=None):
    """The open-world tasks a novelty map is fitted on, sized to the rows."""
    counts = np.unique(y, return_counts=True)[1]
    if setting == "small":
        smallest = int(counts.min())
        if smallest < 2:
            raise ValueError("Novelty calibration needs at least 2 rows in every "
                             "class (a shot and a query); the smallest has "
                             f"{smallest}.")
        n_query = min(n_query, smallest // 2)
        n_support = min(10, counts.shape[0] - n_novel)
        return SmallContextTasks(y, n_support_classes=n_support,
                                 n_novel_classes=n_novel,
                                 shots=(1, min(10, smallest - n_query)),
                                 n_query=n_query, n_tasks=n_tasks, random_state=seed)
    if n_known_query is not None and n_known_query >= known.shape[0]:
        n_known_query = None
    return LargeContextTasks(y, known, n_novel_classes=n_novel,
                             n_query=min(n_query, int(counts.min())),
                             n_tasks=n_tasks, n_known_query_classes=n_known_query,
                             random_state=seed)


@validate_params(
    {**RUN_OPTIONS, "setting": [StrOptions({"small", "large"})],
     "n_novel_classes": [Interval(Integral, 1, None, closed="left"), None],
     "verbose": ["verbose"]},
    prefer_skip_nested_validation=True)
def calibrate_novelty(estimator, X, y, *, setting: str = "small",
                      n_tasks: int = 200, n_novel_classes: int | None = None,
                      n_query: int = 10, n_known_query_classes: int | None = None,
                      n_jobs: int | None = None, random_state=None,
                      targets: str = "platt", verbose: int = 0) -> Bunch:
    """Fit the Platt map of P(novel) (first sightings regressed on the
    log-odds of novel) on open-world tasks of training classes.

    Small context: 10 support + 5 novel classes (in proportion below 15)
    through copies of ``estimator``; large: ``n_novel_classes`` held out and a
    clone refitted on half the rows of the others.

    Parameters
    ----------
    estimator : CRPGaussianClassifier or compatible
        As :func:`evaluate_online` takes it (its own map ignored); not modified.
    X : array-like of shape (n_samples, n_features)
        Embeddings of the labelled training classes.
    y : array-like of shape (n_samples,)
    setting : {"small", "large"}, default="small"
    n_tasks : int, default=200
        Calibration tasks.
    n_novel_classes : int or None, default=None
        Novel classes per task; None: 5 of 15 classes, at most 5.
    n_query : int, default=10
        Query rows per class, at most half the smallest class.
    n_known_query_classes : int or None, default=None
        Large context: known classes queried per task (None: all).
    n_jobs : int, default=None
        Parallel workers of :func:`evaluate_online`.
    random_state : int, Generator, RandomState or None, default=None
        Seeds the tasks and the large context's class split.
    targets : {"platt", "hard"}, default="platt"
        Platt's smoothed targets or plain 0/1 ones.
    verbose : int, default=0
        Above 0, a progress bar over the calibration tasks.

    Returns
    -------
    result : :class:`~sklearn.utils.Bunch`
        ``slope`` (> 0), ``intercept``, ``n_rows``, ``n_first_sightings`` and
        the in-sample ECE ``ece_before`` and ``ece_after``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_flowr import CRPGaussianClassifier
    >>> from sklearn_flowr.protocol import calibrate_novelty
    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat(np.arange(30), 25)
    >>> X = rng.normal(scale=2.0, size=(30, 4))[y] + rng.standard_t(3, (750, 4))
    >>> head = CRPGaussianClassifier(prior_mean=0.0, prior_var=4.0, b=1.0,
    ...                              sigma=1.0)
    >>> out = calibrate_novelty(head, X, y, n_tasks=50, random_state=0)
    >>> out.ece_after < out.ece_before
    True
    >>> head = head.set_params(novelty_calibration=(out.slope, out.intercept))
    """
    X = np.asarray(X)
    y = check_rows(X, y)
    n_classes = np.unique(y).shape[0]
    if n_classes < 2:
        raise ValueError("calibrate_novelty needs at least 2 labelled classes (some "
                         f"are held out as novel); got {n_classes}.")
    if n_novel_classes is not None and n_novel_classes >= n_classes:
        raise ValueError(f"n_novel_classes must be at most {n_classes - 1} for "
                         f"{n_classes} classes; got {n_novel_classes!r}.")
    run = calibration_scores(
        _uncalibrated(estimator, y), X, y, setting, n_tasks=n_tasks,
        n_novel_classes=n_novel_classes, n_query=n_query,
        n_known_query_classes=n_known_query_classes, n_jobs=n_jobs,
        seed=resolve_seed(random_state), probability=True, verbose=verbose)
    return fit_novelty_map(novelty_log_odds(run), run.is_first_sighting,
                           targets=targets)


@validate_params({"setting": [StrOptions({"small", "large"})]},
                 prefer_skip_nested_validation=True)
def calibration_scores(estimator, X, y, setting, *, n_tasks,
                       n_novel_classes=None, n_query=10,
                       n_known_query_classes=None, n_jobs=None, seed=0,
                       probability="auto", verbose=0) -> Bunch:
    """:func:`calibrate_novelty`'s run of tasks of training classes, for any
    estimator :func:`evaluate_online` takes, as given (not modified); rows
    that are not first sightings calibrate conformal p-values.

    Parameters
    ----------
    estimator, X, y, setting, n_tasks
        As :func:`calibrate_novelty` takes them; ``n_novel_classes``,
        ``n_query``, ``n_known_query_classes``, ``n_jobs`` and ``verbose`` too.
    seed : int, default=0
        Seeds the tasks and the large context's class split.
    probability : bool or "auto", default="auto"
        Passed to :func:`evaluate_online`.

    Returns
    -------
    rows : :class:`~sklearn.utils.Bunch`
        :func:`evaluate_online`'s per-row arrays, ``score`` (``novelty_score``
        if given, else ``p_novel``), ``score_name`` and ``is_first_sighting``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_flowr import CRPGaussianClassifier
    >>> from sklearn_flowr.protocol import calibration_scores
    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat(np.arange(20), 25)
    >>> X = rng.normal(scale=3.0, size=(20, 4))[y] + rng.normal(size=(500, 4))
    >>> head = CRPGaussianClassifier(prior_mean=0.0, prior_var=9.0, b=1.0,
    ...                              sigma=1.0)
    >>> run = calibration_scores(head, X, y, "small", n_tasks=5)
    >>> run.score_name, bool(run.is_first_sighting.any())
    ('novelty_score', True)
    >>> calibration_set = run.score[~run.is_first_sighting]
    """
    y = column_or_1d(y)
    if n_novel_classes is None:
        n_novel_classes = small_context_sizes(np.unique(y).shape[0])[1]
    if setting == "small":
        tasks = calibration_tasks("small", y, n_novel_classes, n_query, n_tasks,
                                  seed)
        X_run, y_run = X, y
    else:
        estimator, X_run, y_run, tasks = _large_context_episodes(
            estimator, X, y, n_novel_classes, n_query, n_known_query_classes,
            n_tasks, seed)
    rows = evaluate_online(estimator, X_run, y_run, tasks, setting=setting,
                           n_jobs=n_jobs, return_rows=True,
                           probability=probability, verbose=verbose).rows
    score_name = "novelty_score" if "novelty_score" in rows else "p_novel"
    rows.update(score=rows[score_name], score_name=score_name,
                is_first_sighting=rows.is_novel)
    return rows


@validate_params({"targets": RUN_OPTIONS["targets"]},
                 prefer_skip_nested_validation=True)
def fit_novelty_map(log_odds, is_first_sighting, *, targets: str = "platt",
                    remedy: str = "fit it on classes held out of training "
                    "(FLOWRClassifier's calibration=k, "
                    "cross_fit_novelty_calibration) or on more classes, or "
                    "keep the head's own P(novel) (calibration=None)") -> Bunch:
    """:func:`calibrate_novelty`'s result from the raw log-odds of novel and
    first sightings; ``remedy``: the warning's advice on perfectly separated rows."""
    # Raw log-odds, not logit(P(novel)): a whitened head's span hundreds of
    # nats, where P(novel) rounds to 1 (beyond ~37) and its logit ties rows.
    log_odds = clip_log_odds(np.asarray(log_odds, dtype=np.float64), SCORE_CLIP)
    first = np.asarray(is_first_sighting, dtype=bool)
    if first.all() or not first.any():
        raise ValueError("The calibration tasks need both first sightings and "
                         "known-class queries.")
    if log_odds[~first].max() < log_odds[first].min():
        slope_from = ("Platt's target smoothing" if targets == "platt"
                      else "the optimiser")
        warnings.warn(
            "The calibration tasks separate first sightings from known-class "
            f"queries perfectly: the map's slope is then set by {slope_from}, "
            "not by the data, and it over-states novelty on new classes; "
            f"{remedy}.", UserWarning, stacklevel=caller_stacklevel())
    slope, intercept = platt_fit(log_odds, first, targets)
    return Bunch(
        slope=slope, intercept=intercept, n_rows=int(first.shape[0]),
        n_first_sightings=int(first.sum()),
        ece_before=expected_calibration_error(first, expit(log_odds)),
        ece_after=expected_calibration_error(
            first, expit(slope * log_odds + intercept)),
    )
