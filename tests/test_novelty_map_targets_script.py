"""benchmarks/novelty_map_targets.py: run end to end on tiny digits with its
default verbosity; its head options reach the full head, and its unmapped
head is flowr-benchmark's flowr row without a novelty map."""

import json

import pytest


def test_comparison_runs_on_tiny_digits(load_benchmark_script, tmp_path, capsys):
    script = load_benchmark_script("novelty_map_targets.py")
    base = ["--dataset", "digits", "--pretrain", "sup-e", "--tasks", "6",
            "--pretrain-epochs", "1", "--meta-epochs", "1",
            "--episodes-per-epoch", "2", "--embedding-dim", "8",
            "--cache-dir", str(tmp_path / "cache")]
    # A non-default head (head__noise_shrinkage).
    result = script.main([*base, "--noise-shrinkage", "0.2", "--calibration-tasks",
                          "20", "--out", str(tmp_path)])
    stdout = capsys.readouterr().out
    assert "ECE / Brier of P(novel)" in stdout and "platt" in stdout
    saved = json.loads((tmp_path / "novelty_map_targets.json").read_text())
    assert saved == json.loads(json.dumps(result))
    # The default head on the same encoder (reused: this process trained it).
    default = script.main([*base, "--calibration-tasks", "20", "-q",
                           "--out", str(tmp_path / "default")])
    for setting in ("small", "large"):
        part = saved["settings"][setting]["sup-e"]
        assert isinstance(part["separated"], bool)
        for targets in ("hard", "platt"):
            assert part[targets]["slope"] > 0
            assert 0.0 <= part[targets]["ece"] <= 1.0
            assert 0.0 <= part[targets]["brier"] <= 1.0
        other = default["settings"][setting]["sup-e"]
        assert other["unmapped"]["ece"] != pytest.approx(part["unmapped"]["ece"])
    # Same data, model and test tasks as flowr-benchmark: its flowr row
    # without the map is the unmapped head here.
    from sklearn_flowr.cli import benchmark_main
    assert benchmark_main([*base, "--methods", "flowr", "--set", "calibration=None",
                           "--set", "head__noise_shrinkage=0.2", "-q",
                           "--out", str(tmp_path / "bench")]) == 0
    bench = json.loads((tmp_path / "bench" / "results.json").read_text())
    for setting in ("small", "large"):
        row = bench["settings"][setting]["rows"][0]
        part = saved["settings"][setting]["sup-e"]
        assert row["ece"] == pytest.approx(part["unmapped"]["ece"])
        assert row["brier"] == pytest.approx(part["unmapped"]["brier"])
