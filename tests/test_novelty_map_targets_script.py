"""benchmarks/novelty_map_targets.py: run end to end on tiny digits with its
default verbosity; its Platt-target map is the benchmark's flowr-full-cal."""

import json

import pytest


def test_comparison_runs_on_tiny_digits(load_benchmark_script, tmp_path, capsys):
    script = load_benchmark_script("novelty_map_targets.py")
    base = ["--dataset", "digits", "--pretrain", "sup-e", "--tasks", "6",
            "--pretrain-epochs", "1", "--meta-epochs", "1",
            "--episodes-per-epoch", "2", "--embedding-dim", "8",
            "--cache-dir", str(tmp_path / "cache")]
    # A non-default head (--prior-scale, --noise-shrinkage) is the benchmark's.
    base = [*base, "--prior-scale", "1.5", "--noise-shrinkage", "0.2"]
    result = script.main([*base, "--out", str(tmp_path)])
    stdout = capsys.readouterr().out
    assert "ECE / Brier of P(novel)" in stdout and "platt" in stdout
    saved = json.loads((tmp_path / "novelty_map_targets.json").read_text())
    assert saved == json.loads(json.dumps(result))
    from sklearn_flowr.cli import benchmark_main
    assert benchmark_main([*base, "--methods", "flowr-full", "flowr-full-cal",
                           "--out", str(tmp_path / "bench")]) == 0
    bench = json.loads((tmp_path / "bench" / "results.json").read_text())
    for setting in ("small", "large"):
        part = saved["settings"][setting]["sup-e"]
        rows = {r["method"]: r for r in bench["settings"][setting]["rows"]}
        # Same calibration rows, same test tasks: the Platt map is the one
        # the benchmark's flowr-full-cal row carries, with its ECE.
        assert rows["flowr-full-cal"]["novelty_calibration"] == pytest.approx(
            [part["platt"]["slope"], part["platt"]["intercept"]])
        assert rows["flowr-full-cal"]["ece"] == pytest.approx(part["platt"]["ece"])
        assert rows["flowr-full"]["ece"] == pytest.approx(part["unmapped"]["ece"])
        assert rows["flowr-full-cal"]["brier"] == pytest.approx(
            part["platt"]["brier"])
        for targets in ("hard", "platt"):
            assert part[targets]["slope"] > 0
            assert 0.0 <= part[targets]["ece"] <= 1.0
