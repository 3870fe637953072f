"""Cross-validation for open-world recognition."""

from ._split import OpenWorldSplit, class_disjoint_folds
from ._split import check_row_indices as check_row_indices  # for the protocol

__all__ = ["OpenWorldSplit", "class_disjoint_folds"]
