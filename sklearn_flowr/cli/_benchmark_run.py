"""The run of ``flowr-benchmark``: fit each pre-training's model per setting and
evaluate every method on the same seeded tasks.
"""

from __future__ import annotations

import copy
import time
from pathlib import Path

import numpy as np

from ..protocol import calibration_scores, evaluate_online
from ._benchmark_conformal import MAX_CALIBRATION_TASKS, conformal_figures
from ._benchmark_discovery import discovery_rows
from ._benchmark_model import build_model, describe_model
from ._benchmark_report import CALIBRATION, ablation, row_from_report
from ._benchmark_setup import (
    METHOD_NAMES,
    Features,
    fit_model,
    load_benchmark_data,
    method_template,
    plan_run,
    progress,
)

__all__ = ["benchmark_data", "run_benchmark"]

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
                               user_data=getattr(args, "data", None),
                               image_size=getattr(args, "image_size", None))


def run_benchmark(args, log=print, data=None) -> dict:
    """Load, train and evaluate; every figure as a JSON-able dict (the options, the
    dataset, per setting the models' parameters, rows and ablation). ``log``
    takes the progress lines; ``data`` None loads it. Data the run cannot use
    raises ``UserDataError`` before any training.
    """
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
        models["flowr"], fit_embeddings["flowr"] = fit_model(
            build_model(args, setting, pretrain), X_fit, y_fit, log=log)
        out["models"][pretrain] = describe_model(models["flowr"])
        if "flowr-no-meta" in args.methods:
            models["flowr-no-meta"], fit_embeddings["flowr-no-meta"] = fit_model(
                build_model(args, setting, pretrain, meta=False), X_fit, y_fit,
                log=log)
            out["models"][f"{pretrain}/no-meta"] = describe_model(
                models["flowr-no-meta"])
        features = Features(models, X_fit, X_eval, fit_embeddings, log=log)
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
