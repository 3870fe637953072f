"""benchmarks/novel_class_shift.py: its ratio against an independent
computation, and a run end to end on tiny digits with its default verbosity."""

import json

import numpy as np
import pytest
from scipy.linalg import eigh


@pytest.fixture(scope="module")
def script(load_benchmark_script):
    return load_benchmark_script("novel_class_shift.py")


def test_scale_ratio_is_the_mean_generalised_eigenvalue(script):
    rng = np.random.default_rng(0)
    A, B = rng.normal(size=(2, 5, 5))
    reference, covariance = A @ A.T + np.eye(5), B @ B.T + 0.1 * np.eye(5)
    expected = eigh(covariance, reference, eigvals_only=True).mean()
    assert script.scale_ratio(reference, covariance) == pytest.approx(expected)
    assert script.scale_ratio(reference, 3.0 * reference) == pytest.approx(3.0)


def test_probe_runs_on_tiny_digits(script, tmp_path, capsys):
    argv = ["--dataset", "digits", "--pretrain", "sup-e", "--tasks", "6",
            "--pretrain-epochs", "1", "--meta-epochs", "1",
            "--episodes-per-epoch", "2", "--embedding-dim", "8",
            "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path)]
    result = script.main(argv)
    stdout = capsys.readouterr().out
    assert "noise x" in stdout and "oracle" in stdout
    saved = json.loads((tmp_path / "novel_class_shift.json").read_text())
    assert saved == json.loads(json.dumps(result))
    part = saved["pretrain"]["sup-e"]
    assert part["noise_x"] > 0 and part["prior_x"] > 0
    variants = part["variants"]
    assert len(variants) == 3
    deployed, calibrated = variants["full head"], variants["full head, calibrated"]
    # The calibration map keeps the order of P(novel): ranking figures agree.
    assert calibrated["h_measure"] == pytest.approx(deployed["h_measure"])
    assert calibrated["accuracy"] == pytest.approx(deployed["accuracy"])
    for figures in variants.values():
        assert 0.0 <= figures["ece"] <= 1.0
        assert 0.0 < figures["rate_first_sightings"] < 1.0
    # A second run in this process reuses the trained encoder
    # (reuse_encoder=True) and gives the same figures.
    again = script.main([*argv[:-1], str(tmp_path / "again")])
    assert again["pretrain"]["sup-e"]["noise_x"] == pytest.approx(part["noise_x"])
