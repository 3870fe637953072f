"""Class discovery under a label budget, as ``flowr-benchmark --label-fraction``
reports it.

For each label fraction asked for, three methods run through
:func:`~sklearn_flowr.protocol.evaluate_discovery` on FLOWR's meta-trained
embedding in the same run:

``flowr``
    FLOWR's own head (the fitted model's, as the main table runs it): an
    unlabelled row joins the class of highest CRP posterior, a new
    provisional class when that is the new-class term, and is learned from
    when that posterior reaches ``unlabelled_threshold``.
``crp-isotropic``
    The same head with ``covariance="isotropic"`` (the paper's head), on the
    same embedding.
``dp-means``
    Nearest class mean with a distance threshold that opens a new class
    (DP-means; :class:`~sklearn_flowr.baselines.DPMeansClassifier`), its
    threshold ``threshold_scale`` times the 0.99 quantile of within-class
    distances of the training classes' rows (in both contexts: a one-shot
    support set has no two rows of a class to learn it from).

Every method's threshold is chosen on validation classes, never on the
classes it is scored on (:func:`~sklearn_flowr.protocol.select_discovery_params`,
criterion ``"balanced"``: the mean of the clustering accuracy on new-class
rows and the accuracy on known-class rows). The encoder has seen every
training class, so the validation classes come from the test classes, by
cross-fitting: the test classes are split into two seeded halves
(:func:`class_halves`); tasks are drawn from each half's classes (the large
context's known classes are the training classes' held-out rows, as in the
main table; its new classes come from the half), half the run's ``--tasks``
each; each half is scored with the candidate that did best on the other
half's tasks, and the figures are pooled over the tasks of both halves. The
candidates' runs on a half serve both as that half's validation and, for the
candidate chosen on the other half, as its evaluation: the same seeded tasks
and label arrivals give the same figures. With fewer than
``2 * MIN_HALF_CLASSES`` test classes there are no two halves to cross-fit:
the methods then run with their default thresholds (the model's
``unlabelled_threshold``, ``threshold_scale=1``) on the main table's tasks,
and the log says so.

Each row of the JSON (``discovery``, per setting) holds the mean and standard
error over tasks of every figure of
:func:`~sklearn_flowr.metrics.discovery_report` on the rows that came without
their label, and ``selection``: per half, its classes, the validation classes
and the parameters chosen on them with their validation score (None in the
fallback).
"""

from __future__ import annotations

import argparse
import textwrap
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
from ._benchmark_setup import benchmark_tasks

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
    """The estimator each discovery method copies per task (on FLOWR's
    embedding; ``Z_fit`` the training rows' features)."""
    head = model.prior_head_ if setting == "small" else model.head_
    isotropic = clone(head).set_params(covariance="isotropic")
    for name in ("sigma", "prior_var"):
        value = isotropic.get_params()[name]
        if not isinstance(value, str) and np.ndim(value) == 2:
            # The full head's matrix, as one isotropic variance.
            isotropic.set_params(**{name: float(np.trace(value) / len(value))})
    # DP-means' base threshold comes from the training classes in both
    # contexts (as PEELER's precision does in the small one): a one-shot
    # support set has no pair of rows of one class to learn it from.
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
    """Per half of the test classes, ``(rows, tasks, classes)``: the rows of
    ``y_eval`` its tasks index (the half's classes, and in the large context
    the training classes' held-out rows), its tasks (half of ``args.tasks``,
    the first half taking the odd one) and its classes; None when a half
    would have fewer than ``MIN_HALF_CLASSES`` classes."""
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
    """One method's figures under the cross-fit: per half, its candidates'
    runs; each half scored with the other half's choice. ``(result,
    selection)``, ``result`` as :func:`evaluate_discovery` returns it."""
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
    ``tasks`` are the main table's, run only in the fallback."""
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


def _cell(row, key, digits=3):
    mean, se = row["mean"][key], row["se"][key]
    if mean != mean:  # NaN
        return f"{'n/a':>13s}"
    if se != se:
        return f"{mean:13.{digits}f}"
    return f"{f'{mean:.{digits}f}+-{se:.{digits}f}':>13s}"


def format_discovery_table(rows, setting) -> str:
    """The discovery figures of one setting, a row per (fraction, method)."""
    head = (f"{'Method':14s} {'labels':>6s} {'Acc new':>13s} {'NMI new':>13s} "
            f"{'ARI new':>13s} {'Known acc':>13s} {'found/true':>13s}")
    lines = [f"{setting.capitalize()} context, class discovery under a label "
             "budget (mean +- standard error over tasks)", head, "-" * len(head)]
    for row in rows:
        found = f"{row['mean']['n_discovered']:.1f}/{row['mean']['n_true_new']:.1f}"
        lines.append(f"{DISCOVERY_NAMES[row['method']]:14s} "
                     f"{row['label_fraction']:6g} "
                     + " ".join(_cell(row, key) for key in
                                ("accuracy_new", "nmi_new", "ari_new",
                                 "known_accuracy"))
                     + f" {found:>13s}")
    note = ("On the queries that came without their label: Acc new, NMI new, "
            "ARI new score how the rows of new classes were grouped "
            "(clustering accuracy after Hungarian matching of the assigned "
            "labels to the true classes); Known acc is the plain accuracy on "
            "rows of known classes; found/true: provisional classes opened "
            "per task against the new classes in it. labels: share of "
            "queries whose label arrived (after --label-delay rows).")
    if all(row.get("selection") is not None for row in rows):
        note += (" Thresholds: each half of the test classes is scored with "
                 "the candidate best on the other half's tasks (cross-fit; "
                 "the JSON's selection).")
    else:
        note += (" Thresholds: the methods' defaults (too few test classes "
                 "for two validation halves).")
    lines.append(textwrap.fill(note, width=len(head), break_on_hyphens=False))
    return "\n".join(lines)


def plot_discovery(results, path) -> None:
    """Per setting, the clustering accuracy on new-class rows (left) and the
    known-class accuracy (right) of each discovery method against the label
    fraction, with standard-error bars, as a PNG written to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    settings = [(name, result["discovery"]) for name, result
                in results["settings"].items() if result.get("discovery")]
    fig, axes = plt.subplots(len(settings), 2, figsize=(9, 3.4 * len(settings)),
                             squeeze=False)
    for (setting, rows), pair in zip(settings, axes, strict=True):
        panels = (("accuracy_new", pair[0], "new classes: clustering acc."),
                  ("known_accuracy", pair[1], "known classes: accuracy"))
        for key, ax, title in panels:
            for method in DISCOVERY_METHODS:
                mine = [row for row in rows if row["method"] == method]
                if not mine:
                    continue
                ax.errorbar([row["label_fraction"] for row in mine],
                            [row["mean"][key] for row in mine],
                            yerr=[0.0 if row["se"][key] != row["se"][key]
                                  else row["se"][key] for row in mine],
                            marker="o", capsize=3, label=DISCOVERY_NAMES[method])
            ax.set(title=f"{setting} context, {title}", xlabel="label fraction",
                   ylim=(0, 1.02))
            ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, format="png", dpi=100)
    plt.close(fig)
