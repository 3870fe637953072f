"""The conformal novelty decision ``flowr-benchmark`` reports for every method.

Every test row's conformal p-value ranks its novelty score among the scores
of calibration rows of known classes; a row is called novel when its p-value
is at most ``alpha``. Two calibration sets (``--conformal-calibration``):

``tasks`` (the default)
    The known-class rows of the OTHER test tasks of the same run
    (:func:`~sklearn_flowr.conformal.leave_group_out_pvalues`, cross-conformal
    over tasks). The tasks are independent draws from one pool, so a task's
    known-class rows and the other tasks' are exchangeable: the condition of
    the guarantee. It is the set a user has who labels a few tasks of new
    classes (classes the encoder never saw) to calibrate on; classes recur
    across tasks where the pool is small (the five test classes of digits).
``training``
    A calibration run on the TRAINING classes the method's template was built
    from (:func:`~sklearn_flowr.protocol._calibrate.calibration_scores`:
    small context, few-shot tasks drawn from the training classes; large
    context, a clone refitted with some training classes held out as novel).
    The encoder was trained on those rows and separates them better than new
    ones, so the rates measured exceed ``alpha`` where it does (docs/results.rst).

Reported per task, then as mean and standard error over tasks: the
false-novel rate (share of the rows of known classes called novel) and the
power (share of the first sightings called novel) at each ``alpha`` of
:data:`ALPHAS`, and Benjamini-Hochberg on each task's query rows at each
``q`` of :data:`BH_QS` (its false discovery proportion, 0 when nothing is
selected, and power).
"""

from __future__ import annotations

import numpy as np
from scipy.stats import false_discovery_control

from ..conformal import conformal_pvalues, leave_group_out_pvalues
from ..protocol import calibration_scores

ALPHAS = (0.01, 0.05, 0.1)
BH_QS = (0.05, 0.1, 0.2)
# The level of the BH columns of the printed table.
BH_Q = 0.1
CALIBRATION_SETS = ("tasks", "training")
# The false-novel-rate curve of the figure: alpha from 0.01 to 0.3.
ALPHA_GRID = tuple(round(0.01 * k, 2) for k in range(1, 31))
# Calibration tasks: as many as the method's test tasks, at most this many.
MAX_CALIBRATION_TASKS = 200


def calibrate(template, X, y, setting, *, n_tasks, n_known_query_classes,
              n_jobs, seed, verbose=0):
    """The calibration run of ``template`` on the training rows ``(X, y)``
    (:func:`calibration_scores` with ``min(n_tasks, 200)`` tasks, 10 queries
    per class and as many novel classes as ``calibrate_novelty`` takes)."""
    return calibration_scores(
        template, X, y, setting, n_tasks=min(n_tasks, MAX_CALIBRATION_TASKS),
        n_known_query_classes=n_known_query_classes, n_jobs=n_jobs, seed=seed,
        verbose=verbose)


def row_scores(rows):
    """The novelty score of each test row: ``novelty_score`` when the
    estimator returns it, else ``p_novel`` (as the calibration run)."""
    return rows["novelty_score"] if "novelty_score" in rows else rows["p_novel"]


def _mean_se(values):
    """Mean and standard error over the tasks where ``values`` is defined
    (not NaN); None where there are no such tasks (the standard error also
    where there is only one)."""
    values = np.asarray(values, dtype=np.float64)
    values = values[~np.isnan(values)]
    if values.shape[0] == 0:
        return None, None
    se = (float(values.std(ddof=1) / np.sqrt(values.shape[0]))
          if values.shape[0] > 1 else None)
    return float(values.mean()), se


def _per_task_share(task, mask, among, n_tasks):
    """Per task, the share of the rows in ``among`` that are in ``mask``
    (NaN for a task without rows in ``among``)."""
    total = np.bincount(task, weights=among, minlength=n_tasks)
    hits = np.bincount(task, weights=mask & among, minlength=n_tasks)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, hits / np.maximum(total, 1), np.nan)


