"""Tests of the command-line entry points."""

import itertools

import numpy as np
import pytest

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


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """One tiny flowr-benchmark run with every default method, shared by the
    tests that only read its output: (arguments, printed text, results)."""
    import contextlib
    import io
    import json

    from sklearn_flowr.cli import benchmark_main

    tmp_path = tmp_path_factory.mktemp("benchmark")
    args = [*TINY_BENCHMARK, "--out", str(tmp_path / "out"), "--cache-dir",
            str(tmp_path / "cache")]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert benchmark_main(args) == 0
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    return args, printed.getvalue(), results, tmp_path


def test_benchmark_writes_table_json_and_roc(tiny_run):
    """Check that a tiny flowr-benchmark run prints both tables, writes the JSON
    of every (setting, pre-training, method) row -- the ablation rows included
    by default -- and the figure, and that a re-run loads the cached models and
    gives the same figures."""
    import json

    from sklearn_flowr.cli import benchmark_main

    args, printed, results, tmp_path = tiny_run
    assert "Small context" in printed and "Large context" in printed
    assert "H-measure" in printed and "Support Acc" in printed
    assert (tmp_path / "out" / "roc.png").stat().st_size > 0
    for setting in ("small", "large"):
        rows = results["settings"][setting]["rows"]
        assert {(r["method"], r["pretrain"]) for r in rows} == {
            (m, p) for m in ("flowr", "flowr-full", "flowr-full-cal",
                             "flowr-no-meta", "ncm-flowr-emb", "ncm", "protonet",
                             "peeler", "evm")
            for p in ("sup-e", "sup-fc")}
        assert all(r["n_tasks"] == (3 if r["method"] == "evm" else 6)
                   for r in rows)
        assert all(0.0 <= r["accuracy"] <= 1.0 for r in rows)
    models = sorted((tmp_path / "cache" / "models").iterdir())
    assert len(models) == 4  # two pre-trainings x two settings (no extra model
    # for the ablation: it runs on the cached features)

    assert benchmark_main([*args, "--out", str(tmp_path / "again")]) == 0
    again = json.loads((tmp_path / "again" / "results.json").read_text())
    assert sorted((tmp_path / "cache" / "models").iterdir()) == models
    first_row = results["settings"]["small"]["rows"][0]
    assert again["settings"]["small"]["rows"][0]["h_measure"] == first_row[
        "h_measure"]


def test_benchmark_reports_calibration_and_ablation(tiny_run):
    """Check FLOWR's rows (meta-trained and not) carry the calibration of
    P(novel) and the argmax accuracy, the baselines' rows say n/a instead of a
    number (null in the JSON), and every table ends with the ablation: FLOWR
    against no meta-training and against NCM on the same embedding."""
    _, printed, results, _ = tiny_run
    assert results["calibration"]["n_bins"] == 15
    for setting, pretrain in itertools.product(("small", "large"),
                                               ("sup-e", "sup-fc")):
        result = results["settings"][setting]
        rows = {r["method"]: r for r in result["rows"]
                if r["pretrain"] == pretrain}
        assert {r["embedding"] for r in rows.values()} == {"meta-trained",
                                                          "pre-trained"}
        assert (rows["flowr"]["embedding"] == rows["flowr-full"]["embedding"]
                == rows["ncm-flowr-emb"]["embedding"] == "meta-trained")
        assert rows["flowr-no-meta"]["embedding"] == "pre-trained"
        for method in ("flowr", "flowr-full", "flowr-full-cal", "flowr-no-meta"):
            row = rows[method]
            assert row["probability"] is True
            assert 0.0 <= row["ece"] <= 1.0 and 0.0 <= row["brier"] <= 1.0
            assert 0.0 <= row["argmax_accuracy"] <= 1.0
            assert sum(row["reliability"]["count"]) > 0
        for method in ("ncm-flowr-emb", "ncm", "protonet", "peeler", "evm"):
            row = rows[method]
            assert row["probability"] is False
            assert row["ece"] is row["brier"] is row["argmax_accuracy"] is None
            assert row["reliability"] is None
        (entry,) = [e for e in result["ablation"] if e["pretrain"] == pretrain]
        assert entry["meta_training"]["h_measure_gain"] == (
            rows["flowr"]["h_measure"] - rows["flowr-no-meta"]["h_measure"])
        assert entry["head_vs_distance"]["h_measure_gain"] == (
            rows["flowr"]["h_measure"] - rows["ncm-flowr-emb"]["h_measure"])
        assert entry["full_covariance_vs_distance"]["h_measure_gain"] == (
            rows["flowr-full"]["h_measure"] - rows["ncm-flowr-emb"]["h_measure"])
        assert entry["full_covariance_vs_isotropic"]["accuracy_gain"] == (
            rows["flowr-full"]["accuracy"] - rows["flowr"]["accuracy"])
    table = [line for line in printed.splitlines()
             if line.startswith(("FLOWR", "NCM", "ProtoNet", "PEELER", "EVM"))]
    assert len(table) == 36  # nine methods x two pre-trainings x two settings
    for line in table:
        n_na = line.split().count("n/a")
        assert n_na == (0 if line.startswith("FLOWR") else 3), line
    assert "ECE" in printed and "Brier" in printed and "Argmax Acc" in printed
    assert printed.count("n/a (no probability)") == 2
    assert printed.count("Ablation sup-e: meta-training vs none") == 2
    assert printed.count("Ablation sup-fc: meta-training vs none") == 2
    assert "FLOWR head vs NCM on the same embedding" in printed
    assert printed.count("full-cov head vs NCM on it") == 4


