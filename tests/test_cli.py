"""Tests of the command-line entry points."""

import contextlib
import io
import itertools
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from sklearn_flowr.cli import benchmark_main, demo_main
from sklearn_flowr.cli._benchmark_parser import parse_args
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
TINY_BENCHMARK = ["--dataset", "digits", "--max-per-class", "40",
                  "--lc-known-query-classes", "20", "--tasks", "6",
                  "--pretrain-epochs", "1", "--meta-epochs", "1",
                  "--episodes-per-epoch", "2", "--embedding-dim", "8",
                  "--evm-tasks", "3", "--verbose", "0"]
ALL_METHODS = ("flowr", "flowr-no-meta", "ncm-flowr-emb", "ncm", "protonet",
               "peeler", "evm")


def _run(args):
    """benchmark_main(args) with its tables captured: (status, printed)."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        status = benchmark_main(args)
    return status, printed.getvalue()


def _results(out):
    return json.loads((Path(out) / "results.json").read_text())


def _recording(function, calls):
    """``function``, appending ``(args, kwargs, result)`` of each call to
    ``calls``."""
    def wrapper(*args, **kwargs):
        result = function(*args, **kwargs)
        calls.append((args, kwargs, result))
        return result
    return wrapper


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """One tiny flowr-benchmark run of every method (Sup-E pre-training),
    shared by the tests that only read its output: (arguments, printed text,
    results, folder, calls). ``calls`` records, in the order of the rows, the
    test runs (``evaluate_online``) and conformal calibration runs
    (``calibration_scores``) of the command line."""
    from sklearn_flowr.cli import _benchmark as _benchmark_run

    tmp_path = tmp_path_factory.mktemp("benchmark")
    args = [*TINY_BENCHMARK, "--pretrain", "sup-e", "--methods",
            *ALL_METHODS, "--out", str(tmp_path / "out"), "--cache-dir",
            str(tmp_path / "cache")]
    calls = {"test": [], "calibration": []}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_benchmark_run, "evaluate_online",
                      _recording(_benchmark_run.evaluate_online, calls["test"]))
        patch.setattr(_benchmark_run, "calibration_scores",
                      _recording(_benchmark_run.calibration_scores,
                                 calls["calibration"]))
        status, printed = _run(args)
    assert status == 0
    return args, printed, _results(tmp_path / "out"), tmp_path, calls


def test_benchmark_writes_table_json_and_roc(tiny_run):
    """Check that a tiny run prints both tables, writes the JSON of every
    (setting, pre-training, method) row and of every model's parameters, and
    the figure; and that nothing but data is cached (no model files)."""
    _, printed, results, tmp_path, _ = tiny_run
    assert "Small context" in printed and "Large context" in printed
    assert "H-measure" in printed and "Support Acc" in printed
    assert (tmp_path / "out" / "roc.png").stat().st_size > 0
    for setting in ("small", "large"):
        result = results["settings"][setting]
        assert {(r["method"], r["pretrain"]) for r in result["rows"]} == set(
            itertools.product(ALL_METHODS, ("sup-e",)))
        assert all(r["n_tasks"] == (3 if r["method"] == "evm" else 6)
                   for r in result["rows"])
        assert all(0.0 <= r["accuracy"] <= 1.0 for r in result["rows"])
        # FLOWRClassifier's defaults and the run's options, as fitted.
        model = result["models"]["sup-e"]
        assert model["setting"] == setting
        assert (model["head__covariance"], model["calibration"]) == ("full",
                                                                     "train")
        assert (model["pretrain__epochs"], model["meta__epochs"],
                model["embedding_dim"], model["random_state"]) == (1, 1, 8, 0)
        assert model["pretrain"].startswith("SupE(")
        assert result["models"]["sup-e/no-meta"]["meta"] is None
    assert not [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]


def test_benchmark_reports_calibration_and_ablation(tiny_run):
    """Check FLOWR's rows (with and without meta-training) carry the
    calibration of P(novel) and the argmax accuracy, the distances' rows say
    n/a (null in the JSON), and every table ends with the ablation."""
    _, printed, results, _, _ = tiny_run
    assert results["calibration"]["n_bins"] == 15
    for setting, pretrain in itertools.product(("small", "large"), ("sup-e",)):
        result = results["settings"][setting]
        rows = {r["method"]: r for r in result["rows"]
                if r["pretrain"] == pretrain}
        assert rows["flowr"]["embedding"] == "meta-trained"
        assert rows["ncm-flowr-emb"]["embedding"] == "meta-trained"
        assert rows["flowr-no-meta"]["embedding"] == "pre-trained"
        for method in ("flowr", "flowr-no-meta"):
            row = rows[method]
            assert row["probability"] is True
            assert 0.0 <= row["ece"] <= 1.0 and 0.0 <= row["brier"] <= 1.0
            assert 0.0 <= row["argmax_accuracy"] <= 1.0
            assert sum(row["reliability"]["count"]) > 0
        for method in ("ncm-flowr-emb", "ncm", "protonet", "peeler", "evm"):
            row = rows[method]
            assert row["probability"] is False
            assert row["ece"] is row["brier"] is row["argmax_accuracy"] is None
        (entry,) = [e for e in result["ablation"] if e["pretrain"] == pretrain]
        assert entry["meta_training"]["h_measure_gain"] == (
            rows["flowr"]["h_measure"] - rows["flowr-no-meta"]["h_measure"])
        assert entry["head_vs_distance"]["accuracy_gain"] == (
            rows["flowr"]["accuracy"] - rows["ncm-flowr-emb"]["accuracy"])
    # The rows of the main tables (the conformal tables follow them).
    table, in_main_table = [], False
    for line in printed.splitlines():
        if "context (accuracies" in line or "conformal novelty decision" in line:
            in_main_table = "context (accuracies" in line
        elif in_main_table and line.startswith(("FLOWR", "NCM", "ProtoNet",
                                                "PEELER", "EVM")):
            table.append(line)
    assert len(table) == 14  # seven methods x two settings
    for line in table:
        n_na = line.split().count("n/a")
        assert n_na == (0 if line.startswith("FLOWR") else 3), line
    assert printed.count("n/a (no probability)") == 2
    assert printed.count("Ablation sup-e: meta-training vs none") == 2
    assert printed.count("FLOWR head vs NCM on the same embedding") == 2


_LEVELS = ("0.01", "0.05", "0.1")


def _in_unit_interval(value):
    return value is not None and np.isfinite(value) and 0.0 <= value <= 1.0


def test_benchmark_reports_conformal_figures(tiny_run):
    """Check every (setting, method) row carries the conformal novelty
    decision: false-novel rate and power at alpha 0.01, 0.05, 0.1 (finite,
    in [0, 1], the rate non-decreasing in alpha), Benjamini-Hochberg's FDR and
    power at q = 0.05, 0.1 and 0.2, the curve the figure draws, and a
    calibration set from the other test tasks (the default); and that the
    printed conformal tables list every row."""
    _, printed, results, _, calls = tiny_run
    assert calls["calibration"] == []  # no run on the training classes
    for setting in ("small", "large"):
        for row in results["settings"][setting]["rows"]:
            figures = row["conformal"]
            assert figures["calibration"] == "tasks"
            assert figures["n_calibration"] > 0
            assert figures["n_calibration_tasks"] == row["n_tasks"] - 1
            assert figures["n_tasks"] == row["n_tasks"]
            assert figures["score"] == ("novelty_score" if row["probability"]
                                        else "p_novel")
            assert figures["calibration_seconds"] is None
            rates = []
            for level in _LEVELS:
                cell = figures["alpha"][level]
                for key in ("false_novel_rate", "false_novel_rate_se", "power",
                            "power_se"):
                    assert _in_unit_interval(cell[key]), (row["method"], key)
                rates.append(cell["false_novel_rate"])
            assert rates == sorted(rates), (setting, row["method"], rates)
            assert figures["bh"] == figures["bh_levels"]["0.1"]
            for q in ("0.05", "0.1", "0.2"):
                bh = figures["bh_levels"][q]
                assert bh["q"] == float(q)
                for key in ("fdr", "fdr_se", "power", "power_se"):
                    assert _in_unit_interval(bh[key]), (row["method"], key)
            curve = figures["curve"]
            assert curve["alpha"][0] == 0.01 and curve["alpha"][-1] == 0.3
            assert np.all(np.diff(curve["false_novel_rate"]) >= 0)
            for level in _LEVELS:
                assert curve["false_novel_rate"][curve["alpha"].index(
                    float(level))] == figures["alpha"][level]["false_novel_rate"]
    assert printed.count("conformal novelty decision") == 2
    assert printed.count("FNR@0.05") == 2


def _brute_force_figures(row, pvalues, report):
    """Check ``row``'s conformal figures against per-task metrics of
    ``pvalues`` computed by the package's metrics and scipy."""
    from scipy.stats import false_discovery_control

    from sklearn_flowr.metrics import (
        false_discovery_proportion,
        false_novel_rate,
        novelty_power,
        selection_power,
    )

    def mean_se(values):
        values = np.asarray(values)
        return values.mean(), values.std(ddof=1) / np.sqrt(values.shape[0])

    by_task = [report.rows.task_id == task
               for task in np.unique(report.rows.task_id)]
    first = report.rows.is_novel
    for level in _LEVELS:
        cell = row["conformal"]["alpha"][level]
        fnr = mean_se([false_novel_rate(first[t], pvalues[t], float(level))
                       for t in by_task])
        power = mean_se([novelty_power(first[t], pvalues[t], float(level))
                         for t in by_task])
        assert (cell["false_novel_rate"], cell["false_novel_rate_se"]) == (
            pytest.approx(fnr[0], abs=1e-12), pytest.approx(fnr[1], abs=1e-12))
        assert (cell["power"], cell["power_se"]) == (
            pytest.approx(power[0], abs=1e-12),
            pytest.approx(power[1], abs=1e-12))
    for q in (0.05, 0.1, 0.2):
        selected = [false_discovery_control(pvalues[t], method="bh") <= q
                    for t in by_task]
        fdr = mean_se([false_discovery_proportion(first[t], s)
                       for t, s in zip(by_task, selected, strict=True)])
        power = mean_se([selection_power(first[t], s)
                         for t, s in zip(by_task, selected, strict=True)])
        bh = row["conformal"]["bh_levels"][str(q)]
        assert (bh["fdr"], bh["fdr_se"], bh["power"], bh["power_se"]) == (
            pytest.approx(fdr[0], abs=1e-12), pytest.approx(fdr[1], abs=1e-12),
            pytest.approx(power[0], abs=1e-12), pytest.approx(power[1], abs=1e-12))


