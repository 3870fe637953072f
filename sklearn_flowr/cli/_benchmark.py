"""``flowr-benchmark``: the paper's few-shot open-world tables, end to end.

It evaluates the estimator a user builds: ``FLOWRClassifier()`` with its
defaults, the run's options (backbone, embedding, training budget, seed) and
every ``--set KEY=VALUE`` applied with ``set_params`` (``--set
head__covariance=isotropic --set calibration=None`` is the paper's head). For
every pre-training (``--pretrain``: Sup-E, Sup-FC) and setting (small, large
context) it fits that model on the training classes and runs every method
through the same seeded tasks with
:func:`~sklearn_flowr.protocol.evaluate_online`: FLOWR (the fitted model's own
head on its meta-trained embedding), NCM on that same embedding (does the head
beat a distance on the same features?), and the baselines NCM, ProtoNet, PEELER
and EVM on the pre-trained embedding; ``flowr-no-meta`` (asked for with
``--methods``) fits a second model with ``meta=None`` (does meta-training
help?). It prints the paper-style table (Acc, Support Acc, Inc. Acc at the
fixed novelty TPR, and the accuracy of the threshold-free argmax decision, as
mean +- 95% CI over tasks; H-measure, AUROC, expected calibration error over 15
equal-width bins and Brier score of P(novel) against first sightings, pooled
over the run; n/a for a baseline, whose novelty output is not a probability). A
second table gives every method's conformal novelty decision: each query's
novelty score is ranked among the scores of known-class rows of the OTHER test
tasks (tasks are independent draws from one pool, so these rows are
exchangeable with a task's own known-class rows; ``--conformal-calibration
training`` ranks them among calibration tasks drawn from the training classes
instead), giving a p-value; a query is called novel when it is at most alpha.
It reports, as mean +- standard error over tasks, the false-novel rate (share
of the rows of known classes called novel) at alpha 0.01, 0.05 and 0.1, the
power (share of first sightings called novel) and Benjamini-Hochberg's false
discovery rate and power at q = 0.1 on each task's queries (the JSON also at q
= 0.05 and 0.2); the false-novel rate is at most alpha when the calibration and
test rows are exchangeable, which the figures test. It writes a JSON of all
figures and of every model's parameters, and a PNG of the ROC curves,
reliability diagrams and the false-novel rate against alpha (the diagonal is
the promise). ``--data`` runs on your own data: a folder with a sub-folder of
images per class, or an ``.npz`` of ``X_train``, ``y_train``, ``X_test``,
``y_test`` with class-disjoint labels. ``--n-jobs`` spreads tasks over joblib
workers; inside ``joblib.parallel_config(backend="dask")`` they go to a Dask
cluster.
"""

from __future__ import annotations

import argparse
import copy
import functools
import inspect
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from ..datasets import load_fashion_mnist, load_glyphs
from ..encoders import BACKBONE_NAMES
from ..protocol import evaluate_online
from ..protocol import (  # noqa: F401 (used by benchmarks/)
    small_context_sizes as _small_context_sizes,
)
from ..saving import write_atomically
from ._benchmark_conformal import (
    CALIBRATION_SETS,
    MAX_CALIBRATION_TASKS,
    calibrate,
    conformal_figures,
)
from ._benchmark_discovery import discovery_rows, plot_discovery
from ._benchmark_model import (
    DEFAULT_META,
    DEFAULT_MODEL,
    DEFAULT_PRETRAIN,
    PRETRAININGS,
    build_model,
    check_model_options,
    describe_model,
)
from ._benchmark_report import (
    CALIBRATION,
    ablation,
    format_table,
    plot_figures,
    row_from_report,
)
from ._benchmark_setup import (
    DATASETS,
    DEFAULT_METHODS,
    KANJI_CLASSES,
    KANJI_INSTANCES,
    METHOD_NAMES,
    METHODS,
    Features,
    benchmark_tasks,
    fit_model,
    load_benchmark_data,
    method_template,
    plan_run,
    setting_data,
)
from ._options import HelpFormatter, integer, key_value, plain_text, real
from ._user_data import UserDataError

__all__ = ["benchmark_data", "benchmark_tasks", "build_model", "build_parser",
           "format_table", "main", "parse_args", "run_benchmark", "setting_data"]

