"""``flowr-benchmark``: check the outputs, load the data, fit each
pre-training's model per setting, evaluate every method on the same seeded
tasks, print the tables and write the figures."""

import contextlib
import copy
import errno
import functools
import json
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np

from ..protocol import calibration_scores, evaluate_online
from ..saving import temporary_name, write_atomically
from ._benchmark_discovery import discovery_rows
from ._benchmark_model import (
    META_TRAINED_METHODS,
    METHOD_NAMES,
    build_model,
    describe_model,
    fit_model,
    method_template,
    plan_run,
)
from ._benchmark_parser import build_parser, parse_args
from ._benchmark_report import (
    CALIBRATION,
    MAX_CALIBRATION_TASKS,
    ablation,
    conformal_figures,
    format_table,
    plot_discovery,
    plot_figures,
    row_from_report,
)
from ._benchmark_setup import UserDataError, load_benchmark_data

__all__ = ["benchmark_data", "main", "run_benchmark"]

# Seconds between the "still ..." lines of a stage without progress bars.
PROGRESS_EVERY = 5.0


@contextlib.contextmanager
def progress(log, what: str, every: float = PROGRESS_EVERY):
    """Log ``what ...``, then ``... still <what> (N s)`` every ``every``
    seconds until the block ends: no silent stage."""
    log(f"{what} ...")
    done = threading.Event()
    tic = time.perf_counter()

    def beat():
        while not done.wait(every):
            log(f"   ... still {what.strip()} ({time.perf_counter() - tic:.0f} s)")

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def _output_problem(args) -> str | None:
    """Why the run could not write its results or cache, or None; creates the
    folders and probes them with a uniquely named file, never the outputs."""
    checks = [(Path(args.out), ("results.json", "roc.png", "discovery.png"),
               "--out", "pass a folder you can write to")]
    if args.cache_dir:
        checks.append((Path(args.cache_dir), (), "--cache-dir",
                       "pass a folder you can write to, or --cache-dir '' to "
                       "run without a cache"))
    for folder, names, option, fix in checks:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            for name in names:
                # The outputs are replaced atomically: only a folder in the
                # way blocks them.
                if (folder / name).is_dir():
                    raise IsADirectoryError(errno.EISDIR, "Is a directory",
                                            str(folder / name))
            probe = temporary_name(folder / "write-test")
            with open(probe, "xb"):
                pass
            os.unlink(probe)
        except OSError as exc:
            where = str(exc.filename) if exc.filename else str(folder)
            return (f"{option} {str(folder)!r} cannot be written: {where!r}: "
                    f"{exc.strerror or exc}; {fix}.")
    return None


def main(argv=None) -> int:
    """Run ``flowr-benchmark``: train, evaluate, print the tables, save figures.

    Parameters
    ----------
    argv : list of str or None, default=None
        Command-line arguments (see ``flowr-benchmark --help``); ``None`` reads
        ``sys.argv``.

    Returns
    -------
    int
        The exit status: 0, or 1 when an output cannot be written (a one-line
        message after the tables). Bad options, ``--data``, devices or outputs
        stop before any training with a usage error (``SystemExit`` 2).

    Examples
    --------
    From a shell: ``flowr-benchmark --quick --out flowr-benchmark-out``.

    >>> from sklearn_flowr.cli._benchmark_parser import build_parser, parse_args
    >>> print(build_parser().format_usage())  # doctest: +ELLIPSIS
    usage: flowr-benchmark [-h] [--dataset {glyphs,...} | --data PATH] ...
    >>> args = parse_args(["--quick", "--tasks", "50"])  # --quick keeps --tasks
    >>> args.dataset, args.tasks, args.pretrain_epochs
    ('glyphs', 50, 3)
    """
    args = parse_args(argv)
    # Outputs first: an unwritable folder must stop the run before training.
    problem = _output_problem(args)
    if problem:
        build_parser().error(problem)
    # Flushed: stage lines keep their place among the progress bars (stderr).
    log = (functools.partial(print, flush=True) if args.verbose
           else (lambda *a, **k: None))
    try:
        # Raised only before training.
        results = run_benchmark(args, log=log)
    except UserDataError as exc:
        build_parser().error(str(exc))
    out = Path(args.out)
    # The tables first: a failing write (a full disk) cannot take them along.
    print()
    for setting, setting_result in results["settings"].items():
        print(format_table(setting_result, setting))
        print()
    with progress(log, f"writing {out / 'results.json'} and drawing "
                  f"{out / 'roc.png'}"):
        problem = _write_outputs(results, out)
    if problem:
        # One line, no traceback: the tables above already hold the results.
        print(f"flowr-benchmark: error: {problem}", file=sys.stderr, flush=True)
        return 1
    print(f"Figures: {out / 'results.json'}, ROC curves, reliability "
          f"diagrams and conformal false-novel rates: {out / 'roc.png'} "
          f"({results['seconds']:.0f} s)")
    return 0


