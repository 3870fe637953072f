"""Open-world evaluation: H-measure, the paper's report, and a CV scorer."""

from ._h_measure import h_measure
from ._open_world import novelty_threshold_at_tpr, open_world_report
from ._scorer import novelty_scorer

__all__ = [
    "h_measure",
    "novelty_scorer",
    "novelty_threshold_at_tpr",
    "open_world_report",
]