def test_no_meta_head_is_flowr_head_by_empirical_bayes(rng):
    """Check the no-meta-training head keeps FLOWR's hyper-parameters and takes
    the prior, b and sigma by empirical Bayes: unfitted in the small context,
    the training classes frozen in the large one."""
    from types import SimpleNamespace

    from sklearn_flowr import CRPGaussianClassifier
    from sklearn_flowr.cli._benchmark_setup import no_meta_head

    centres = rng.normal(scale=3.0, size=(6, 4))
    y = np.repeat(np.arange(6), 10)
    Z = centres[y] + rng.normal(size=(60, 4))
    model = SimpleNamespace(update_known=False, head_=CRPGaussianClassifier(
        a=0.3, b=1.0, sigma=0.5, prior_mean=0.0, prior_var=1.0, known_count=2.0))
    empirical = CRPGaussianClassifier(a=0.3, known_count=2.0).fit(Z, y)

    small = no_meta_head("small", model, Z, y)
    assert not small.__sklearn_is_fitted__()
    assert small.a == 0.3 and small.known_count == 2.0
    assert small.b == empirical.b_ and small.sigma == empirical.sigma_
    np.testing.assert_allclose(small.prior_mean, empirical.prior_mean_)
    np.testing.assert_allclose(small.prior_var, empirical.prior_var_)

    large = no_meta_head("large", model, Z, y)
    np.testing.assert_array_equal(large.classes_, empirical.classes_)
    np.testing.assert_allclose(large.class_mean_, empirical.class_mean_)
    np.testing.assert_allclose(large.crp_count_, 2.0)
    before = large.class_mean_.copy()
    large.open_world_step(Z[:5], y[:5])  # known classes stay fixed online
    np.testing.assert_array_equal(large.class_mean_, before)


def test_full_covariance_head_matches_flowr_classifier_option(rng):
    """Check the benchmark's flowr-full row is the head
    FLOWRClassifier(covariance="full") builds: full-covariance empirical
    Bayes on the embedding with FLOWR's a and meta-learned b kept."""
    from types import SimpleNamespace

    from sklearn_flowr import CRPGaussianClassifier
    from sklearn_flowr.cli._benchmark_setup import full_covariance_head

    centres = rng.normal(scale=3.0, size=(6, 4))
    y = np.repeat(np.arange(6), 10)
    Z = centres[y] + rng.normal(size=(60, 4)) * [1.0, 0.1, 2.0, 0.5]
    model = SimpleNamespace(update_known=False, head_=CRPGaussianClassifier(
        a=0.3, b=1.7, sigma=0.5, prior_mean=0.0, prior_var=1.0))
    empirical = CRPGaussianClassifier(a=0.3, b=1.7, covariance="full").fit(Z, y)
    small = full_covariance_head("small", model, Z, y)
    assert not small.__sklearn_is_fitted__()
    assert small.covariance == "full" and small.b == 1.7 and small.a == 0.3
    np.testing.assert_allclose(small.sigma, empirical.sigma_)
    np.testing.assert_allclose(small.prior_var, empirical.prior_var_)
    large = full_covariance_head("large", model, Z, y)
    np.testing.assert_allclose(large.predict_proba(Z[:7]),
                               empirical.predict_proba(Z[:7]))
    before = large.class_mean_.copy()
    large.open_world_step(Z[:5], y[:5])  # known classes stay fixed online
    np.testing.assert_array_equal(large.class_mean_, before)


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
    # --prior-scale changes only the full head, from the same cached model.
    full = ["--methods", "flowr", "flowr-full"]
    plain = rows(*full, out="plain-full")
    wider = rows(*full, "--prior-scale", "3", out="wider")
    assert len(list((tmp_path / "cache" / "models").iterdir())) == 2
    assert wider["flowr"]["h_measure"] == plain["flowr"]["h_measure"]
    assert wider["flowr-full"]["ece"] != plain["flowr-full"]["ece"]
    # So does --noise-shrinkage.
    shrunk = rows(*full, "--noise-shrinkage", "0.5", out="shrunk")
    assert len(list((tmp_path / "cache" / "models").iterdir())) == 2
    assert shrunk["flowr"]["h_measure"] == plain["flowr"]["h_measure"]
    assert shrunk["flowr-full"]["ece"] != plain["flowr-full"]["ece"]


