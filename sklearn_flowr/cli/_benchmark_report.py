"""What ``flowr-benchmark`` reports: JSON rows, the conformal novelty decision
(calibrated on the other test tasks or on tasks of the training classes), the
ablation, the tables (main, conformal, class discovery) and the PNGs (roc.png:
ROC curves, reliability diagrams, conformal false-novel rate against alpha;
discovery.png). A method whose novelty output is not a probability gets null in
the JSON and ``n/a`` in the tables."""

import textwrap

import numpy as np
from scipy.stats import false_discovery_control

from ..conformal import conformal_pvalues, leave_group_out_pvalues
from ..metrics import DEFAULT_N_BINS
from ..protocol import summarise_tasks
from ._benchmark_discovery import DISCOVERY_METHODS, DISCOVERY_NAMES
from ._benchmark_model import META_TRAINED_METHODS, METHOD_NAMES, METHODS

ALPHAS = (0.01, 0.05, 0.1)
BH_QS = (0.05, 0.1, 0.2)
# The level of the BH columns of the printed table.
BH_Q = 0.1
CALIBRATION_SETS = ("tasks", "training")
# The false-novel-rate curve of the figure: alpha from 0.01 to 0.3.
ALPHA_GRID = tuple(round(0.01 * k, 2) for k in range(1, 31))
# Calibration tasks: as many as the method's test tasks, at most this many.
MAX_CALIBRATION_TASKS = 200


def _mean_se(values):
    """Mean and standard error over tasks, NaN ignored; None where undefined."""
    mean, se = summarise_tasks({"values": values})
    return tuple(None if x != x else x for x in (mean["values"], se["values"]))


def _per_task_share(task, mask, among, n_tasks):
    """Per task, the share of the rows in ``among`` that are in ``mask`` (NaN
    without such rows)."""
    total = np.bincount(task, weights=among, minlength=n_tasks)
    hits = np.bincount(task, weights=mask & among, minlength=n_tasks)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, hits / np.maximum(total, 1), np.nan)


def _bh_figures(pvalues, first, task, n_tasks, q):
    """Mean false discovery proportion and power of Benjamini-Hochberg at
    level ``q`` on each task's query rows, with their standard errors."""
    order = np.argsort(task, kind="stable")
    bounds = np.cumsum(np.bincount(task, minlength=n_tasks))[:-1]
    fdp, power = [], []
    for rows_of_task in np.split(order, bounds):
        selected = false_discovery_control(pvalues[rows_of_task], method="bh") <= q
        is_first = first[rows_of_task]
        fdp.append(float(np.sum(selected & ~is_first) / max(int(selected.sum()), 1)))
        power.append(float(np.sum(selected & is_first) / is_first.sum())
                     if is_first.any() else np.nan)
    (fdr, fdr_se), (power, power_se) = _mean_se(fdp), _mean_se(power)
    return {"q": q, "fdr": fdr, "fdr_se": fdr_se, "power": power,
            "power_se": power_se}


