"""Class discovery under a label budget (``flowr-benchmark --label-fraction``),
thresholds cross-fitted over two halves of the test classes.
"""

import argparse
import time

import numpy as np
from sklearn.base import clone
from sklearn.utils import Bunch

from ..baselines import DPMeansClassifier
from ..protocol import (
    DISCOVERY_FIGURES,
    evaluate_discovery,
    select_discovery_params,
    summarise_tasks,
)
from ._benchmark_model import benchmark_tasks

DISCOVERY_METHODS = ("flowr", "crp-isotropic", "dp-means")
DISCOVERY_NAMES = {"flowr": "FLOWR", "crp-isotropic": "CRP isotropic",
                   "dp-means": "DP-means"}
# The candidates each method's threshold is chosen from.
_HEAD_GRID = {"unlabelled_threshold": [0.5, 0.7, 0.9, 0.99]}
DISCOVERY_GRIDS = {"flowr": _HEAD_GRID, "crp-isotropic": _HEAD_GRID,
                   "dp-means": {"threshold_scale": [0.5, 0.75, 1.0, 1.5, 2.0]}}
SCORING = "balanced"
# Test classes each half needs: a small-context task has a support class and
# a new one.
MIN_HALF_CLASSES = 2


def discovery_templates(model, setting, Z_fit, y_fit):
    """The estimator each discovery method copies per task (``Z_fit``: the
    training rows on FLOWR's embedding)."""
    head = model.prior_head_ if setting == "small" else model.head_
    isotropic = clone(head).set_params(covariance="isotropic")
    for name in ("sigma", "prior_var"):
        value = isotropic.get_params()[name]
        if not isinstance(value, str) and np.ndim(value) == 2:
            # The full head's matrix, as one isotropic variance.
            isotropic.set_params(**{name: float(np.trace(value) / len(value))})
    # DP-means' threshold comes from the training classes in both contexts:
    # a one-shot support set has no two rows of a class to learn it from.
    trained = DPMeansClassifier().fit(Z_fit, y_fit)
    dp_means = DPMeansClassifier(threshold=trained.threshold_)
    if setting == "large":
        isotropic.fit(Z_fit, y_fit)
        if callable(getattr(head, "freeze_classes", None)):
            isotropic.freeze_classes(bool(head.frozen_classes_.all()))
        dp_means = trained
    return {"flowr": head, "crp-isotropic": isotropic, "dp-means": dp_means}


def class_halves(test_classes, seed):
    """The test classes in two seeded halves (the first has the odd one),
    each sorted."""
    classes = np.unique(test_classes)
    order = np.random.default_rng([seed, 30]).permutation(classes)
    n_first = (classes.shape[0] + 1) // 2
    return np.sort(order[:n_first]), np.sort(order[n_first:])


def discovery_halves(setting, y_fit, y_eval, args):
    """Per half of the test classes, ``(rows of y_eval, tasks, classes)``;
    None when a half would have fewer than ``MIN_HALF_CLASSES`` classes."""
    test_classes = np.setdiff1d(np.unique(y_eval), np.unique(y_fit))
    halves = class_halves(test_classes, args.seed)
    if min(half.shape[0] for half in halves) < MIN_HALF_CLASSES:
        return None
    plan = []
    for i, half in enumerate(halves):
        keep = np.isin(y_eval, half)
        if setting == "large":
            keep |= np.isin(y_eval, y_fit)
        rows = np.flatnonzero(keep)
        n_tasks = (args.tasks + 1 - i) // 2
        half_args = argparse.Namespace(**{**vars(args), "tasks": max(n_tasks, 1)})
        tasks, _ = benchmark_tasks(setting, y_fit, y_eval[rows], half, half_args)
        plan.append((rows, tasks, half))
    return plan


