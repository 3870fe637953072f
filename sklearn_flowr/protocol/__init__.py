"""The few-shot open-world evaluation protocol (FLOWR, section 6): seeded tasks,
the online runs over them, and the choices made on validation tasks."""

from ._calibrate import calibrate_novelty, calibration_scores, small_context_sizes
from ._cross_fit import cross_fit_novelty_calibration, cross_fit_plan
from ._discovery import (
    DISCOVERY_FIGURES,
    choose_rows_to_label,
    evaluate_discovery,
    summarise_tasks,
)
from ._evaluate import evaluate_online
from ._select import select_discovery_params, select_head_params
from .sampling import LargeContextTasks, SmallContextTasks, Task

__all__ = ["DISCOVERY_FIGURES", "LargeContextTasks", "SmallContextTasks", "Task",
           "calibrate_novelty", "calibration_scores", "choose_rows_to_label",
           "cross_fit_novelty_calibration", "cross_fit_plan", "evaluate_discovery",
           "evaluate_online", "select_discovery_params", "select_head_params",
           "small_context_sizes", "summarise_tasks"]