def _bh_figures(pvalues, first, task, n_tasks, q):
    """Mean false discovery proportion and power of Benjamini-Hochberg at
    level ``q`` on each task's query rows, with their standard errors."""
    order = np.argsort(task, kind="stable")
    bounds = np.cumsum(np.bincount(task, minlength=n_tasks))[:-1]
    fdp, power = [], []
    for rows_of_task in np.split(order, bounds):
        selected = false_discovery_control(pvalues[rows_of_task], method="bh") <= q
        is_first = first[rows_of_task]
        fdp.append(float(np.sum(selected & ~is_first) / max(int(selected.sum()), 1)))
        power.append(float(np.sum(selected & is_first) / is_first.sum())
                     if is_first.any() else np.nan)
    (fdr, fdr_se), (power, power_se) = _mean_se(fdp), _mean_se(power)
    return {"q": q, "fdr": fdr, "fdr_se": fdr_se, "power": power,
            "power_se": power_se}


def conformal_figures(rows, calibration=None, *, seconds=None) -> dict:
    """The conformal figures of one (method, pre-training, setting) row.

    Parameters
    ----------
    rows : Bunch
        The test run's rows (``evaluate_online(..., return_rows=True).rows``).
    calibration : Bunch or None, default=None
        ``None``: every task is calibrated on the known-class rows of the
        other tasks (``tasks``). Else a calibration run (:func:`calibrate`,
        ``training``): ``score`` and ``is_first_sighting`` of its rows.
    seconds : float or None, default=None
        The calibration's time, reported.

    Returns
    -------
    figures : dict
        ``calibration`` (``"tasks"`` or ``"training"``); ``alpha``: per level
        (keys ``"0.01"``, ``"0.05"``, ``"0.1"``) ``false_novel_rate``,
        ``power`` and their standard errors ``*_se`` over tasks; ``bh``:
        ``q``, ``fdr`` (mean false discovery proportion) and ``power`` of
        Benjamini-Hochberg per task at ``q =`` :data:`BH_Q`, with their
        ``*_se``; ``bh_levels``: the same at each ``q`` of :data:`BH_QS`
        (keys ``"0.05"``, ...); ``curve``: mean ``false_novel_rate`` and
        ``power`` over tasks at each ``alpha`` of :data:`ALPHA_GRID`;
        ``score`` (the column ranked), ``n_calibration`` (calibration
        scores; per task, the fewest), ``n_calibration_tasks``, ``n_tasks``
        and ``calibration_seconds``.
    """
    scores = np.asarray(row_scores(rows), dtype=np.float64)
    first = np.asarray(rows["is_novel"], dtype=bool)
    known = ~first
    task_ids, task = np.unique(rows["task_id"], return_inverse=True)
    n_tasks = task_ids.shape[0]
    if calibration is None:
        pvalues = leave_group_out_pvalues(scores, known, task)
        per_task = np.bincount(task, weights=known, minlength=n_tasks)
        n_calibration = int(known.sum() - per_task.max())
        n_calibration_tasks = n_tasks - 1
        score_name = "novelty_score" if "novelty_score" in rows else "p_novel"
    else:
        known_calibration = ~np.asarray(calibration.is_first_sighting, dtype=bool)
        reference = np.asarray(calibration.score, dtype=np.float64)[known_calibration]
        pvalues = conformal_pvalues(reference, scores)
        n_calibration = int(reference.shape[0])
        n_calibration_tasks = int(np.unique(calibration.task_id).shape[0])
        score_name = calibration.score_name

    def at(alpha):
        called = pvalues <= alpha
        return (_per_task_share(task, called, known, n_tasks),
                _per_task_share(task, called, first, n_tasks))

    levels = {}
    for alpha in ALPHAS:
        fnr, power = at(alpha)
        (fnr, fnr_se), (power, power_se) = _mean_se(fnr), _mean_se(power)
        levels[str(alpha)] = {"false_novel_rate": fnr, "false_novel_rate_se": fnr_se,
                              "power": power, "power_se": power_se}
    curve = {"alpha": list(ALPHA_GRID), "false_novel_rate": [], "power": []}
    for alpha in ALPHA_GRID:
        fnr, power = at(alpha)
        curve["false_novel_rate"].append(_mean_se(fnr)[0])
        curve["power"].append(_mean_se(power)[0])
    bh_levels = {str(q): _bh_figures(pvalues, first, task, n_tasks, q)
                 for q in BH_QS}
    return {"calibration": "tasks" if calibration is None else "training",
            "score": score_name,
            "n_calibration": n_calibration,
            "n_calibration_tasks": n_calibration_tasks,
            "n_tasks": int(n_tasks),
            "calibration_seconds": None if seconds is None else float(seconds),
            "alpha": levels,
            "bh": bh_levels[str(BH_Q)],
            "bh_levels": bh_levels,
            "curve": curve}
