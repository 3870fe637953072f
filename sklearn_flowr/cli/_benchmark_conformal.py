"""The conformal novelty decision ``flowr-benchmark`` reports for every method.

Per method, a calibration run on the TRAINING classes the method's template
was built from (:func:`~sklearn_flowr.protocol._calibrate.calibration_scores`:
small context, the same kind of few-shot tasks drawn from the training
classes; large context, a clone refitted with some training classes held out
as novel) gives the novelty scores of the rows of classes known at that
moment: the calibration set. Every test row's conformal p-value
(:func:`~sklearn_flowr.conformal.conformal_pvalues`) compares its score with
that set; a row is called novel when its p-value is at most ``alpha``.

Reported per task, then as mean and standard error over tasks: the
false-novel rate (share of the rows of known classes called novel) and the
power (share of the first sightings called novel) at each ``alpha`` of
:data:`ALPHAS`, and Benjamini-Hochberg on each task's query rows at
``q =`` :data:`BH_Q` (its false discovery proportion, 0 when nothing is
selected, and power). Under exchangeability of the calibration rows and the
test rows of known classes the false-novel rate is at most ``alpha``. The
calibration rows are the encoder's own training rows (small context: of
other classes than the test tasks'; large context: of the known classes, but
not the held-out rows the test queries), so whether it holds is what the
figures test.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import false_discovery_control

from ..conformal import conformal_pvalues
from ..protocol._calibrate import calibration_scores

ALPHAS = (0.01, 0.05, 0.1)
BH_Q = 0.1
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


def conformal_figures(calibration, rows, *, seconds=None) -> dict:
    """The conformal figures of one (method, pre-training, setting) row.

    Parameters
    ----------
    calibration : Bunch
        The calibration run (:func:`calibrate`): ``score`` and
        ``is_first_sighting`` of its rows.
    rows : Bunch
        The test run's rows (``evaluate_online(..., return_rows=True).rows``).
    seconds : float or None, default=None
        The calibration run's time, reported.

    Returns
    -------
    figures : dict
        ``alpha``: per level (keys ``"0.01"``, ``"0.05"``, ``"0.1"``)
        ``false_novel_rate``, ``power`` and their standard errors ``*_se``
        over tasks; ``bh``: ``q``, ``fdr`` (mean false discovery proportion)
        and ``power`` of Benjamini-Hochberg per task, with their ``*_se``;
        ``curve``: mean ``false_novel_rate`` and ``power`` over tasks at
        each ``alpha`` of :data:`ALPHA_GRID`; ``score`` (the column ranked),
        ``n_calibration`` (calibration scores), ``n_calibration_tasks``,
        ``n_tasks`` and ``calibration_seconds``.
    """
    known_calibration = ~np.asarray(calibration.is_first_sighting, dtype=bool)
    reference = np.asarray(calibration.score, dtype=np.float64)[known_calibration]
    pvalues = conformal_pvalues(reference, row_scores(rows))
    first = np.asarray(rows["is_novel"], dtype=bool)
    known = ~first
    task_ids, task = np.unique(rows["task_id"], return_inverse=True)
    n_tasks = task_ids.shape[0]

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
    # Benjamini-Hochberg on each task's query rows.
    order = np.argsort(task, kind="stable")
    bounds = np.cumsum(np.bincount(task, minlength=n_tasks))[:-1]
    fdp, bh_power = [], []
    for rows_of_task in np.split(order, bounds):
        selected = false_discovery_control(pvalues[rows_of_task], method="bh") <= BH_Q
        is_first = first[rows_of_task]
        fdp.append(float(np.sum(selected & ~is_first) / max(int(selected.sum()), 1)))
        bh_power.append(float(np.sum(selected & is_first) / is_first.sum())
                        if is_first.any() else np.nan)
    (fdr, fdr_se), (power, power_se) = _mean_se(fdp), _mean_se(bh_power)
    return {"score": calibration.score_name,
            "n_calibration": int(reference.shape[0]),
            "n_calibration_tasks": int(np.unique(calibration.task_id).shape[0]),
            "n_tasks": int(n_tasks),
            "calibration_seconds": None if seconds is None else float(seconds),
            "alpha": levels,
            "bh": {"q": BH_Q, "fdr": fdr, "fdr_se": fdr_se, "power": power,
                   "power_se": power_se},
            "curve": curve}