def test_benchmark_conformal_figures_match_a_recomputation(tiny_run):
    """Check the conformal figures of every row against an independent
    computation from the rows of the runs the command line made: each task's
    calibration set is the scores of the rows of the OTHER tasks that are
    not first sightings; p-values by brute force; the false-novel rate,
    power, FDP and BH selection per task by the package's metrics and scipy,
    then mean and standard error over tasks."""
    _, _, results, _, calls = tiny_run
    rows = [row for setting in ("small", "large")
            for row in results["settings"][setting]["rows"]]
    assert len(calls["test"]) == len(rows) == 14
    for row, test_call in zip(rows, calls["test"], strict=True):
        report = test_call[2]
        scores = np.asarray(report.rows.get("novelty_score",
                                            report.rows.p_novel))
        task, known = report.rows.task_id, ~report.rows.is_novel
        pvalues = np.empty(scores.shape[0])
        for i in range(scores.shape[0]):
            reference = scores[known & (task != task[i])]
            pvalues[i] = (1 + np.sum(reference >= scores[i])) / (
                reference.shape[0] + 1)
        _brute_force_figures(row, pvalues, report)


def test_benchmark_conformal_calibration_on_training_classes(tmp_path):
    """Check ``--conformal-calibration training``: one calibration run per
    row, on the training (fit) classes only, whose known-class scores are
    every test row's calibration set (brute-force p-values and figures)."""
    from sklearn_flowr.cli import _benchmark as _benchmark_run

    args = [*TINY_BENCHMARK, "--pretrain", "sup-e", "--methods", "flowr",
            "ncm", "--conformal-calibration", "training", "--out",
            str(tmp_path / "out"), "--cache-dir", ""]
    calls = {"test": [], "calibration": []}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_benchmark_run, "evaluate_online",
                      _recording(_benchmark_run.evaluate_online, calls["test"]))
        patch.setattr(_benchmark_run, "calibration_scores",
                      _recording(_benchmark_run.calibration_scores,
                                 calls["calibration"]))
        status, printed = _run(args)
    assert status == 0
    results = _results(tmp_path / "out")
    rows = [row for setting in ("small", "large")
            for row in results["settings"][setting]["rows"]]
    assert len(calls["test"]) == len(calls["calibration"]) == len(rows) == 4
    assert "calibration tasks drawn from the training classes" in " ".join(
        printed.split())
    for row, test_call, calibration_call in zip(
            rows, calls["test"], calls["calibration"], strict=True):
        report, calibration = test_call[2], calibration_call[2]
        assert row["conformal"]["calibration"] == "training"
        assert row["conformal"]["n_calibration_tasks"] == row["n_tasks"]
        y_fit = calibration_call[0][2]  # calibration_scores(template, X, y, ...)
        # The calibration tasks draw from the training (fit) classes only,
        # and the test tasks have classes the calibration never saw.
        assert np.isin(calibration.y_true, np.unique(y_fit)).all()
        assert not np.isin(report.rows.y_true, np.unique(y_fit)).all()
        reference = calibration.score[~calibration.is_novel]
        assert reference.shape[0] == row["conformal"]["n_calibration"]
        scores = report.rows.get("novelty_score", report.rows.p_novel)
        pvalues = ((1 + (reference[None, :] >= scores[:, None]).sum(axis=1))
                   / (reference.shape[0] + 1))
        _brute_force_figures(row, pvalues, report)


