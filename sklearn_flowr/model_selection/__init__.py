"""Cross-validation for open-world recognition."""

from ._split import OpenWorldSplit, class_disjoint_folds

__all__ = ["OpenWorldSplit", "class_disjoint_folds"]
