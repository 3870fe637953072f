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


# 20 known query classes is more than digits' 5 training classes: means all.
TINY_BENCHMARK = ["--dataset", "digits", "--lc-known-query-classes", "20",
                  "--tasks", "6", "--pretrain-epochs", "1", "--meta-epochs", "1",
                  "--episodes-per-epoch", "2",
                  "--embedding-dim", "8", "--evm-tasks", "3", "--verbose", "0"]


def test_benchmark_writes_table_json_and_roc(tmp_path, capsys):
    """Check that a tiny flowr-benchmark run prints both tables, writes the JSON
    of every (setting, pre-training, method) row and the ROC figure, and that a
    re-run loads the cached models and gives the same figures."""
    import json

    from sklearn_flowr.cli import benchmark_main

    args = [*TINY_BENCHMARK, "--out", str(tmp_path / "out"), "--cache-dir",
            str(tmp_path / "cache")]
    assert benchmark_main(args) == 0
    printed = capsys.readouterr().out
    assert "Small context" in printed and "Large context" in printed
    assert "H-measure" in printed and "Support Acc" in printed
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert (tmp_path / "out" / "roc.png").stat().st_size > 0
    for setting in ("small", "large"):
        rows = results["settings"][setting]["rows"]
        assert {(r["method"], r["pretrain"]) for r in rows} == {
            (m, p) for m in ("flowr", "ncm", "protonet", "peeler", "evm")
            for p in ("sup-e", "sup-fc")}
        assert all(r["n_tasks"] == (3 if r["method"] == "evm" else 6)
                   for r in rows)
        assert all(0.0 <= r["accuracy"] <= 1.0 for r in rows)
    models = sorted((tmp_path / "cache" / "models").iterdir())
    assert len(models) == 4  # two pre-trainings x two settings

    assert benchmark_main([*args, "--out", str(tmp_path / "again")]) == 0
    again = json.loads((tmp_path / "again" / "results.json").read_text())
    assert sorted((tmp_path / "cache" / "models").iterdir()) == models
    first_row = results["settings"]["small"]["rows"][0]
    assert again["settings"]["small"]["rows"][0]["h_measure"] == first_row[
        "h_measure"]


def test_benchmark_small_context_scales_to_small_splits():
    """Check the paper's 10 + 5 classes are kept for large splits and scaled in
    proportion for ten-class datasets."""
    from sklearn_flowr.cli._benchmark import _small_context_sizes

    assert _small_context_sizes(88) == (10, 5)
    assert _small_context_sizes(5) == (3, 2)


def test_benchmark_ablation_options(tmp_path):
    """Check --lambda-adapt keys a separately cached model and --fine-tune-steps
    evaluates FLOWR on images with a per-task fine-tuned encoder, leaving the
    baselines' figures unchanged."""
    import json

    from sklearn_flowr.cli import benchmark_main

    base = [*TINY_BENCHMARK, "--setting", "small", "--methods", "flowr", "ncm",
            "--pretrain", "sup-e", "--cache-dir", str(tmp_path / "cache")]

    def rows(*extra, out):
        assert benchmark_main([*base, *extra, "--out", str(tmp_path / out)]) == 0
        results = json.loads((tmp_path / out / "results.json").read_text())
        return {r["method"]: r for r in results["settings"]["small"]["rows"]}

    plain = rows(out="plain")
    tuned = rows("--fine-tune-steps", "3", out="tuned")
    assert len(list((tmp_path / "cache" / "models").iterdir())) == 1
    assert tuned["ncm"]["h_measure"] == plain["ncm"]["h_measure"]
    assert tuned["flowr"]["h_measure"] != plain["flowr"]["h_measure"]
    rows("--lambda-adapt", "0", out="no-adapt")
    assert len(list((tmp_path / "cache" / "models").iterdir())) == 2


def test_benchmark_rejects_negative_ablation_values():
    """Check bad ablation values stop with a usage error."""
    import pytest

    from sklearn_flowr.cli._benchmark import parse_args

    for bad in (["--lambda-adapt", "-1"], ["--fine-tune-steps", "-2"],
                ["--meta-lr", "0"]):
        with pytest.raises(SystemExit):
            parse_args(bad)


def test_model_cache_key_covers_every_parameter():
    """Check that the model cache key reads every FLOWRClassifier parameter:
    spelling out a default keeps the key, changing any parameter changes it."""
    from sklearn_flowr.cli._benchmark_setup import model_key

    assert model_key({}, "data") == model_key({"known_table": "refit"}, "data")
    assert model_key({}, "data") != model_key({"known_table": "learned"}, "data")
    assert model_key({}, "data") != model_key({}, "other data")
