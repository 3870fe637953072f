"""FLOWR's head against the baselines on frozen pretrained ImageNet features.

Question
--------
With no meta-training at all -- the features of an ImageNet network, frozen
-- does FLOWR's Bayesian CRP-Gaussian head detect novel classes and classify
better than the distance baselines (NCM, PEELER, EVM) on the *same*
features? Every method sees the same vectors and the same seeded tasks, so
the comparison is of heads only.

Data
----
``--dataset fashion-mnist``: the split of ``flowr-benchmark --dataset
fashion-mnist`` (``load_benchmark_data``): classes 0-4 are the training
classes, 5-9 the test classes, at most ``--max-per-class`` images each (a
choice seeded by ``--data-seed``). ``--dataset kanji``: ``load_kanji``'s
class-disjoint train and test splits of ``--kanji-classes`` characters with
``--kanji-instances`` drawings each. ``--dataset digits`` (scikit-learn's 8x8
digits, split as Fashion-MNIST) is the tiny data of the tests.

Features
--------
Every image is embedded once by ``EfficientNetLite0Encoder(pretrained=True,
freeze=True)`` with its projection replaced by the identity, so the vectors
are the network's globally pooled 1280-d features and the encoder's own
forward does the preprocessing (grayscale repeated to three channels,
bilinear upsampling to ``--min-size``, EfficientNet-Lite's pixel scaling).
The features are cached as .npz under ``--cache-dir``, keyed by the images,
so further seeds and ``--pca`` values only evaluate.

``--pca N`` (default 64; 0 keeps all 1280) projects onto the first ``N``
principal components of the features the heads are fit on (the training
classes; in the large context only their fitting half), never the test
classes. The reason is the full-covariance head: its class noise is a
1280 x 1280 covariance estimated from a few thousand rows of a handful of
classes (five for Fashion-MNIST), mostly shrinkage, and every row costs
O(d^2); 64 components also match the embedding dimension FLOWR trains by
default. The isotropic head and the baselines run on the same reduced
features.

Methods
-------
- ``flowr``: ``CRPGaussianClassifier`` with FLOWR's hyper-parameters
  (``a = 0.5``, CRP class prior, known-class pseudo-count 1) and what
  meta-training would learn -- ``mu0``, ``s0``, ``b`` and ``sigma`` -- by
  empirical Bayes on the training classes' features (``CRPGaussianClassifier``'s
  ``"auto"`` values, fitted there; ``sklearn_flowr.head.empirical_bayes_head``).
- ``flowr-full``: the same with ``covariance="full"`` (full class noise and
  full prior covariance, both by empirical Bayes).
- ``flowr-full-cal``: ``flowr-full`` with P(novel) Platt-mapped by
  ``calibrate_novelty`` on episodes of the training classes (same ranking).
- ``ncm``: nearest class mean; ``peeler``: ``PEELERClassifier`` with the
  diagonal precision fitted on the training classes (as ``flowr-benchmark``);
  ``evm``: the Extreme Value Machine.

Small context: unfitted heads carrying the estimated prior. Large context:
fitted on the training classes (kept fixed online, the paper's known-known
classes).

Protocols (as ``flowr-benchmark``)
---------------------------------
Small context on the test classes: ``SmallContextTasks`` with the paper's 10
support + 5 novel classes (in proportion, 3 + 2, for a five-class test
split), U{1..10} shots, 10 queries per class, novelty TPR 0.15. Large
context: half of every training class fits the heads, the other half and the
test classes are queried (``LargeContextTasks``, 5 novel classes, 10 queries
per class), novelty TPR 0.6; ``--lc-known-query-classes`` queries a random
subset of the known classes per task.

Reported
--------
Per dataset, setting and seed: the H-measure and AUROC of the novelty output
against first sightings (pooled over the run), the accuracy at the fixed
novelty TPR (mean +- 95% CI over tasks), and for the probabilistic heads the
expected calibration error (15 equal-width bins) of P(novel) and the accuracy
of the argmax decision; a baseline's novelty output is a distance, so it has
neither ("n/a, no probability"). The mean and standard deviation over seeds
close each table. ``--out`` writes every figure as JSON.

Usage
-----
    python benchmarks/pretrained_embedding_heads.py --dataset fashion-mnist \\
        --max-per-class 300 --seed 0 1 2 --n-tasks 1000 --out fmnist.json
    python benchmarks/pretrained_embedding_heads.py --dataset kanji \\
        --kanji-classes 1000 --lc-known-query-classes 20 --evm-tasks 200 \\
        --seed 0 1 2 --n-tasks 1000 --out kanji.json
    python benchmarks/pretrained_embedding_heads.py --smoke   # seconds

Torch runs on ``--threads`` (1) threads, the features in batches under
``torch.no_grad()``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
from sklearn.decomposition import PCA
from torch import nn

from sklearn_flowr import CRPGaussianClassifier
from sklearn_flowr.cli._benchmark_model import baseline_template
from sklearn_flowr.cli._benchmark_setup import (
    load_benchmark_data,
    split_fit_and_held_out,
)
from sklearn_flowr.encoders import EfficientNetLite0Encoder
from sklearn_flowr.head import empirical_bayes_head
from sklearn_flowr.protocol import (
    LargeContextTasks,
    SmallContextTasks,
    calibrate_novelty,
    evaluate_online,
    small_context_sizes,
)

METHODS = ("flowr", "flowr-full", "flowr-full-cal", "ncm", "peeler", "evm")
NAMES = {"flowr": "FLOWR head (iso)", "flowr-full": "FLOWR head (full)",
         "flowr-full-cal": "FLOWR full, cal.",
         "ncm": "NCM", "peeler": "PEELER", "evm": "EVM"}
TPR = {"small": 0.15, "large": 0.6}
FEATURE_DIM = 1280
NO_PROBABILITY = "n/a, no probability"
SMOKE = dict(max_per_class=20, kanji_classes=30, kanji_instances=20, n_tasks=3,
             evm_tasks=None, min_size=32, batch_size=64, pca=8)


# ------------------------------------------------------------------ data
def load_data(args):
    """Class-disjoint train/test images of the dataset (flowr-benchmark's)."""
    cache = None if not args.cache_dir else Path(args.cache_dir) / "data"
    return load_benchmark_data(args.dataset, max_per_class=args.max_per_class,
                               kanji_classes=args.kanji_classes,
                               kanji_instances=args.kanji_instances,
                               cache_dir=cache, random_state=args.data_seed)


def feature_encoder(*, pretrained: bool, min_size: int) -> nn.Module:
    """The frozen EfficientNet-Lite0 encoder, its projection the identity: its
    forward returns the pooled 1280-d features of grayscale [0, 1] images."""
    encoder = EfficientNetLite0Encoder(in_channels=1, embedding_dim=1,
                                       pretrained=pretrained, freeze=True,
                                       min_size=min_size)
    encoder.fc = nn.Identity()
    return encoder.eval()


def embed(encoder, images, batch_size, log=print):
    """Pooled features of ``(n, H, W)`` images, in batches."""
    out = np.empty((images.shape[0], FEATURE_DIM), dtype=np.float32)
    tic = time.perf_counter()
    with torch.no_grad():
        for start in range(0, images.shape[0], batch_size):
            batch = torch.from_numpy(images[start:start + batch_size, None])
            out[start:start + batch.shape[0]] = encoder(batch).numpy()
            done = start + batch.shape[0]
            if done == images.shape[0] or (done // batch_size) % 20 == 0:
                log(f"   {done}/{images.shape[0]} images "
                    f"({time.perf_counter() - tic:.0f} s)")
    return out


def features_or_load(data, args, log=print):
    """Features of the train and test images, from the .npz cache if there."""
    key = hashlib.sha256(json.dumps(
        [data.fingerprint(), not args.random_init, args.min_size]).encode())
    path = (None if not args.cache_dir else
            Path(args.cache_dir) / f"{args.dataset}-{key.hexdigest()[:16]}.npz")
    if path is not None and path.is_file():
        with np.load(path) as cached:
            Z_train, Z_test = cached["train"], cached["test"]
        if Z_train.shape[0] == data.y_train.shape[0] and \
                Z_test.shape[0] == data.y_test.shape[0]:
            log(f"   cached features {path}")
            return Z_train, Z_test, 0.0, str(path)
        log(f"   {path} does not match the images; embedding again")
    encoder = feature_encoder(pretrained=not args.random_init,
                              min_size=args.min_size)
    tic = time.perf_counter()
    Z_train = embed(encoder, data.X_train, args.batch_size, log)
    Z_test = embed(encoder, data.X_test, args.batch_size, log)
    seconds = time.perf_counter() - tic
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(path, train=Z_train, test=Z_test)
    return Z_train, Z_test, seconds, None if path is None else str(path)


def reduce(Z_fit, others, n_components, seed):
    """PCA fitted on ``Z_fit`` (training classes only), applied to all."""
    if not n_components:
        return Z_fit, others, None
    n = min(n_components, Z_fit.shape[0] - 1, Z_fit.shape[1])
    pca = PCA(n_components=n, random_state=seed).fit(Z_fit)
    info = {"n_components": int(n),
            "explained_variance": float(pca.explained_variance_ratio_.sum())}
    return pca.transform(Z_fit), [pca.transform(Z) for Z in others], info


# --------------------------------------------------------------- methods
def template(method, setting, Z_fit, y_fit, *, seed=0, n_known_query=None):
    """The estimator ``evaluate_online`` copies for every task: unfitted with
    its learned prior / precision (small context), fitted on the training
    classes (large context)."""
    if method in ("flowr", "flowr-full", "flowr-full-cal"):
        covariance = "isotropic" if method == "flowr" else "full"
        # FLOWR's head defaults (a=0.5, CRP prior, known_count=1); prior,
        # concentration and noise by empirical Bayes, classes frozen online.
        head = empirical_bayes_head(CRPGaussianClassifier(), Z_fit, y_fit,
                                    setting=setting, frozen=True, b="auto",
                                    covariance=covariance)
        if method == "flowr-full-cal":
            # P(novel)'s Platt map from episodes of the training classes only.
            fitted = calibrate_novelty(head, Z_fit, y_fit, setting=setting,
                                       n_known_query_classes=n_known_query,
                                       random_state=seed)
            head.set_params(novelty_calibration=(fitted.slope, fitted.intercept))
        return head
    return baseline_template(method, setting, Z_fit, y_fit)


def head_prior(head):
    """The empirical-Bayes hyper-parameters of an isotropic head, for the JSON."""
    params = head.get_params()
    fitted = hasattr(head, "b_")
    prior_var = np.asarray(head.prior_var_ if fitted else params["prior_var"])
    sigma = head.sigma_ if fitted else params["sigma"]
    return {"b": float(head.b_ if fitted else params["b"]),
            "sigma": float(np.mean(np.diag(np.atleast_2d(sigma)))
                           if np.ndim(sigma) else sigma),
            "prior_var": float(np.mean(np.diag(prior_var)) if prior_var.ndim == 2
                               else prior_var.mean())}


# ------------------------------------------------------------- protocol
def setting_data(setting, data, Z_train, Z_test, seed, args):
    """(fit features, labels, eval features, labels, tasks, protocol)."""
    if setting == "small":
        n_support, n_novel = small_context_sizes(np.unique(data.y_test).shape[0])
        tasks = SmallContextTasks(data.y_test, n_support_classes=n_support,
                                  n_novel_classes=n_novel, n_tasks=args.n_tasks,
                                  random_state=seed)
        protocol = {"n_support_classes": n_support, "n_novel_classes": n_novel,
                    "shots": [1, 10], "n_query": 10}
        return Z_train, data.y_train, Z_test, data.y_test, tasks, protocol
    fit_rows, held_rows = split_fit_and_held_out(data.y_train, seed)
    y_fit = data.y_train[fit_rows]
    y_eval = np.concatenate([data.y_train[held_rows], data.y_test])
    Z_eval = np.concatenate([Z_train[held_rows], Z_test])
    known = np.unique(y_fit)
    n_novel = min(5, np.unique(data.y_test).shape[0])
    n_queried = (None if args.lc_known_query_classes is None
                 or args.lc_known_query_classes >= known.shape[0]
                 else args.lc_known_query_classes)
    tasks = LargeContextTasks(y_eval, known, n_novel_classes=n_novel,
                              n_tasks=args.n_tasks,
                              n_known_query_classes=n_queried, random_state=seed)
    protocol = {"n_known_classes": int(known.shape[0]),
                "n_known_query_classes": n_queried, "n_novel_classes": n_novel,
                "n_query": 10}
    return Z_train[fit_rows], y_fit, Z_eval, y_eval, tasks, protocol


def run_setting(setting, data, Z_train, Z_test, seed, args, log=print):
    Z_fit, y_fit, Z_eval, y_eval, tasks, protocol = setting_data(
        setting, data, Z_train, Z_test, seed, args)
    Z_fit, (Z_eval,), pca = reduce(Z_fit, [Z_eval], args.pca, seed)
    out = {"protocol": protocol, "pca": pca, "rows": {}}
    for method in args.methods:
        tic = time.perf_counter()
        estimator = template(method, setting, Z_fit, y_fit, seed=seed,
                             n_known_query=args.lc_known_query_classes)
        if method == "flowr":
            out["flowr_prior"] = head_prior(estimator)
        method_tasks = tasks
        if method == "evm" and args.evm_tasks is not None:
            method_tasks = tasks[: min(args.evm_tasks, len(tasks))]
        report = evaluate_online(estimator, Z_eval, y_eval, method_tasks,
                                 setting=setting, tpr=TPR[setting])
        row = {"n_tasks": int(report.n_tasks),
               "seconds": time.perf_counter() - tic,
               "probability": bool(report.probability)}
        for key in ("h_measure", "auroc", "accuracy", "accuracy_ci",
                    "support_accuracy", "incremental_accuracy", "threshold",
                    "novel_tpr"):
            row[key] = float(report[key])
        for key in ("ece", "brier", "argmax_accuracy", "argmax_accuracy_ci"):
            row[key] = None if report[key] is None else float(report[key])
        out["rows"][method] = row
        ece = NO_PROBABILITY if row["ece"] is None else f"{row['ece']:.3f}"
        log(f"   [seed {seed}] {setting:5s} {NAMES[method]:17s} "
            f"H={row['h_measure']:.3f} Acc={row['accuracy']:.3f} ECE={ece} "
            f"({row['n_tasks']} tasks, {row['seconds']:.1f} s)")
    return out


# --------------------------------------------------------------- summary
SUMMARY = ("h_measure", "auroc", "accuracy", "argmax_accuracy", "ece")


def over_seeds(per_seed, method):
    """Mean and standard deviation over seeds of each figure (None if n/a)."""
    out = {}
    for key in SUMMARY:
        values = [s["rows"][method][key] for s in per_seed.values()]
        if any(v is None for v in values):
            out[key] = out[key + "_sd"] = None
            continue
        v = np.array(values, dtype=float)
        out[key] = float(v.mean())
        out[key + "_sd"] = float(v.std(ddof=1)) if v.size > 1 else None
    return out


def _mean_cell(summary, key, width=15):
    # H-measures of rare first sightings can be ~1e-3: one more digit.
    digits = 4 if key == "h_measure" else 3
    if summary[key] is None:
        return f"{'n/a':>{width}s}"
    sd = summary[key + "_sd"]
    sd = "" if sd is None else f"+-{sd:.{digits}f}"
    return f"{summary[key]:.{digits}f}{sd}".rjust(width)


def format_table(dataset, setting, result, args) -> str:
    per_seed = result["per_seed"]
    first = next(iter(per_seed.values()))
    dim = ("1280-d" if first["pca"] is None
           else f"PCA {first['pca']['n_components']} of 1280-d")
    lines = [f"{dataset}, {setting} context, {dim} EfficientNet-Lite0 features; "
             f"{first['protocol']}; novelty TPR {TPR[setting]}; seeds "
             f"{list(per_seed)}"]
    head = (f"{'method':17s} {'H-measure':>15s} {'AUROC':>15s} "
            f"{'Acc@TPR':>15s} {'Argmax Acc':>15s} {'ECE P(novel)':>15s}")
    lines += [head, "-" * len(head)]
    for method in args.methods:
        summary = result["mean"][method]
        lines.append(f"{NAMES[method]:17s} " + " ".join(
            _mean_cell(summary, key) for key in SUMMARY))
    lines.append("per seed, H-measure / Acc@TPR (+-95% CI over tasks) / ECE:")
    for method in args.methods:
        cells = []
        for seed, s in per_seed.items():
            row = s["rows"][method]
            ece = NO_PROBABILITY if row["ece"] is None else f"{row['ece']:.3f}"
            cells.append(f"s{seed}: {row['h_measure']:.4f} / {row['accuracy']:.3f}"
                         f"+-{row['accuracy_ci']:.3f} / {ece}")
        lines.append(f"  {NAMES[method]:17s} " + "  ".join(cells))
    lines.append("Mean +- sd over seeds; H-measure, AUROC, ECE pooled over the "
                 "tasks of a seed. Baselines' novelty output is a distance: "
                 f"ECE and argmax accuracy {NO_PROBABILITY}.")
    return "\n".join(lines)


# ------------------------------------------------------------------ main
def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dataset", choices=("fashion-mnist", "kanji", "digits"),
                   default="fashion-mnist")
    p.add_argument("--max-per-class", type=int, default=300,
                   help="fashion-mnist/digits: images per class (0: all)")
    p.add_argument("--kanji-classes", type=int, default=1000,
                   help="kanji: characters (about 60%% train, 20%% test)")
    p.add_argument("--kanji-instances", type=int, default=20,
                   help="kanji: drawings per character (>= 20: 10 shots + 10 "
                   "queries)")
    p.add_argument("--data-seed", type=int, default=0,
                   help="seed of the per-class image subsample")
    p.add_argument("--seed", type=int, nargs="+", default=[0],
                   help="task-sampling seeds (and the large context's fit/held "
                   "split), all on the same cached features")
    p.add_argument("--n-tasks", type=int, default=500, help="tasks per setting")
    p.add_argument("--evm-tasks", type=int, default=None,
                   help="EVM on the first N tasks only (default: all)")
    p.add_argument("--lc-known-query-classes", type=int, default=None,
                   help="large context: known classes queried per task "
                   "(default: all)")
    p.add_argument("--setting", nargs="+", choices=("small", "large"),
                   default=["small", "large"])
    p.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    p.add_argument("--pca", type=int, default=64,
                   help="principal components fitted on the training classes "
                   "(0: the full 1280-d features)")
    p.add_argument("--min-size", type=int, default=64,
                   help="images are upsampled to this side")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--random-init", action="store_true",
                   help="untrained EfficientNet-Lite0 (no ImageNet weights)")
    p.add_argument("--cache-dir", default=str(Path.home() / ".cache" /
                                              "sklearn_flowr" / "pretrained"),
                   help="features (.npz) and rendered data ('' disables)")
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    p.add_argument("--out", default=None, help="write all figures as JSON here")
    p.add_argument("--smoke", action="store_true",
                   help="tiny run for the tests: "
                   + ", ".join(f"{k}={v}" for k, v in SMOKE.items())
                   + " (add --random-init where the ImageNet weights are not "
                   "installed)")
    p.add_argument("-q", "--quiet", action="store_true", help="only the tables")
    args = p.parse_args(argv)
    if args.smoke:
        for key, value in SMOKE.items():
            setattr(args, key, value)
    if not args.max_per_class:
        args.max_per_class = None
    return args


