"""Evidence for FLOWR's training claims on scikit-learn's digits (CPU, minutes).

Claims tested
-------------
1. FLOWR (Sup-E pre-training + meta-training) beats the *same* CRP-Gaussian
   head on (a) an untrained encoder (``pretrain=None, meta=None``) and
   (b) a Sup-FC-pretrained encoder (``pretrain=SupFC(), meta=None``),
   in H-measure (accuracies reported too). A Sup-E-only row
   (``pretrain=SupE(), meta=None``) separates pre-training from
   meta-training. Tested in both contexts.
2. The adaptation loss helps: ``MetaTraining(lambda_adapt=0.1)`` vs ``0.0``
   (both contexts).
3. Last-layer fine-tuning helps in the small context:
   ``adapt(..., fine_tune=k)`` vs ``adapt(..., fine_tune=False)``.

Data and model
--------------
``load_digits``: 1797 images of 8x8, 10 classes (~180 rows each), scaled as
``X.reshape(-1, 8, 8) / 16``. Backbone ``"conv4"`` (4 conv blocks of 64
channels; on 8x8 inputs the map shrinks to 1x1) with a final linear layer to
``--embedding-dim`` (32). Paper hyper-parameters otherwise: ``a = 0.5``,
meta-training's ``episode_noise = 0.5`` (``--sigma``,
``MetaTraining(episode_noise=...)``;
without meta-training the encoder is matched to the default 0.5), lr 1e-3,
``beta = 0.1``. The head is ``FLOWRClassifier``'s default in every row
(``CRPGaussianClassifier(covariance="full")``, ``calibration="train"``).
Every compared configuration gets the same budget (``--pretrain-epochs``,
``--meta-epochs``, ``--episodes-per-epoch``), and within a seed every
configuration uses the same ``random_state``, so FLOWR, its lambda=0 variant
and the Sup-E-only row share the identical pre-trained encoder (checked and
recorded in the JSON).

Protocols (scaled-down versions of the paper's section 6; digits has only
10 classes)
-------------------------------------------------------------------------
Large context (LC), ``setting="large"``:
  * fit on classes 0-6, on a random half of each class's rows (per seed);
    the other half is the held-out query pool of those classes.
  * classes 7, 8, 9 are never seen in training (novel).
  * a task streams 10 held-out queries from each of the 7 known classes and
    10 rows of each of the 3 novel classes (100 rows) in random order through
    ``open_world_step``, after ``reset()`` to the post-``fit`` state.
  * the threshold is set so the novelty TPR is 0.6, pooled over the run
    (``open_world_report(..., tpr=0.6, task_ids=...)``).
Small context (SC), ``setting="small"``:
  * meta-train on all rows of classes 0-4.
  * a task draws a random order of {5, ..., 9}: 3 support classes with
    U{1..5} shots each, 2 novel classes; 10 queries per class (50 rows),
    disjoint from the support rows, in random order.
  * ``adapt(X_support, y_support, fine_tune=...)`` then ``open_world_step``;
    novelty TPR 0.15.
In both, ``is_novel`` marks the first query of a class not yet seen (3 rows
per LC task, 2 per SC task). Tasks are drawn once per seed and shared by all
configurations (paired comparisons).

Reported
--------
Per seed: Acc / Support / Incremental accuracy as mean +- 95% CI over tasks
(Student t), pooled H-measure and AUROC of ``p_novel`` against ``is_novel``,
the threshold ``tau`` and the attained TPR. Across seeds: the mean (and the
standard deviation over seeds) of every figure. For claims 2 and 3 also the
paired per-task accuracy difference (mean +- 95% CI over all tasks of all
seeds) and the per-seed H-measure difference. A reference row gives the
H-measure / AUROC of the CRP novel mass alone (stream position, no image):
the first row of a novel class tends to arrive early, when that mass is high,
so a detector is only informative where it beats this row.

Diagnostics
-----------
``--class-stats learned`` starts meta-training of the Sup-E configurations
from Sup-E's learned class parameters ``(mu_n, s_n)`` instead of the empirical
class statistics of the pre-trained embeddings (the package default,
``MetaTraining(class_stats="empirical")``, which every other encoder uses
too). ``--pretrain-epochs`` /
``--meta-epochs`` change the budget of every configuration alike.

Usage
-----
    python benchmarks/evidence_flowr.py --seeds 3 --tasks 150 --out results.json
    python benchmarks/evidence_flowr.py --seeds 3 --tasks 150 --class-stats learned
    python benchmarks/evidence_flowr.py --smoke      # tiny run, ~10 s

Torch is limited to ``--threads`` (1) threads: on a small shared machine more
threads made training several times slower.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
import torch
from scipy import stats
from sklearn.datasets import load_digits
from sklearn.metrics import roc_auc_score

from sklearn_flowr import FLOWRClassifier
from sklearn_flowr.metrics import h_measure, open_world_report
from sklearn_flowr.training import MetaTraining, SupE, SupFC

LC_KNOWN, LC_NOVEL = list(range(7)), [7, 8, 9]
SC_TRAIN, SC_TEST = list(range(5)), [5, 6, 7, 8, 9]
N_QUERY = 10
SC_WAYS, SC_SHOTS = 3, (1, 5)
LC_TPR, SC_TPR = 0.6, 0.15

# name -> (pre-training stage, MetaTraining settings or None: no meta-training).
CONFIGS = {
    "flowr": (SupE, dict(lambda_adapt=0.1)),
    "flowr_lambda0": (SupE, dict(lambda_adapt=0.0)),
    "sup-e_only": (SupE, None),
    "sup-fc_only": (SupFC, None),
    "untrained": (None, None),
}
LABELS = {
    "flowr": "FLOWR: Sup-E + meta (lambda=0.1)",
    "flowr_lambda0": "FLOWR: Sup-E + meta (lambda=0)",
    "sup-e_only": "Sup-E only (no meta)",
    "sup-fc_only": "(b) Sup-FC only (no meta)",
    "untrained": "(a) untrained encoder",
}


# ----------------------------------------------------------------- data
def load_data():
    X, y = load_digits(return_X_y=True)
    return (X.reshape(-1, 8, 8) / 16.0).astype(np.float32), y


def lc_split(y, seed):
    """Half of each known class's rows for fit, the rest held out."""
    rng = np.random.default_rng([seed, 1])
    fit, held = [], {}
    for c in LC_KNOWN:
        rows = rng.permutation(np.flatnonzero(y == c))
        half = rows.shape[0] // 2
        fit.append(rows[:half])
        held[c] = rows[half:]
    for c in LC_NOVEL:
        held[c] = np.flatnonzero(y == c)
    return np.sort(np.concatenate(fit)), held


