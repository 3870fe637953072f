"""Online evaluation of an open-world estimator over few-shot tasks, in joblib
batches whose tasks are drawn in the workers."""

from __future__ import annotations

import copy
import warnings
from numbers import Real

import numpy as np
from joblib import Parallel, delayed, effective_n_jobs
from sklearn.metrics import roc_curve
from sklearn.utils import Bunch
from sklearn.utils._param_validation import Interval, StrOptions, validate_params
from sklearn.utils.validation import check_is_fitted
from threadpoolctl import threadpool_limits
from tqdm.auto import tqdm

from ..calibration import check_rows
from ..metrics import open_world_report
from ..model_selection import check_row_indices
from .sampling import LargeContextTasks, Task, _TaskSampler, fill_reference

__all__ = ["evaluate_online"]

_DEFAULT_TPR = {"small": 0.15, "large": 0.6}
# A "novel" decision in the pooled rows: equal to no class whatever each
# task's novel label.
_NOVEL_DECISION = object()
_STEP_FIELDS = ("y_known", "p_novel", "is_novel")
# Enough batches to balance workers and move a progress bar, few enough to
# cost nothing to dispatch.
_BATCHES_PER_WORKER = 4
_MIN_BATCHES = 10


@fill_reference
@validate_params(
    {"setting": [StrOptions({"small", "large"})],
     "tpr": [Interval(Real, 0, 1, closed="right"), None],
     "verbose": ["verbose"], "return_rows": ["boolean"],
     "probability": ["boolean", StrOptions({"auto"})]},
    prefer_skip_nested_validation=True)
def evaluate_online(estimator, X, y, tasks, *, setting: str = "small",
                    tpr: float | None = None, n_jobs: int | None = None,
                    verbose: int = 0, return_rows: bool = False,
                    probability: bool | str = "auto") -> Bunch:
    """Run copies of an estimator through few-shot open-world tasks and score
    the pooled rows with :func:`~sklearn_flowr.metrics.open_world_report`.

    Parameters
    ----------
    estimator : estimator
        Has ``open_world_step(X, y)`` returning ``y_known``, ``p_novel`` and
        ``is_novel``; small context: ``adapt`` or ``partial_fit`` learns each
        support set; large context: fitted. Not modified.
    X : array-like of shape (n_samples, ...)
        Features or images, indexed by the tasks' rows.
    y : array-like of shape (n_samples,)
        Labels.
    tasks : SmallContextTasks, LargeContextTasks or iterable of Task
        Or any objects with ``support``, ``query`` and a distinct ``task_id``.
    setting : {"small", "large"}, default="small"
        Small: a support set is learned before each stream; large: query-only.
    tpr : float in (0, 1], default=None
        Novelty TPR of the operating point; None: 0.15 (small) or 0.6 (large).
    n_jobs : int, default=None
        joblib workers; results do not depend on it.
    verbose : int, default=0
        Above 0, a progress bar over task batches.
    return_rows : bool, default=False
        Also return the pooled per-row arrays under ``rows``.
    probability : bool or "auto", default="auto"
        Whether ``p_novel`` is a probability; "auto": when the estimator has
        ``predict_proba``.

    Returns
    -------
    report : :class:`~sklearn.utils.Bunch`
        :func:`~sklearn_flowr.metrics.open_world_report`'s keys, ``setting``,
        ``target_tpr``, the ROC curve (``fpr``, ``tpr_curve``,
        ``roc_thresholds``) and with ``return_rows`` the per-row ``rows``.

    References
    ----------
    %(flowr)s

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_flowr import CRPGaussianClassifier
    >>> from sklearn_flowr.protocol import SmallContextTasks, evaluate_online
    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat(np.arange(20), 25)
    >>> X = rng.normal(scale=3.0, size=(20, 8))[y] + rng.normal(size=(500, 8))
    >>> tasks = SmallContextTasks(y, n_tasks=20, random_state=0)
    >>> head = CRPGaussianClassifier(prior_mean=0.0, prior_var=9.0, b=1.0,
    ...                              sigma=1.0)
    >>> report = evaluate_online(head, X, y, tasks)
    >>> report.n_tasks, round(report.novel_tpr, 2)
    (20, 0.15)
    >>> 0.5 < report.auroc <= 1.0
    True
    """
    if tpr is None:
        tpr = _DEFAULT_TPR[setting]
    if probability == "auto":
        probability = callable(getattr(estimator, "predict_proba", None))
    if not hasattr(X, "shape") or not hasattr(X, "__getitem__"):
        X = np.asarray(X)
    y = check_rows(X, y)
    tasks = _check_tasks(tasks, y, setting)
    _check_estimator(estimator, setting)
    n_tasks = len(tasks)

    n_workers = max(1, effective_n_jobs(n_jobs))
    n_batches = min(n_tasks, max(_MIN_BATCHES, _BATCHES_PER_WORKER * n_workers))
    batches = np.array_split(np.arange(n_tasks), n_batches)
    # Tasks are drawn (or picked) in the workers.
    jobs = (delayed(_evaluate_batch)(estimator, X, y, tasks, batch, setting)
            for batch in batches)
    results = Parallel(n_jobs=n_jobs, return_as="generator")(jobs)
    parts = list(tqdm(results, total=n_batches, disable=verbose <= 0,
                      desc=f"{setting}-context tasks", unit="batch"))
    rows = Bunch(**{name: np.concatenate([part[name] for part in parts])
                    for name in parts[0]})

    y_pred = None
    if "pred_novel" in rows:
        y_pred = np.where(rows.pred_novel, _NOVEL_DECISION,
                          rows.y_pred.astype(object))
    report = open_world_report(
        rows.y_true, rows.y_known, rows.p_novel, rows.is_novel, tpr=tpr,
        task_ids=rows.task_id, support_mask=rows.support_mask, y_pred=y_pred,
        novel_label=_NOVEL_DECISION, probability=probability,
        novelty_score=rows.get("novelty_score"),
    )
    fpr, tpr_curve, thresholds = roc_curve(rows.is_novel,
                                           rows.get("novelty_score", rows.p_novel))
    report.update(setting=setting, target_tpr=float(tpr), fpr=fpr,
                  tpr_curve=tpr_curve, roc_thresholds=thresholds)
    if return_rows:
        report["rows"] = rows
    return report