def test_benchmark_model_is_the_default_estimator():
    """Check that, without options, the run's model is FLOWRClassifier() with
    its defaults (the setting and seed aside): the CLI evaluates what users
    build; --pretrain picks the stage."""
    from sklearn_flowr import FLOWRClassifier
    from sklearn_flowr.cli._benchmark_model import build_model, describe_model

    args = parse_args([])
    built = build_model(args, "large", "sup-e")
    assert describe_model(built) == describe_model(
        FLOWRClassifier(setting="large", random_state=0))
    assert build_model(args, "small", "sup-fc").pretrain.__class__.__name__ == (
        "SupFC")
    assert build_model(args, "small", "none").pretrain is None
    assert build_model(args, "small", "sup-e", meta=False).meta is None
    # A shared default part is never changed by the run.
    assert FLOWRClassifier().meta.epochs == 10


def test_benchmark_templates_are_the_fitted_heads():
    """Check FLOWR is evaluated through the fitted model's own heads: the
    prior head in the small context, the head knowing the training classes in
    the large one."""
    from types import SimpleNamespace

    from sklearn_flowr.cli._benchmark_model import method_template

    model = SimpleNamespace(prior_head_=object(), head_=object())
    for method in ("flowr", "flowr-no-meta"):
        assert method_template(method, "small", model, None, None) is (
            model.prior_head_)
        assert method_template(method, "large", model, None, None) is model.head_


def test_benchmark_small_context_scales_to_small_splits():
    """Check the paper's 10 + 5 classes are kept for large splits and scaled in
    proportion for ten-class datasets."""
    from sklearn_flowr.protocol import small_context_sizes

    assert small_context_sizes(88) == (10, 5)
    assert small_context_sizes(5) == (3, 2)


# ----------------------------------------------------------------- --data npz
def _blobs(classes, rng, n=24, d=6):
    centres = rng.normal(scale=3.0, size=(len(classes), d))
    y = np.repeat(classes, n)
    X = centres[np.repeat(np.arange(len(classes)), n)] + rng.normal(
        size=(y.shape[0], d))
    return X.astype(np.float32), y


@pytest.fixture(scope="module")
def npz_arrays():
    """Four training and four test classes of 6-d features, 24 rows each."""
    rng = np.random.default_rng(0)
    X_train, y_train = _blobs(np.arange(4), rng)
    X_test, y_test = _blobs(np.arange(4, 8), rng)
    return dict(X_train=X_train, y_train=y_train, X_test=X_test, y_test=y_test)


# The mlp reads the features; a tiny budget, and episodes that fit 4 classes.
NPZ_BASE = ["--backbone", "mlp", "--tasks", "3", "--pretrain", "sup-e",
            "--pretrain-epochs", "1", "--meta-epochs", "1",
            "--episodes-per-epoch", "2", "--embedding-dim", "4",
            "--set", "meta__n_way=2", "--verbose", "0", "--cache-dir", ""]
TINY_NPZ = [*NPZ_BASE, "--set", "meta__n_unknown=1"]


