"""Open-world evaluation: H-measure, log-loss, calibration, report, a CV scorer."""

from ._calibration import expected_calibration_error
from ._h_measure import h_measure
from ._log_loss import open_world_log_loss
from ._open_world import novelty_threshold_at_tpr, open_world_report
from ._scorer import novelty_scorer

__all__ = [
    "expected_calibration_error",
    "h_measure",
    "novelty_scorer",
    "novelty_threshold_at_tpr",
    "open_world_log_loss",
    "open_world_report",
]