def conformal_figures(rows, calibration=None, *, seconds=None) -> dict:
    """The conformal figures (a JSON dict) of a row's test ``rows``,
    calibrated on the other tasks (``calibration`` None) or a calibration run."""
    score_name = "novelty_score" if "novelty_score" in rows else "p_novel"
    scores = np.asarray(rows[score_name], dtype=np.float64)
    first = np.asarray(rows["is_novel"], dtype=bool)
    known = ~first
    task_ids, task = np.unique(rows["task_id"], return_inverse=True)
    n_tasks = task_ids.shape[0]
    if calibration is None:
        pvalues = leave_group_out_pvalues(scores, known, task)
        per_task = np.bincount(task, weights=known, minlength=n_tasks)
        n_calibration = int(known.sum() - per_task.max())
        n_calibration_tasks = n_tasks - 1
    else:
        known_calibration = ~np.asarray(calibration.is_first_sighting, dtype=bool)
        reference = np.asarray(calibration.score, dtype=np.float64)[known_calibration]
        pvalues = conformal_pvalues(reference, scores)
        n_calibration = int(reference.shape[0])
        n_calibration_tasks = int(np.unique(calibration.task_id).shape[0])
        score_name = calibration.score_name

    levels = {}
    curve = {"alpha": list(ALPHA_GRID), "false_novel_rate": [], "power": []}
    for alpha in ALPHA_GRID:  # ALPHAS are points of the grid
        called = pvalues <= alpha
        (fnr, fnr_se), (power, power_se) = (
            _mean_se(_per_task_share(task, called, among, n_tasks))
            for among in (known, first))
        curve["false_novel_rate"].append(fnr)
        curve["power"].append(power)
        if alpha in ALPHAS:
            levels[str(alpha)] = {"false_novel_rate": fnr,
                                  "false_novel_rate_se": fnr_se,
                                  "power": power, "power_se": power_se}
    bh_levels = {str(q): _bh_figures(pvalues, first, task, n_tasks, q)
                 for q in BH_QS}
    return {"calibration": "tasks" if calibration is None else "training",
            "score": score_name,
            "n_calibration": n_calibration,
            "n_calibration_tasks": n_calibration_tasks,
            "n_tasks": int(n_tasks),
            "calibration_seconds": None if seconds is None else float(seconds),
            "alpha": levels,
            "bh": bh_levels[str(BH_Q)],
            "bh_levels": bh_levels,
            "curve": curve}


ACCURACY_COLUMNS = ("accuracy", "support_accuracy", "incremental_accuracy")
CALIBRATION = {
    "n_bins": DEFAULT_N_BINS,
    "binning": f"{DEFAULT_N_BINS} equal-width bins of [0, 1], right-closed "
    "(k/n, (k+1)/n] with 0 in the first (sklearn.calibration.calibration_curve, "
    "strategy='uniform')",
    "target": "is_novel (the query's class had not been seen yet)",
}
_NOT_A_PROBABILITY = ("n/a (no probability): the method's novelty output is a "
                      "distance or score, not P(novel), so it has no ECE, Brier "
                      "score or argmax decision.")


def row_from_report(method: str, pretrain: str, report, seconds: float) -> dict:
    """One JSON row of the figures of :func:`evaluate_online`'s report."""
    row = {"method": method, "pretrain": pretrain,
           "embedding": ("meta-trained" if method in META_TRAINED_METHODS
                         else "pre-trained"), "seconds": seconds,
           "n_tasks": int(report.n_tasks), "h_measure": float(report.h_measure),
           "auroc": float(report.auroc), "threshold": float(report.threshold),
           "novel_tpr": float(report.novel_tpr),
           "probability": bool(report.probability),
           "roc": {"fpr": report.fpr.tolist(), "tpr": report.tpr_curve.tolist()}}
    for key in ACCURACY_COLUMNS:
        row[key] = float(report[key])
        row[key + "_ci"] = float(report[key + "_ci"])
    for key in ("argmax_accuracy", "argmax_accuracy_ci", "argmax_novel_tpr",
                "ece", "brier"):
        row[key] = None if report[key] is None else float(report[key])
    bins = report.reliability
    row["reliability"] = None if bins is None else {
        "prob_pred": bins.prob_pred.tolist(), "prob_true": bins.prob_true.tolist(),
        "count": bins.count.tolist()}
    return row


# (ablation entry, method, the method it is compared with, printed title):
# does meta-training help (when flowr-no-meta ran), and does the head beat a
# distance on the same embedding?
_ABLATIONS = (
    ("meta_training", "flowr", "flowr-no-meta", "meta-training vs none"),
    ("head_vs_distance", "flowr", "ncm-flowr-emb",
     "FLOWR head vs NCM on the same embedding"),
)


