"""``flowr-benchmark``: the paper's few-shot open-world tables, end to end.

For every pre-training (Sup-E, Sup-FC) and setting (small, large context) it
trains a ``FLOWRClassifier`` on the training classes, extracts features of the
evaluation images with the meta-trained encoder (FLOWR) and with the
pre-trained encoder (the baselines), and runs every method through the same
seeded tasks with :func:`~sklearn_flowr.protocol.evaluate_online`. It prints
the paper-style table (Acc, Support Acc, Inc. Acc as mean +- 95% CI over
tasks; H-measure and AUROC of P(novel) pooled over the run), writes a JSON of
all figures and a PNG of the ROC curves. Trained models and features are
cached, so a re-run only evaluates. ``--n-jobs`` spreads tasks over joblib
workers; inside ``joblib.parallel_config(backend="dask")`` they go to a Dask
cluster.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path

import numpy as np

from ..protocol import LargeContextTasks, SmallContextTasks, evaluate_online
from ._benchmark_setup import (
    DATASETS,
    METHOD_NAMES,
    METHODS,
    features_or_load,
    fit_or_load_model,
    load_benchmark_data,
    method_template,
    model_key,
    split_fit_and_held_out,
)

_TPR = {"small": 0.15, "large": 0.6}
_COLUMNS = ("accuracy", "support_accuracy", "incremental_accuracy")
_QUICK = dict(dataset="glyphs", tasks=200, lc_known_query_classes=20,
              pretrain_epochs=3, meta_epochs=3, episodes_per_epoch=30,
              embedding_dim=32, evm_tasks=50)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="flowr-benchmark", description=__doc__.split("\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    add = parser.add_argument
    add("--dataset", choices=DATASETS, default="glyphs")
    add("--data-path", default=None, help="folder of the idx files (fashion-mnist)")
    add("--font-dir", action="append", default=[],
        help="extra font folder for glyphs (repeatable), e.g. /usr/share/fonts")
    add("--max-fonts", type=int, default=None,
        help="glyphs: at most this many fonts per class (a seeded choice)")
    add("--setting", nargs="+", choices=("small", "large"),
        default=["small", "large"])
    add("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    add("--pretrain", nargs="+", choices=("sup-e", "sup-fc", "none"),
        default=["sup-e", "sup-fc"],
        help="'none' keeps the encoder untrained (a reference row)")
    add("--backbone", choices=("conv4", "resnet12", "resnet18"), default="conv4")
    add("--tasks", type=int, default=1000, help="tasks per setting")
    add("--evm-tasks", type=int, default=None,
        help="evaluate EVM on the first N tasks only (it is ~50x slower)")
    add("--lc-known-query-classes", type=int, default=None,
        help="known classes queried per large-context task (default: all)")
    add("--max-per-class", type=int, default=None,
        help="cap on images per class (bounds training time)")
    add("--embedding-dim", type=int, default=64)
    add("--pretrain-epochs", type=int, default=20)
    add("--meta-epochs", type=int, default=10)
    add("--episodes-per-epoch", type=int, default=100)
    add("--meta-lr", type=float, default=None,
        help="meta-training learning rate (default: a tenth of the pre-training rate)")
    add("--lambda-adapt", type=float, default=0.1,
        help="weight of the adaptation loss in meta-training")
    add("--fine-tune-steps", type=int, default=0,
        help="small context: last-layer fine-tuning steps on each task's support "
        "set (FLOWR runs on images then, not on cached features)")
    add("--n-jobs", type=int, default=1, help="joblib workers over tasks")
    add("--device", default="auto")
    add("--seed", type=int, default=0)
    add("--out", default="flowr-benchmark-out", help="folder for JSON and PNG")
    add("--cache-dir", default=str(Path.home() / ".cache" / "sklearn_flowr"),
        help="cache of rendered data, trained models and features ('' disables)")
    add("--quick", action="store_true",
        help="a few minutes on 2 CPU cores: glyphs, short training, "
        f"{_QUICK['tasks']} tasks, {_QUICK['lc_known_query_classes']} known "
        "classes queried per large-context task")
    add("--verbose", type=int, default=1)
    return parser


def parse_args(argv=None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.quick:
        defaults = parser.parse_args([])
        for key, value in _QUICK.items():
            if getattr(args, key) == getattr(defaults, key):
                setattr(args, key, value)
    for name in ("tasks", "embedding_dim", "episodes_per_epoch", "n_jobs"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    for name in ("lambda_adapt", "fine_tune_steps"):
        if getattr(args, name) < 0:
            parser.error(f"--{name.replace('_', '-')} must be >= 0")
    if args.meta_lr is not None and not args.meta_lr > 0:
        parser.error("--meta-lr must be > 0")
    return args


def _small_context_sizes(n_test_classes):
    """The paper's 10 support + 5 novel classes, in proportion for small splits."""
    if n_test_classes >= 15:
        return 10, 5
    n_novel = max(1, round(n_test_classes / 3))
    return n_test_classes - n_novel, n_novel


