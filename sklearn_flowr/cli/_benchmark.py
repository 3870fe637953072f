"""``flowr-benchmark``: the paper's few-shot open-world tables, end to end.

For every pre-training (Sup-E, Sup-FC) and setting (small, large context) it
trains a ``FLOWRClassifier`` on the training classes, extracts features of the
evaluation images with the meta-trained encoder (FLOWR) and with the
pre-trained encoder (the baselines), and runs every method through the same
seeded tasks with :func:`~sklearn_flowr.protocol.evaluate_online`. Two
ablation rows ride along: FLOWR's head without meta-training (empirical Bayes
on the pre-trained embedding) and NCM on FLOWR's meta-trained embedding, so
every table says whether meta-training helps and whether the head beats a
distance on the same features. It prints the paper-style table (Acc, Support
Acc, Inc. Acc at the fixed novelty TPR, and the accuracy of the threshold-free
argmax decision, as mean +- 95% CI over tasks; H-measure, AUROC, expected
calibration error over 15 equal-width bins and Brier score of P(novel)
against first sightings, pooled over the run; n/a for a baseline, whose
novelty output is not a probability), writes a JSON of all figures and a PNG
of the ROC curves and reliability diagrams. Trained models and features are
cached, so a re-run only evaluates. ``--n-jobs`` spreads tasks over joblib
workers; inside ``joblib.parallel_config(backend="dask")`` they go to a Dask
cluster.
"""

from __future__ import annotations

import argparse
import copy
import functools
import inspect
import itertools
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from ..datasets import load_fashion_mnist, load_glyphs
from ..encoders._factory import BACKBONE_NAMES
from ..protocol import LargeContextTasks, SmallContextTasks, evaluate_online
from ..protocol._calibrate import small_context_sizes as _small_context_sizes
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
    calibration_folds,
    cross_fit_option_problem,
    cross_fit_setting_problem,
    features_or_load,
    fit_or_load_model,
    load_benchmark_data,
    method_features,
    method_template,
    model_key,
    split_fit_and_held_out,
)
from ._options import HelpFormatter, integer, plain_text, real, real_or_auto

__all__ = ["benchmark_data", "build_parser", "format_table", "main", "model_params",
           "parse_args", "run_benchmark", "setting_data"]

_TPR = {"small": 0.15, "large": 0.6}
_FASHION_MNIST_PATH = inspect.signature(load_fashion_mnist).parameters[
    "path"].default
_MIN_FONTS = inspect.signature(load_glyphs).parameters["min_fonts"].default
# Seeds go to numpy's RandomState and torch, which take 0 .. 2**32 - 1.
_MAX_SEED = 2**32 - 1
# What --quick sets, on options left at their defaults. The --help text of
# --quick is generated from this dict, so the two cannot drift apart.
_QUICK = dict(dataset="glyphs", tasks=200, lc_known_query_classes=20,
              pretrain_epochs=3, meta_epochs=3, episodes_per_epoch=30,
              embedding_dim=32, evm_tasks=50)


