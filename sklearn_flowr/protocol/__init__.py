"""The few-shot open-world evaluation protocol (FLOWR, section 6).

Seeded tasks (:class:`SmallContextTasks`, :class:`LargeContextTasks`) as index
arrays into the caller's data; :func:`evaluate_online` and
:func:`evaluate_discovery` run an estimator through them; the calibration of
P(novel) (:func:`calibrate_novelty`, :func:`cross_fit_novelty_calibration`)
and the choice of head and discovery parameters on validation classes
(:func:`select_head_params`, :func:`select_discovery_params`) run on such
tasks; :func:`choose_rows_to_label` spends a label budget. Meta-training's
episodes are drawn by the same :mod:`~sklearn_flowr.protocol.sampling` code.

References
----------
.. [1] M. Willes, J. Harrison, A. Harakeh, C. Finn, M. Pavone and
   S. Waslander, "Bayesian embeddings for few-shot open world recognition",
   IEEE TPAMI, section 6.
"""

from ._calibrate import calibrate_novelty, calibration_scores, small_context_sizes
from ._cross_fit import cross_fit_novelty_calibration, cross_fit_plan
from ._discovery import DISCOVERY_FIGURES, evaluate_discovery, summarise_tasks
from ._discovery_select import select_discovery_params
from ._evaluate import evaluate_online
from ._label_queries import choose_rows_to_label
from ._select import select_head_params
from ._tasks import LargeContextTasks, SmallContextTasks, Task

__all__ = ["DISCOVERY_FIGURES", "LargeContextTasks", "SmallContextTasks", "Task",
           "calibrate_novelty", "calibration_scores", "choose_rows_to_label",
           "cross_fit_novelty_calibration", "cross_fit_plan", "evaluate_discovery",
           "evaluate_online", "select_discovery_params", "select_head_params",
           "small_context_sizes", "summarise_tasks"]