# ---------------------------------------------------------------- validation
def _check_estimator(estimator, setting):
    if not callable(getattr(estimator, "open_world_step", None)):
        raise TypeError(
            f"{type(estimator).__name__} has no open_world_step(X, y) method; "
            "evaluate_online streams the queries through it."
        )
    if setting == "small":
        if not (callable(getattr(estimator, "adapt", None))
                or callable(getattr(estimator, "partial_fit", None))):
            raise TypeError(
                f"{type(estimator).__name__} has neither adapt(X, y) nor "
                "partial_fit(X, y): the small context learns each task's support "
                "set with one of them."
            )
    elif hasattr(estimator, "fit"):
        check_is_fitted(
            estimator,
            msg=("setting='large' needs a fitted %(name)s: its classes are the "
                 "known-known classes of the stream. Fit it on the training "
                 "classes first."),
        )


def _check_tasks(tasks, y, setting):
    """The sampler, or the checked tasks as a list."""
    if isinstance(tasks, _TaskSampler):
        if not tasks._matches(y):
            raise ValueError(
                f"The tasks were drawn from other labels than y ({tasks.n_samples} "
                f"rows vs {y.shape[0]}, or different labels): build "
                f"{type(tasks).__name__} on the y passed here."
            )
        if setting == "large" and not isinstance(tasks, LargeContextTasks):
            raise ValueError(
                f"setting='large' runs query-only tasks; {type(tasks).__name__} "
                "has support sets. Use setting='small' or LargeContextTasks."
            )
        return tasks
    if isinstance(tasks, (str, bytes)) or not hasattr(tasks, "__iter__"):
        raise TypeError(
            "tasks must be SmallContextTasks, LargeContextTasks or an iterable of "
            f"Task; got {type(tasks).__name__}."
        )
    task_list = [_check_task(task, y.shape[0], setting) for task in tasks]
    if not task_list:
        raise ValueError("tasks is empty.")
    ids = [task.task_id for task in task_list]
    if len(set(ids)) != len(ids):
        raise ValueError("task_id values must be distinct: the report groups rows "
                         "by task.")
    return task_list