def _quick_help() -> str:
    values = ", ".join(f"--{key.replace('_', '-')} {value}"
                       for key, value in _QUICK.items())
    return (f"a short run (about 10 minutes on 2 CPU cores); sets {values}. An "
            "option given explicitly keeps its value")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``flowr-benchmark`` (``--quick`` not applied)."""
    parser = argparse.ArgumentParser(
        prog="flowr-benchmark", description=plain_text(__doc__),
        formatter_class=HelpFormatter)
    add = parser.add_argument
    add("--dataset", choices=DATASETS, default="glyphs",
        help="images to run on: rendered font glyphs (bundled fonts), kanji "
        "drawn from KanjiVG's strokes (pip install sklearn-flowr[kanji]), "
        "Fashion-MNIST (idx files) or scikit-learn's 8x8 digits")
    add("--data-path", default=None,
        help="folder of the idx files (fashion-mnist; default: "
        f"{_FASHION_MNIST_PATH})")
    add("--font-dir", action="append", default=[],
        help="extra font folder for glyphs (repeatable), e.g. /usr/share/fonts")
    add("--max-fonts", type=integer(_MIN_FONTS, why=" (a glyph class needs "
                                     f"{_MIN_FONTS} fonts)"), default=None,
        help="glyphs: at most this many fonts per class, a seeded choice "
        "(default: all)")
    add("--kanji-classes", type=integer(20, why=" (about a fifth of them "
                                         "are test classes)"),
        default=KANJI_CLASSES,
        help="kanji: characters drawn, by a fixed hash; about 60%% are the "
        "training (large context: known-known) classes, 20%% the test classes")
    add("--kanji-instances", type=integer(20, why=" (a small-context task "
                                           "takes up to 10 shots and 10 queries "
                                           "of a class)"),
        default=KANJI_INSTANCES,
        help="kanji: drawings per character")
    add("--setting", nargs="+", choices=("small", "large"),
        default=["small", "large"], help="evaluation settings (contexts) to run")
    add("--methods", nargs="+", choices=METHODS, default=list(DEFAULT_METHODS),
        help="methods to evaluate on the same tasks; flowr-no-meta (FLOWR's "
        "head by empirical Bayes on the pre-trained embedding, no "
        "meta-training) and ncm-flowr-emb (NCM on FLOWR's meta-trained "
        "embedding) are the ablation; flowr-full-cal is flowr-full with "
        "P(novel) calibrated on episodes of the training classes, "
        "flowr-full-cvcal on classes held out of training "
        "(--calibration-cv; added by it)")
    add("--pretrain", nargs="+", choices=("sup-e", "sup-fc", "none"),
        default=["sup-e", "sup-fc"],
        help="encoder pre-trainings; 'none' keeps the encoder untrained "
        "(a reference row)")
    # Image backbones: "mlp" takes feature vectors, not the benchmark's images.
    add("--backbone", choices=[name for name in BACKBONE_NAMES if name != "mlp"],
        default="conv4",
        help="encoder architecture")
    add("--tasks", type=integer(1), default=1000, help="tasks per setting")
    add("--evm-tasks", type=integer(1), default=None,
        help="evaluate EVM on the first N tasks only, it is ~50x slower "
        "(default: all tasks)")
    add("--lc-known-query-classes", type=integer(1), default=None,
        help="known classes queried per large-context task (default: all)")
    add("--max-per-class", type=integer(2, why=": the large context fits on "
                                         "half of each class and queries the "
                                         "other half"), default=None,
        help="cap on images per class, bounds training time (default: no cap)")
    add("--embedding-dim", type=integer(1), default=64,
        help="embedding dimension")
    add("--pretrain-epochs", type=integer(0), default=20,
        help="epochs of Sup-E / Sup-FC pre-training")
    add("--meta-epochs", type=integer(0), default=10,
        help="epochs of meta-training")
    add("--episodes-per-epoch", type=integer(1), default=100,
        help="meta-training episodes per epoch")
    add("--meta-lr", type=real(0.0, closed=False), default=None,
        help="meta-training learning rate (default: a tenth of the pre-training "
        "rate)")
    add("--lambda-adapt", type=real(0.0), default=0.1,
        help="weight of the adaptation loss in meta-training")
    add("--prior-scale", type=real(0.0, closed=False), default=1.0,
        help="FLOWR full: factor on its empirical-Bayes prior covariance "
        "(FLOWRClassifier's prior_scale; 1.0: plain empirical Bayes)")
    add("--noise-shrinkage", type=real_or_auto(0.0, 1.0), default=0.0,
        help="FLOWR full: extra shrinkage of its empirical-Bayes noise "
        "covariance towards isotropic, in [0, 1] (FLOWRClassifier's "
        "noise_shrinkage; 0.0: the Ledoit-Wolf estimate); 'auto' (needs "
        "--calibration-cv): flowr-full-cvcal chooses it on its folds' held-out "
        "classes, the other full-head rows keep 0.0")
    add("--calibration-cv", type=integer(2), default=None, metavar="K",
        help="add flowr-full-cvcal: P(novel) mapped on tasks of training "
        "classes held out of K models trained on the others "
        "(FLOWRClassifier's calibration_cv; K more trainings per model, not "
        "cached)")
    add("--calibration-held-classes", type=integer(1), default=None,
        metavar="M",
        help="with --calibration-cv: each of the K folds holds out M random "
        "training classes (GroupShuffleSplit) instead of a K-th of them "
        "(GroupKFold)")
    add("--fine-tune-steps", type=integer(0), default=0,
        help="small context: last-layer fine-tuning steps on each task's support "
        "set (FLOWR runs on images then, not on cached features)")
    add("--n-jobs", type=integer(1), default=1, help="joblib workers over tasks")
    add("--device", default="auto",
        help="torch device of training and feature extraction: auto (CUDA when "
        "available), cpu, cuda, cuda:1, ...")
    add("--seed", type=integer(0, _MAX_SEED), default=0,
        help="seed of data subsampling, training and task sampling")
    add("--out", default="flowr-benchmark-out",
        help="folder for results.json and roc.png")
    add("--cache-dir", default=str(Path.home() / ".cache" / "sklearn_flowr"),
        help="cache of rendered data, trained models and features ('' disables)")
    add("--quick", action="store_true", help=_quick_help())
    add("-v", "--verbose", type=integer(0), default=1, metavar="LEVEL",
        help="0: only the tables; 1: a line per stage, training progress bars "
        "and a progress bar per evaluation; 2: also FLOWR's per-task "
        "fine-tuning bars")
    add("-q", "--quiet", action="store_const", const=0, dest="verbose",
        help="same as --verbose 0")
    return parser


def parse_args(argv=None) -> argparse.Namespace:
    """Parse the options; ``--quick`` changes the defaults, not given values."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.quick:
        parser.set_defaults(**_QUICK)
        args = parser.parse_args(argv)
    problem = cross_fit_option_problem(args)
    if problem:
        parser.error(problem)
    if args.calibration_cv is not None and "flowr-full-cvcal" not in args.methods:
        args.methods = [*args.methods, "flowr-full-cvcal"]
    return args