@pytest.fixture
def npz_file(tmp_path, npz_arrays):
    path = tmp_path / "blobs.npz"
    np.savez(path, **npz_arrays)
    return path


@pytest.fixture
def fit_spy(monkeypatch):
    """Record the parameters of every FLOWRClassifier.fit or fit_transform
    (then run it)."""
    from sklearn_flowr import FLOWRClassifier

    fits = []

    def recording(original):
        def spy(self, X, y):
            fits.append(self.get_params(deep=True))
            return original(self, X, y)
        return spy

    for name in ("fit", "fit_transform"):
        monkeypatch.setattr(FLOWRClassifier, name,
                            recording(getattr(FLOWRClassifier, name)))
    return fits


def test_data_npz_runs_with_set_overrides(npz_file, tmp_path, fit_spy):
    """Check --data x.npz runs end to end on features (mlp backbone) and
    --set reaches the fitted model through set_params, after the options
    (--meta-epochs 1 then --set meta__epochs=2) and recorded in the JSON."""
    out = tmp_path / "out"
    status, printed = _run([
        "--data", str(npz_file), *TINY_NPZ, "--methods", "flowr",
        "flowr-no-meta", "ncm", "--set", "head__covariance=isotropic",
        "--set", "calibration=None", "--set", "head__a=0.25",
        "--set", "meta__lambda_adapt=0.0", "--set", "meta__epochs=2",
        "--out", str(out)])
    assert status == 0 and "Small context" in printed
    results = _results(out)
    assert results["dataset"] == {"name": "blobs.npz", "n_train_classes": 4,
                                  "n_test_classes": 4}
    assert results["args"]["set"][-3] == "head__a=0.25"
    # Two contexts x (the model and its no-meta twin).
    assert len(fit_spy) == 4
    with_meta = [p for p in fit_spy if p["meta"] is not None]
    assert len(with_meta) == 2
    for params in with_meta:
        assert params["head__covariance"] == "isotropic"
        assert params["calibration"] is None and params["head__a"] == 0.25
        assert params["meta__lambda_adapt"] == 0.0 and params["meta__epochs"] == 2
        assert params["backbone"] == "mlp" and params["meta__n_way"] == 2
    recorded = results["settings"]["large"]["models"]["sup-e"]
    assert recorded["head__a"] == 0.25 and recorded["calibration"] is None
    assert recorded["meta__epochs"] == 2
    assert results["settings"]["large"]["models"]["sup-e/no-meta"][
        "head__covariance"] == "isotropic"
    rows = {r["method"] for r in results["settings"]["small"]["rows"]}
    assert rows == {"flowr", "flowr-no-meta", "ncm"}


def test_fine_tune_steps_evaluate_flowr_on_images(npz_file, tmp_path):
    """Check --fine-tune-steps streams FLOWR through the model itself (a
    per-task fine-tuned encoder) and leaves the baselines' figures unchanged;
    the second run reuses the first one's encoder (same process)."""
    base = ["--data", str(npz_file), *TINY_NPZ, "--setting", "small",
            "--methods", "flowr", "ncm"]

    def rows(*extra, out):
        assert _run([*base, *extra, "--out", str(tmp_path / out)])[0] == 0
        results = _results(tmp_path / out)
        return results, {r["method"]: r for r in results["settings"]["small"][
            "rows"]}

    _, plain = rows(out="plain")
    tuned_results, tuned = rows("--fine-tune-steps", "3", out="tuned")
    assert tuned_results["settings"]["small"]["models"]["sup-e"][
        "fine_tune_steps"] == 3
    assert tuned["ncm"]["h_measure"] == plain["ncm"]["h_measure"]
    assert tuned["flowr"]["h_measure"] != plain["flowr"]["h_measure"]


def _refuse(*args, **kwargs):
    raise AssertionError("the run went past its checks")


@pytest.fixture
def nothing_runs(monkeypatch):
    """Make training (and, with --set, data loading) fail: a usage error must
    come first."""
    from sklearn_flowr import FLOWRClassifier
    from sklearn_flowr.cli import _benchmark
    from sklearn_flowr.cli import _benchmark as _benchmark_run

    monkeypatch.setattr(FLOWRClassifier, "fit", _refuse)
    return monkeypatch, _benchmark, _benchmark_run


@pytest.mark.parametrize(("items", "message"), [
    (["head__sigmaa=1"], r"--set head__sigmaa=1: FLOWRClassifier has no "
     r"parameter 'head__sigmaa' \(did you mean head__sigma"),
    (["colour=red"], "--set colour=red: FLOWRClassifier has no parameter"),
    (["head__sigma=-1"], r"--set head__sigma=-1: The 'sigma' parameter"),
    (["calibration=sometimes"], "--set calibration=sometimes: The 'calibration'"),
    (["meta__episode_discount=0.95", "meta__episode_known_count=0.5"],
     "--set meta__episode_known_count=0.5: episode_known_count=0.5 must exceed "
     "episode_discount=0.95"),
    (["setting=large"], "--set setting=large: .*--setting"),
    (["head__covariance=isotropic", "head__prior_scale=2"],
     "--set head__prior_scale=2: head__prior_scale=2 scales an estimated"),
    (["meta=None", "meta__epochs=3"], "--set meta__epochs=3: meta is None"),
    (["calibration"], "--set: expected KEY=VALUE"),
])
def test_bad_set_is_a_usage_error_before_anything_runs(items, message, tmp_path,
                                                       nothing_runs, capsys):
    """Check a --set key or value the model refuses stops with exit status 2
    and a message naming it, before any data is loaded or model trained."""
    monkeypatch, module, run_module = nothing_runs
    monkeypatch.setattr(run_module, "load_benchmark_data", _refuse)
    monkeypatch.setattr(module, "run_benchmark", _refuse)
    argv = [*TINY_BENCHMARK, "--out", str(tmp_path)]
    for item in items:
        argv += ["--set", item]
    with pytest.raises(SystemExit) as stop:
        benchmark_main(argv)
    assert stop.value.code == 2
    assert re.search(message, capsys.readouterr().err)


