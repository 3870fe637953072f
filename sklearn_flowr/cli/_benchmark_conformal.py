"""The conformal novelty decision ``flowr-benchmark`` reports for every method,
calibrated on the other test tasks or on tasks of the training classes.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import false_discovery_control

from ..conformal import conformal_pvalues, leave_group_out_pvalues
from ..protocol import summarise_tasks

ALPHAS = (0.01, 0.05, 0.1)
BH_QS = (0.05, 0.1, 0.2)
# The level of the BH columns of the printed table.
BH_Q = 0.1
CALIBRATION_SETS = ("tasks", "training")
# The false-novel-rate curve of the figure: alpha from 0.01 to 0.3.
ALPHA_GRID = tuple(round(0.01 * k, 2) for k in range(1, 31))
# Calibration tasks: as many as the method's test tasks, at most this many.
MAX_CALIBRATION_TASKS = 200


def _mean_se(values):
    """Mean and standard error over tasks, NaN ignored; None where undefined."""
    mean, se = summarise_tasks({"values": values})
    return tuple(None if x != x else x for x in (mean["values"], se["values"]))


def _per_task_share(task, mask, among, n_tasks):
    """Per task, the share of the rows in ``among`` that are in ``mask`` (NaN
    without such rows)."""
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
    """The conformal figures (a JSON dict) of a row's test ``rows``,
    calibrated on the other tasks (``calibration`` None) or a calibration run."""
    score_name = "novelty_score" if "novelty_score" in rows else "p_novel"
    scores = np.asarray(rows[score_name], dtype=np.float64)
    first = np.asarray(rows["is_novel"], dtype=bool)
    known = ~first
    task_ids, task = np.unique(rows["task_id"], return_inverse=True)
    n_tasks = task_ids.shape[0]
    if calibration is None:
        pvalues = leave_group_out_pvalues(scores, known, task)
        per_task = np.bincount(task, weights=known, minlength=n_tasks)
        n_calibration = int(known.sum() - per_task.max())
        n_calibration_tasks = n_tasks - 1
    else:
        known_calibration = ~np.asarray(calibration.is_first_sighting, dtype=bool)
        reference = np.asarray(calibration.score, dtype=np.float64)[known_calibration]
        pvalues = conformal_pvalues(reference, scores)
        n_calibration = int(reference.shape[0])
        n_calibration_tasks = int(np.unique(calibration.task_id).shape[0])
        score_name = calibration.score_name

    levels = {}
    curve = {"alpha": list(ALPHA_GRID), "false_novel_rate": [], "power": []}
    for alpha in ALPHA_GRID:  # ALPHAS are points of the grid
        called = pvalues <= alpha
        (fnr, fnr_se), (power, power_se) = (
            _mean_se(_per_task_share(task, called, among, n_tasks))
            for among in (known, first))
        curve["false_novel_rate"].append(fnr)
        curve["power"].append(power)
        if alpha in ALPHAS:
            levels[str(alpha)] = {"false_novel_rate": fnr,
                                  "false_novel_rate_se": fnr_se,
                                  "power": power, "power_se": power_se}
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