def benchmark_data(args):
    """The run's train/test images (:func:`load_benchmark_data` with the
    options of ``args``; rendered glyphs and kanji cached under
    ``--cache-dir``)."""
    cache = args.cache_dir or None
    return load_benchmark_data(args.dataset, data_path=args.data_path,
                               font_dirs=args.font_dir,
                               max_fonts=args.max_fonts,
                               max_per_class=args.max_per_class,
                               kanji_classes=args.kanji_classes,
                               kanji_instances=args.kanji_instances,
                               cache_dir=None if cache is None
                               else Path(cache) / "data",
                               random_state=args.seed)


def model_params(args, setting: str, pretrain: str) -> dict:
    """``FLOWRClassifier`` parameters of the run's model for one setting and
    pre-training (the model cache is keyed by them)."""
    return dict(backbone=args.backbone, setting=setting,
                pretrain=None if pretrain == "none" else pretrain,
                embedding_dim=args.embedding_dim,
                pretrain_epochs=args.pretrain_epochs,
                meta_epochs=args.meta_epochs,
                episodes_per_epoch=args.episodes_per_epoch,
                meta_lr=args.meta_lr, lambda_adapt=args.lambda_adapt,
                # "flowr" is the paper's isotropic head, unmapped;
                # "flowr-full" (FLOWRClassifier's default head) and
                # "flowr-full-cal" are built from the same encoder's
                # cached features.
                covariance="isotropic", calibrate_novelty=False,
                device=args.device, random_state=args.seed,
                # Training progress (skorch's epoch tables and bars).
                verbose=int(args.verbose >= 1))


def setting_data(setting: str, data, seed):
    """``(X_fit, y_fit, X_eval, y_eval)`` of one context: small, the
    training classes fit and the test classes are evaluated; large, half of
    every training class fits (the known-known classes) and the other half
    is evaluated with the test classes."""
    if setting == "small":
        return data.X_train, data.y_train, data.X_test, data.y_test
    fit_rows, held_rows = split_fit_and_held_out(data.y_train, seed)
    return (data.X_train[fit_rows], data.y_train[fit_rows],
            np.concatenate([data.X_train[held_rows], data.X_test]),
            np.concatenate([data.y_train[held_rows], data.y_test]))