def test_set_values_are_python_literals():
    """Check VALUE is read as a Python literal, or else kept as text."""
    from sklearn_flowr.cli._benchmark_model import build_model

    args = parse_args(["--set", "calibration=None", "--set",
                       "head__covariance=isotropic", "--set", "calibration=3",
                       "--set", "head__novelty_calibration=(1.5, -0.5)"])
    model = build_model(args, "small", "sup-e")
    assert model.calibration == 3  # the last one given wins
    assert model.head.covariance == "isotropic"
    assert model.head.novelty_calibration == (1.5, -0.5)


def _array_of_objects():
    array = np.empty(96, dtype=object)
    array[:] = [_Canary()] * 96
    return array


class _Canary:
    """Unpickling one would create the file CANARY names."""

    path = None

    def __reduce__(self):
        return (Path.touch, (Path(_Canary.path),))


@pytest.mark.parametrize(("change", "message"), [
    ("missing", "no such file or folder"),
    (dict(X_test=None, y_test=None),
     "lacks X_test, y_test; it holds X_train, y_train"),
    (dict(y_train=np.arange(95) % 4), "X_train has 96 rows but y_train 95"),
    (dict(X_train="objects"), "X_train is an object array"),
    (dict(X_test=np.zeros((96, 2, 2, 2, 2))), r"X_test has shape \(96, 2, 2, 2, 2\)"),
    (dict(X_train=np.full((96, 6), "a")), "X_train has dtype <U1"),
    (dict(X_train=np.zeros(96)), r"X_train has shape \(96,\)"),
    (dict(y_train=np.zeros(96, int)), "the train split has 1 class"),
    (dict(y_test=np.arange(96) % 4 + 2), "must be disjoint.*both hold 2, 3"),
    (dict(X_test=np.zeros((96, 5))), r"X_train rows have shape \(6,\) but X_test"),
    ("garbage", "not an .npz file of the arrays"),
    ("npy", "single array"),
    ("pickle", "not an .npz file"),
    ("images-with-mlp", "--backbone mlp reads feature vectors"),
    ("features-without-mlp", "need --backbone mlp"),
    ("two-train-classes", "small-context model cannot be fitted on its "
     "training classes: n_unknown=2 leaves no support class"),
    (dict(X_test=np.zeros((8, 6), np.float32), y_test=np.arange(8) % 4 + 4),
     "tasks cannot be drawn from it"),
])
def test_data_npz_problems_are_usage_errors(change, message, tmp_path,
                                            npz_arrays, nothing_runs, capsys):
    """Check every layout the run cannot use stops with exit status 2 and a
    message naming the path and the problem, before any training; object
    arrays and pickles are never unpickled."""
    import pickle

    arrays = dict(npz_arrays)
    path = tmp_path / "data.npz"
    options = list(NPZ_BASE)  # meta__n_unknown=2, MetaTraining's default
    _Canary.path = str(tmp_path / "unpickled")
    if change == "garbage":
        path.write_bytes(b"not a zip")
    elif change == "npy":
        np.save(tmp_path / "data.npy", arrays["X_train"])
        path = tmp_path / "data.npy"
    elif change == "pickle":
        path.write_bytes(pickle.dumps(_Canary()))
    elif change == "images-with-mlp":
        arrays.update(X_train=np.zeros((96, 4, 4)), X_test=np.zeros((96, 4, 4)))
    elif change == "features-without-mlp":
        options = options[2:]  # drops --backbone mlp
    elif change == "two-train-classes":
        arrays.update(y_train=np.arange(96) % 2)
    elif isinstance(change, dict):
        if isinstance(change.get("X_train"), str):
            change = dict(X_train=_array_of_objects())
        arrays.update(change)
    arrays = {key: value for key, value in arrays.items() if value is not None}
    if isinstance(change, dict) or change in ("images-with-mlp",
                                              "features-without-mlp",
                                              "two-train-classes"):
        np.savez(path, **arrays)
    with pytest.raises(SystemExit) as stop:
        benchmark_main(["--data", str(path), *options, "--out",
                        str(tmp_path / "out")])
    assert stop.value.code == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"--data {str(path)!r}" in err
    assert re.search(message, err), err
    assert not Path(_Canary.path).exists()