def _cross_fit(method, template, Z_eval, y_eval, plan, setting, fraction, args):
    """``(result, selection)`` of one method, each half scored with the
    candidate chosen on the other half."""
    nothing_unlabelled = fraction == 1.0 and args.label_delay == 0
    grid = {} if nothing_unlabelled else DISCOVERY_GRIDS[method]
    found = [select_discovery_params(
        template, Z_eval[rows], y_eval[rows], grid, setting=setting, tasks=tasks,
        label_fraction=fraction, label_delay=args.label_delay, scoring=SCORING,
        n_jobs=args.n_jobs, random_state=args.seed,
        verbose=int(args.verbose >= 1)) for rows, tasks, _ in plan]
    halves, reports = [], []
    for i, (_, tasks, classes) in enumerate(plan):
        chosen = found[1 - i]
        reports.append(found[i].results[chosen.best_index]["report"])
        halves.append({"classes": classes.tolist(),
                       "validation_classes": plan[1 - i][2].tolist(),
                       "params": chosen.best_params,
                       "validation_score": chosen.best_score,
                       "n_tasks": len(tasks)})
    per_task = {name: np.concatenate([report.per_task[name] for report in reports])
                for name in DISCOVERY_FIGURES}
    mean, se = summarise_tasks(per_task)
    result = Bunch(
        mean=mean, se=se, n_tasks=sum(report.n_tasks for report in reports),
        n_unlabelled=sum(report.n_unlabelled for report in reports))
    return result, {"scoring": SCORING, "grid": grid, "halves": halves}


def _chosen(selection):
    """A log's account of the parameters chosen per half."""
    if selection is None:
        return "default thresholds"
    parts = []
    for i, half in enumerate(selection["halves"]):
        params = ", ".join(f"{key}={value}" for key, value in
                           half["params"].items()) or "defaults"
        parts.append(f"half {i + 1}: {params} (validation "
                     f"{selection['scoring']} {half['validation_score']:.3f})")
    return "; ".join(parts)


def discovery_rows(model, setting, Z_fit, y_fit, Z_eval, y_eval, tasks, args,
                   log) -> list:
    """Per label fraction and method, the discovery figures (JSON rows);
    ``tasks``, the main table's, run only without two halves."""
    templates = discovery_templates(model, setting, Z_fit, y_fit)
    plan = discovery_halves(setting, y_fit, y_eval, args)
    if plan is None:
        n_test = np.setdiff1d(np.unique(y_eval), np.unique(y_fit)).shape[0]
        log(f"   discovery: only {n_test} test classes, too few for two "
            f"validation halves of {MIN_HALF_CLASSES}: no threshold is chosen; "
            "the methods' defaults run on the main table's tasks")
    else:
        log("   discovery thresholds cross-fitted over two halves of the test "
            f"classes ({plan[0][2].shape[0]} + {plan[1][2].shape[0]} classes, "
            f"{len(plan[0][1])} + {len(plan[1][1])} tasks): each half scored "
            "with the choice on the other")
    rows = []
    for fraction in args.label_fraction:
        for method, template in templates.items():
            tic = time.perf_counter()
            try:
                if plan is None:
                    selection = None
                    out = evaluate_discovery(
                        template, Z_eval, y_eval, tasks, setting=setting,
                        label_fraction=fraction, label_delay=args.label_delay,
                        n_jobs=args.n_jobs, random_state=args.seed,
                        verbose=int(args.verbose >= 1))
                else:
                    out, selection = _cross_fit(method, template, Z_eval, y_eval,
                                                plan, setting, fraction, args)
            except (TypeError, ValueError) as exc:
                log(f"   no discovery figures for {DISCOVERY_NAMES[method]}: {exc}")
                continue
            rows.append({"method": method, "label_fraction": fraction,
                         "label_delay": args.label_delay, "mean": out.mean,
                         "se": out.se, "n_tasks": out.n_tasks,
                         "n_unlabelled": out.n_unlabelled, "selection": selection,
                         "seconds": time.perf_counter() - tic})
            log(f"   discovery {DISCOVERY_NAMES[method]:13s} fraction {fraction:g}: "
                f"acc new={out.mean['accuracy_new']:.3f} "
                f"known acc={out.mean['known_accuracy']:.3f} "
                f"[{_chosen(selection)}]")
    return rows
