"""flowr-benchmark --label-fraction: class discovery in the same run."""

import json

from sklearn_flowr.cli import benchmark_main

TINY = ["--dataset", "digits", "--max-per-class", "40", "--lc-known-query-classes",
        "20", "--tasks", "4", "--pretrain-epochs", "1", "--meta-epochs", "1",
        "--episodes-per-epoch", "2", "--embedding-dim", "8", "--verbose", "0",
        "--pretrain", "sup-e", "--methods", "flowr", "--cache-dir", ""]


def test_label_fraction_reports_discovery_rows_table_and_figure(tmp_path, capsys):
    out = tmp_path / "out"
    status = benchmark_main([*TINY, "--label-fraction", "0", "0.5",
                             "--label-delay", "2", "--out", str(out)])
    assert status == 0
    printed = capsys.readouterr().out
    results = json.loads((out / "results.json").read_text())
    for setting in ("small", "large"):
        rows = results["settings"][setting]["discovery"]
        dp = [row for row in rows if row["method"] == "dp-means"]
        assert [row["label_fraction"] for row in dp] == [0.0, 0.5]
        for row in dp:
            assert row["label_delay"] == 2 and row["n_tasks"] == 4
            assert 0.0 <= row["mean"]["accuracy_new"] <= 1.0
            assert 0.0 <= row["mean"]["known_accuracy"] <= 1.0
        # Labels two rows late: every query still comes without its label.
        assert dp[1]["n_unlabelled"] == dp[0]["n_unlabelled"] > 0
        # Thresholds cross-fitted over two halves of the five test classes:
        # each half scored with the choice on the other, never on itself.
        test_classes = set(range(10, 15))
        for row in rows:
            first, second = row["selection"]["halves"]
            assert set(first["classes"]) | set(second["classes"]) == test_classes
            assert first["validation_classes"] == second["classes"]
            assert second["validation_classes"] == first["classes"]
            assert not set(first["classes"]) & set(second["classes"])
            assert first["n_tasks"] + second["n_tasks"] == row["n_tasks"] == 4
    # The tables say how the thresholds were chosen.
    assert " ".join(printed.split()).count(
        "the candidate best on the other half's tasks (cross-fit") == 2
    assert printed.count("class discovery under a label budget") == 2
    assert (out / "discovery.png").stat().st_size > 0


def test_without_label_fraction_no_discovery(tmp_path):
    out = tmp_path / "out"
    assert benchmark_main([*TINY, "--setting", "small", "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    assert "discovery" not in results["settings"]["small"]
    assert not (out / "discovery.png").exists()
