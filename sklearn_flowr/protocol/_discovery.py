"""The open-world stream with a label budget: labels come for some rows, late;
and which rows of an unlabelled batch to ask a person to label."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from numbers import Integral, Real

import numpy as np
from joblib import Parallel, delayed
from sklearn.utils import Bunch, check_random_state, column_or_1d
from sklearn.utils._param_validation import Interval, StrOptions, validate_params
from threadpoolctl import threadpool_limits
from tqdm.auto import tqdm

from ..metrics import discovery_report
from ._evaluate import _check_estimator, _check_tasks, start_task
from .sampling import resolve_seed

__all__ = ["choose_rows_to_label", "evaluate_discovery"]

# The figures of discovery_report averaged over tasks.
DISCOVERY_FIGURES = ("accuracy_new", "nmi_new", "ari_new", "accuracy_all",
                     "nmi_all", "ari_all", "known_accuracy", "n_discovered",
                     "n_true_new")


@validate_params(
    {"setting": [StrOptions({"small", "large"})],
     "label_fraction": [Interval(Real, 0, 1, closed="both")],
     "label_delay": [Interval(Integral, 0, None, closed="left")],
     "verbose": ["verbose"]},
    prefer_skip_nested_validation=True)
def evaluate_discovery(estimator, X, y, tasks, *, setting: str = "small",
                       label_fraction: float = 0.0, label_delay: int = 0,
                       n_jobs: int | None = None, random_state=None,
                       verbose: int = 0) -> Bunch:
    """Run an estimator through open-world tasks whose labels come late or
    never; the rows without their label are scored by
    :func:`~sklearn_flowr.metrics.discovery_report` of their assigned labels.

    Parameters
    ----------
    estimator : estimator
        As :func:`evaluate_online` takes it, and ``open_world_step(X)`` returns
        ``y_assigned`` (and ``learned``); ``correct`` is used if it exists.
    X : array-like of shape (n_samples, ...)
    y : array-like of shape (n_samples,)
    tasks : SmallContextTasks, LargeContextTasks or iterable of Task
    setting : {"small", "large"}, default="small"
    label_fraction : float in [0, 1], default=0.0
        Share of queries whose label arrives (drawn per query).
    label_delay : int >= 0, default=0
        Rows after its query that a label arrives; 0: a labelled step.
    n_jobs : int or None, default=None
        joblib workers over tasks.
    random_state : int, Generator, RandomState or None, default=None
        Seeds which labels arrive.
    verbose : int, default=0
        Above 0, a progress bar over tasks.

    Returns
    -------
    result : :class:`~sklearn.utils.Bunch`
        ``per_task`` (NaN without such rows), ``mean`` and ``se`` over tasks,
        ``n_tasks``, ``label_fraction``, ``label_delay``, ``n_unlabelled``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_flowr.baselines import DPMeansClassifier
    >>> from sklearn_flowr.protocol import SmallContextTasks, evaluate_discovery
    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat(np.arange(12), 20)
    >>> X = rng.normal(scale=8.0, size=(12, 3))[y] + rng.normal(size=(240, 3))
    >>> tasks = SmallContextTasks(y, n_support_classes=8, n_novel_classes=4,
    ...                           n_tasks=5, random_state=0)
    >>> out = evaluate_discovery(DPMeansClassifier(), X, y, tasks,
    ...                          random_state=0)
    >>> round(out.mean["accuracy_new"], 2) > 0.8
    True
    """
    if isinstance(label_fraction, bool):  # Interval(Real) takes bools
        raise ValueError(f"label_fraction must be a number in [0, 1], not a bool; "
                         f"got {label_fraction!r}.")
    _check_estimator(estimator, setting)
    y = column_or_1d(y)
    X = X if hasattr(X, "shape") else np.asarray(X)
    tasks = _check_tasks(tasks, y, setting)
    n_tasks = len(tasks)
    seed = resolve_seed(random_state)
    jobs = (delayed(_discovery_task)(
        estimator, X, y, tasks[i],
        setting, float(label_fraction), int(label_delay), (seed, i))
        for i in range(n_tasks))
    results = Parallel(n_jobs=n_jobs, return_as="generator")(jobs)
    parts = list(tqdm(results, total=n_tasks, disable=verbose <= 0,
                      desc=f"{setting}-context discovery tasks", unit="task"))
    per_task = {name: np.array([part[name] for part in parts], dtype=np.float64)
                for name in DISCOVERY_FIGURES}
    mean, se = summarise_tasks(per_task)
    return Bunch(per_task=per_task, mean=mean, se=se, n_tasks=n_tasks,
                 label_fraction=float(label_fraction), label_delay=int(label_delay),
                 n_unlabelled=int(sum(part["n_unlabelled"] for part in parts)))


def summarise_tasks(per_task):
    """Mean and standard error over tasks of each figure, NaN ignored.

    Parameters
    ----------
    per_task : dict of str to ndarray of shape (n_tasks,)
        A figure's value per task (NaN where a task has none).

    Returns
    -------
    mean, se : dict of str to float
        NaN where no task (``se``: fewer than two) has the figure.

    Examples
    --------
    >>> from sklearn_flowr.protocol import summarise_tasks
    >>> mean, se = summarise_tasks({"accuracy_new": [0.5, float("nan"), 0.7]})
    >>> round(mean["accuracy_new"], 2), round(se["accuracy_new"], 2)
    (0.6, 0.1)
    """
    mean, se = {}, {}
    for name, values in per_task.items():
        values = np.asarray(values, dtype=np.float64)
        values = values[~np.isnan(values)]
        mean[name] = float(values.mean()) if values.size else float("nan")
        se[name] = (float(values.std(ddof=1) / np.sqrt(values.size))
                    if values.size > 1 else float("nan"))
    return mean, se


def _deliver(est, x, assigned, learned, y_true):
    """A late label: correct a row the estimator learned from, else learn it."""
    if learned and callable(getattr(est, "correct", None)):
        est.correct(x, [assigned], [y_true])
    elif not learned:
        est.partial_fit(x, [y_true])
    # A learned row of an estimator without ``correct`` keeps its assignment.


def _discovery_task(estimator, X, y, task, setting, fraction, delay, seed):
    """One task's stream under the label budget; its discovery figures."""
    rng = np.random.default_rng(seed)
    with threadpool_limits(limits=1, user_api="blas"):
        # A row whose label arrives at once is a labelled step, any other an
        # unlabelled one; a late label goes to _deliver.
        est = start_task(estimator, X, y, task, setting)
        known = np.asarray(est.classes_)
        query = task.query
        arrives = rng.random(query.shape[0]) < fraction
        labelled = arrives & (delay == 0)
        assigned = np.empty(query.shape[0], dtype=object)
        pending = deque()
        for t, row in enumerate(query):
            while pending and pending[0][0] <= t:
                _, past, label, learned = pending.popleft()
                _deliver(est, X[query[past:past + 1]], label, learned, y[query[past]])
            x = X[query[t:t + 1]]
            if labelled[t]:
                est.open_world_step(x, y[query[t:t + 1]])
                assigned[t] = y[row]
                continue
            out = est.open_world_step(x)
            assigned[t] = out["y_assigned"][0]
            learned = bool(np.asarray(out.get("learned", [True]))[0])
            if arrives[t]:
                pending.append((t + delay, t, assigned[t], learned))
    unlabelled = ~labelled
    figures = dict.fromkeys(DISCOVERY_FIGURES, float("nan"))
    if unlabelled.any():
        # A new-class row left unlearned keeps the novel label: no discovery.
        report = discovery_report(y[query][unlabelled], assigned[unlabelled],
                                  known, novel_label=getattr(est, "novel_label_",
                                                             None))
        figures.update({name: float(report[name]) for name in DISCOVERY_FIGURES})
    figures["n_unlabelled"] = int(unlabelled.sum())
    return figures


