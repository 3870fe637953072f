"""Platt's smoothed targets against hard 0/1 targets for the novelty map.

``calibrate_novelty`` regresses the first sightings of calibration tasks on
``logit P(novel)``. With hard targets the fit is plain maximum likelihood,
whose slope runs off when the calibration rows are separated perfectly (the
five-class encoders separate their own training classes cleanly); Platt's
targets, ``(N+ + 1) / (N+ + 2)`` and ``1 / (N- + 2)``, keep it finite (they are
``calibrate_novelty``'s default and ``FLOWRClassifier(calibration="train")``'s).
This script fits ``FLOWRClassifier(head=CRPGaussianClassifier(covariance=
"full"), calibration=None)`` per setting and pre-training on a
``flowr-benchmark`` dataset (its data, tasks and training options, a subset;
``--prior-scale`` and ``--noise-shrinkage`` set ``head__prior_scale`` and
``head__noise_shrinkage``) and prints the ECE and Brier score of its head's
P(novel) (``prior_head_`` in the small context, ``head_`` in the large one) on
the benchmark's test tasks: unmapped, mapped with hard targets and mapped
with Platt's, both maps fitted by ``calibrate_novelty(head, Z_fit, y_fit,
targets=...)`` on the same calibration rows (tasks of the training classes on
their meta-trained embedding, as ``calibration="train"`` draws them) and set
as the head's ``novelty_calibration``.

Usage (the options are ``flowr-benchmark``'s)::

    python benchmarks/novelty_map_targets.py --quick --seed 0
"""

from __future__ import annotations

import copy
import sys
import warnings
from pathlib import Path

import numpy as np

from sklearn_flowr import CRPGaussianClassifier
from sklearn_flowr.cli._benchmark import benchmark_data
from sklearn_flowr.cli._benchmark_setup import setting_data
from sklearn_flowr.metrics import expected_calibration_error
from sklearn_flowr.protocol import calibrate_novelty, evaluate_online

# The probes' shared run (flowr-benchmark's options, model and tasks), from
# this script's folder whether run or imported.
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _probe import (  # noqa: E402
    TPR,
    benchmark_tasks,
    build_model,
    build_parser,
    parse_args,
    run_probe,
)

TARGETS = ("hard", "platt")


def _scores(first, p_novel):
    return {"ece": float(expected_calibration_error(first, p_novel)),
            "brier": float(np.mean((p_novel - first) ** 2))}


def _test_rows(head, Z_eval, y_eval, tasks, setting, args):
    report = evaluate_online(head, Z_eval, y_eval, tasks, setting=setting,
                             tpr=TPR[setting], n_jobs=args.n_jobs,
                             return_rows=True, probability=True, verbose=0)
    return report.rows.p_novel, report.rows.is_novel.astype(bool)


def compare(args, log=print) -> dict:
    data = benchmark_data(args)
    out = {"dataset": args.dataset, "seed": args.seed, "settings": {}}
    for setting in args.setting:
        X_fit, y_fit, X_eval, y_eval = setting_data(setting, data, args.seed)
        tasks = benchmark_tasks(setting, y_fit, y_eval, data.y_test, args)
        for pretrain in args.pretrain:
            model = build_model(
                args, setting, pretrain, calibration=None,
                head=CRPGaussianClassifier(covariance="full",
                                           prior_scale=args.prior_scale,
                                           noise_shrinkage=args.noise_shrinkage))
            log(f"{setting} {pretrain}: training on {X_fit.shape[0]} images ...")
            model.fit(X_fit, y_fit)
            head = model.prior_head_ if setting == "small" else model.head_
            Z_fit, Z_eval = model.transform(X_fit), model.transform(X_eval)
            p_test, first_test = _test_rows(head, Z_eval, y_eval, tasks, setting,
                                            args)
            part = {"separated": False, "unmapped": _scores(first_test, p_test)}
            for targets in TARGETS:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    # The same calibration rows for both targets (same seed).
                    fitted = calibrate_novelty(head, Z_fit, y_fit, setting=setting,
                                               n_tasks=args.calibration_tasks,
                                               n_jobs=args.n_jobs,
                                               random_state=args.seed,
                                               targets=targets)
                # Reported as "separated" rather than warned about.
                part["separated"] |= any("calibration tasks separate"
                                         in str(w.message) for w in caught)
                # novelty_calibration is read at call time: set on a copy.
                mapped = copy.deepcopy(head).set_params(
                    novelty_calibration=(fitted.slope, fitted.intercept))
                p_mapped, _ = _test_rows(mapped, Z_eval, y_eval, tasks, setting,
                                         args)
                part[targets] = {"slope": fitted.slope,
                                 "intercept": fitted.intercept,
                                 **_scores(first_test, p_mapped)}
            out["settings"].setdefault(setting, {})[pretrain] = part
    return out


def format_comparison(result) -> str:
    lines = [f"{result['dataset']}, seed {result['seed']}: ECE / Brier of "
             "P(novel) on the test tasks"]
    for setting, parts in result["settings"].items():
        for pretrain, part in parts.items():
            cells = [f"unmapped {part['unmapped']['ece']:.4f} / "
                     f"{part['unmapped']['brier']:.4f}"]
            cells += [f"{t} {part[t]['ece']:.4f} / {part[t]['brier']:.4f} "
                      f"(slope {part[t]['slope']:.3f})" for t in TARGETS]
            separated = ", calibration rows separated" if part["separated"] else ""
            lines.append(f"{setting:5s} {pretrain:6s} " + " | ".join(cells)
                         + separated)
    return "\n".join(lines)


def main(argv=None) -> dict:
    parser = build_parser(__doc__.split("\n")[0])
    parser.add_argument("--prior-scale", type=float, default=1.0,
                        help="the full head's prior_scale (head__prior_scale)")
    parser.add_argument("--noise-shrinkage", type=float, default=0.0,
                        help="the full head's noise_shrinkage "
                        "(head__noise_shrinkage)")
    parser.add_argument("--calibration-tasks", type=int, default=200,
                        help="calibration tasks of each map (calibrate_novelty's "
                        "n_tasks; 200 as calibration='train' draws)")
    args = parse_args(parser, list(sys.argv[1:] if argv is None else argv))
    return run_probe(args, compare, format_comparison, "novelty_map_targets.json")


if __name__ == "__main__":
    main()