_TPR = {"small": 0.15, "large": 0.6}
_FASHION_MNIST_PATH = inspect.signature(load_fashion_mnist).parameters[
    "path"].default
_MIN_FONTS = inspect.signature(load_glyphs).parameters["min_fonts"].default
# Seeds go to numpy's RandomState and torch, which take 0 .. 2**32 - 1.
_MAX_SEED = 2**32 - 1
# Caps on sizes, checked by argparse: beyond them a run would exhaust memory
# or time long after it started (after the training, for the tasks), so they
# are refused before anything runs. Counts the run only compares (class caps)
# get the int32 bound the model's own counts have.
_MAX_COUNT = 2**31 - 1
_MAX_TASKS = 10**6
_MAX_JOBS = 1024
_MAX_KANJI_INSTANCES = 1000
_TASKS_WHY = " (every task's predictions are held in memory)"
# What --quick sets, on options left at their defaults. The --help text of
# --quick is generated from this dict, so the two cannot drift apart.
_QUICK = dict(dataset="glyphs", tasks=200, lc_known_query_classes=20,
              pretrain_epochs=3, meta_epochs=3, episodes_per_epoch=30,
              embedding_dim=32, evm_tasks=50)


def _quick_help() -> str:
    values = ", ".join(f"--{key.replace('_', '-')} {value}"
                       for key, value in _QUICK.items())
    return ("a short run (1 min 53 s on 2 quiet CPU cores, see README); sets "
            f"{values}. An option given explicitly keeps its value")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``flowr-benchmark`` (``--quick`` not applied)."""
    parser = argparse.ArgumentParser(
        prog="flowr-benchmark", description=plain_text(__doc__),
        formatter_class=HelpFormatter)
    add = parser.add_argument
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--dataset", choices=DATASETS, default="glyphs",
        help="images to run on: rendered font glyphs (bundled fonts), kanji "
        "drawn from KanjiVG's strokes (pip install sklearn-flowr[kanji]), "
        "Fashion-MNIST (idx files) or scikit-learn's 8x8 digits")
    source.add_argument(
        "--data", default=None, metavar="PATH",
        help="your own data instead of --dataset: a folder with one sub-folder "
        "of images per class (at least 4; about half of them, a choice by "
        "--seed, are the training classes, the others the test classes), or an "
        ".npz file of X_train, y_train, X_test, y_test (numbers, read without "
        "unpickling; class-disjoint labels; X images (n, H, W), (n, H, W, C), "
        "(n, C, H, W), or features (n, d) with --backbone mlp) (default: none)")
    add("--data-path", default=None,
        help="folder of the idx files (fashion-mnist; default: "
        f"{_FASHION_MNIST_PATH})")
    add("--font-dir", action="append", default=[],
        help="extra font folder for glyphs (repeatable), e.g. /usr/share/fonts")
    add("--max-fonts", type=integer(_MIN_FONTS, why=" (a glyph class needs "
                                     f"{_MIN_FONTS} fonts)", cap=_MAX_COUNT),
        default=None,
        help="glyphs: at most this many fonts per class, a seeded choice "
        "(default: all)")
    add("--kanji-classes", type=integer(20, why=" (about a fifth of them "
                                         "are test classes)", cap=_MAX_COUNT),
        default=KANJI_CLASSES,
        help="kanji: characters drawn, by a fixed hash; about 60%% are the "
        "training (large context: known-known) classes, 20%% the test classes")
    add("--kanji-instances", type=integer(20, why=" (a small-context task "
                                           "takes up to 10 shots and 10 queries "
                                           "of a class)",
                                           cap=_MAX_KANJI_INSTANCES,
                                           cap_why=" (every drawing is held "
                                           "in memory)"),
        default=KANJI_INSTANCES,
        help="kanji: drawings per character")
    add("--setting", nargs="+", choices=("small", "large"),
        default=["small", "large"], help="evaluation settings (contexts) to run")
    add("--methods", nargs="+", choices=METHODS, default=list(DEFAULT_METHODS),
        help="methods to evaluate on the same tasks: flowr (the fitted "
        "FLOWRClassifier's head), ncm-flowr-emb (NCM on its meta-trained "
        "embedding), flowr-no-meta (a second FLOWRClassifier fitted with "
        "meta=None: one more training per model, so not run by default) and the "
        "baselines on the pre-trained embedding")
    add("--pretrain", nargs="+", choices=tuple(PRETRAININGS),
        default=["sup-e", "sup-fc"],
        help="pre-trainings, one model each: pretrain=SupE(), SupFC() or None "
        "(no pre-training: meta-training starts from the untrained encoder, "
        "which the baselines then run on)")
    add("--backbone", choices=BACKBONE_NAMES, default=DEFAULT_MODEL.backbone,
        help="encoder architecture (FLOWRClassifier's backbone); mlp reads "
        "feature vectors: --data with an .npz of 2-d X")
    add("--tasks", type=integer(1, cap=_MAX_TASKS, cap_why=_TASKS_WHY),
        default=1000, help="tasks per setting")
    add("--evm-tasks", type=integer(1, cap=_MAX_TASKS, cap_why=_TASKS_WHY),
        default=None,
        help="evaluate EVM on the first N tasks only, it is ~50x slower "
        "(default: all tasks)")
    add("--lc-known-query-classes", type=integer(1, cap=_MAX_COUNT),
        default=None,
        help="known classes queried per large-context task (default: all)")
    add("--max-per-class", type=integer(2, why=": the large context fits on "
                                         "half of each class and queries the "
                                         "other half", cap=_MAX_COUNT),
        default=None,
        help="cap on images per class, bounds training time (default: no cap)")
    add("--embedding-dim", type=integer(1), default=DEFAULT_MODEL.embedding_dim,
        help="embedding dimension (embedding_dim)")
    add("--pretrain-epochs", type=integer(0), default=DEFAULT_PRETRAIN.epochs,
        help="epochs of Sup-E / Sup-FC pre-training (pretrain__epochs)")
    add("--meta-epochs", type=integer(1), default=DEFAULT_META.epochs,
        help="epochs of meta-training (meta__epochs; for none, --methods "
        "flowr-no-meta or --set meta=None)")
    add("--episodes-per-epoch", type=integer(1),
        default=DEFAULT_META.episodes_per_epoch,
        help="meta-training episodes per epoch (meta__episodes_per_epoch)")
    add("--meta-lr", type=real(0.0, closed=False), default=DEFAULT_META.encoder_lr,
        help="meta-training learning rate (meta__encoder_lr; default: a tenth of the "
        "pre-training rate)")
    add("--lambda-adapt", type=real(0.0), default=DEFAULT_META.lambda_adapt,
        help="weight of the adaptation loss in meta-training (meta__lambda_adapt)")
    add("--fine-tune-steps", type=integer(0),
        default=DEFAULT_MODEL.fine_tune_steps,
        help="small context: last-layer fine-tuning steps on each task's support "
        "set (fine_tune_steps; FLOWR then runs on images, its encoder tuned per "
        "task)")
    add("--set", action="append", type=key_value, default=[],
        metavar="KEY=VALUE",
        help="set a FLOWRClassifier parameter with set_params after the options "
        "above, nested ones as head__sigma or meta__n_way (repeatable; VALUE is "
        "a Python literal or else a string), e.g. --set "
        "head__covariance=isotropic --set calibration=None for the paper's head, "
        "--set head__prior_scale=2, --set calibration=3; a key or value the "
        "model refuses stops the run before any data is loaded (default: none)")
    add("--conformal-calibration", choices=CALIBRATION_SETS, default="tasks",
        help="calibration rows of the conformal novelty decision: tasks, the "
        "known-class rows of the other test tasks (classes the encoder never "
        "saw, cross-conformal over tasks); training, calibration tasks drawn "
        "from the training classes (the encoder saw them; a run per method)")
    add("--label-fraction", type=real(0.0, 1.0), nargs="+", default=None,
        metavar="F",
        help="also run class discovery under a label budget: the share of "
        "queries whose label arrives, e.g. 0 0.1 (FLOWR's head, the isotropic "
        "head and DP-means on FLOWR's embedding; a table, the JSON's "
        "discovery rows and discovery.png; default: not run)")
    add("--label-delay", type=integer(0, cap=_MAX_COUNT), default=0,
        help="with --label-fraction: rows after its query that a label arrives "
        "(0: right after the prediction)")
    add("--n-jobs", type=integer(1, cap=_MAX_JOBS,
                                 cap_why=" (joblib starts that many workers)"),
        default=1, help="joblib workers over tasks")
    add("--device", default=DEFAULT_MODEL.device,
        help="torch device of training and feature extraction: auto (CUDA when "
        "available), cpu, cuda, cuda:1, ...")
    add("--seed", type=integer(0, _MAX_SEED), default=0,
        help="seed of data subsampling, training (random_state) and task "
        "sampling")
    add("--out", default="flowr-benchmark-out",
        help="folder for results.json and roc.png (ROC curves, reliability "
        "diagrams, conformal false-novel rate against alpha)")
    add("--cache-dir", default=str(Path.home() / ".cache" / "sklearn_flowr"),
        help="cache of rendered glyph and kanji images, plain arrays read back "
        "without unpickling ('' disables). Trained models are never cached: "
        "each run trains its own")
    add("--quick", action="store_true", help=_quick_help())
    add("-v", "--verbose", type=integer(0, cap=_MAX_COUNT), default=1,
        metavar="LEVEL",
        help="0: only the tables; 1: a line per stage, training progress bars "
        "and a progress bar per evaluation; 2: also FLOWR's per-task "
        "fine-tuning bars")
    add("-q", "--quiet", action="store_const", const=0, dest="verbose",
        help="same as --verbose 0")
    return parser


def parse_args(argv=None) -> argparse.Namespace:
    """Parse the options; ``--quick`` changes the defaults, not given values.

    Every model the run will fit is built and validated here (its options and
    ``--set`` items, as ``fit`` checks them before training), and ``--data``
    must exist: a problem is a usage error (``SystemExit`` with status 2)
    before any data is loaded.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.quick:
        parser.set_defaults(**_QUICK)
        args = parser.parse_args(argv)
    if args.data is not None:
        path = Path(args.data)
        if not path.exists():
            parser.error(f"--data {args.data!r}: no such file or folder.")
        args.dataset = path.name
    problem = check_model_options(args)
    if problem:
        parser.error(problem)
    if args.data is None and _backbone(args) == "mlp":
        parser.error(f"--backbone mlp reads feature vectors, and --dataset "
                     f"{args.dataset} holds images: choose an image backbone, or "
                     "pass --data FILE.npz with 2-d X_train and X_test.")
    return args


