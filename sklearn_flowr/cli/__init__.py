"""Command-line entry points (``flowr-demo``, ``flowr-benchmark``)."""

from ._benchmark import main as benchmark_main
from ._demo import main as demo_main

__all__ = ["benchmark_main", "demo_main"]
