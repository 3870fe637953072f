"""Command-line entry points (``flowr-demo``)."""

from ._demo import main as demo_main

__all__ = ["demo_main"]
