"""Tests of the command-line entry points."""

import numpy as np

from sklearn_flowr.cli import demo_main
from sklearn_flowr.cli._demo import run_demo


def test_demo_prints_accuracy_and_h_measure(capsys):
    """Check that flowr-demo runs a few tasks and prints the headline figures."""
    assert demo_main(["--n-tasks", "3"]) == 0
    printed = capsys.readouterr().out
    assert "accuracy" in printed and "h_measure" in printed


def test_demo_is_reproducible():
    """Check that the same random_state gives the same report."""
    first = run_demo(n_tasks=4, random_state=3)
    second = run_demo(n_tasks=4, random_state=3)
    assert first.accuracy == second.accuracy
    assert np.isfinite(first.h_measure)
