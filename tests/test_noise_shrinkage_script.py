"""benchmarks/noise_shrinkage.py: run end to end on tiny digits with its
default verbosity; the unshrunk sweep entry is flowr-benchmark's flowr row
(FLOWRClassifier's default head)."""

import json

import numpy as np
import pytest


@pytest.fixture(scope="module")
def script(load_benchmark_script):
    return load_benchmark_script("noise_shrinkage.py")


def test_class_halves_are_disjoint_and_cover_the_classes(script):
    y = np.repeat(np.arange(7), 3)
    first, second = script.class_halves(y, seed=0)
    assert set(first).isdisjoint(second)
    assert sorted([*first, *second]) == list(range(7))
    assert (len(first), len(second)) == (3, 4)


def test_bad_shrinkages_are_refused(script):
    with pytest.raises(SystemExit):
        script.main(["--shrinkages", "0.1", "2"])


def test_probe_runs_on_tiny_digits(script, tmp_path, capsys):
    base = ["--dataset", "digits", "--pretrain", "sup-e", "--tasks", "6",
            "--pretrain-epochs", "1", "--meta-epochs", "1",
            "--episodes-per-epoch", "2", "--embedding-dim", "8",
            "--cache-dir", str(tmp_path / "cache")]
    result = script.main([*base, "--shrinkages", "0.5", "--min-half-classes", "2",
                          "--out", str(tmp_path)])
    stdout = capsys.readouterr().out
    assert "shrinkage 0.50" in stdout and "other half: chosen" in stdout
    saved = json.loads((tmp_path / "noise_shrinkage.json").read_text())
    assert saved == json.loads(json.dumps(result))
    assert result["shrinkages"] == [0.0, 0.5]  # 0 is always measured
    for setting in ("small", "large"):
        part = saved["settings"][setting]["sup-e"]
        sweep = part["sweep"]
        assert set(sweep) == {"0.0", "0.5"}
        for figures in sweep.values():
            assert 0.0 <= figures["h_measure"] <= 1.0
            assert 0.0 <= figures["ece"] <= 1.0
        assert part["ncm_same_embedding"]["ece"] is None
        folds = part["chosen_on_other_half"]
        assert len(folds) == 2
        for fold in folds:
            assert fold["chosen"] in (0.0, 0.5)
            if fold["chosen"] == 0.0:
                assert fold["chosen_head"] == fold["unshrunk_head"]
    # Same data, model and tasks as flowr-benchmark: its flowr row
    # (FLOWRClassifier's default head; its novelty map keeps the order of
    # P(novel), so the H-measure and the fixed-TPR accuracy do not move) and
    # NCM on the same embedding are the unshrunk sweep entry and NCM here.
    from sklearn_flowr.cli import benchmark_main
    assert benchmark_main([*base, "--methods", "flowr", "ncm-flowr-emb",
                           "--out", str(tmp_path / "bench")]) == 0
    bench = json.loads((tmp_path / "bench" / "results.json").read_text())
    for setting in ("small", "large"):
        rows = {r["method"]: r for r in bench["settings"][setting]["rows"]}
        part = saved["settings"][setting]["sup-e"]
        assert part["sweep"]["0.0"]["h_measure"] == pytest.approx(
            rows["flowr"]["h_measure"])
        assert part["sweep"]["0.0"]["accuracy"] == pytest.approx(
            rows["flowr"]["accuracy"])
        assert part["ncm_same_embedding"]["h_measure"] == pytest.approx(
            rows["ncm-flowr-emb"]["h_measure"])
