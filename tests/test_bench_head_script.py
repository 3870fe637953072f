"""benchmarks/bench_head.py: each row says whether it meets its goal."""

import pytest


@pytest.mark.parametrize(("value", "goal", "met"), [
    (10.54, "<= 10x", False),
    (9.99, "<= 10x", True),
    (10.0, "<= 10x", True),
    (40.1, ">= 20x", True),
    (19.9, ">= 20x", False),
    (12.5, "<= 50 ms", True),
    (64.0, "<= 50 ms", False),
    (3.2, "(info)", None),
])
def test_goal_met_reads_the_bound_and_its_direction(load_benchmark_script,
                                                    value, goal, met):
    """Check a goal's bound and direction decide the verdict; info rows have
    none."""
    assert load_benchmark_script("bench_head.py").goal_met(value, goal) is met


def test_report_prints_missed_for_a_missed_goal(load_benchmark_script, capsys):
    """Check a missed goal is printed as MISSED, a met one as met."""
    bench = load_benchmark_script("bench_head.py")
    bench.report("step, N=100", 10.54, "<= 10x")
    bench.report("step, N=10k", 1.32, "<= 3x")
    missed, met = capsys.readouterr().out.splitlines()
    assert missed.endswith("goal <= 10x   MISSED")
    assert met.endswith("goal <= 3x   met")
