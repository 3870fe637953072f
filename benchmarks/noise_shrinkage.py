"""Does shrinking the full head's noise covariance help on new classes?

The full-covariance head takes its class noise ``W`` from the training classes'
embeddings (Ledoit-Wolf shrunk). On an embedding trained on those classes, the
encoder squeezes their within-class scatter in some directions; new classes
are not squeezed there, so a Mahalanobis distance under ``W`` over-weighs
those directions for them. ``noise_shrinkage`` moves ``W``'s eigenvalues
towards their mean (``CRPGaussianClassifier``'s parameter). This script reads
``flowr-benchmark``'s cache (same options and keys; it trains and caches a
model when it is absent) and prints, per setting and pre-training:

- the sweep: H-measure / accuracy at the fixed TPR / ECE of P(novel) (the
  model's own, unmapped) of the full head for each shrinkage in
  ``--shrinkages``, and NCM on the same embedding, on all test classes;
- an honest choice: the test classes are split in two halves; the shrinkage
  with the best H-measure on one half's tasks is scored on the other half's
  (both ways), against the unshrunk head on the same tasks. Needs
  ``--min-half-classes`` test classes in each half (glyphs, kanji), else
  "n/a" (digits, fashion-mnist: 5 test classes).

Usage (the other options are ``flowr-benchmark``'s)::

    python benchmarks/noise_shrinkage.py --quick --seed 0 \
        --cache-dir ~/.cache/sklearn_flowr --shrinkages 0 0.1 0.25
"""

from __future__ import annotations

import argparse
import functools
import sys

import numpy as np

from sklearn_flowr.cli._benchmark import (
    _TPR,
    benchmark_data,
    model_params,
    parse_args,
    setting_data,
)
from sklearn_flowr.cli._benchmark_report import run_probe
from sklearn_flowr.cli._benchmark_setup import (
    features_or_load,
    fit_or_load_model,
    method_template,
    model_key,
)
from sklearn_flowr.protocol import (
    LargeContextTasks,
    SmallContextTasks,
    evaluate_online,
)
from sklearn_flowr.protocol._calibrate import small_context_sizes


def _own_options(argv):
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--shrinkages", type=float, nargs="+",
                        default=[0.0, 0.05, 0.1, 0.2, 0.3])
    parser.add_argument("--min-half-classes", type=int, default=10)
    own, rest = parser.parse_known_args(argv)
    if 0.0 not in own.shrinkages:
        own.shrinkages = [0.0, *own.shrinkages]
    if not all(0.0 <= s <= 1.0 for s in own.shrinkages):
        parser.error(f"--shrinkages must lie in [0, 1]; got {own.shrinkages}")
    return own, rest


