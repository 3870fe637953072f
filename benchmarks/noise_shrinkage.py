"""Does shrinking the full head's noise covariance help on new classes?

The full-covariance head (``CRPGaussianClassifier(covariance="full")``,
``FLOWRClassifier``'s default) takes its class noise ``W`` from the training
classes' embeddings (Ledoit-Wolf shrunk). On an embedding trained on those
classes, the encoder squeezes their within-class scatter in some directions;
new classes are not squeezed there, so a Mahalanobis distance under ``W``
over-weighs those directions for them. ``head__noise_shrinkage`` moves ``W``'s
eigenvalues towards their mean. This script fits ``FLOWRClassifier(head=
CRPGaussianClassifier(covariance="full"), calibration=None)`` per setting and
pre-training on a ``flowr-benchmark`` dataset, refits it once per shrinkage
with ``set_params(head__noise_shrinkage=s)`` (the trained encoder is reused,
``reuse_encoder=True``) and prints:

- the sweep: H-measure / accuracy at the fixed TPR / ECE of P(novel) (the
  model's own, unmapped) of the fitted model's head (``prior_head_`` in the
  small context, ``head_`` in the large one) for each shrinkage in
  ``--shrinkages``, and NCM on the same embedding, on all test classes;
- an honest choice: the test classes are split in two halves; the shrinkage
  with the best H-measure on one half's tasks is scored on the other half's
  (both ways), against the unshrunk head on the same tasks. Needs
  ``--min-half-classes`` test classes in each half (glyphs, kanji), else
  "n/a" (digits, fashion-mnist: 5 test classes).

The data, contexts and tasks are ``flowr-benchmark``'s (same seeds); its
training options are accepted here too (a subset, see ``--help``).

Usage::

    python benchmarks/noise_shrinkage.py --quick --seed 0 \
        --shrinkages 0 0.1 0.25
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from sklearn.base import clone

from sklearn_flowr import CRPGaussianClassifier
from sklearn_flowr.cli._benchmark import benchmark_data
from sklearn_flowr.cli._benchmark_model import baseline_template
from sklearn_flowr.cli._benchmark_setup import setting_data
from sklearn_flowr.protocol import (
    LargeContextTasks,
    SmallContextTasks,
    evaluate_online,
)

# The probes' shared run (flowr-benchmark's options, model and tasks), from
# this script's folder whether run or imported.
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _probe import (  # noqa: E402
    TPR,
    build_model,
    build_parser,
    parse_args,
    run_probe,
    small_context_sizes,
)


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
                             tpr=TPR[setting], n_jobs=args.n_jobs, verbose=0)
    return {"h_measure": float(report.h_measure),
            "accuracy": float(report.accuracy),
            "ece": None if report["ece"] is None else float(report["ece"])}


def shrunk_heads(model, shrinkages, X_fit, y_fit, setting):
    """The fitted model's head for each shrinkage (one training: the refits
    reuse the encoder), and the model of the first."""
    heads, first = {}, None
    for s in shrinkages:
        fitted = clone(model).set_params(head__noise_shrinkage=s).fit(X_fit, y_fit)
        heads[s] = fitted.prior_head_ if setting == "small" else fitted.head_
        first = fitted if first is None else first
    return heads, first


def probe(args, shrinkages, min_half_classes, log=print) -> dict:
    data = benchmark_data(args)
    halves = class_halves(data.y_test, args.seed)
    out = {"dataset": args.dataset, "seed": args.seed, "shrinkages": shrinkages,
           "settings": {}}
    for setting in args.setting:
        X_fit, y_fit, X_eval, y_eval = setting_data(setting, data, args.seed)
        known = (np.unique(y_fit)[:0] if setting == "small" else np.unique(y_fit))
        for pretrain in args.pretrain:
            model = build_model(args, setting, pretrain, calibration=None,
                                head=CRPGaussianClassifier(covariance="full"))
            log(f"{setting} {pretrain}: training on {X_fit.shape[0]} images ...")
            heads, fitted = shrunk_heads(model, shrinkages, X_fit, y_fit, setting)
            Z_fit, Z_eval = fitted.transform(X_fit), fitted.transform(X_eval)
            ncm = baseline_template("ncm", setting, Z_fit, y_fit)
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
    parser = build_parser(__doc__.split("\n")[0])
    parser.add_argument("--shrinkages", type=float, nargs="+",
                        default=[0.0, 0.05, 0.1, 0.2, 0.3],
                        help="values of head__noise_shrinkage (0 is always "
                        "measured)")
    parser.add_argument("--min-half-classes", type=int, default=10)
    args = parse_args(parser, list(sys.argv[1:] if argv is None else argv))
    if 0.0 not in args.shrinkages:
        args.shrinkages = [0.0, *args.shrinkages]
    if not all(0.0 <= s <= 1.0 for s in args.shrinkages):
        parser.error(f"--shrinkages must lie in [0, 1]; got {args.shrinkages}")
    return run_probe(args, lambda args, log: probe(
        args, args.shrinkages, args.min_half_classes, log=log),
        format_probe, "noise_shrinkage.json")


if __name__ == "__main__":
    main()