def lc_tasks(held, n_tasks, seed):
    tasks = []
    for t in range(n_tasks):
        rng = np.random.default_rng([seed, 2, t])
        rows = np.concatenate([rng.choice(held[c], N_QUERY, replace=False)
                               for c in LC_KNOWN + LC_NOVEL])
        tasks.append(rng.permutation(rows))
    return tasks


def sc_tasks(y, n_tasks, seed):
    """(support rows, query rows) of each small-context task."""
    tasks = []
    for t in range(n_tasks):
        rng = np.random.default_rng([seed, 3, t])
        classes = rng.permutation(SC_TEST)
        support, query = [], []
        for i, c in enumerate(classes.tolist()):
            shots = (int(rng.integers(SC_SHOTS[0], SC_SHOTS[1] + 1))
                     if i < SC_WAYS else 0)
            rows = rng.choice(np.flatnonzero(y == c), shots + N_QUERY, replace=False)
            support.append(rows[:shots])
            query.append(rows[shots:])
        tasks.append((np.concatenate(support), rng.permutation(np.concatenate(query))))
    return tasks


# ------------------------------------------------------------- evaluation
def run_lc(model, X, y, tasks):
    parts = []
    for t, rows in enumerate(tasks):
        model.reset()
        out = model.open_world_step(X[rows], y[rows])
        parts.append((y[rows], out.y_known, out.p_novel, out.is_novel,
                      np.full(rows.shape[0], t)))
    return score(parts, LC_TPR)


def run_sc(model, X, y, tasks, fine_tune):
    parts = []
    for t, (support, query) in enumerate(tasks):
        model.adapt(X[support], y[support], fine_tune=fine_tune)
        out = model.open_world_step(X[query], y[query])
        parts.append((y[query], out.y_known, out.p_novel, out.is_novel,
                      np.full(query.shape[0], t)))
    model.reset()
    return score(parts, SC_TPR)


