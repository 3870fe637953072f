"""Fit the Platt map of P(novel) on classes the encoder has not seen.

:func:`calibrate_novelty` draws its tasks from the training classes' final
embeddings. With few training classes those tasks do not look like tasks of
new classes: the encoder separates the classes it was trained on cleanly, so
their held-out "novel" ones are easy to tell apart, while new classes land
among the known ones (measured on the five-class datasets, README "Measured
figures"). Cross-fitting, as :class:`~sklearn.calibration.CalibratedClassifierCV`
does with ``ensemble=False``: each fold trains a clone of the estimator on
some classes and runs open-world tasks of the classes it held out through the
clone's head; the first sightings of every fold, pooled, fit one map, which is
then set on the model trained on every class.
"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from sklearn.base import clone
from sklearn.model_selection import GroupKFold
from sklearn.utils import Bunch, column_or_1d

from ._calibrate import fit_novelty_map, small_context_sizes
from ._evaluate import evaluate_online
from ._tasks import LargeContextTasks, SmallContextTasks, _resolve_seed

__all__ = ["class_disjoint_folds", "cross_fit_novelty_calibration",
           "cross_fit_plan"]

# Parameters of the fold clones: no map of their own, no cross-fitting inside
# a fold, no checkpoints shared with the model being calibrated.
_FOLD_PARAMS = {"calibrate_novelty": False, "calibration_cv": None,
                "checkpoint_dir": None}


def class_disjoint_folds(cv, X, y, *, min_held_classes: int = 1):
    """``(train, held)`` row indices of each fold, checked to split classes.

    Parameters
    ----------
    cv : int, cross-validation generator or iterable
        An int ``k``: :class:`~sklearn.model_selection.GroupKFold` with ``k``
        folds over the class labels. A splitter's ``split(X, y, groups=y)``
        is used (a group splitter, e.g.
        :class:`~sklearn.model_selection.GroupShuffleSplit`, keeps classes
        whole); an iterable yields ``(train, held)`` index arrays.
    X : array-like of shape (n_samples, ...)
    y : ndarray of shape (n_samples,)
    min_held_classes : int, default=1
        Classes each fold must hold out.

    Returns
    -------
    folds : list of (ndarray, ndarray)

    Raises
    ------
    ValueError
        A fold shares a class between its two sides, holds out fewer than
        ``min_held_classes`` classes or trains on fewer than 2, or no fold.

    Examples
    --------
    >>> import numpy as np
    >>> y = np.repeat([0, 1, 2, 3], 2)
    >>> [np.unique(y[held]).tolist() for _, held in
    ...  class_disjoint_folds(2, np.zeros((8, 1)), y)]
    [[1, 3], [0, 2]]
    """
    if isinstance(cv, (bool, str, bytes)):
        raise ValueError(f"calibration_cv must be an int >= 2, a splitter or an "
                         f"iterable of (train, held) indices; got {cv!r}.")
    if isinstance(cv, Integral):
        if cv < 2:
            raise ValueError(f"calibration_cv as an int must be >= 2; got {cv}.")
        n_classes = np.unique(y).shape[0]
        if cv > n_classes:
            raise ValueError(f"calibration_cv={cv} folds over the classes need at "
                             f"least {cv} classes; got {n_classes}.")
        cv = GroupKFold(n_splits=cv)
    if hasattr(cv, "split"):
        splits = cv.split(X, y, groups=y)
    elif hasattr(cv, "__iter__"):
        splits = cv
    else:
        raise ValueError(f"calibration_cv must be an int >= 2, a splitter or an "
                         f"iterable of (train, held) indices; got {cv!r}.")
    folds = []
    for number, (train, held) in enumerate(splits):
        train, held = np.asarray(train, dtype=np.intp), np.asarray(held, dtype=np.intp)
        train_classes, held_classes = np.unique(y[train]), np.unique(y[held])
        shared = np.intersect1d(train_classes, held_classes)
        if shared.size:
            raise ValueError(
                f"calibration_cv must split whole classes (use a group splitter "
                f"such as GroupKFold or GroupShuffleSplit); fold {number} has "
                f"class {shared.tolist()[0]!r} on both sides.")
        if held_classes.shape[0] < min_held_classes or train_classes.shape[0] < 2:
            raise ValueError(
                f"Fold {number} of calibration_cv trains on "
                f"{train_classes.shape[0]} classes and holds out "
                f"{held_classes.shape[0]}; each fold needs at least 2 and "
                f"{min_held_classes}.")
        folds.append((train, held))
    if not folds:
        raise ValueError("calibration_cv gave no fold.")
    return folds


def _known_queries(y, rows, share, rng):
    """Split ``rows`` per class into rows to fit and ``share`` of them (at
    least one, at most half) to query as known classes."""
    fit, query = [], []
    for label in np.unique(y[rows]):
        mine = rng.permutation(rows[y[rows] == label])
        if mine.shape[0] < 2:
            raise ValueError("calibration_cv in the large context needs at "
                             "least 2 rows in every class (one to fit, one to "
                             f"query); class {label!r} has {mine.shape[0]}.")
        n_query = min(max(1, round(share * mine.shape[0])), mine.shape[0] // 2)
        query.append(mine[:n_query])
        fit.append(mine[n_query:])
    return np.concatenate(fit), np.concatenate(query)


def _fold_tasks(setting, y_query, known, n_held, n_tasks, n_query,
                n_known_query_classes, seed):
    if setting == "small":
        n_support, n_novel = small_context_sizes(n_held)
        smallest = int(np.unique(y_query, return_counts=True)[1].min())
        n_query = min(n_query, smallest // 2)
        return SmallContextTasks(y_query, n_support_classes=n_support,
                                 n_novel_classes=min(5, n_novel),
                                 shots=(1, min(10, smallest - n_query)),
                                 n_query=n_query, n_tasks=n_tasks,
                                 random_state=seed)
    if n_known_query_classes is not None and n_known_query_classes >= known.shape[0]:
        n_known_query_classes = None
    n_query = min(n_query, int(np.unique(y_query, return_counts=True)[1].min()))
    return LargeContextTasks(y_query, known, n_novel_classes=min(5, n_held),
                             n_query=n_query, n_tasks=n_tasks,
                             n_known_query_classes=n_known_query_classes,
                             random_state=seed)


def cross_fit_plan(cv, X, y, *, setting: str, known_query_share: float = 0.25,
                   random_state=None) -> list:
    """The rows each fold trains on and queries, and its seed.

    Parameters
    ----------
    cv : int, cross-validation generator or iterable
        As :func:`class_disjoint_folds` takes it.
    X : array-like of shape (n_samples, ...)
    y : ndarray of shape (n_samples,)
    setting : {"small", "large"}
    known_query_share : float in (0, 0.5], default=0.25
        Large context: share of each training class's rows the fold keeps out
        of training and queries as a known class.
    random_state : int, Generator, RandomState or None, default=None

    Returns
    -------
    plan : list of :class:`~sklearn.utils.Bunch`
        One per fold: ``fit_rows``, ``query_rows``, ``n_held_classes`` and
        ``seed``. The same ``random_state`` gives the same plan.

    Examples
    --------
    >>> import numpy as np
    >>> y = np.repeat([0, 1, 2, 3], 4)
    >>> plan = cross_fit_plan(2, np.zeros((16, 1)), y, setting="large",
    ...                       random_state=0)
    >>> [(len(p.fit_rows), len(p.query_rows)) for p in plan]
    [(6, 10), (6, 10)]
    """
    if setting not in ("small", "large"):
        raise ValueError(f"setting must be 'small' or 'large'; got {setting!r}.")
    if (isinstance(known_query_share, bool) or not isinstance(known_query_share, Real)
            or not 0 < known_query_share <= 0.5):
        raise ValueError("known_query_share must lie in (0, 0.5]; got "
                         f"{known_query_share!r}.")
    y = column_or_1d(y)
    folds = class_disjoint_folds(cv, X, y,
                                 min_held_classes=2 if setting == "small" else 1)
    seed = _resolve_seed(random_state)
    plan = []
    for number, (train, held) in enumerate(folds):
        rng = np.random.default_rng([seed, number])
        fold_seed = int(rng.integers(2**31 - 1))
        if setting == "small":
            fit_rows, query_rows = train, held
        else:
            fit_rows, known_rows = _known_queries(y, train, known_query_share, rng)
            query_rows = np.concatenate([known_rows, held])
        plan.append(Bunch(fit_rows=fit_rows, query_rows=query_rows,
                          n_held_classes=int(np.unique(y[held]).shape[0]),
                          seed=fold_seed))
    return plan


def cross_fit_novelty_calibration(estimator, X, y, *, cv=2, n_tasks: int = 200,
                                  n_query: int = 10,
                                  n_known_query_classes: int | None = None,
                                  known_query_share: float = 0.25,
                                  n_jobs: int | None = None, random_state=None,
                                  plan=None) -> Bunch:
    """Fit the Platt map of P(novel) on folds of classes held out of training.

    For each fold of ``cv`` (class-disjoint), a clone of ``estimator``
    (without its own map) is trained on the fold's training classes; the
    held-out classes, embedded by the clone (``transform``), go through
    open-world tasks run by the clone's head (``head_``), in the estimator's
    ``setting``: small context, :class:`SmallContextTasks` of the held-out
    classes (the paper's 10 support + 5 novel, in proportion below 15); large
    context, :class:`LargeContextTasks` whose known classes are the fold's
    training classes, queried on ``known_query_share`` of their rows kept out
    of the clone's training, and whose novel classes are the held-out ones.
    The first sightings of all folds are regressed on ``logit P(novel)``
    together (:func:`calibrate_novelty`'s map). Each fold trains a model:
    this costs ``k`` trainings on ``(k - 1) / k`` of the classes.

    Parameters
    ----------
    estimator : FLOWRClassifier
        Unfitted or fitted (only its parameters are used); not modified.
    X : array-like of shape (n_samples, ...)
        Training inputs, as ``estimator.fit`` takes them.
    y : array-like of shape (n_samples,)
    cv : int, cross-validation generator or iterable, default=2
        Folds over whole classes (:func:`class_disjoint_folds`); small
        context: each fold must hold out at least 2 classes.
    n_tasks : int, default=200
        Tasks per fold.
    n_query : int, default=10
        Query rows per class (at most half the smallest held-out class in the
        small context).
    n_known_query_classes : int or None, default=None
        Large context: known classes queried per task (``None``: all).
    known_query_share : float in (0, 0.5], default=0.25
        Large context: share of each training class's rows kept out of the
        fold's training to be queried as a known class.
    n_jobs : int, default=None
        Parallel workers of :func:`evaluate_online`.
    random_state : int, Generator, RandomState or None, default=None
        Seeds the folds' models, known-query rows and tasks.
    plan : list of Bunch or None, default=None
        :func:`cross_fit_plan`'s folds, already checked (``FLOWRClassifier``
        checks them before training anything); ``None``: from ``cv``,
        ``known_query_share`` and ``random_state``.

    Returns
    -------
    result : :class:`~sklearn.utils.Bunch`
        ``slope``, ``intercept``, ``n_rows``, ``n_first_sightings``,
        ``ece_before`` and ``ece_after`` (in-sample, over the pooled folds),
        as :func:`calibrate_novelty` returns them, and ``n_folds``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.datasets import load_digits
    >>> from sklearn_flowr import FLOWRClassifier
    >>> from sklearn_flowr.protocol import cross_fit_novelty_calibration
    >>> X, y = load_digits(return_X_y=True)
    >>> X = (X / 16).astype("f4")
    >>> clf = FLOWRClassifier(backbone="mlp", embedding_dim=8, pretrain_epochs=2,
    ...                       meta_epochs=1, episodes_per_epoch=5, n_way=3,
    ...                       n_unknown=1, random_state=0, verbose=0)
    >>> out = cross_fit_novelty_calibration(clf, X, y, cv=2, n_tasks=20,
    ...                                     random_state=0)
    >>> out.n_folds, out.slope > 0
    (2, True)
    """
    y = column_or_1d(y)
    if np.shape(X)[0] != y.shape[0]:
        raise ValueError(f"X and y have different numbers of rows: "
                         f"{np.shape(X)[0]} and {y.shape[0]}.")
    for name, value in (("n_tasks", n_tasks), ("n_query", n_query)):
        if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
            raise ValueError(f"{name} must be an int >= 1; got {value!r}.")
    setting = estimator.get_params()["setting"]
    if plan is None:
        plan = cross_fit_plan(cv, X, y, setting=setting,
                              known_query_share=known_query_share,
                              random_state=random_state)
    check = getattr(estimator, "_check_cross_fit_plan", None)
    if check is not None:
        check(y, plan)  # every fold, before the first one trains
    fold_params = {name: value for name, value in _FOLD_PARAMS.items()
                   if name in estimator.get_params()}
    p_novel, first = [], []
    for fold in plan:
        model = clone(estimator).set_params(**fold_params, random_state=fold.seed)
        model.fit(_take(X, fold.fit_rows), y[fold.fit_rows])
        y_query = y[fold.query_rows]
        Z = model.transform(_take(X, fold.query_rows))
        tasks = _fold_tasks(setting, y_query, np.unique(y[fold.fit_rows]),
                            fold.n_held_classes, n_tasks, n_query,
                            n_known_query_classes, fold.seed)
        report = evaluate_online(model.head_, Z, y_query, tasks, setting=setting,
                                 n_jobs=n_jobs, return_rows=True, probability=True)
        p_novel.append(report.rows.p_novel)
        first.append(report.rows.is_novel)
    result = fit_novelty_map(np.concatenate(p_novel), np.concatenate(first))
    result.n_folds = len(plan)
    return result


def _take(X, rows):
    """Rows of an array or a list (images may come as nested lists)."""
    return X[rows] if hasattr(X, "shape") else [X[i] for i in rows]