# -------------------------------------------------------------- --data folder
def _png_tree(root, n_classes, n_images=22, size=8):
    """``root/class-k/*.png``: a bright square at a class's own place."""
    from PIL import Image

    rng = np.random.default_rng(1)
    for k in range(n_classes):
        folder = root / f"class-{k}"
        folder.mkdir(parents=True)
        for i in range(n_images):
            image = rng.integers(0, 60, size=(size, size), dtype=np.uint8)
            row, col = divmod(k, size // 2)
            image[2 * row: 2 * row + 2, 2 * col: 2 * col + 3] = 255
            Image.fromarray(image).save(folder / f"{i:02d}.png")
    return root


@pytest.mark.filterwarnings("ignore:The calibration tasks separate")
def test_data_folder_of_images_runs(tmp_path):
    """Check --data FOLDER reads one class per sub-folder, splits the classes
    by --seed into training and test classes (half each) and runs."""
    pytest.importorskip("PIL")
    from sklearn_flowr.cli._benchmark import benchmark_data
    from sklearn_flowr.cli._benchmark_setup import split_classes

    root = _png_tree(tmp_path / "shapes", 6)
    options = [opt for opt in TINY_NPZ if opt != "mlp"]
    options.remove("--backbone")
    options = ["--data", str(root), *options, "--methods", "flowr", "ncm"]
    status, printed = _run([*options, "--out", str(tmp_path / "out")])
    assert status == 0 and "Large context" in printed
    results = _results(tmp_path / "out")
    assert results["dataset"] == {"name": "shapes", "n_train_classes": 3,
                                  "n_test_classes": 3}
    data = benchmark_data(parse_args(options))
    assert data.X_train.shape[1:] == (8, 8) and data.X_train.max() <= 1.0
    # The classes are split by --seed: the same seed, the same split.
    again = benchmark_data(parse_args(options))
    np.testing.assert_array_equal(again.X_train, data.X_train)
    assert len({tuple(split_classes(6, seed)) for seed in range(10)}) > 1


@pytest.mark.parametrize(("layout", "message"), [
    ("three", r"found 3 class folder\(s\).*needs at least 4"),
    ("empty", "has no class folder"),
    ("broken", "cannot read it as an image folder"),
])
def test_data_folder_problems_are_usage_errors(layout, message, tmp_path,
                                               nothing_runs, capsys):
    """Check a folder with too few class folders, none, or an image that
    cannot be read stops with exit status 2 and a message naming it."""
    pytest.importorskip("PIL")
    root = tmp_path / "tree"
    if layout == "empty":
        root.mkdir()
    else:
        _png_tree(root, 3 if layout == "three" else 4, n_images=3)
    if layout == "broken":
        (root / "class-0" / "99.png").write_bytes(b"not a png")
    with pytest.raises(SystemExit) as stop:
        benchmark_main(["--data", str(root), *TINY_BENCHMARK[2:],
                        "--out", str(tmp_path / "out")])
    assert stop.value.code == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"--data {str(root)!r}" in err and re.search(message, err), err


def test_image_size_resizes_a_folder_of_mixed_sizes(tmp_path, nothing_runs,
                                                   capsys):
    """Check that differently sized images stop the run with advice naming
    --image-size, and that --image-size reads them at one size."""
    pytest.importorskip("PIL")
    from sklearn_flowr.cli._benchmark import benchmark_data

    root = _png_tree(tmp_path / "tree", 4, n_images=3)
    _png_tree(tmp_path / "big", 1, n_images=1, size=12)
    (tmp_path / "big" / "class-0" / "00.png").rename(root / "class-0" / "99.png")
    options = ["--data", str(root), *TINY_BENCHMARK[2:], "--out",
               str(tmp_path / "out")]
    with pytest.raises(SystemExit) as stop:
        benchmark_main(options)
    assert stop.value.code == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "pass --image-size HEIGHT WIDTH" in err and "image_size=" not in err
    for size, shape in ((["8"], (8, 8)), (["6", "10"], (6, 10))):
        args = parse_args([*options, "--image-size", *size])
        assert benchmark_data(args).X_train.shape[1:] == shape


@pytest.mark.parametrize(("extra", "message"), [
    (["--image-size", "8", "8", "8"], "takes HEIGHT WIDTH or one SIDE"),
    (["--image-size", "0"], "--image-size: must be an integer >= 1"),
    (["--dataset", "digits", "--image-size", "8"], "resizes the images of --data"),
])
def test_image_size_is_checked(extra, message, capsys):
    """Check --image-size takes one or two positive sides and only with a
    --data folder."""
    with pytest.raises(SystemExit):
        parse_args(extra)
    assert message in capsys.readouterr().err


def test_data_and_dataset_are_exclusive(capsys, tmp_path):
    """Check --data replaces --dataset (giving both is a usage error) and
    --backbone mlp needs --data: the benchmark's data sets are images."""
    for argv, message in (
            (["--data", str(tmp_path), "--dataset", "digits"], "not allowed with"),
            (["--backbone", "mlp"], "--backbone mlp reads feature vectors")):
        with pytest.raises(SystemExit) as stop:
            parse_args(argv)
        assert stop.value.code == 2
        assert message in capsys.readouterr().err


def test_cli_never_unpickles():
    """Check no code of the command line reads a pickle: no joblib.load,
    pickle module or allow_pickle=True (files a user hands it are data)."""
    import sklearn_flowr.cli

    folder = Path(sklearn_flowr.cli.__file__).parent
    pattern = re.compile(r"joblib\.(load|dump)|import pickle|pickle\.load|"
                         r"allow_pickle=True|load_pickle|import joblib")
    for path in folder.glob("*.py"):
        assert not pattern.search(path.read_text()), path.name


# ------------------------------------------------------------------- options
def test_benchmark_verbose_levels():
    """Check that --verbose defaults to 1 (progress), -v sets a level and
    --quiet / -q mean 0."""
    assert parse_args([]).verbose == 1
    assert parse_args(["--quick"]).verbose == 1
    assert parse_args(["-v", "2"]).verbose == 2
    assert parse_args(["--verbose", "0"]).verbose == 0
    assert parse_args(["--quiet"]).verbose == 0
    assert parse_args(["-q", "--quick"]).verbose == 0
    with pytest.raises(SystemExit):
        parse_args(["--verbose", "-1"])


def test_benchmark_out_is_honoured(tmp_path, monkeypatch, npz_file):
    """Check that --out names the folder of results.json and roc.png, and
    nothing is written into the working directory."""
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "elsewhere" / "run"
    args = ["--data", str(npz_file), *TINY_NPZ, "--setting", "large",
            "--methods", "ncm", "--pretrain", "none", "--out", str(out)]
    assert _run(args)[0] == 0
    assert (out / "results.json").exists() and (out / "roc.png").exists()
    assert _results(out)["settings"]["large"]["models"]["none"]["pretrain"] is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blobs.npz",
                                                          "elsewhere"]


