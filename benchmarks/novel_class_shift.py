"""Why P(novel) stays miscalibrated on encoders trained on few classes.

FLOWR's full-covariance head (``CRPGaussianClassifier(covariance="full")``,
``FLOWRClassifier``'s default) takes its noise covariance ``W`` and its prior
covariance ``S0`` of the class means from the training classes' embeddings. The Gaussian
predictive of the novel class, ``N(mu0, S0 + W)``, pays an Occam factor of
``1/2 log det(I + W^-1 S0)`` against a known class; that is right when new
classes spread like the training classes. An encoder trained on five classes
(digits, fashion-mnist) does not spread new classes that way: it maps them
into a small region near ``mu0``, so every first sighting is explained by some
known class and P(novel) collapses to ~0, far below the rate of first
sightings, and a Platt map fitted on training classes (where novelty *is*
visible) cannot see that.

This probe fits the small-context ``FLOWRClassifier(head=
CRPGaussianClassifier(covariance="full"), calibration=None)`` on a
``flowr-benchmark`` dataset (its data, tasks and training options, a subset)
and prints, per pre-training:

- the shift: the mean generalised eigenvalue of the test classes' pooled
  within-class covariance against ``W`` (``noise x``) and of their class-mean
  covariance against ``S0`` (``prior x``); 1.0 means "new classes look like
  training classes";
- the median novelty log-odds of first sightings and of the other queries;
- H-measure / accuracy at the fixed TPR / ECE of the full-covariance head as
  deployed (``prior_head_``), with its calibration map (the same model refitted
  with ``calibration="train"``, which reuses the trained encoder), and with
  ``W`` and ``S0`` rescaled by the test classes' own ratios (an oracle no
  deployed model has: it shows whether knowing the shift would fix the
  calibration).

Usage (the options are ``flowr-benchmark``'s)::

    python benchmarks/novel_class_shift.py --quick --dataset digits --seed 0
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import numpy as np
from sklearn.base import clone

from sklearn_flowr import CRPGaussianClassifier
from sklearn_flowr.cli._benchmark import benchmark_data
from sklearn_flowr.protocol import SmallContextTasks, evaluate_online

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


def scale_ratio(reference, covariance):
    """Mean generalised eigenvalue of ``covariance`` against ``reference``:
    ``trace(reference^-1 covariance) / d``, how many times wider the data are
    than the model assumes, averaged over directions."""
    reference = np.asarray(reference, dtype=np.float64)
    return float(np.trace(np.linalg.solve(reference, covariance))
                 / reference.shape[0])


def shift_ratios(head, Z, y):
    """``(noise x, prior x)`` of the classes of ``(Z, y)`` against a
    full-covariance prior head's ``sigma`` (``W``) and ``prior_var``
    (``S0``): the same empirical-Bayes estimates (Ledoit-Wolf shrunk) on
    ``(Z, y)``, by a full head fitted there."""
    own = CRPGaussianClassifier(covariance="full").fit(Z, y)
    return (scale_ratio(head.sigma, own.sigma_),
            scale_ratio(head.prior_var, own.prior_var_))


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
    data = benchmark_data(args)
    n_support, n_novel = small_context_sizes(np.unique(data.y_test).shape[0])
    tasks = SmallContextTasks(data.y_test, n_support_classes=n_support,
                              n_novel_classes=n_novel, n_tasks=args.tasks,
                              random_state=args.seed)
    out = {"dataset": args.dataset, "seed": args.seed, "pretrain": {}}
    for pretrain in args.pretrain:
        model = build_model(args, "small", pretrain, calibration=None,
                            head=CRPGaussianClassifier(covariance="full"))
        log(f"{pretrain}: training on {data.X_train.shape[0]} images ...")
        model.fit(data.X_train, data.y_train)
        # The same model with its map: the refit reuses the trained encoder.
        calibrated = clone(model).set_params(calibration="train").fit(
            data.X_train, data.y_train)
        Z_eval = model.transform(data.X_test)
        head = model.prior_head_
        noise_x, prior_x = shift_ratios(head, Z_eval, data.y_test)
        variants = {
            "full head": head,
            "full head, calibrated": calibrated.prior_head_,
            # set_params on a copy: the deployed head stays as it is.
            "full head, W and S0 x test ratios (oracle)":
                copy.deepcopy(head).set_params(sigma=noise_x * head.sigma,
                                               prior_var=prior_x * head.prior_var),
        }
        figures = {}
        for name, estimator in variants.items():
            report = evaluate_online(estimator, Z_eval, data.y_test, tasks,
                                     setting="small", tpr=TPR["small"],
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
    parser = build_parser(__doc__.split("\n")[0])
    args = parse_args(parser, list(sys.argv[1:] if argv is None else argv))
    return run_probe(args, probe, format_probe, "novel_class_shift.json")


if __name__ == "__main__":
    main()