def run_benchmark(args, log=print) -> dict:
    """Train, extract and evaluate; return every figure as a JSON-able dict."""
    cache = args.cache_dir or None
    start = time.perf_counter()
    data = load_benchmark_data(args.dataset, data_path=args.data_path,
                               font_dirs=args.font_dir,
                               max_fonts=args.max_fonts,
                               max_per_class=args.max_per_class,
                               cache_dir=None if cache is None
                               else Path(cache) / "data",
                               random_state=args.seed)
    n_train_classes = np.unique(data.y_train).shape[0]
    n_test_classes = np.unique(data.y_test).shape[0]
    log(f"{args.dataset}: {n_train_classes} training classes "
        f"({data.y_train.shape[0]} images), {n_test_classes} test classes "
        f"({data.y_test.shape[0]} images), images {data.X_train.shape[1:]}")
    data_key = data.fingerprint()
    results = {"args": vars(args), "dataset": {
        "name": args.dataset, "n_train_classes": int(n_train_classes),
        "n_test_classes": int(n_test_classes)}, "settings": {}}
    for setting in args.setting:
        results["settings"][setting] = _run_setting(setting, args, data, data_key,
                                                    cache, log)
    results["seconds"] = time.perf_counter() - start
    return results


def _run_setting(setting, args, data, data_key, cache, log):
    if setting == "small":
        X_fit, y_fit = data.X_train, data.y_train
        X_eval, y_eval = data.X_test, data.y_test
        n_support, n_novel = _small_context_sizes(np.unique(y_eval).shape[0])
        tasks = SmallContextTasks(y_eval, n_support_classes=n_support,
                                  n_novel_classes=n_novel, n_tasks=args.tasks,
                                  random_state=args.seed)
        protocol = {"n_support_classes": n_support, "n_novel_classes": n_novel,
                    "shots": [1, 10], "n_query": 10}
    else:
        fit_rows, held_rows = split_fit_and_held_out(data.y_train, args.seed)
        X_fit, y_fit = data.X_train[fit_rows], data.y_train[fit_rows]
        X_eval = np.concatenate([data.X_train[held_rows], data.X_test])
        y_eval = np.concatenate([data.y_train[held_rows], data.y_test])
        n_novel = min(5, np.unique(data.y_test).shape[0])
        n_known = int(np.unique(y_fit).shape[0])
        # A cap above the number of known classes (--quick on a ten-class
        # dataset) means "all of them".
        n_queried = (None if args.lc_known_query_classes is None
                     or args.lc_known_query_classes >= n_known
                     else args.lc_known_query_classes)
        tasks = LargeContextTasks(y_eval, np.unique(y_fit), n_novel_classes=n_novel,
                                  n_tasks=args.tasks, n_known_query_classes=n_queried,
                                  random_state=args.seed)
        protocol = {"n_known_classes": n_known,
                    "n_known_query_classes": n_queried,
                    "n_novel_classes": n_novel, "n_query": 10}
    log(f"\n== {setting} context: {args.tasks} tasks, {protocol}")
    out = {"protocol": protocol, "tpr": _TPR[setting], "rows": []}
    for pretrain in args.pretrain:
        params = dict(backbone=args.backbone, setting=setting,
                      pretrain=None if pretrain == "none" else pretrain,
                      embedding_dim=args.embedding_dim,
                      pretrain_epochs=args.pretrain_epochs,
                      meta_epochs=args.meta_epochs,
                      episodes_per_epoch=args.episodes_per_epoch,
                      meta_lr=args.meta_lr, lambda_adapt=args.lambda_adapt,
                      device=args.device, random_state=args.seed,
                      verbose=max(args.verbose - 1, 0))
        tic = time.perf_counter()
        log(f"-- {pretrain}: training FLOWR ({setting} context)")
        model = fit_or_load_model(params, X_fit, y_fit, data_key=data_key,
                                  cache_dir=cache, log=log)
        features = features_or_load(model_key(params, data_key), model,
                                    {"fit": X_fit, "eval": X_eval}, cache_dir=cache)
        log(f"   model and features in {time.perf_counter() - tic:.1f} s")
        for method in args.methods:
            kind = "flowr" if method == "flowr" else "base"
            template = method_template(method, setting, model,
                                       features[f"{kind}/fit"], y_fit)
            X_method = features[f"{kind}/eval"]
            if method == "flowr" and setting == "small" and args.fine_tune_steps:
                # Fine-tuning changes the encoder per task: stream images. A
                # copy, so the cached model keeps its own parameters.
                template = copy.deepcopy(model).set_params(
                    fine_tune_steps=args.fine_tune_steps)
                X_method = X_eval
            method_tasks = tasks
            if method == "evm" and args.evm_tasks is not None:
                method_tasks = tasks[: min(args.evm_tasks, len(tasks))]
            tic = time.perf_counter()
            report = evaluate_online(template, X_method, y_eval,
                                     method_tasks, setting=setting,
                                     n_jobs=args.n_jobs, verbose=args.verbose > 1)
            row = _row(method, pretrain, report, time.perf_counter() - tic)
            out["rows"].append(row)
            log(f"   {METHOD_NAMES[method]:9s} H={row['h_measure']:.3f} "
                f"Acc={row['accuracy']:.3f} ({row['n_tasks']} tasks, "
                f"{row['seconds']:.1f} s)")
    return out