STRATEGIES = ("uncertain", "largest-provisional", "random")

# The keys of the ``open_world_step`` result each strategy reads.
_NEEDED = {
    "uncertain": ("novelty_score",),
    "largest-provisional": ("y_assigned", "is_novel", "learned", "p_novel"),
    "random": ("y_assigned",),
}


def _checked_result(result, strategy):
    """The arrays of ``result`` that ``strategy`` reads, one entry per row."""
    missing = [key for key in _NEEDED[strategy] if key not in result]
    if missing:
        raise ValueError(
            f"result lacks {missing}, which strategy={strategy!r} reads: pass "
            "the Bunch that open_world_step(X) returned for the unlabelled batch.")
    arrays = {key: np.asarray(result[key]) for key in _NEEDED[strategy]}
    for key, array in arrays.items():
        if array.ndim != 1:
            raise ValueError(f"result[{key!r}] must be one-dimensional (one entry "
                             f"per row); got shape {array.shape}.")
    lengths = {key: array.shape[0] for key, array in arrays.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"result's arrays need one entry per row; got lengths "
                         f"{lengths}.")
    for key in ("novelty_score", "p_novel"):
        if key in arrays:
            try:
                arrays[key] = arrays[key].astype(float)
            except (TypeError, ValueError):
                raise ValueError(f"result[{key!r}] must hold numbers; got dtype "
                                 f"{arrays[key].dtype}.") from None
            if np.isnan(arrays[key]).any():
                raise ValueError(f"result[{key!r}] contains NaN.")
    for key in ("is_novel", "learned"):
        if key in arrays and arrays[key].dtype != bool:
            raise ValueError(f"result[{key!r}] must be a boolean array; got dtype "
                             f"{arrays[key].dtype}.")
    return arrays