def _backbone(args):
    """The backbone of the run's models (the options, then ``--set``)."""
    return build_model(args, args.setting[0], args.pretrain[0]).backbone


def benchmark_data(args):
    """The run's train/test images (:func:`load_benchmark_data` with the
    options of ``args``; rendered glyphs and kanji cached under
    ``--cache-dir``; ``--data``'s problems raise
    :class:`~._user_data.UserDataError`)."""
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
                               user_data=getattr(args, "data", None))


def run_benchmark(args, log=print, data=None) -> dict:
    """Load, train and evaluate; return every figure as a JSON-able dict.

    Parameters
    ----------
    args : argparse.Namespace
        The options (:func:`parse_args`).
    log : callable, default=print
        Takes the progress lines.
    data : BenchmarkData or None, default=None
        The data; ``None`` loads it (:func:`benchmark_data`).

    Returns
    -------
    results : dict
        The options, the dataset, and per setting the models' parameters, the
        rows of every (pre-training, method) and the ablation.

    Raises
    ------
    UserDataError
        Before any training: data the run cannot use (from ``--data``, or
        tasks the data cannot give).
    """
    start = time.perf_counter()
    if data is None:
        log(f"loading {args.dataset} ...")
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
    out = {"protocol": protocol, "tpr": _TPR[setting], "models": {}, "rows": []}
    for pretrain in args.pretrain:
        tic = time.perf_counter()
        log(f"-- {pretrain} pre-training, {setting} context")
        models, fit_embeddings = {}, {}
        models["flowr"], fit_embeddings["flowr"] = fit_model(
            build_model(args, setting, pretrain), X_fit, y_fit, log=log)
        out["models"][pretrain] = describe_model(models["flowr"])
        if "flowr-no-meta" in args.methods:
            models["flowr-no-meta"], fit_embeddings["flowr-no-meta"] = fit_model(
                build_model(args, setting, pretrain, meta=False), X_fit, y_fit,
                log=log)
            out["models"][f"{pretrain}/no-meta"] = describe_model(
                models["flowr-no-meta"])
        features = Features(models, X_fit, X_eval, fit_embeddings)
        log(f"   models in {time.perf_counter() - tic:.1f} s")
        for method in args.methods:
            model = models.get(method, models["flowr"])
            Z_fit, X_method = features(method)
            template = method_template(method, setting, model, Z_fit, y_fit)
            # The conformal calibration run reads the same kind of rows as
            # the test run: the fit classes' features, or their images when
            # FLOWR fine-tunes per task.
            X_calibration = Z_fit
            if (method in models and setting == "small"
                    and model.fine_tune_steps):
                # Fine-tuning changes the encoder per task: stream images,
                # through the whole model (adapt starts each task). Its
                # per-task fine-tuning bars only at --verbose 2: one bar per
                # task otherwise floods the terminal.
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
    """The conformal figures of one row (:func:`conformal_figures`): with
    ``--conformal-calibration tasks``, each test task calibrated on the
    other tasks' known-class rows; with ``training``, on a calibration run of
    ``template`` on the training classes ``(X_fit, y_fit)`` with as many
    tasks as the test run (at most 200) and the run's seed. None, logged,
    where the rows cannot give a calibration set."""
    tic = time.perf_counter()
    try:
        if args.conformal_calibration == "tasks":
            figures = conformal_figures(rows)
        else:
            n_calibration = min(n_tasks, MAX_CALIBRATION_TASKS)
            log(f"   conformal calibration of {METHOD_NAMES[method]} on "
                f"{n_calibration} training-class tasks ...")
            calibration = calibrate(
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


def _output_problem(args) -> str | None:
    """Why the run could not write its results or cache, or None.

    Creates the folders (as the run would) and opens each output file for
    appending, which creates no content and truncates nothing; files it had
    to create are removed again.
    """
    checks = [(Path(args.out), ("results.json", "roc.png", "discovery.png"),
               "--out", "pass a folder you can write to")]
    if args.cache_dir:
        checks.append((Path(args.cache_dir), (), "--cache-dir",
                       "pass a folder you can write to, or --cache-dir '' to "
                       "run without a cache"))
    for folder, names, option, fix in checks:
        probe = f".flowr-benchmark-write-test-{os.getpid()}"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            for name in (*names, probe):
                target = folder / name
                existed = target.exists()
                with open(target, "ab"):
                    pass
                if not existed:
                    target.unlink()
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
        The exit status: 0, or 1 when results.json or roc.png cannot be
        written (a full disk; a one-line message names the file, after the
        tables are printed). An out-of-range option, a ``--device`` this
        machine lacks, a ``--set`` the model refuses, an ``--out`` /
        ``--cache-dir`` that cannot be written or ``--data`` the run cannot
        use stops earlier, before any training, with a usage error
        (``SystemExit`` with status 2).

    Examples
    --------
    From a shell, a few minutes on two CPU cores::

        flowr-benchmark --quick --out flowr-benchmark-out

    The paper's isotropic head, without the novelty calibration::

        flowr-benchmark --quick --set head__covariance=isotropic \\
            --set calibration=None

    The options, without running a benchmark:

    >>> from sklearn_flowr.cli._benchmark import build_parser, parse_args
    >>> print(build_parser().format_usage())  # doctest: +ELLIPSIS
    usage: flowr-benchmark [-h] [--dataset {glyphs,...} | --data PATH] ...
    >>> args = parse_args(["--quick", "--tasks", "50"])  # --quick keeps --tasks
    >>> args.dataset, args.tasks, args.pretrain_epochs
    ('glyphs', 50, 3)
    """
    args = parse_args(argv)
    # Outputs first: a folder that cannot be written must stop the run before
    # hours of training, not after them.
    problem = _output_problem(args)
    if problem:
        build_parser().error(problem)
    # Flushed, so stage lines keep their place among the progress bars (on
    # stderr) when the output goes to a file.
    log = (functools.partial(print, flush=True) if args.verbose
           else (lambda *a, **k: None))
    try:
        # Raised only before training: the data and the tasks are checked
        # first.
        results = run_benchmark(args, log=log)
    except UserDataError as exc:
        build_parser().error(str(exc))
    out = Path(args.out)
    # The tables are printed before the files are written: a failing write
    # (a full disk) cannot take them along.
    print()
    for setting, setting_result in results["settings"].items():
        print(format_table(setting_result, setting))
        print()
    log(f"writing {out / 'results.json'} and drawing {out / 'roc.png'} ...")
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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