def ablation(rows) -> list[dict]:
    """Per pre-training, the H-measure and accuracy gains of the comparisons of
    ``_ABLATIONS`` whose two methods both ran."""
    out = []
    for pretrain in dict.fromkeys(row["pretrain"] for row in rows):
        mine = {row["method"]: row for row in rows if row["pretrain"] == pretrain}
        entry = {"pretrain": pretrain}
        for key, method, other, _ in _ABLATIONS:
            if method in mine and other in mine:
                entry[key] = {
                    "method": method, "compared_with": other,
                    **{f"{metric}_gain": mine[method][metric] - mine[other][metric]
                       for metric in ("h_measure", "accuracy")}}
        if len(entry) > 1:
            out.append(entry)
    return out


def _mean_se_cell(mean, se, width):
    """``mean+-se`` in ``width`` characters; n/a without a mean (None or NaN)."""
    if mean is None or mean != mean:
        return f"{'n/a':>{width}s}"
    if se is None or se != se:
        return f"{mean:{width}.3f}"
    return f"{f'{mean:.3f}+-{se:.3f}':>{width}s}"


_LABEL_HEAD = f"{'Method':14s} {'Pre-train':9s} {'Emb.':4s} "


def _embedding(row):
    """``meta`` (FLOWR's meta-trained encoder) or ``pre`` (the one before)."""
    return {"meta-trained": "meta"}.get(row.get("embedding"), "pre")


def _label(row):
    """The method, pre-training and embedding cells of a table row."""
    return (f"{METHOD_NAMES[row['method']]:14s} {row['pretrain']:9s} "
            f"{_embedding(row):4s} ")


def _accuracy_cell(row, key):
    if row.get(key) is None:
        return f"{'n/a':>14s}"
    return f"{100 * row[key]:6.2f}+-{100 * row[key + '_ci']:5.2f}"


def format_table(setting_result, setting) -> str:
    """The paper-style table of one setting, with calibration and ablation."""
    head = (f"{_LABEL_HEAD}{'Acc':>14s} {'Support Acc':>14s} {'Inc. Acc':>14s} "
            f"{'Argmax Acc':>14s} {'H-measure':>9s} {'AUROC':>6s} {'ECE':>6s} "
            f"{'Brier':>6s} {'tasks':>5s}")
    lines = [f"{setting.capitalize()} context (accuracies: mean +- 95% CI over "
             "tasks; H-measure, AUROC, ECE, Brier: pooled over the run)", head,
             "-" * len(head)]
    any_score = False
    for row in setting_result["rows"]:
        any_score |= not row.get("probability", False)
        cells = " ".join(_accuracy_cell(row, k)
                         for k in (*ACCURACY_COLUMNS, "argmax_accuracy"))
        lines.append(
            f"{_label(row)}{cells} {row['h_measure']:9.3f} {row['auroc']:6.3f} "
            f"{_mean_se_cell(row.get('ece'), None, 6)} "
            f"{_mean_se_cell(row.get('brier'), None, 6)} {row['n_tasks']:5d}")
    notes = [f"Acc: novel iff P(novel) >= tau, tau set at novelty TPR "
             f"{setting_result['tpr']}. Argmax Acc: the model's own decision "
             "(predict's): novel iff the conformal p-value of P(novel) against "
             "known-class rows the head has scored before learning them is at "
             "most head__novelty_alpha (0.05), or, with fewer such rows, the "
             "argmax over the N+1 probabilities. ECE (over "
             f"{DEFAULT_N_BINS} equal-width bins) and Brier: P(novel) against "
             "first sightings. Emb.: meta = FLOWR's meta-trained encoder, pre = "
             "the encoder before meta-training (flowr-no-meta: its model's only one)."]
    if any_score:
        notes.append(_NOT_A_PROBABILITY)
    lines.extend(textwrap.fill(note, width=len(head), break_on_hyphens=False)
                 for note in notes)
    for entry in setting_result.get("ablation", []):
        parts = [f"{title}: H {entry[key]['h_measure_gain']:+.3f}, Acc "
                 f"{100 * entry[key]['accuracy_gain']:+.2f}"
                 for key, _, _, title in _ABLATIONS if key in entry]
        lines.append(f"Ablation {entry['pretrain']}: " + "; ".join(parts))
    if any("conformal" in row for row in setting_result["rows"]):
        lines.extend(["", format_conformal_table(setting_result, setting)])
    if setting_result.get("discovery"):
        lines.extend(["", format_discovery_table(setting_result["discovery"],
                                                 setting)])
    return "\n".join(lines)