def class_halves(y_test, seed):
    """The test classes in two random halves (class-disjoint)."""
    labels = np.random.default_rng([seed, 7]).permutation(np.unique(y_test))
    return labels[: labels.shape[0] // 2], labels[labels.shape[0] // 2:]


def make_tasks(setting, y_eval, novel_pool, known, args):
    """Tasks over the eval rows whose class is known (large context) or in
    ``novel_pool``; returns ``(row_mask, tasks)``, the tasks indexing the
    masked rows."""
    mask = np.isin(y_eval, novel_pool) | np.isin(y_eval, known)
    y = y_eval[mask]
    if setting == "small":
        n_support, n_novel = small_context_sizes(np.unique(y).shape[0])
        return mask, SmallContextTasks(y, n_support_classes=n_support,
                                       n_novel_classes=n_novel,
                                       n_tasks=args.tasks, random_state=args.seed)
    n_queried = args.lc_known_query_classes
    if n_queried is not None and n_queried >= known.shape[0]:
        n_queried = None
    return mask, LargeContextTasks(y, known, n_novel_classes=min(5, len(novel_pool)),
                                   n_tasks=args.tasks,
                                   n_known_query_classes=n_queried,
                                   random_state=args.seed)


def _figures(estimator, Z, y, tasks, setting, args):
    report = evaluate_online(estimator, Z, y, tasks, setting=setting,
                             tpr=_TPR[setting], n_jobs=args.n_jobs, verbose=0)
    return {"h_measure": float(report.h_measure),
            "accuracy": float(report.accuracy),
            "ece": None if report["ece"] is None else float(report["ece"])}


def probe(args, shrinkages, min_half_classes, log=print) -> dict:
    cache = args.cache_dir or None
    data = benchmark_data(args)
    data_key = data.fingerprint()
    halves = class_halves(data.y_test, args.seed)
    out = {"dataset": args.dataset, "seed": args.seed, "shrinkages": shrinkages,
           "settings": {}}
    for setting in args.setting:
        X_fit, y_fit, X_eval, y_eval = setting_data(setting, data, args.seed)
        known = (np.unique(y_fit)[:0] if setting == "small" else np.unique(y_fit))
        for pretrain in args.pretrain:
            params = model_params(args, setting, pretrain)
            model = fit_or_load_model(params, X_fit, y_fit, data_key=data_key,
                                      cache_dir=cache, log=log)
            features = features_or_load(model_key(params, data_key), model,
                                        {"fit": X_fit, "eval": X_eval},
                                        cache_dir=cache, log=log)
            Z_fit, Z_eval = features["flowr/fit"], features["flowr/eval"]
            heads = {s: method_template("flowr-full", setting, model, Z_fit, y_fit,
                                        noise_shrinkage=s) for s in shrinkages}
            ncm = method_template("ncm-flowr-emb", setting, model, Z_fit, y_fit)
            mask, tasks = make_tasks(setting, y_eval, np.unique(data.y_test),
                                     known, args)
            Z, y = Z_eval[mask], y_eval[mask]
            part = {"sweep": {str(s): _figures(h, Z, y, tasks, setting, args)
                              for s, h in heads.items()},
                    "ncm_same_embedding": _figures(ncm, Z, y, tasks, setting, args)}
            if min(map(len, halves)) >= min_half_classes:
                part["chosen_on_other_half"] = _choose(heads, ncm, Z_eval, y_eval,
                                                       halves, known, setting, args)
            out["settings"].setdefault(setting, {})[pretrain] = part
            log(f"{setting} {pretrain}: done")
    return out


def _choose(heads, ncm, Z_eval, y_eval, halves, known, setting, args):
    """Pick the shrinkage on one half's tasks, score it on the other's."""
    folds = []
    for pick, held in (halves, halves[::-1]):
        mask, tasks = make_tasks(setting, y_eval, pick, known, args)
        h_pick = {s: _figures(h, Z_eval[mask], y_eval[mask], tasks, setting,
                              args)["h_measure"] for s, h in heads.items()}
        chosen = max(h_pick, key=lambda s: (h_pick[s], -s))
        mask, tasks = make_tasks(setting, y_eval, held, known, args)
        Z, y = Z_eval[mask], y_eval[mask]
        def score(estimator, Z=Z, y=y, tasks=tasks):
            return _figures(estimator, Z, y, tasks, setting, args)

        folds.append({"chosen": chosen, "chosen_head": score(heads[chosen]),
                      "unshrunk_head": score(heads[0.0]),
                      "ncm_same_embedding": score(ncm)})
    return folds


def format_probe(result) -> str:
    lines = [f"{result['dataset']}, seed {result['seed']}: H / Acc (%) / ECE"]
    for setting, parts in result["settings"].items():
        for pretrain, part in parts.items():
            lines.append(f"{setting} context, {pretrain}:")
            for s, f in part["sweep"].items():
                lines.append(f"  shrinkage {float(s):4.2f}  {_cell(f)}")
            lines.append(f"  NCM same embedding  {_cell(part['ncm_same_embedding'])}")
            for fold in part.get("chosen_on_other_half", []):
                lines.append(
                    f"  other half: chosen {fold['chosen']:.2f} "
                    f"{_cell(fold['chosen_head'])} | 0.00 "
                    f"{_cell(fold['unshrunk_head'])} | NCM "
                    f"{_cell(fold['ncm_same_embedding'])}")
    return "\n".join(lines)


def _cell(f):
    ece = "  n/a" if f["ece"] is None else f"{f['ece']:.3f}"
    return f"{f['h_measure']:.3f} / {100 * f['accuracy']:.1f} / {ece}"


def main(argv=None) -> dict:
    own, rest = _own_options(list(sys.argv[1:] if argv is None else argv))
    return run_probe(parse_args(rest),
                     functools.partial(probe, shrinkages=own.shrinkages,
                                       min_half_classes=own.min_half_classes),
                     format_probe, "noise_shrinkage.json")


if __name__ == "__main__":
    main()
