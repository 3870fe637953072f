"""Platt's smoothed targets against hard 0/1 targets for the novelty map.

``calibrate_novelty`` regresses the first sightings of calibration tasks on
``logit P(novel)``. With hard targets the fit is plain maximum likelihood,
whose slope runs off when the calibration rows are separated perfectly (the
five-class encoders separate their own training classes cleanly); Platt's
targets, ``(N+ + 1) / (N+ + 2)`` and ``1 / (N- + 2)``, keep it finite. This
script reads ``flowr-benchmark``'s cache (same options and keys; it trains
and caches a model when it is absent) and prints, per setting and
pre-training, the ECE and Brier score of the full head's P(novel) on the
benchmark's own test tasks: unmapped, mapped with hard targets and mapped
with Platt's, both maps fitted on the same calibration rows as the
benchmark's ``flowr-full-cal`` row (whose map is the Platt one).

Usage (the options are ``flowr-benchmark``'s)::

    python benchmarks/novelty_map_targets.py --quick --seed 0 \
        --cache-dir ~/.cache/sklearn_flowr
"""

from __future__ import annotations

import sys
import warnings

import numpy as np

from sklearn_flowr.cli._benchmark import (
    _TPR,
    benchmark_data,
    benchmark_tasks,
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
from sklearn_flowr.metrics import expected_calibration_error
from sklearn_flowr.protocol import evaluate_online
from sklearn_flowr.protocol._calibrate import (
    apply_novelty_map,
    calibration_rows,
    fit_novelty_map,
    small_context_sizes,
)
from sklearn_flowr.protocol._tasks import _resolve_seed

TARGETS = ("hard", "platt")


def _scores(first, p_novel):
    return {"ece": float(expected_calibration_error(first, p_novel)),
            "brier": float(np.mean((p_novel - first) ** 2))}


def compare(args, log=print) -> dict:
    cache = args.cache_dir or None
    data = benchmark_data(args)
    data_key = data.fingerprint()
    out = {"dataset": args.dataset, "seed": args.seed, "settings": {}}
    for setting in args.setting:
        X_fit, y_fit, X_eval, y_eval = setting_data(setting, data, args.seed)
        tasks, _ = benchmark_tasks(setting, y_fit, y_eval, data.y_test, args)
        for pretrain in args.pretrain:
            params = model_params(args, setting, pretrain)
            model = fit_or_load_model(params, X_fit, y_fit, data_key=data_key,
                                      cache_dir=cache, log=log)
            features = features_or_load(model_key(params, data_key), model,
                                        {"fit": X_fit, "eval": X_eval},
                                        cache_dir=cache, log=log)
            Z_fit, Z_eval = features["flowr/fit"], features["flowr/eval"]
            # The benchmark's full head: --prior-scale, and --noise-shrinkage
            # unless "auto" (which only its cv-cal row chooses).
            head = method_template(
                "flowr-full", setting, model, Z_fit, y_fit,
                prior_scale=args.prior_scale,
                noise_shrinkage=0.0 if args.noise_shrinkage == "auto"
                else args.noise_shrinkage)
            # calibrate_novelty's defaults and seed, as the benchmark's
            # flowr-full-cal row calls it.
            p_cal, first_cal = calibration_rows(
                head, Z_fit, y_fit, setting, n_tasks=200,
                n_novel_classes=min(5, small_context_sizes(
                    np.unique(y_fit).shape[0])[1]),
                n_query=10, n_known_query_classes=args.lc_known_query_classes,
                n_jobs=args.n_jobs, seed=_resolve_seed(args.seed))
            report = evaluate_online(head, Z_eval, y_eval, tasks, setting=setting,
                                     tpr=_TPR[setting], n_jobs=args.n_jobs,
                                     return_rows=True, probability=True)
            p_test = report.rows.p_novel
            first_test = report.rows.is_novel.astype(bool)
            part = {"separated": bool(
                        np.max(p_cal[~first_cal]) < np.min(p_cal[first_cal])),
                    "unmapped": _scores(first_test, p_test)}
            for targets in TARGETS:
                with warnings.catch_warnings():
                    # Reported as "separated" instead.
                    warnings.filterwarnings("ignore", "The calibration tasks "
                                            "separate", UserWarning)
                    fitted = fit_novelty_map(p_cal, first_cal, targets=targets)
                part[targets] = {"slope": fitted.slope,
                                 "intercept": fitted.intercept,
                                 **_scores(first_test, apply_novelty_map(
                                     p_test, fitted.slope, fitted.intercept))}
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
    args = parse_args(list(sys.argv[1:] if argv is None else argv))
    return run_probe(args, compare, format_comparison, "novelty_map_targets.json")


if __name__ == "__main__":
    main()