def test_benchmark_cross_fitted_calibration(tmp_path):
    """Check --calibration-cv adds flowr-full-cvcal: the full head of the
    same cached model (same ranking, so the same H-measure and fixed-TPR
    accuracy) with the map cross_fit_novelty_calibration fits on folds of
    models like it; the default run does not train those folds."""
    import json

    from sklearn.model_selection import GroupShuffleSplit

    from sklearn_flowr.cli import benchmark_main
    from sklearn_flowr.cli._benchmark import parse_args
    from sklearn_flowr.cli._benchmark_setup import DEFAULT_METHODS
    from sklearn_flowr.protocol import cross_fit_novelty_calibration

    assert "flowr-full-cvcal" not in parse_args([]).methods
    assert list(DEFAULT_METHODS) == parse_args([]).methods
    cache = str(tmp_path / "cache")
    base = [*TINY_BENCHMARK, "--setting", "small", "--pretrain", "sup-e",
            "--methods", "flowr-full", "flowr-full-cal", "--cache-dir", cache,
            ]
    out = tmp_path / "out"
    assert benchmark_main([*base, "--calibration-cv", "3",
                           "--calibration-held-classes", "2", "--out", str(out)]) == 0
    rows = {row["method"]: row for row in json.loads(
        (out / "results.json").read_text())["settings"]["small"]["rows"]}
    assert set(rows) == {"flowr-full", "flowr-full-cal", "flowr-full-cvcal"}
    assert len(list((tmp_path / "cache" / "models").iterdir())) == 1
    crossed, full = rows["flowr-full-cvcal"], rows["flowr-full"]
    assert crossed["h_measure"] == full["h_measure"]
    assert crossed["accuracy"] == full["accuracy"]
    own_map = rows["flowr-full-cal"]["novelty_calibration"]
    assert crossed["novelty_calibration"] != own_map
    # The same map by hand, from the benchmark's own model parameters.
    from sklearn_flowr import FLOWRClassifier
    from sklearn_flowr.cli._benchmark import benchmark_data, model_params, setting_data

    args = parse_args([*base, "--calibration-cv", "3"])
    data = benchmark_data(args)
    X_fit, y_fit = setting_data("small", data, args.seed)[:2]
    expected = cross_fit_novelty_calibration(
        FLOWRClassifier(**model_params(args, "small", "sup-e")).set_params(
            covariance="full"), X_fit, y_fit,
        cv=GroupShuffleSplit(n_splits=3, test_size=2, random_state=args.seed),
        random_state=args.seed, n_jobs=args.n_jobs,
        n_known_query_classes=args.lc_known_query_classes)
    assert crossed["novelty_calibration"] == [expected.slope, expected.intercept]
    assert crossed["noise_shrinkage"] == 0.0
    # --noise-shrinkage auto: cvcal chooses it on the folds, the full row keeps 0.
    auto = tmp_path / "auto"
    # Two held-out classes a fold: small-context tasks of one support class,
    # which the choice warns about.
    with pytest.warns(UserWarning, match="tasks of one support class"):
        assert benchmark_main([*base, "--calibration-cv", "3",
                               "--calibration-held-classes", "2",
                               "--noise-shrinkage", "auto", "--out", str(auto)]) == 0
    rows = {row["method"]: row for row in json.loads(
        (auto / "results.json").read_text())["settings"]["small"]["rows"]}
    with pytest.warns(UserWarning, match="tasks of one support class"):
        chosen = cross_fit_novelty_calibration(
            FLOWRClassifier(**model_params(args, "small", "sup-e")).set_params(
                covariance="full"), X_fit, y_fit,
            cv=GroupShuffleSplit(n_splits=3, test_size=2, random_state=args.seed),
            noise_shrinkages=[0.0, 0.05, 0.1, 0.2, 0.3], random_state=args.seed,
            n_jobs=args.n_jobs, n_known_query_classes=args.lc_known_query_classes)
    assert rows["flowr-full-cvcal"]["noise_shrinkage"] == chosen.noise_shrinkage
    assert rows["flowr-full-cvcal"]["novelty_calibration"] == [chosen.slope,
                                                               chosen.intercept]
    # What the choice was made on, per candidate, is in the row.
    assert rows["flowr-full-cvcal"]["cross_fit_candidates"] == {
        str(value): {"h_measure": pytest.approx(chosen.h_measures[value]),
                     "accuracy": pytest.approx(chosen.accuracies[value])}
        for value in (0.0, 0.05, 0.1, 0.2, 0.3)}
    assert "cross_fit_candidates" not in crossed
    assert rows["flowr-full"] == {**full, "seconds": rows["flowr-full"]["seconds"]}


