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


def test_dp_means_threshold_comes_from_the_training_classes():
    """A one-shot support set has no two rows of one class: DP-means' base
    threshold is learned on the training classes in both contexts, so a
    small-context task of one-shot classes still runs."""
    from types import SimpleNamespace

    import numpy as np

    from sklearn_flowr import CRPGaussianClassifier
    from sklearn_flowr.baselines import DPMeansClassifier
    from sklearn_flowr.cli._benchmark_discovery import discovery_templates

    rng = np.random.default_rng(0)
    y_fit = np.repeat(np.arange(6), 15)
    Z_fit = rng.normal(scale=4.0, size=(6, 3))[y_fit] + rng.normal(size=(90, 3))
    model = SimpleNamespace(prior_head_=CRPGaussianClassifier(),
                            head_=CRPGaussianClassifier().fit(Z_fit, y_fit))
    trained = DPMeansClassifier().fit(Z_fit, y_fit).threshold_
    small = discovery_templates(model, "small", Z_fit, y_fit)["dp-means"]
    assert small.threshold == trained
    large = discovery_templates(model, "large", Z_fit, y_fit)["dp-means"]
    assert large.threshold_ == trained
    # One row per support class, then an unlabelled stream.
    one_shot = small.fit(Z_fit[::15], y_fit[::15])
    out = one_shot.open_world_step(Z_fit[1:40:3])
    assert out.y_assigned.shape == (13,)
