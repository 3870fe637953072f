"""Why P(novel) stays miscalibrated on encoders trained on few classes.

FLOWR's head takes its noise covariance ``W`` and its prior covariance ``S0``
of the class means from the training classes' embeddings. The Gaussian
predictive of the novel class, ``N(mu0, S0 + W)``, pays an Occam factor of
``1/2 log det(I + W^-1 S0)`` against a known class; that is right when new
classes spread like the training classes. An encoder trained on five classes
(digits, fashion-mnist) does not spread new classes that way: it maps them
into a small region near ``mu0``, so every first sighting is explained by some
known class and P(novel) collapses to ~0, far below the rate of first
sightings, and a Platt map fitted on training classes (where novelty *is*
visible) cannot see that.

This probe reads ``flowr-benchmark``'s cache (same options, same keys; it
trains and caches the small-context model when it is absent) and prints, per
pre-training:

- the shift: the mean generalised eigenvalue of the test classes' pooled
  within-class covariance against ``W`` (``noise x``) and of their class-mean
  covariance against ``S0`` (``prior x``); 1.0 means "new classes look like
  training classes";
- the median novelty log-odds of first sightings and of the other queries;
- H-measure / accuracy at the fixed TPR / ECE of the full-covariance head as
  deployed, with its calibration map (``calibrate_novelty`` on the training
  classes), and with ``W`` and ``S0`` rescaled by the test classes' own ratios
  (an oracle no deployed model has: it shows whether knowing the shift would
  fix the calibration).

Usage (the options are ``flowr-benchmark``'s)::

    python benchmarks/novel_class_shift.py --quick --dataset digits --seed 0 \
        --cache-dir ~/.cache/sklearn_flowr
"""

from __future__ import annotations

import copy
import sys

import numpy as np

from sklearn_flowr._core._covariance import (
    estimate_noise_covariance,
    estimate_prior_covariance,
)
from sklearn_flowr.cli._benchmark import (
    _TPR,
    benchmark_data,
    model_params,
    parse_args,
)
from sklearn_flowr.cli._benchmark_report import run_probe
from sklearn_flowr.cli._benchmark_setup import (
    features_or_load,
    fit_or_load_model,
    method_template,
    model_key,
)
from sklearn_flowr.protocol import (
    SmallContextTasks,
    evaluate_online,
)
from sklearn_flowr.protocol._calibrate import small_context_sizes


def scale_ratio(reference, covariance):
    """Mean generalised eigenvalue of ``covariance`` against ``reference``:
    ``trace(reference^-1 covariance) / d``, how many times wider the data are
    than the model assumes, averaged over directions."""
    reference = np.asarray(reference, dtype=np.float64)
    return float(np.trace(np.linalg.solve(reference, covariance))
                 / reference.shape[0])


def shift_ratios(head, Z, y):
    """``(noise x, prior x)`` of the classes of ``(Z, y)`` against a fitted
    full-covariance head's ``sigma`` (``W``) and ``prior_var`` (``S0``)."""
    labels, y_index = np.unique(y, return_inverse=True)
    noise = estimate_noise_covariance(Z, y_index, labels.shape[0])
    _, prior = estimate_prior_covariance(Z, y_index, labels.shape[0])
    return scale_ratio(head.sigma, noise), scale_ratio(head.prior_var, prior)


def _summary(report):
    rows = report.rows
    first = rows.is_novel
    return {"h_measure": report.h_measure, "accuracy": report.accuracy,
            "ece": report.ece,
            "median_log_odds_first_sightings": float(np.median(
                rows.novelty_score[first])),
            "median_log_odds_other_queries": float(np.median(
                rows.novelty_score[~first])),
            "rate_first_sightings": float(first.mean()),
            "mean_p_novel": float(rows.p_novel.mean())}


def probe(args, log=print) -> dict:
    """Shift ratios and the head's figures per pre-training (small context)."""
    cache = args.cache_dir or None
    data = benchmark_data(args)
    data_key = data.fingerprint()
    n_support, n_novel = small_context_sizes(np.unique(data.y_test).shape[0])
    tasks = SmallContextTasks(data.y_test, n_support_classes=n_support,
                              n_novel_classes=n_novel, n_tasks=args.tasks,
                              random_state=args.seed)
    out = {"dataset": args.dataset, "seed": args.seed, "pretrain": {}}
    for pretrain in args.pretrain:
        params = model_params(args, "small", pretrain)
        model = fit_or_load_model(params, data.X_train, data.y_train,
                                  data_key=data_key, cache_dir=cache, log=log)
        features = features_or_load(model_key(params, data_key), model,
                                    {"fit": data.X_train, "eval": data.X_test},
                                    cache_dir=cache, log=log)
        Z_fit, Z_eval = features["flowr/fit"], features["flowr/eval"]
        head = method_template("flowr-full", "small", model, Z_fit, data.y_train)
        noise_x, prior_x = shift_ratios(head, Z_eval, data.y_test)
        calibration = dict(random_state=args.seed, n_jobs=args.n_jobs)
        variants = {
            "full head": head,
            "full head, calibrated": method_template(
                "flowr-full-cal", "small", model, Z_fit, data.y_train,
                calibration=calibration),
            # set_params on a copy: the deployed head stays as it is.
            "full head, W and S0 x test ratios (oracle)":
                copy.deepcopy(head).set_params(sigma=noise_x * head.sigma,
                                               prior_var=prior_x * head.prior_var),
        }
        figures = {}
        for name, head in variants.items():
            report = evaluate_online(head, Z_eval, data.y_test, tasks,
                                     setting="small", tpr=_TPR["small"],
                                     n_jobs=args.n_jobs, return_rows=True,
                                     verbose=0)
            figures[name] = _summary(report)
        out["pretrain"][pretrain] = {"noise_x": noise_x, "prior_x": prior_x,
                                     "variants": figures}
    return out


def format_probe(result) -> str:
    lines = [f"{result['dataset']}, seed {result['seed']}, small context"]
    for pretrain, part in result["pretrain"].items():
        lines.append(f"{pretrain}: test classes vs training classes: noise x "
                     f"{part['noise_x']:.2f}, prior x {part['prior_x']:.2f}")
        lines.append(f"  {'head':44s} {'H':>6s} {'Acc':>6s} {'ECE':>6s} "
                     f"{'rate':>6s} {'mean P':>7s} {'lo first':>9s} "
                     f"{'lo other':>9s}")
        for name, f in part["variants"].items():
            lines.append(
                f"  {name:44s} {f['h_measure']:6.3f} {100 * f['accuracy']:6.1f} "
                f"{f['ece']:6.3f} {f['rate_first_sightings']:6.3f} "
                f"{f['mean_p_novel']:7.3f} "
                f"{f['median_log_odds_first_sightings']:9.1f} "
                f"{f['median_log_odds_other_queries']:9.1f}")
    return "\n".join(lines)


def main(argv=None) -> dict:
    return run_probe(parse_args(argv), probe, format_probe, "novel_class_shift.json")


if __name__ == "__main__":
    main(sys.argv[1:])