def test_benchmark_refuses_folds_that_cannot_train_before_training(
        tmp_path, no_training, capsys):
    """Check --calibration-cv folds the models cannot train on (digits' five
    training classes: one held out leaves a small-context task no novel
    class; two folds of 2-3 classes leave n_unknown=2 no support class) stop
    with a usage error before any encoder is trained."""
    from sklearn_flowr.cli import benchmark_main

    base = [*TINY_BENCHMARK, "--pretrain", "sup-e", "--cache-dir", "",
            "--out", str(tmp_path)]
    for extra, message in ((["--calibration-cv", "5"], "holds out 1"),
                           (["--calibration-cv", "2"], "n_unknown=2")):
        with pytest.raises(SystemExit) as stop:
            benchmark_main([*base, *extra])
        assert stop.value.code == 2
        assert message in capsys.readouterr().err


def test_benchmark_rejects_negative_ablation_values():
    """Check bad ablation values stop with a usage error."""
    import pytest

    from sklearn_flowr.cli._benchmark import parse_args

    for bad in (["--lambda-adapt", "-1"], ["--fine-tune-steps", "-2"],
                ["--meta-lr", "0"]):
        with pytest.raises(SystemExit):
            parse_args(bad)


def test_benchmark_help_is_plain_text_and_lists_quick_values():
    """Check that --help shows no reST markup, states every default once and
    lists exactly the values --quick sets (from the dict the code applies)."""
    import re

    from sklearn_flowr.cli._benchmark import _QUICK, build_parser, parse_args

    parser = build_parser()
    text = parser.format_help()
    assert "``" not in text
    assert not re.search(r":(class|func|meth|mod|attr|obj):", text)
    assert "evaluate_online" in text and "FLOWRClassifier" in text
    flat = " ".join(text.split())
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


def test_benchmark_quick_keeps_explicit_values():
    """Check that an option given explicitly wins over --quick, even when it
    spells out the normal default."""
    from sklearn_flowr.cli._benchmark import _QUICK, parse_args

    args = parse_args(["--quick", "--tasks", "1000", "--embedding-dim", "16"])
    assert (args.tasks, args.embedding_dim) == (1000, 16)
    assert args.meta_epochs == _QUICK["meta_epochs"]
    assert parse_args([]).tasks == 1000


def test_benchmark_verbose_levels():
    """Check that --verbose defaults to 1 (progress), -v sets a level and
    --quiet / -q mean 0."""
    import pytest

    from sklearn_flowr.cli._benchmark import parse_args

    assert parse_args([]).verbose == 1
    assert parse_args(["--quick"]).verbose == 1
    assert parse_args(["-v", "2"]).verbose == 2
    assert parse_args(["--verbose", "0"]).verbose == 0
    assert parse_args(["--quiet"]).verbose == 0
    assert parse_args(["-q", "--quick"]).verbose == 0
    with pytest.raises(SystemExit):
        parse_args(["--verbose", "-1"])


def test_benchmark_out_is_honoured(tmp_path, monkeypatch):
    """Check that --out names the folder of results.json and roc.png, and
    nothing is written into the working directory."""
    from sklearn_flowr.cli import benchmark_main

    monkeypatch.chdir(tmp_path)
    out = tmp_path / "elsewhere" / "run"
    args = [*TINY_BENCHMARK, "--setting", "large", "--methods", "ncm",
            "--pretrain", "none", "--cache-dir", "", "--out", str(out)]
    assert benchmark_main(args) == 0
    assert (out / "results.json").exists() and (out / "roc.png").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere"]