def _row(method, pretrain, report, seconds):
    row = {"method": method, "pretrain": pretrain, "seconds": seconds,
           "n_tasks": int(report.n_tasks), "h_measure": float(report.h_measure),
           "auroc": float(report.auroc), "threshold": float(report.threshold),
           "novel_tpr": float(report.novel_tpr),
           "roc": {"fpr": report.fpr.tolist(), "tpr": report.tpr_curve.tolist()}}
    for key in _COLUMNS:
        row[key] = float(report[key])
        row[key + "_ci"] = float(report[key + "_ci"])
    return row


def format_table(setting_result, setting) -> str:
    """The paper-style table of one setting."""
    head = (f"{'Method':10s} {'Pre-train':9s} {'Acc':>14s} {'Support Acc':>14s} "
            f"{'Inc. Acc':>14s} {'H-measure':>9s} {'AUROC':>6s} {'tasks':>5s}")
    lines = [f"{setting.capitalize()} context (threshold at novelty TPR "
             f"{setting_result['tpr']}; mean +- 95% CI over tasks)", head,
             "-" * len(head)]
    for row in setting_result["rows"]:
        cells = " ".join(f"{100 * row[k]:6.2f}+-{100 * row[k + '_ci']:5.2f}"
                         for k in _COLUMNS)
        lines.append(f"{METHOD_NAMES[row['method']]:10s} {row['pretrain']:9s} "
                     f"{cells} {row['h_measure']:9.3f} {row['auroc']:6.3f} "
                     f"{row['n_tasks']:5d}")
    return "\n".join(lines)


def plot_roc(results, path) -> None:
    """One panel of ROC curves (P(novel) vs is_novel) per setting."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    settings = list(results["settings"])
    fig, axes = plt.subplots(1, len(settings), figsize=(5 * len(settings), 4.5),
                             squeeze=False)
    for ax, setting in zip(axes[0], settings, strict=True):
        for row in results["settings"][setting]["rows"]:
            ax.plot(row["roc"]["fpr"], row["roc"]["tpr"],
                    label=f"{METHOD_NAMES[row['method']]} ({row['pretrain']}), "
                    f"AUROC {row['auroc']:.2f}")
        ax.plot([0, 1], [0, 1], color="grey", lw=0.5, ls="--")
        ax.set(title=f"{results['dataset']['name']}: {setting} context",
               xlabel="false novel rate", ylabel="novelty TPR")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


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
        The exit status, 0.

    Examples
    --------
    From a shell, a few minutes on two CPU cores::

        flowr-benchmark --quick --out flowr-benchmark-out

    The options, without running a benchmark:

    >>> from sklearn_flowr.cli._benchmark import build_parser, parse_args
    >>> print(build_parser().format_usage())  # doctest: +ELLIPSIS
    usage: flowr-benchmark [-h] [--dataset {glyphs,fashion-mnist,digits}] ...
    >>> args = parse_args(["--quick", "--tasks", "50"])  # --quick keeps --tasks
    >>> args.dataset, args.tasks, args.pretrain_epochs
    ('glyphs', 50, 3)
    """
    args = parse_args(argv)
    log = print if args.verbose else (lambda *a, **k: None)
    results = run_benchmark(args, log=log)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=1))
    plot_roc(results, out / "roc.png")
    print()
    for setting, setting_result in results["settings"].items():
        print(format_table(setting_result, setting))
        print()
    print(f"Figures: {out / 'results.json'}, ROC curves: {out / 'roc.png'} "
          f"({results['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