def main(argv=None):
    args = parse_args(argv)
    log = (lambda *a, **k: None) if args.quiet else (
        lambda *a, **k: print(*a, **k, flush=True))
    threads = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    try:
        start = time.perf_counter()
        log(f"loading {args.dataset} ...")
        data = load_data(args)
        log(f"{args.dataset}: {np.unique(data.y_train).shape[0]} training classes "
            f"({data.y_train.shape[0]} images), {np.unique(data.y_test).shape[0]} "
            f"test classes ({data.y_test.shape[0]} images); embedding ...")
        Z_train, Z_test, embed_s, path = features_or_load(data, args, log)
        results = {"args": vars(args), "dataset": {
            "name": args.dataset,
            "n_train_classes": int(np.unique(data.y_train).shape[0]),
            "n_train_images": int(data.y_train.shape[0]),
            "n_test_classes": int(np.unique(data.y_test).shape[0]),
            "n_test_images": int(data.y_test.shape[0])},
            "features": {"network": "EfficientNet-Lite0, pooled",
                         "pretrained": not args.random_init, "dim": FEATURE_DIM,
                         "min_size": args.min_size, "embed_seconds": embed_s,
                         "cache": path},
            "settings": {}}
        for setting in args.setting:
            per_seed = {seed: run_setting(setting, data, Z_train, Z_test, seed,
                                          args, log) for seed in args.seed}
            results["settings"][setting] = {
                "tpr": TPR[setting], "per_seed": per_seed,
                "mean": {m: over_seeds(per_seed, m) for m in args.methods}}
        results["seconds"] = time.perf_counter() - start
        print()
        for setting, result in results["settings"].items():
            print(format_table(args.dataset, setting, result, args))
            print()
        print(f"total {results['seconds']:.0f} s (embedding {embed_s:.0f} s)")
        if args.out:
            Path(args.out).write_text(json.dumps(results, indent=1))
        return results
    finally:
        torch.set_num_threads(threads)


if __name__ == "__main__":
    main(sys.argv[1:])