def test_benchmark_progress_lines(tmp_path, capsys):
    """Check that the default verbosity prints a line per stage (training,
    cached model, evaluation) and --quiet prints only the tables."""
    from sklearn_flowr.cli import benchmark_main

    args = [*TINY_BENCHMARK[:-2], "--setting", "small", "--methods", "ncm",
            "--pretrain", "sup-e", "--cache-dir", str(tmp_path / "cache"),
            "--out", str(tmp_path / "out")]
    assert benchmark_main(args) == 0
    printed = capsys.readouterr().out
    assert "training FLOWR Sup-E encoder" in printed
    assert "evaluating NCM on 6 tasks" in printed
    assert benchmark_main(args) == 0
    assert "loading cached model" in capsys.readouterr().out
    assert benchmark_main([*args, "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "loading" not in printed and "evaluating" not in printed
    assert "Small context" in printed


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--max-per-class", "-3"], "--max-per-class: must be an integer >= 2"),
        (["--max-per-class", "0"], "--max-per-class: must be an integer >= 2"),
        (["--max-per-class", "1"], "half of each class"),
        (["--evm-tasks", "-1"], "--evm-tasks: must be an integer >= 1"),
        (["--evm-tasks", "0"], "--evm-tasks: must be an integer >= 1"),
        (["--lc-known-query-classes", "0"],
         "--lc-known-query-classes: must be an integer >= 1"),
        (["--seed", "-5"], r"--seed: must be an integer in 0\.\.4294967295"),
        (["--seed", str(2**32)], "--seed: must be an integer in"),
        (["--max-fonts", "0"], "--max-fonts: must be an integer >= 5"),
        (["--tasks", "0"], "--tasks: must be an integer >= 1"),
        (["--pretrain-epochs", "-1"], "--pretrain-epochs: must be an integer >= 0"),
        (["--meta-epochs", "-1"], "--meta-epochs: must be an integer >= 0"),
        (["--embedding-dim", "0"], "--embedding-dim: must be an integer >= 1"),
        (["--episodes-per-epoch", "0"], "--episodes-per-epoch: must be an integer"),
        (["--n-jobs", "0"], "--n-jobs: must be an integer >= 1"),
        (["--fine-tune-steps", "-2"], "--fine-tune-steps: must be an integer >= 0"),
        (["--tasks", "1.5"], "--tasks: expected an integer; got '1.5'"),
        (["--lambda-adapt", "-1"], "--lambda-adapt: must be a finite number >= 0"),
        (["--lambda-adapt", "nan"], "--lambda-adapt: must be a finite number"),
        (["--meta-lr", "0"], "--meta-lr: must be a finite number > 0"),
        (["--meta-lr", "inf"], "--meta-lr: must be a finite number > 0"),
        (["--meta-lr", "fast"], "--meta-lr: expected a number; got 'fast'"),
        (["--prior-scale", "0"], "--prior-scale: must be a finite number > 0"),
        (["--noise-shrinkage", "1.5"], "--noise-shrinkage: must be at most 1"),
        (["--noise-shrinkage", "-0.1"],
         "--noise-shrinkage: must be a finite number >= 0"),
        (["--verbose", "-1"], "--verbose: must be an integer >= 0"),
        (["--calibration-cv", "1"], "--calibration-cv: must be an integer >= 2"),
        (["--calibration-cv", "2", "--calibration-held-classes", "0"],
         "--calibration-held-classes: must be an integer >= 1"),
        (["--methods", "flowr-full-cvcal"],
         "flowr-full-cvcal needs --calibration-cv K"),
        (["--calibration-held-classes", "2"],
         "--calibration-held-classes needs --calibration-cv K"),
        (["--noise-shrinkage", "auto"], "--noise-shrinkage auto is chosen on"),
        (["--noise-shrinkage", "most"], "--noise-shrinkage: expected a number"),
    ],
)
def test_benchmark_rejects_out_of_range_numbers(argv, message, capsys):
    """Check that every numeric option out of its range stops with a usage
    error (exit status 2) naming the option and the allowed values."""
    import re

    from sklearn_flowr.cli._benchmark import parse_args

    with pytest.raises(SystemExit) as stop:
        parse_args(argv)
    assert stop.value.code == 2
    assert re.search(message, capsys.readouterr().err)


def test_benchmark_accepts_boundary_numbers():
    """Check the smallest allowed values pass (and --quick keeps them)."""
    from sklearn_flowr.cli._benchmark import parse_args

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

    def must_not_run(*args, **kwargs):
        raise AssertionError("the benchmark ran")

    monkeypatch.setattr(_benchmark, "run_benchmark", must_not_run)
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
    from sklearn_flowr.cli._benchmark import _output_problem, parse_args

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