def _write_outputs(results, out: Path) -> str | None:
    """Write results.json and roc.png into ``out``; why one failed, or None."""
    target = out
    try:
        out.mkdir(parents=True, exist_ok=True)
        target = out / "results.json"
        text = json.dumps(results, indent=1).encode("utf-8")
        write_atomically(target, lambda file: file.write(text))
        target = out / "roc.png"
        write_atomically(target, lambda file: plot_figures(results, file))
        if any(result.get("discovery") for result in results["settings"].values()):
            target = out / "discovery.png"
            write_atomically(target, lambda file: plot_discovery(results, file))
    except OSError as exc:
        # exc.filename, when set, is the temporary name: name the target.
        return (f"cannot write {str(target)!r}: "
                f"{exc.strerror or type(exc).__name__ + ': ' + str(exc)}; the "
                "tables above hold the results (free space or pass another "
                "--out to keep the files).")
    return None


def benchmark_data(args):
    """The run's train/test data; ``--data``'s problems raise ``UserDataError``."""
    cache = args.cache_dir or None
    return load_benchmark_data(args.dataset, data_path=args.data_path,
                               font_dirs=args.font_dir,
                               max_fonts=args.max_fonts,
                               max_per_class=args.max_per_class,
                               kanji_classes=args.kanji_classes,
                               kanji_instances=args.kanji_instances,
                               cache_dir=None if cache is None
                               else Path(cache) / "data",
                               random_state=args.seed,
                               # The probes of benchmarks/ have no --data.
                               user_data=getattr(args, "data", None),
                               image_size=getattr(args, "image_size", None))


def run_benchmark(args, log=print, data=None) -> dict:
    """Load (``data`` None), train and evaluate: every figure as a JSON-able
    dict. Data the run cannot use raises ``UserDataError`` before training."""
    start = time.perf_counter()
    if data is None:
        with progress(log, f"loading {args.dataset}"):
            data = benchmark_data(args)
    n_train_classes = np.unique(data.y_train).shape[0]
    n_test_classes = np.unique(data.y_test).shape[0]
    log(f"{args.dataset}: {n_train_classes} training classes "
        f"({data.y_train.shape[0]} rows), {n_test_classes} test classes "
        f"({data.y_test.shape[0]} rows), rows of shape {data.X_train.shape[1:]}")
    plan = plan_run(args, data)
    results = {"args": vars(args), "dataset": {
        "name": args.dataset, "n_train_classes": int(n_train_classes),
        "n_test_classes": int(n_test_classes)}, "calibration": CALIBRATION,
        "settings": {}}
    for setting, (split, tasks, protocol) in plan.items():
        log(f"\n== {setting} context: {args.tasks} tasks, {protocol}")
        results["settings"][setting] = _run_setting(setting, split, tasks,
                                                    protocol, args, log)
    results["seconds"] = time.perf_counter() - start
    return results


