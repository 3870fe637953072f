"""The few-shot open-world evaluation protocol (FLOWR, section 6).

- :class:`SmallContextTasks` and :class:`LargeContextTasks` draw seeded,
  reproducible test tasks as index arrays (:class:`Task`) into the caller's
  arrays, so the protocol runs on images and on cached features alike;
- :func:`evaluate_online` runs an estimator through them (learn the support
  set, then predict-then-label along the query stream), in parallel through
  joblib, and scores the run with
  :func:`~sklearn_flowr.metrics.open_world_report`;
- :func:`evaluate_discovery` runs them with a label budget (labels for a
  share of the queries, late or never) and scores how new classes are
  discovered from the unlabelled rows;
- :func:`calibrate_novelty` fits a Platt map of P(novel) on such tasks drawn
  from labelled training classes (``novelty_calibration`` of the heads);
- :func:`cross_fit_novelty_calibration` fits it on classes held out of
  training instead, one model per class-disjoint fold;
- :func:`select_head_params` picks head hyper-parameters (e.g.
  ``noise_shrinkage``) on small-context tasks of validation classes;
- :func:`select_discovery_params` picks the thresholds of class discovery
  (e.g. ``unlabelled_threshold``) on discovery tasks of validation classes;
- :func:`choose_rows_to_label` picks the rows of an unlabelled batch to ask a
  person to label under a budget (one row of each of the largest provisional
  classes, the least certain rows, or random ones).

The meta-training episodes of :class:`~sklearn_flowr.training.EpisodeDataset`
are drawn by the same sampling code.

References
----------
.. [1] M. Willes, J. Harrison, A. Harakeh, C. Finn, M. Pavone and
   S. Waslander, "Bayesian embeddings for few-shot open world recognition",
   IEEE TPAMI, section 6.
"""

from ._calibrate import calibrate_novelty
from ._cross_fit import cross_fit_novelty_calibration, cross_fit_plan
from ._discovery import evaluate_discovery
from ._discovery_select import select_discovery_params
from ._evaluate import evaluate_online
from ._label_queries import choose_rows_to_label
from ._select import select_head_params
from ._tasks import LargeContextTasks, SmallContextTasks, Task

__all__ = ["LargeContextTasks", "SmallContextTasks", "Task", "calibrate_novelty",
           "choose_rows_to_label",
           "cross_fit_novelty_calibration", "cross_fit_plan", "evaluate_discovery",
           "evaluate_online", "select_discovery_params", "select_head_params"]
