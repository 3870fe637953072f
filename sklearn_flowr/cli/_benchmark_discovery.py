"""Class discovery under a label budget, as ``flowr-benchmark --label-fraction``
reports it.

For each label fraction asked for, the run's tasks go through
:func:`~sklearn_flowr.protocol.evaluate_discovery` on FLOWR's meta-trained
embedding, for three methods in the same run:

``flowr``
    FLOWR's own head (the fitted model's, as the main table runs it): an
    unlabelled row joins the class of highest CRP posterior, a new
    provisional class when that is the new-class term.
``crp-isotropic``
    The same head with ``covariance="isotropic"`` (the paper's head), on the
    same embedding.
``dp-means``
    Nearest class mean with a distance threshold that opens a new class
    (DP-means; :class:`~sklearn_flowr.baselines.DPMeansClassifier`), its
    threshold the 0.99 quantile of within-class distances of the labelled
    rows it is fitted on: the support set (small context) or the training
    classes (large context), never the test classes.

Each row of the JSON (``discovery``, per setting) holds the mean and standard
error over tasks of every figure of
:func:`~sklearn_flowr.metrics.discovery_report` on the rows that came without
their label.
"""

from __future__ import annotations

import textwrap
import time

import numpy as np
from sklearn.base import clone

from ..baselines import DPMeansClassifier
from ..protocol import evaluate_discovery

DISCOVERY_METHODS = ("flowr", "crp-isotropic", "dp-means")
DISCOVERY_NAMES = {"flowr": "FLOWR", "crp-isotropic": "CRP isotropic",
                   "dp-means": "DP-means"}


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
    dp_means = DPMeansClassifier()
    if setting == "large":
        isotropic.fit(Z_fit, y_fit)
        if callable(getattr(head, "freeze_classes", None)):
            isotropic.freeze_classes(bool(head.frozen_classes_.all()))
        dp_means.fit(Z_fit, y_fit)
    return {"flowr": head, "crp-isotropic": isotropic, "dp-means": dp_means}


def discovery_rows(model, setting, Z_fit, y_fit, Z_eval, y_eval, tasks, args,
                   log) -> list:
    """Per label fraction and method, the discovery figures (JSON rows)."""
    templates = discovery_templates(model, setting, Z_fit, y_fit)
    rows = []
    for fraction in args.label_fraction:
        for method, template in templates.items():
            tic = time.perf_counter()
            try:
                out = evaluate_discovery(
                    template, Z_eval, y_eval, tasks, setting=setting,
                    label_fraction=fraction, label_delay=args.label_delay,
                    n_jobs=args.n_jobs, random_state=args.seed,
                    verbose=int(args.verbose >= 1))
            except (TypeError, ValueError) as exc:
                log(f"   no discovery figures for {DISCOVERY_NAMES[method]}: {exc}")
                continue
            rows.append({"method": method, "label_fraction": fraction,
                         "label_delay": args.label_delay, "mean": out.mean,
                         "se": out.se, "n_tasks": out.n_tasks,
                         "n_unlabelled": out.n_unlabelled,
                         "seconds": time.perf_counter() - tic})
            log(f"   discovery {DISCOVERY_NAMES[method]:13s} fraction {fraction:g}: "
                f"acc new={out.mean['accuracy_new']:.3f} "
                f"known acc={out.mean['known_accuracy']:.3f}")
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
