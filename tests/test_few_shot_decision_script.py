"""benchmarks/few_shot_decision.py: end to end on tiny cached features."""

import numpy as np
import pytest


@pytest.fixture(scope="module")
def script(load_benchmark_script):
    return load_benchmark_script("few_shot_decision.py")


def test_rates_follow_novelty_alpha(script, tmp_path, capsys, rng):
    """Check that each head prints a row per rows-a-class with shares in [0, 1]
    and the binomial standard error of ``--alpha``, and that a larger alpha
    calls at least as many rows novel (the same fits, a lower threshold)."""
    y = np.repeat(np.arange(12), 8)
    Z = np.abs(4.0 * rng.normal(size=(12, 20))[y] + rng.normal(size=(96, 20)))
    path = tmp_path / "feats.npz"
    np.savez(path, Z=Z, y=y)
    printed = {}
    for alpha in (0.05, 0.3):
        script.main(["--features", str(path), "--known", "8", "--rows", "4",
                     "--draws", "2", "--alpha", str(alpha)])
        lines = capsys.readouterr().out.splitlines()[1:]
        rows = [line.rsplit(None, 6) for line in lines]
        assert [row[0] for row in rows] == list(script.HEADS)
        for name, n_rows, rate, _, _, one_fit, caught in rows:
            assert n_rows == "4"
            assert 0.0 <= float(rate) <= 1.0 and 0.0 <= float(caught) <= 1.0
            n_held = 8 * 4  # the other four rows of each known class
            assert float(one_fit) == pytest.approx(
                np.sqrt(alpha * (1 - alpha) / n_held), abs=6e-4)
            printed[alpha, name] = float(rate), float(caught)
    for name in script.HEADS:
        assert printed[0.3, name][0] >= printed[0.05, name][0]
        assert printed[0.3, name][1] >= printed[0.05, name][1]