def _check_task(task, n_samples, setting):
    try:
        support, query, task_id = task.support, task.query, task.task_id
    except AttributeError:
        raise TypeError(
            "Each task needs support, query and task_id attributes (see Task); "
            f"got {type(task).__name__}."
        ) from None
    arrays = [check_row_indices(rows, n_samples, f"Task {task_id!r}: {name}")
              for name, rows in [("support", support), ("query", query)]]
    if arrays[1].size == 0:
        raise ValueError(f"Task {task_id!r} has no query rows.")
    if setting == "large" and arrays[0].size:
        raise ValueError(
            f"setting='large' runs query-only tasks; task {task_id!r} has "
            f"{arrays[0].size} support rows. Use setting='small'."
        )
    return Task(support=arrays[0], query=arrays[1], task_id=task_id)


# -------------------------------------------------------------------- running
def _evaluate_batch(estimator, X, y, tasks, batch, setting):
    """Per-row arrays of the tasks ``batch`` (indices into ``tasks``), concatenated."""
    # Parallelism is over tasks: BLAS threads on small products only add sync.
    with threadpool_limits(limits=1, user_api="blas"):
        parts = [_evaluate_task(estimator, X, y, tasks[int(i)], setting)
                 for i in batch]
    return {name: np.concatenate([part[name] for part in parts])
            for name in parts[0]}


def start_task(estimator, X, y, task, setting):
    """A copy of ``estimator`` that has learned ``task``'s support set."""
    est = copy.deepcopy(estimator)
    if setting == "small":
        X_support, y_support = X[task.support], y[task.support]
        if callable(getattr(est, "adapt", None)):
            est.adapt(X_support, y_support)
        else:
            with warnings.catch_warnings():  # tasks score P(novel), not predict
                warnings.filterwarnings("ignore",
                                        message="partial_fit on an unfitted")
                est.partial_fit(X_support, y_support)
    return est


def _evaluate_task(estimator, X, y, task, setting):
    est = start_task(estimator, X, y, task, setting)
    # Known before the stream: the estimator's classes when it exposes them.
    known = getattr(est, "classes_", None)
    y_query = y[task.query]
    out = est.open_world_step(X[task.query], y_query)
    missing = [name for name in _STEP_FIELDS if name not in out]
    if missing:
        raise ValueError(
            f"{type(est).__name__}.open_world_step must return {_STEP_FIELDS}; "
            f"{missing} missing."
        )
    is_novel = np.asarray(out["is_novel"], dtype=bool)
    if known is None:
        known = (y[task.support] if setting == "small"
                 else np.setdiff1d(y_query, y_query[is_novel]))
    n = y_query.shape[0]
    rows = {"y_true": y_query}
    if "y_pred" in out:
        rows["y_pred"] = np.asarray(out["y_pred"])
        novel_label = getattr(est, "novel_label_", None)
        if novel_label is not None:
            # Per task: each copy resolved its own novel label.
            rows["pred_novel"] = np.asarray(
                rows["y_pred"].astype(object) == novel_label, dtype=bool)
    if "novelty_score" in out:
        rows["novelty_score"] = np.asarray(out["novelty_score"], dtype=np.float64)
    return rows | {
        "y_known": np.asarray(out["y_known"]),
        "p_novel": np.asarray(out["p_novel"], dtype=np.float64),
        "is_novel": is_novel,
        "support_mask": np.isin(y_query, known),
        "task_id": np.full(n, task.task_id),
        "index": task.query,
    }