def test_benchmark_progress_lines(tmp_path, capsys, npz_file):
    """Check that the default verbosity prints a line per stage (training,
    evaluation) and --quiet prints only the tables."""
    args = ["--data", str(npz_file), *NPZ_BASE[:-4], "--set",
            "meta__n_unknown=1", "--cache-dir", "",
            "--setting", "small", "--methods", "ncm", "--out",
            str(tmp_path / "out")]
    assert benchmark_main(args) == 0
    printed = capsys.readouterr().out
    assert "training FLOWR Sup-E encoder on 96 images" in printed
    assert "evaluating NCM on 3 tasks" in printed
    assert benchmark_main([*args, "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "training FLOWR" not in printed and "evaluating" not in printed
    assert "Small context" in printed


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--max-per-class", "-3"], "--max-per-class: must be an integer >= 2"),
        (["--max-per-class", "1"], "half of each class"),
        (["--evm-tasks", "0"], "--evm-tasks: must be an integer >= 1"),
        (["--lc-known-query-classes", "0"],
         "--lc-known-query-classes: must be an integer >= 1"),
        (["--seed", "-5"], r"--seed: must be an integer in 0\.\.4294967295"),
        (["--seed", str(2**32)], "--seed: must be an integer in"),
        (["--max-fonts", "0"], "--max-fonts: must be an integer >= 5"),
        (["--tasks", "0"], "--tasks: must be an integer >= 1"),
        (["--pretrain-epochs", "-1"], "--pretrain-epochs: must be an integer >= 0"),
        (["--meta-epochs", "0"], "--meta-epochs: must be an integer >= 1"),
        (["--embedding-dim", "0"], "--embedding-dim: must be an integer >= 1"),
        (["--episodes-per-epoch", "0"], "--episodes-per-epoch: must be an integer"),
        (["--n-jobs", "0"], "--n-jobs: must be an integer >= 1"),
        (["--fine-tune-steps", "-2"], "--fine-tune-steps: must be an integer >= 0"),
        (["--tasks", "1.5"], "--tasks: expected an integer; got '1.5'"),
        (["--lambda-adapt", "-1"], "--lambda-adapt: must be a finite number >= 0"),
        (["--lambda-adapt", "nan"], "--lambda-adapt: must be a finite number"),
        (["--meta-lr", "0"], "--meta-lr: must be a finite number > 0"),
        (["--meta-lr", "fast"], "--meta-lr: expected a number; got 'fast'"),
        (["--verbose", "-1"], "--verbose: must be an integer >= 0"),
        (["--prior-scale", "2"], "unrecognized arguments: --prior-scale"),
        (["--set", "=3"], "--set: expected KEY=VALUE"),
        (["--device", "warp-drive"], "--device warp-drive: device='warp-drive' is "
         "not a torch device"),
        (["--set", "device='warp-drive'"], "--set device='warp-drive': device="),
        (["--data", "/no/such/data.npz"],
         "--data '/no/such/data.npz': no such file or folder"),
        (["--pretrain", "none", "--set", "pretrain__epochs=3"],
         "no model of this run has a pre-training stage"),
    ],
)
def test_benchmark_rejects_bad_options(argv, message, capsys):
    """Check that every option out of its range stops with a usage error (exit
    status 2) naming the option and the allowed values."""
    with pytest.raises(SystemExit) as stop:
        parse_args(argv)
    assert stop.value.code == 2
    assert re.search(message, capsys.readouterr().err)


def test_benchmark_accepts_boundary_numbers():
    """Check the smallest allowed values pass (and --quick keeps them)."""
    args = parse_args(["--quick", "--max-per-class", "2", "--evm-tasks", "1",
                       "--lc-known-query-classes", "1", "--seed", "0",
                       "--max-fonts", "5", "--pretrain-epochs", "0",
                       "--lambda-adapt", "0"])
    assert (args.max_per_class, args.evm_tasks, args.lc_known_query_classes,
            args.seed, args.max_fonts, args.pretrain_epochs,
            args.lambda_adapt) == (2, 1, 1, 0, 5, 0, 0.0)


@pytest.mark.parametrize("option", ["--out", "--cache-dir"])
def test_benchmark_unwritable_output_fails_before_training(tmp_path, monkeypatch,
                                                           capsys, option):
    """Check that an --out or --cache-dir that cannot be written stops the run
    with a usage error naming it, before any data is loaded or model trained."""
    from sklearn_flowr.cli import _benchmark

    monkeypatch.setattr(_benchmark, "run_benchmark", _refuse)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    paths = {"--out": str(tmp_path / "out"), "--cache-dir": str(tmp_path / "cache"),
             option: str(blocker / "sub")}
    with pytest.raises(SystemExit) as stop:
        _benchmark.main([*TINY_BENCHMARK, "--out", paths["--out"], "--cache-dir",
                         paths["--cache-dir"]])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert f"{option} '{blocker / 'sub'}' cannot be written" in err


def test_benchmark_output_check_leaves_no_trace(tmp_path):
    """Check that the write test creates the folders but no file, and keeps
    existing results untouched."""
    from sklearn_flowr.cli._benchmark import _output_problem

    out = tmp_path / "out"
    out.mkdir()
    (out / "results.json").write_text("{}")
    args = parse_args(["--out", str(out), "--cache-dir", str(tmp_path / "c")])
    assert _output_problem(args) is None
    assert sorted(p.name for p in out.iterdir()) == ["results.json"]
    assert (out / "results.json").read_text() == "{}"
    assert list((tmp_path / "c").iterdir()) == []
    (out / "roc.png").mkdir()  # a folder where the figure must go
    assert "roc.png" in _output_problem(args)


