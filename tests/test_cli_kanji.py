"""Tests of ``flowr-benchmark --dataset kanji``."""

import contextlib
import importlib.metadata
import io
import json

import numpy as np
import pytest

from sklearn_flowr.cli import benchmark_main
from sklearn_flowr.cli._benchmark_parser import parse_args
from sklearn_flowr.cli._benchmark_setup import load_benchmark_data


@pytest.fixture
def kanjivg():
    """Skip without the KanjiVG package (it installs data, no module)."""
    try:
        return importlib.metadata.distribution("kanjivg")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("the kanji extra (kanjivg) is not installed")


@pytest.mark.slow
def test_benchmark_runs_on_kanji(kanjivg, tmp_path):
    """Check that a tiny kanji run prints both tables and records the data."""
    args = ["--dataset", "kanji", "--kanji-classes", "40", "--kanji-instances", "20",
            "--methods", "flowr", "ncm", "--pretrain", "sup-e", "--tasks", "3",
            "--lc-known-query-classes", "5", "--pretrain-epochs", "1",
            "--meta-epochs", "1", "--episodes-per-epoch", "2", "--embedding-dim",
            "8", "--verbose", "0", "--out", str(tmp_path / "out"), "--cache-dir",
            str(tmp_path / "cache")]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert benchmark_main(args) == 0
    assert "Small context" in printed.getvalue()
    assert "Large context" in printed.getvalue()
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["dataset"]["name"] == "kanji"
    assert results["dataset"]["n_train_classes"] > results["dataset"][
        "n_test_classes"] > 0
    assert list((tmp_path / "cache" / "data").glob("kanji-*.npz"))


@pytest.mark.slow
def test_kanji_defaults_give_the_paper_protocols(kanjivg):
    """Check that the default kanji data give the small context its 10 + 5
    test classes and the large context hundreds of known-known classes."""
    data = load_benchmark_data("kanji", kanji_instances=2)
    n_train = np.unique(data.y_train).shape[0]
    n_test = np.unique(data.y_test).shape[0]
    assert n_train >= 500 and n_test >= 15
    assert np.intersect1d(data.y_train, data.y_test).size == 0
    assert data.X_train.dtype == np.float32 and data.X_train.max() <= 1.0


def test_kanji_options_parse_and_validate(capsys):
    """Check the kanji options' defaults and their range check."""
    args = parse_args(["--dataset", "kanji", "--quick"])
    assert (args.dataset, args.kanji_classes, args.kanji_instances) == (
        "kanji", 1000, 20)
    with pytest.raises(SystemExit):
        parse_args(["--dataset", "kanji", "--kanji-classes", "10"])
    assert "must be an integer >= 20" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse_args(["--dataset", "kanji", "--kanji-instances", "5"])
    assert "10 shots and 10 queries" in capsys.readouterr().err