def run_benchmark(args, log=print) -> dict:
    """Train, extract and evaluate; return every figure as a JSON-able dict."""
    cache = args.cache_dir or None
    start = time.perf_counter()
    log(f"loading {args.dataset} ...")
    data = benchmark_data(args)
    n_train_classes = np.unique(data.y_train).shape[0]
    n_test_classes = np.unique(data.y_test).shape[0]
    log(f"{args.dataset}: {n_train_classes} training classes "
        f"({data.y_train.shape[0]} images), {n_test_classes} test classes "
        f"({data.y_test.shape[0]} images), images {data.X_train.shape[1:]}")
    data_key = data.fingerprint()
    results = {"args": vars(args), "dataset": {
        "name": args.dataset, "n_train_classes": int(n_train_classes),
        "n_test_classes": int(n_test_classes)}, "calibration": CALIBRATION,
        "settings": {}}
    if "flowr-full-cvcal" in args.methods:
        # Folds that cannot train fail now, not after the encoders have.
        for setting, pretrain in itertools.product(args.setting, args.pretrain):
            X_fit, y_fit = setting_data(setting, data, args.seed)[:2]
            problem = cross_fit_setting_problem(
                calibration_folds(args), model_params(args, setting, pretrain),
                X_fit, y_fit, args.seed)
            if problem:
                build_parser().error(problem)
    for setting in args.setting:
        results["settings"][setting] = _run_setting(setting, args, data, data_key,
                                                    cache, log)
    results["seconds"] = time.perf_counter() - start
    return results


def benchmark_tasks(setting, y_fit, y_eval, y_test, args):
    """The setting's evaluation tasks over ``y_eval`` (the rows of
    :func:`setting_data`) and a description of their protocol."""
    if setting == "small":
        n_support, n_novel = _small_context_sizes(np.unique(y_eval).shape[0])
        tasks = SmallContextTasks(y_eval, n_support_classes=n_support,
                                  n_novel_classes=n_novel, n_tasks=args.tasks,
                                  random_state=args.seed)
        return tasks, {"n_support_classes": n_support, "n_novel_classes": n_novel,
                       "shots": [1, 10], "n_query": 10}
    n_novel = min(5, np.unique(y_test).shape[0])
    n_known = int(np.unique(y_fit).shape[0])
    # A cap above the number of known classes (--quick on a ten-class
    # dataset) means "all of them".
    n_queried = (None if args.lc_known_query_classes is None
                 or args.lc_known_query_classes >= n_known
                 else args.lc_known_query_classes)
    tasks = LargeContextTasks(y_eval, np.unique(y_fit), n_novel_classes=n_novel,
                              n_tasks=args.tasks, n_known_query_classes=n_queried,
                              random_state=args.seed)
    return tasks, {"n_known_classes": n_known, "n_known_query_classes": n_queried,
                   "n_novel_classes": n_novel, "n_query": 10}