def _run_setting(setting, split, tasks, protocol, args, log):
    """Fit each pre-training's model and evaluate every method on ``tasks``."""
    X_fit, y_fit, X_eval, y_eval = split
    # "tpr": the protocol's novelty TPR of the setting, from its reports.
    out = {"protocol": protocol, "tpr": None, "models": {}, "rows": []}
    for pretrain in args.pretrain:
        tic = time.perf_counter()
        log(f"-- {pretrain} pre-training, {setting} context")
        models, fit_embeddings = {}, {}
        for key, meta in (("flowr", True), ("flowr-no-meta", False)):
            if meta or key in args.methods:
                models[key] = build_model(args, setting, pretrain, meta=meta)
                fit_embeddings[key] = fit_model(models[key], X_fit, y_fit, log=log)
                out["models"][pretrain if meta else f"{pretrain}/no-meta"] = (
                    describe_model(models[key]))
        features = _embedder(models, X_fit, X_eval, fit_embeddings, log=log)
        log(f"   models in {time.perf_counter() - tic:.1f} s")
        for method in args.methods:
            model = models.get(method, models["flowr"])
            Z_fit, X_method = features(method)
            template = method_template(method, setting, model, Z_fit, y_fit)
            # The conformal calibration run reads the rows the test run reads.
            X_calibration = Z_fit
            if (method in models and setting == "small"
                    and model.fine_tune_steps):
                # Fine-tuning changes the encoder per task: stream images
                # through the whole model; its per-task bars at --verbose 2.
                template = copy.deepcopy(model).set_params(
                    verbose=int(args.verbose >= 2))
                X_method, X_calibration = X_eval, X_fit
            method_tasks = tasks
            if method == "evm" and args.evm_tasks is not None:
                method_tasks = tasks[: min(args.evm_tasks, len(tasks))]
            tic = time.perf_counter()
            log(f"   evaluating {METHOD_NAMES[method]} on {len(method_tasks)} "
                "tasks ...")
            report = evaluate_online(template, X_method, y_eval, method_tasks,
                                     setting=setting, n_jobs=args.n_jobs,
                                     verbose=int(args.verbose >= 1),
                                     return_rows=True)
            out["tpr"] = report.target_tpr
            row = row_from_report(method, pretrain, report,
                                  time.perf_counter() - tic)
            row["conformal"] = _conformal(template, X_calibration, y_fit,
                                          setting, report.rows,
                                          len(method_tasks), method, args, log)
            out["rows"].append(row)
            calibration = ("" if row["ece"] is None
                           else f" ECE={row['ece']:.3f}")
            fnr = (None if row["conformal"] is None else
                   row["conformal"]["alpha"]["0.1"]["false_novel_rate"])
            conformal = "" if fnr is None else f" false-novel@0.1={fnr:.3f}"
            log(f"   {METHOD_NAMES[method]:14s} H={row['h_measure']:.3f} "
                f"Acc={row['accuracy']:.3f}{calibration}{conformal} "
                f"({row['n_tasks']} tasks, {row['seconds']:.1f} s)")
        if args.label_fraction:
            log(f"   class discovery under a label budget ({pretrain}) ...")
            Z_fit, Z_eval = features("flowr")
            for row in discovery_rows(models["flowr"], setting, Z_fit, y_fit,
                                      Z_eval, y_eval, tasks, args, log):
                out.setdefault("discovery", []).append(
                    {"pretrain": pretrain, **row})
    out["ablation"] = ablation(out["rows"])
    return out


def _conformal(template, X_fit, y_fit, setting, rows, n_tasks, method, args,
               log):
    """The conformal figures of one row, or None (logged) without calibration set."""
    tic = time.perf_counter()
    try:
        if args.conformal_calibration == "tasks":
            figures = conformal_figures(rows)
        else:
            n_calibration = min(n_tasks, MAX_CALIBRATION_TASKS)
            log(f"   conformal calibration of {METHOD_NAMES[method]} on "
                f"{n_calibration} training-class tasks ...")
            calibration = calibration_scores(
                template, X_fit, y_fit, setting, n_tasks=n_calibration,
                n_known_query_classes=args.lc_known_query_classes,
                n_jobs=args.n_jobs, seed=args.seed,
                verbose=int(args.verbose >= 1))
            figures = conformal_figures(rows, calibration,
                                        seconds=time.perf_counter() - tic)
            log(f"   conformal calibration of {METHOD_NAMES[method]}: "
                f"{figures['n_calibration']} calibration scores in "
                f"{figures['calibration_seconds']:.1f} s")
    except ValueError as exc:
        log(f"   no conformal figures for {METHOD_NAMES[method]}: {exc}")
        return None
    return figures


def _embedder(models, X_fit, X_eval, fit_embeddings, *, log):
    """``embed(method)``: ``(Z_fit, Z_eval)`` on the method's encoder, computed
    once per encoder (``fit_embeddings``: the rows ``fit_transform`` returned)."""
    cache = {}

    def embed(method):
        if method == "flowr-no-meta":
            key, encoder = method, "current"
        elif method in META_TRAINED_METHODS:
            key, encoder = "flowr", "current"
        else:
            key, encoder = "base", "pretrained"
        if key not in cache:
            model = models[key if key == "flowr-no-meta" else "flowr"]
            Z_fit = fit_embeddings.get(key)
            rows = X_eval.shape[0] + (0 if Z_fit is not None else X_fit.shape[0])
            name = {"base": "pre-trained", "flowr": "meta-trained"}.get(key, key)
            with progress(log, f"   embedding {rows} rows with the {name} encoder"):
                if Z_fit is None:
                    Z_fit = model.transform(X_fit, encoder=encoder)
                cache[key] = Z_fit, model.transform(X_eval, encoder=encoder)
        return cache[key]

    return embed


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
