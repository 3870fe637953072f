"""Cross-validation for open-world recognition."""

from ._split import OpenWorldSplit

__all__ = ["OpenWorldSplit"]
