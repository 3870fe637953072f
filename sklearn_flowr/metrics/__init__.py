"""Open-world evaluation: H-measure, log-loss, calibration, novelty detection,
class discovery, the protocol's report and a CV scorer."""

from ._calibration import (
    DEFAULT_N_BINS,
    brier_decomposition,
    classwise_calibration_error,
    expected_calibration_error,
    neg_novelty_ece_scorer,
    open_world_log_loss,
)
from ._discovery import clustering_accuracy, discovery_report
from ._h_measure import h_measure, novelty_scorer
from ._novelty import (
    false_discovery_proportion,
    false_novel_rate,
    fpr_at_tpr,
    novelty_power,
    open_auc,
    selection_power,
)
from ._open_world import novelty_threshold_at_tpr, open_world_report

__all__ = [
    "DEFAULT_N_BINS",
    "brier_decomposition",
    "classwise_calibration_error",
    "clustering_accuracy",
    "discovery_report",
    "expected_calibration_error",
    "false_discovery_proportion",
    "false_novel_rate",
    "fpr_at_tpr",
    "h_measure",
    "neg_novelty_ece_scorer",
    "novelty_power",
    "novelty_scorer",
    "novelty_threshold_at_tpr",
    "open_auc",
    "open_world_log_loss",
    "open_world_report",
    "selection_power",
]