def score(parts, tpr):
    y_true, y_known, p_novel, is_novel, task_ids = (
        np.concatenate(a) for a in zip(*parts, strict=True))
    # Labels are ints; y_known holds the int novel label while no class exists.
    r = open_world_report(y_true, y_known.astype(y_true.dtype), p_novel, is_novel,
                          tpr=tpr, task_ids=task_ids)
    declared = p_novel >= r.threshold
    return {
        "accuracy": r.accuracy, "accuracy_ci": r.accuracy_ci,
        "support_accuracy": r.support_accuracy,
        "support_accuracy_ci": r.support_accuracy_ci,
        "incremental_accuracy": r.incremental_accuracy,
        "incremental_accuracy_ci": r.incremental_accuracy_ci,
        "h_measure": float(r.h_measure), "auroc": r.auroc,
        "threshold": r.threshold, "novel_tpr": r.novel_tpr,
        "known_fpr": float(declared[~is_novel].mean()),
        "n_novel_rows": int(is_novel.sum()), "n_rows": int(is_novel.shape[0]),
        "p_novel_distinct": int(np.unique(p_novel).shape[0]),
        "task_accuracy": r.task_accuracy.tolist(),
    }


def prior_only(streams, a=0.5, b=1.0):
    """H-measure and AUROC of the CRP novel mass alone (no image information).

    ``streams`` holds ``(labels in stream order, {initial class: count},
    frozen)``; frozen initial classes (the large context's known-known ones)
    keep their pseudo-count. ``P(novel) = (b + a N) / (k + b)`` before each
    row, with ``N`` classes and total count ``k`` so far. This is the
    reference a detector must beat: the first row of a novel class tends to
    come early in the stream, when ``k`` is small.
    """
    scores, novel = [], []
    for labels, initial, frozen in streams:
        counts = dict(initial)
        k = float(sum(counts.values()))
        for label in labels.tolist():
            scores.append((b + a * len(counts)) / (k + b))
            novel.append(label not in counts)
            if label not in counts:
                counts[label] = 0
            if not (frozen and label in initial):
                counts[label] += 1
                k += 1
    novel = np.array(novel)
    return {"h_measure": float(h_measure(novel.astype(np.int8), np.array(scores))),
            "auroc": float(roc_auc_score(novel, scores))}


# ---------------------------------------------------------------- summary
FIELDS = ["h_measure", "auroc", "accuracy", "support_accuracy",
          "incremental_accuracy"]


def over_seeds(per_seed):
    out = {}
    for f in FIELDS + ["threshold", "novel_tpr", "known_fpr"]:
        v = np.array([s[f] for s in per_seed], dtype=float)
        out[f] = float(v.mean())
        out[f + "_sd"] = float(v.std(ddof=1)) if v.size > 1 else float("nan")
    return out


def ci95(v):
    v = np.asarray(v, dtype=float)
    v = v[np.isfinite(v)]
    if v.size < 2:
        return float(v.mean()) if v.size else float("nan"), float("nan")
    return float(v.mean()), float(stats.t.ppf(0.975, v.size - 1) * v.std(ddof=1)
                                  / np.sqrt(v.size))


def paired(results, a, b):
    """Per-task accuracy difference a - b (all tasks of all seeds) and H diffs."""
    diff = np.concatenate([np.subtract(results[a][s]["task_accuracy"],
                                       results[b][s]["task_accuracy"])
                           for s in range(len(results[a]))])
    dh = [results[a][s]["h_measure"] - results[b][s]["h_measure"]
          for s in range(len(results[a]))]
    mean, half = ci95(diff)
    return {"acc_diff": mean, "acc_diff_ci": half, "h_diff_per_seed": dh,
            "seeds_h_better": int(np.sum(np.array(dh) > 0)), "n_seeds": len(dh)}


def _cell(m, f):
    if np.isfinite(m[f + "_sd"]):
        return f"{m[f]:.3f}+-{m[f + '_sd']:.3f}"
    return f"{m[f]:.3f}"


def print_table(title, results, names, labels, reference=None):
    print(f"\n{title}")
    head = (f"{'method':34s} {'H-measure':>15s} {'AUROC':>15s} {'Acc':>15s} "
            f"{'Support':>15s} {'Incremental':>15s} {'tau':>7s} {'TPR':>5s}")
    print(head)
    print("-" * len(head))
    for name in names:
        m = over_seeds(results[name])
        cells = " ".join(f"{_cell(m, f):>15s}" for f in FIELDS)
        print(f"{labels[name]:34s} {cells} {m['threshold']:7.1e} "
              f"{m['novel_tpr']:5.2f}")
    if reference:
        print(f"{'(ref) CRP prior only, no image':34s} "
              f"{np.mean([x['h_measure'] for x in reference]):15.3f} "
              f"{np.mean([x['auroc'] for x in reference]):15.3f}")
    print("  per seed (H | Acc+-95%CI over tasks | Sup | Inc):")
    for name in names:
        cells = [f"{s['h_measure']:.3f} | {s['accuracy']:.3f}+-{s['accuracy_ci']:.3f}"
                 f" | {s['support_accuracy']:.3f}+-{s['support_accuracy_ci']:.3f}"
                 f" | {s['incremental_accuracy']:.3f}+-"
                 f"{s['incremental_accuracy_ci']:.3f}" for s in results[name]]
        print(f"    {name:20s} " + "   ".join(cells))