def _largest_provisional(arrays, budget):
    """One row from each provisional class, largest first, in rounds; in a
    class, its learned rows by increasing P(novel)."""
    y_assigned, learned = arrays["y_assigned"], arrays["learned"]
    opened = (arrays["is_novel"] & learned).nonzero()[0]
    # Each class in the order it was opened; labels compared by == and hash,
    # as they may mix numbers and strings.
    classes = list(dict.fromkeys(y_assigned[opened].tolist()))
    rows_of = {label: [] for label in classes}
    for row in learned.nonzero()[0].tolist():
        members = rows_of.get(y_assigned[row])
        if members is not None:
            members.append(row)
    p_novel = arrays["p_novel"]
    queues = [sorted(rows_of[label], key=lambda row: (p_novel[row], row))
              for label in classes]
    # Stable sort: equal sizes keep the order the classes were opened in.
    queues.sort(key=len, reverse=True)
    chosen = []
    for depth in range(len(queues[0]) if queues else 0):
        for queue in queues:
            if len(chosen) == budget:
                return chosen
            if depth < len(queue):
                chosen.append(queue[depth])
    return chosen


@validate_params(
    {
        "result": [Mapping],
        "budget": [Interval(Integral, 0, None, closed="left")],
        "strategy": [StrOptions(set(STRATEGIES))],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def choose_rows_to_label(result, budget, *, strategy="uncertain",
                         random_state=None):
    """Choose the rows of an unlabelled batch to ask a person to label; their
    labels go to ``correct`` (rows the step learned) or ``partial_fit``.

    Parameters
    ----------
    result : :class:`~sklearn.utils.Bunch` or mapping
        What ``open_world_step(X)`` returned for the batch, without labels.
    budget : int >= 0
        How many labels may be asked for.
    strategy : {"uncertain", "largest-provisional", "random"}, \
default="uncertain"
        ``"uncertain"``: smallest ``|novelty_score|`` first (a toss-up between
        known and new). ``"largest-provisional"``: one row of each provisional
        class, largest first, in rounds, by increasing ``p_novel`` (may give
        fewer than ``budget``). ``"random"``: the baseline to beat.
    random_state : int, RandomState instance or None, default=None
        Seeds ``"random"``.

    Returns
    -------
    rows : ndarray of shape (n_chosen,), dtype intp
        Distinct indices into the batch, most wanted first.

    Examples
    --------
    >>> from sklearn_flowr import CRPGaussianClassifier
    >>> from sklearn_flowr.protocol import choose_rows_to_label
    >>> head = CRPGaussianClassifier(covariance="isotropic").fit(
    ...     [[0.0], [0.3], [9.0], [9.2]], [0, 0, 1, 1])
    >>> X = [[30.0], [30.2], [29.9], [0.1]]
    >>> out = head.open_world_step(X)
    >>> out.y_assigned
    array([-2, -2, -2,  0])
    >>> rows = choose_rows_to_label(out, 1, strategy="largest-provisional")
    >>> rows  # the member of class -2 best explained by the classes before it
    array([2])
    >>> head = head.correct([X[i] for i in rows], out.y_assigned[rows], [7])
    >>> head.classes_
    array([0, 1, 7])
    """
    if isinstance(budget, (bool, np.bool_)):
        raise ValueError(f"budget must be an int >= 0 (a number of labels); got "
                         f"the bool {budget!r}.")
    arrays = _checked_result(result, strategy)
    n_rows = next(iter(arrays.values())).shape[0]
    budget = min(int(budget), n_rows)
    if strategy == "uncertain":
        margin = np.abs(arrays["novelty_score"])
        rows = np.argsort(margin, kind="stable")[:budget]
    elif strategy == "largest-provisional":
        rows = _largest_provisional(arrays, budget)
    else:
        rng = check_random_state(random_state)
        rows = rng.choice(n_rows, size=budget, replace=False)
    return np.asarray(rows, dtype=np.intp)