_FILE_EVENTS = []


def _record_file_events(event, args):
    if _FILE_EVENTS and event in ("open", "os.remove", "os.rename", "os.replace",
                                  "os.truncate"):
        _FILE_EVENTS.append((event, str(args[0])))


sys.addaudithook(_record_file_events)


def test_benchmark_output_check_never_touches_the_outputs(tmp_path):
    """Check that the write test opens, creates and deletes none of the files a
    run writes: another run's fresh results.json can be neither deleted nor
    seen empty."""
    from sklearn_flowr.cli._benchmark import _output_problem

    out = tmp_path / "out"
    args = parse_args(["--out", str(out), "--cache-dir", ""])
    for existing in (False, True):
        if existing:
            (out / "results.json").write_text("{}")
        _FILE_EVENTS[:] = [("start", "")]
        try:
            assert _output_problem(args) is None
        finally:
            events, _FILE_EVENTS[:] = _FILE_EVENTS[1:], []
        touched = {Path(path).name for _, path in events}
        assert not touched & {"results.json", "roc.png", "discovery.png"}, events
        assert any(event == "open" for event, _ in events)  # it did probe


def test_stages_without_bars_say_they_are_still_running():
    """Check that a stage without progress bars (loading, embedding) logs its
    name, then a "still ..." line at every beat until it ends, and none after."""
    import threading

    from sklearn_flowr.cli._benchmark import progress

    lines, beat = [], threading.Event()

    def log(line):
        lines.append(line)
        if "still" in line:
            beat.set()

    with progress(log, "loading glyphs", every=0.01):
        assert beat.wait(30), lines  # the stage outlasts a beat
    n_lines = len(lines)
    assert lines[0] == "loading glyphs ..."
    assert re.fullmatch(r"   \.\.\. still loading glyphs \(\d+ s\)", lines[1])
    assert not threading.Event().wait(0.05) and len(lines) == n_lines


def test_benchmark_logs_the_embedding_of_baseline_features(tmp_path):
    """Check that a run names the embedding of the baseline features, the
    stage that was silent for over 10 s in the main job."""
    status, printed = _run([*TINY_BENCHMARK[:-2], "--verbose", "1", "--setting",
                            "small", "--pretrain", "sup-e", "--methods", "flowr",
                            "ncm", "--out", str(tmp_path / "out")])
    assert status == 0
    assert re.search(r"embedding \d+ rows with the pre-trained encoder \.\.\.",
                     printed), printed


def test_benchmark_help_says_what_data_and_quick_do(tmp_path):
    """Check that --help says .npz labels may be strings and that --quick
    keeps --data, as the parser does."""
    from sklearn_flowr.cli._benchmark_parser import build_parser

    flat = " ".join(build_parser().format_help().split())
    assert "labels integers or strings" in flat
    assert "a run on your own data PATH stays on it" in flat
    y = np.array(["a", "b", "c", "d"] * 6)
    np.savez(tmp_path / "own.npz", X_train=np.zeros((24, 8, 8)), y_train=y,
             X_test=np.zeros((24, 8, 8)), y_test=np.char.add(y, "-new"))
    args = parse_args(["--quick", "--data", str(tmp_path / "own.npz")])
    assert (args.data, args.dataset) == (str(tmp_path / "own.npz"), "own.npz")


def test_benchmark_help_is_plain_text_and_lists_quick_values():
    """Check that --help shows no reST markup, states every default once and
    lists exactly the values --quick sets (from the dict the code applies)."""
    from sklearn_flowr.cli._benchmark_parser import _QUICK, build_parser

    parser = build_parser()
    text = parser.format_help()
    assert "``" not in text
    assert not re.search(r":(class|func|meth|mod|attr|obj):", text)
    assert "evaluate_online" in text and "FLOWRClassifier" in text
    flat = " ".join(text.split())
    assert "--set KEY=VALUE" in flat
    for removed in ("--prior-scale", "--noise-shrinkage", "--calibration-cv",
                    "--calibration-held-classes"):
        assert removed not in flat
    for key, value in _QUICK.items():
        assert f"--{key.replace('_', '-')} {value}" in flat
    # Every option has help, and every option with a value states its default
    # exactly once (a help text that says it is not given a second one).
    formatter = parser._get_formatter()
    for action in parser._actions:
        if action.dest == "help":
            continue
        assert action.help, f"{action.option_strings} has no help text"
        n_defaults = formatter._get_help_string(action).count("default:")
        assert n_defaults == (0 if action.nargs == 0 else 1), action.option_strings

    quick_help = next(a.help for a in parser._actions if a.dest == "quick")
    assert quick_help.count("--") == len(_QUICK)
    quick = parse_args(["--quick"])
    assert {key: getattr(quick, key) for key in _QUICK} == _QUICK


def test_benchmark_quick_keeps_explicit_values_and_sets_the_budget():
    """Check that an option given explicitly wins over --quick, even when it
    spells out the normal default, and that --quick's budget reaches the
    model's nested parameters."""
    from sklearn_flowr.cli._benchmark_model import build_model
    from sklearn_flowr.cli._benchmark_parser import _QUICK

    args = parse_args(["--quick", "--tasks", "1000", "--embedding-dim", "16"])
    assert (args.tasks, args.embedding_dim) == (1000, 16)
    assert args.meta_epochs == _QUICK["meta_epochs"]
    assert parse_args([]).tasks == 1000
    model = build_model(parse_args(["--quick"]), "small", "sup-e")
    assert (model.pretrain.epochs, model.meta.epochs,
            model.meta.episodes_per_epoch, model.embedding_dim) == (3, 3, 30, 32)