def print_paired(label, p):
    dh = ", ".join(f"{d:+.3f}" for d in p["h_diff_per_seed"])
    print(f"  {label}: per-task Acc diff {p['acc_diff']:+.3f} +- "
          f"{p['acc_diff_ci']:.3f} (95% CI, all tasks); H diff per seed [{dh}] "
          f"({p['seeds_h_better']}/{p['n_seeds']} seeds better)")


# ------------------------------------------------------------------- main
def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seeds", type=int, default=3, help="number of training seeds")
    p.add_argument("--tasks", type=int, default=150, help="tasks per configuration")
    p.add_argument("--smoke", action="store_true", help="tiny run for the tests")
    p.add_argument("--out", default=None, help="write results as JSON here")
    p.add_argument("--embedding-dim", type=int, default=32)
    p.add_argument("--pretrain-epochs", type=int, default=20)
    p.add_argument("--meta-epochs", type=int, default=10)
    p.add_argument("--episodes-per-epoch", type=int, default=50)
    p.add_argument("--sigma", type=float, default=0.5)
    p.add_argument("--fine-tune-steps", type=int, nargs="+", default=[20, 100])
    p.add_argument("--contexts", nargs="+", default=["lc", "sc"],
                   choices=["lc", "sc"])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--class-stats", choices=["empirical", "learned"],
                   default="empirical",
                   help="MetaTraining's class_stats for the Sup-E "
                   "configurations: empirical class statistics of the "
                   "embeddings (default) or Sup-E's learned parameters")
    args = p.parse_args(argv)
    if args.smoke:
        args.seeds, args.tasks = 1, 4
        args.embedding_dim, args.pretrain_epochs = 8, 1
        args.meta_epochs, args.episodes_per_epoch = 1, 3
        args.fine_tune_steps = [2]
    return args


def make_model(setting, name, seed, args):
    """The unfitted ``FLOWRClassifier`` of configuration ``name``."""
    stage, meta = CONFIGS[name]
    if meta is not None:
        meta = MetaTraining(epochs=args.meta_epochs,
                            episodes_per_epoch=args.episodes_per_epoch,
                            episode_noise=args.sigma, **meta)
        if stage is SupE:  # "learned" needs Sup-E's parameters
            meta.set_params(class_stats=args.class_stats)
    return FLOWRClassifier(
        backbone="conv4", setting=setting, embedding_dim=args.embedding_dim,
        pretrain=None if stage is None else stage(epochs=args.pretrain_epochs),
        meta=meta, device="cpu", verbose=0, random_state=seed)


def fit(setting, name, X, y, seed, args):
    start = time.perf_counter()
    model = make_model(setting, name, seed, args).fit(X, y)
    return model, time.perf_counter() - start