def _run_setting(setting, args, data, data_key, cache, log):
    X_fit, y_fit, X_eval, y_eval = setting_data(setting, data, args.seed)
    tasks, protocol = benchmark_tasks(setting, y_fit, y_eval, data.y_test, args)
    log(f"\n== {setting} context: {args.tasks} tasks, {protocol}")
    out = {"protocol": protocol, "tpr": _TPR[setting], "rows": []}
    for pretrain in args.pretrain:
        params = model_params(args, setting, pretrain)
        tic = time.perf_counter()
        log(f"-- {pretrain} pre-training, {setting} context")
        model = fit_or_load_model(params, X_fit, y_fit, data_key=data_key,
                                  cache_dir=cache, log=log)
        features = features_or_load(model_key(params, data_key), model,
                                    {"fit": X_fit, "eval": X_eval}, cache_dir=cache,
                                    log=log)
        log(f"   model and features in {time.perf_counter() - tic:.1f} s")
        for method in args.methods:
            kind = method_features(method)
            cross_fit = dict(X=X_fit, cv=calibration_folds(args),
                             choose_shrinkage=args.noise_shrinkage == "auto")
            template = method_template(
                method, setting, model, features[f"{kind}/fit"], y_fit,
                prior_scale=args.prior_scale,
                noise_shrinkage=0.0 if args.noise_shrinkage == "auto"
                else args.noise_shrinkage,
                calibration=dict(random_state=args.seed, n_jobs=args.n_jobs,
                                 n_known_query_classes=args.lc_known_query_classes),
                cross_fit=cross_fit)
            X_method = features[f"{kind}/eval"]
            if method == "flowr" and setting == "small" and args.fine_tune_steps:
                # Fine-tuning changes the encoder per task: stream images. A
                # copy, so the cached model keeps its own parameters.
                # Its per-task fine-tuning bars only at --verbose 2: one bar
                # per task otherwise floods the terminal.
                template = copy.deepcopy(model).set_params(
                    fine_tune_steps=args.fine_tune_steps,
                    verbose=int(args.verbose >= 2))
                X_method = X_eval
            method_tasks = tasks
            if method == "evm" and args.evm_tasks is not None:
                method_tasks = tasks[: min(args.evm_tasks, len(tasks))]
            tic = time.perf_counter()
            log(f"   evaluating {METHOD_NAMES[method]} on {len(method_tasks)} "
                "tasks ...")
            report = evaluate_online(template, X_method, y_eval,
                                     method_tasks, setting=setting,
                                     n_jobs=args.n_jobs,
                                     verbose=int(args.verbose >= 1))
            row = row_from_report(method, pretrain, report,
                                  time.perf_counter() - tic)
            if method in ("flowr-full-cal", "flowr-full-cvcal"):
                row["novelty_calibration"] = list(template.novelty_calibration)
                row["noise_shrinkage"] = float(template.noise_shrinkage)
            if method == "flowr-full-cvcal" and cross_fit["result"].h_measures:
                # What "auto" chose from: the folds' mean H and accuracy.
                fitted = cross_fit["result"]
                row["cross_fit_candidates"] = {
                    str(value): {"h_measure": fitted.h_measures[value],
                                 "accuracy": fitted.accuracies[value]}
                    for value in fitted.h_measures}
            out["rows"].append(row)
            calibration = ("" if row["ece"] is None
                           else f" ECE={row['ece']:.3f}")
            log(f"   {METHOD_NAMES[method]:14s} H={row['h_measure']:.3f} "
                f"Acc={row['accuracy']:.3f}{calibration} ({row['n_tasks']} "
                f"tasks, {row['seconds']:.1f} s)")
    out["ablation"] = ablation(out["rows"])
    return out


def _output_problem(args) -> str | None:
    """Why the run could not write its results or cache, or None.

    Creates the folders (as the run would) and opens each output file for
    appending, which creates no content and truncates nothing; files it had
    to create are removed again.
    """
    checks = [(Path(args.out), ("results.json", "roc.png"), "--out",
               "pass a folder you can write to")]
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
        The exit status, 0. An out-of-range option or an ``--out`` /
        ``--cache-dir`` that cannot be written stops earlier, before any data
        is loaded, with a usage error (``SystemExit`` with status 2).

    Examples
    --------
    From a shell, a few minutes on two CPU cores::

        flowr-benchmark --quick --out flowr-benchmark-out

    The options, without running a benchmark:

    >>> from sklearn_flowr.cli._benchmark import build_parser, parse_args
    >>> print(build_parser().format_usage())  # doctest: +ELLIPSIS
    usage: flowr-benchmark [-h] [--dataset {glyphs,kanji,fashion-mnist,digits}] ...
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
    results = run_benchmark(args, log=log)
    out = Path(args.out)
    # The tables are printed before the files are written: a failing write
    # (a full disk) cannot take them along.
    print()
    for setting, setting_result in results["settings"].items():
        print(format_table(setting_result, setting))
        print()
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=1))
    plot_figures(results, out / "roc.png")
    print(f"Figures: {out / 'results.json'}, ROC curves and reliability "
          f"diagrams: {out / 'roc.png'} ({results['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