def _figure_cell(figures, key):
    return _mean_se_cell(figures.get(key), figures.get(key + "_se"), 12)


def format_conformal_table(setting_result, setting) -> str:
    """The conformal novelty decision of every row of one setting."""
    levels = [str(alpha) for alpha in ALPHAS]
    head = (_LABEL_HEAD + " ".join(f"{'FNR@' + level:>12s}" for level in levels)
            + f" {'Power@' + levels[-1]:>12s} {'BH FDR':>12s} {'BH power':>12s} "
            f"{'n cal':>6s}")
    lines = [f"{setting.capitalize()} context, conformal novelty decision "
             "(mean +- standard error over tasks)", head, "-" * len(head)]
    for row in setting_result["rows"]:
        figures = row.get("conformal")
        if figures is None:
            lines.append(_label(row) + "n/a (no calibration set: see the log)")
            continue
        cells = [_figure_cell(figures["alpha"][level], "false_novel_rate")
                 for level in levels]
        cells.append(_figure_cell(figures["alpha"][levels[-1]], "power"))
        cells.extend(_figure_cell(figures["bh"], key) for key in ("fdr", "power"))
        lines.append(_label(row) + " ".join(cells)
                     + f" {figures['n_calibration']:6d}")
    sources = {(row.get("conformal") or {}).get("calibration")
               for row in setting_result["rows"]} - {None}
    source = ("known-class rows of the other test tasks" if sources == {"tasks"}
              else "known-class rows of calibration tasks drawn from the "
              "training classes" if sources == {"training"}
              else "the calibration rows of its JSON row")
    note = ("A query is called novel when its conformal p-value, its novelty "
            f"score ranked among the scores of {source} (n cal; per task, the "
            "fewest), is at most alpha. FNR@alpha: share of the rows of known "
            "classes called novel, at most alpha when calibration and test rows "
            "are exchangeable; Power: share of first sightings called novel. BH: "
            f"Benjamini-Hochberg at q = {BH_Q} on each task's queries; FDR: "
            "mean share of known-class rows among those selected (0 when none).")
    lines.append(textwrap.fill(note, width=len(head), break_on_hyphens=False))
    return "\n".join(lines)


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
                     + " ".join(_mean_se_cell(row["mean"][key], row["se"][key], 13)
                                for key in
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


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


_LEGEND = dict(fontsize=8, title_fontsize=8)
_MARKERS = "osD^vP*X"


def _plot_label(row):
    return f"{METHOD_NAMES[row['method']]} ({_embedding(row)})"


def plot_figures(results, path) -> None:
    """roc.png into ``path`` (a name or binary file): per setting, the ROC
    curves, reliability diagrams and conformal false-novel rates."""
    plt = _pyplot()
    pretrains = list(dict.fromkeys(row["pretrain"]
                                   for result in results["settings"].values()
                                   for row in result["rows"]))

    def style(row):
        # A colour and a marker per method, a line style per pre-training;
        # markers at staggered points keep lines that coincide apart.
        index = METHODS.index(row["method"])
        return dict(color=f"C{index % 10}", marker=_MARKERS[index % len(_MARKERS)],
                    ms=4, markevery=(index % 4, 4),
                    ls=("-", "--", ":", "-.")[pretrains.index(row["pretrain"]) % 4])

    settings = list(results["settings"])
    n_rows = 2 * len(pretrains) + 1
    fig, axes = plt.subplots(n_rows, len(settings),
                             figsize=(6.5 * len(settings), 5 * n_rows),
                             squeeze=False)
    name = results["dataset"]["name"]
    for column, setting in enumerate(settings):
        rows = results["settings"][setting]["rows"]
        for k, pretrain in enumerate(pretrains):
            mine = [row for row in rows if row["pretrain"] == pretrain]
            _plot_roc(axes[k, column], mine, style,
                      f"{name}: {setting} context, {pretrain}")
            _plot_conformal(axes[len(pretrains) + 1 + k, column], mine, style,
                            f"{name}: {setting} context, {pretrain}, conformal "
                            "decision\ngrey: rate = alpha as promised; above "
                            "it: broken")
        reliability = axes[len(pretrains), column]
        reliability.plot([0, 1], [0, 1], color="grey", lw=0.5, ls="--",
                         label="perfectly calibrated")
        for row in rows:
            if row.get("reliability") is None:
                continue
            bins = row["reliability"]
            reliability.plot(bins["prob_pred"], bins["prob_true"],
                             **{**style(row), "markevery": 1},
                             label=f"{_plot_label(row)}, {row['pretrain']}, "
                             f"ECE {row['ece']:.3f}")
        reliability.set(
            title=f"{name}: {setting} context, reliability of P(novel) "
            f"({CALIBRATION['n_bins']} bins)", xlabel="mean predicted P(novel) in bin",
            ylabel="fraction of first sightings in bin", xlim=(0, 1), ylim=(0, 1))
        reliability.legend(title="baselines: no probability", **_LEGEND)
    fig.tight_layout()
    try:
        # PNG whatever the name: the caller writes under a temporary one.
        fig.savefig(path, dpi=100, format="png")
    finally:
        plt.close(fig)


def _plot_roc(ax, rows, style, title):
    for row in rows:
        ax.plot(row["roc"]["fpr"], row["roc"]["tpr"], **{**style(row), "ms": 0},
                label=f"{_plot_label(row)}, AUROC {row['auroc']:.2f}")
    ax.plot([0, 1], [0, 1], color="grey", lw=0.5, ls="--")
    ax.set(title=title, xlabel="false novel rate", ylabel="novelty TPR")
    ax.legend(loc="lower right", **_LEGEND)


def _plot_conformal(ax, rows, style, title):
    # One lane per method, each its excess over alpha around its own zero:
    # rates that keep the promise all lie on the diagonal, where they merge.
    curves = [(row, row["conformal"]["curve"]) for row in rows
              if (row.get("conformal") or {}).get("curve") is not None]
    excesses = [[float("nan") if rate is None else rate - alpha
                 for alpha, rate in zip(curve["alpha"], curve["false_novel_rate"],
                                        strict=True)] for _, curve in curves]
    spread = max([0.002, *(abs(value) for excess in excesses for value in excess
                           if value == value)])
    lane = 2.5 * spread
    for k, ((row, curve), excess) in enumerate(zip(curves, excesses, strict=True)):
        ax.axhline(-k * lane, color="grey", lw=2.5, alpha=0.4)
        ax.plot(curve["alpha"], [value - k * lane for value in excess],
                **style(row))
    ax.set_yticks([-k * lane for k in range(len(curves))],
                  [_plot_label(row) for row, _ in curves], fontsize=8)
    ax.set(title=title, xlabel="level alpha (novel when p-value <= alpha)",
           ylabel=f"false-novel rate - alpha (lane +-{spread:.3f})",
           xlim=(0, ALPHA_GRID[-1]),
           ylim=(-(len(curves) - 0.5) * lane, 0.5 * lane))


def plot_discovery(results, path) -> None:
    """Per setting, new-class clustering accuracy and known-class accuracy
    against the label fraction, a PNG written to ``path``."""
    plt = _pyplot()
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