def pretrain_signature(model):
    hist = model.history_.get("pretrain")
    return None if hist is None else [float(h["train_loss"]) for h in hist]


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    X, y = load_data()
    t0 = time.perf_counter()
    results = {"lc": {n: [] for n in CONFIGS}, "sc": {n: [] for n in CONFIGS}}
    fine_names = [f"flowr_ft{k}" for k in args.fine_tune_steps]
    for n in fine_names:
        results["sc"][n] = []
    timing, checks = {}, {"same_pretraining": []}
    reference = {"lc": [], "sc": []}
    for seed in range(args.seeds):
        if "lc" in args.contexts:
            fit_rows, held = lc_split(y, seed)
            tasks = lc_tasks(held, args.tasks, seed)
            sigs = {}
            for name in CONFIGS:
                model, sec = fit("large", name, X[fit_rows], y[fit_rows], seed, args)
                timing[f"lc/{name}/{seed}"] = sec
                sigs[name] = pretrain_signature(model)
                results["lc"][name].append(run_lc(model, X, y, tasks))
                print(f"[seed {seed}] LC {name:14s} fit {sec:5.1f}s "
                      f"H={results['lc'][name][-1]['h_measure']:.3f}", flush=True)
            checks["same_pretraining"].append(
                sigs["flowr"] == sigs["flowr_lambda0"] == sigs["sup-e_only"])
            reference["lc"].append(prior_only(
                [(y[rows], dict.fromkeys(LC_KNOWN, 1.0), True) for rows in tasks]))
        if "sc" in args.contexts:
            train = np.isin(y, SC_TRAIN)
            tasks = sc_tasks(y, args.tasks, seed)
            sigs = {}
            for name in CONFIGS:
                model, sec = fit("small", name, X[train], y[train], seed, args)
                timing[f"sc/{name}/{seed}"] = sec
                sigs[name] = pretrain_signature(model)
                results["sc"][name].append(run_sc(model, X, y, tasks, False))
                print(f"[seed {seed}] SC {name:14s} fit {sec:5.1f}s "
                      f"H={results['sc'][name][-1]['h_measure']:.3f}", flush=True)
                if name == "flowr":
                    for k, fname in zip(args.fine_tune_steps, fine_names, strict=True):
                        start = time.perf_counter()
                        results["sc"][fname].append(run_sc(model, X, y, tasks, k))
                        timing[f"sc/{fname}/{seed}"] = time.perf_counter() - start
                        print(f"[seed {seed}] SC {fname:14s} eval "
                              f"{timing[f'sc/{fname}/{seed}']:5.1f}s "
                              f"H={results['sc'][fname][-1]['h_measure']:.3f}",
                              flush=True)
            checks["same_pretraining"].append(
                sigs["flowr"] == sigs["flowr_lambda0"] == sigs["sup-e_only"])
            reference["sc"].append(prior_only(
                [(y[query], {c: float(np.sum(y[support] == c))
                             for c in np.unique(y[support]).tolist()}, False)
                 for support, query in tasks]))
    runtime = time.perf_counter() - t0

    steps = zip(args.fine_tune_steps, fine_names, strict=True)
    labels = dict(LABELS, **{f: f"FLOWR + fine-tune {k} steps" for k, f in steps})
    labels["flowr_nofinetune"] = "FLOWR, no fine-tuning"
    claims = {}
    print(f"\nDigits, conv4 d={args.embedding_dim}, pretrain {args.pretrain_epochs} "
          f"ep, meta {args.meta_epochs} x {args.episodes_per_epoch} episodes, "
          f"sigma={args.sigma}, class stats {args.class_stats}, {args.seeds} seeds x "
          f"{args.tasks} tasks. Cells: mean+-sd over seeds; H/AUROC pooled per seed.")
    baselines = ["flowr", "sup-e_only", "sup-fc_only", "untrained"]
    for ctx, tpr in [("lc", LC_TPR), ("sc", SC_TPR)]:
        if ctx not in args.contexts:
            continue
        r = results[ctx]
        print_table(f"Claim 1 [{ctx.upper()}, TPR {tpr}]: FLOWR vs the same head "
                    "on other encoders", r, baselines, labels, reference[ctx])
        claims[f"claim1_{ctx}"] = {b: paired(r, "flowr", b) for b in baselines[1:]}
        for b in baselines[1:]:
            print_paired(f"FLOWR - {b}", claims[f"claim1_{ctx}"][b])
        print_table(f"Claim 2 [{ctx.upper()}]: adaptation loss", r,
                    ["flowr", "flowr_lambda0"], labels)
        claims[f"claim2_{ctx}"] = paired(r, "flowr", "flowr_lambda0")
        print_paired("lambda 0.1 - lambda 0", claims[f"claim2_{ctx}"])
    if "sc" in args.contexts:
        r = dict(results["sc"], flowr_nofinetune=results["sc"]["flowr"])
        print_table("Claim 3 [SC]: last-layer fine-tuning in adapt()", r,
                    ["flowr_nofinetune", *fine_names], labels)
        for fname in fine_names:
            claims[f"claim3_{fname}"] = paired(results["sc"], fname, "flowr")
            print_paired(f"{fname} - no fine-tune", claims[f"claim3_{fname}"])
    print(f"\nidentical pre-training for flowr / flowr_lambda0 / sup-e_only: "
          f"{all(checks['same_pretraining'])}")
    print(f"runtime {runtime:.0f}s")

    if args.out:
        summary = {ctx: {n: over_seeds(v) for n, v in res.items() if v}
                   for ctx, res in results.items()}
        with open(args.out, "w") as fh:
            json.dump({"args": vars(args), "runtime_s": runtime, "timing_s": timing,
                       "checks": checks, "prior_only_reference": reference,
                       "summary": summary, "claims": claims,
                       "per_seed": results}, fh, indent=1)
    return results, claims


if __name__ == "__main__":
    main(sys.argv[1:])
