"""What ``flowr-benchmark`` reports: JSON rows, the tables, the ablation and
the figures (ROC curves, reliability diagrams, false-novel rate of the
conformal decision against its level).

A method whose novelty output is not a probability (the baselines' distances)
has no calibration and no argmax decision: its JSON holds null and its table
cells say ``n/a``, never a number.
"""

from __future__ import annotations

import textwrap

from ..metrics import DEFAULT_N_BINS
from ._benchmark_conformal import ALPHA_GRID, ALPHAS, BH_Q
from ._benchmark_setup import METHOD_NAMES, METHODS, method_features

ACCURACY_COLUMNS = ("accuracy", "support_accuracy", "incremental_accuracy")
CALIBRATION = {
    "n_bins": DEFAULT_N_BINS,
    "binning": f"{DEFAULT_N_BINS} equal-width bins of [0, 1], right-closed "
    "(k/n, (k+1)/n] with 0 in the first (sklearn.calibration.calibration_curve, "
    "strategy='uniform')",
    "target": "is_novel (the query's class had not been seen yet)",
}
_EMBEDDING = {"flowr": "meta-trained", "base": "pre-trained"}
_EMBEDDING_SHORT = {"meta-trained": "meta", "pre-trained": "pre"}
_NOT_A_PROBABILITY = ("n/a (no probability): the method's novelty output is a "
                      "distance or score, not P(novel), so it has no ECE, Brier "
                      "score or argmax decision.")


def row_from_report(method: str, pretrain: str, report, seconds: float) -> dict:
    """One JSON row of the figures of :func:`evaluate_online`'s report."""
    row = {"method": method, "pretrain": pretrain,
           "embedding": _EMBEDDING[method_features(method)], "seconds": seconds,
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
    """Per pre-training, the comparisons of ``_ABLATIONS`` whose two methods
    both ran (H-measure and accuracy differences)."""
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


def _cell(row, key, scale=1.0, digits=3, width=6):
    value = row.get(key)
    if value is None:
        return f"{'n/a':>{width}s}"
    return f"{scale * value:{width}.{digits}f}"


def _accuracy_cell(row, key):
    if row.get(key) is None:
        return f"{'n/a':>14s}"
    return f"{100 * row[key]:6.2f}+-{100 * row[key + '_ci']:5.2f}"


def format_table(setting_result, setting) -> str:
    """The paper-style table of one setting, with calibration and ablation."""
    head = (f"{'Method':14s} {'Pre-train':9s} {'Emb.':4s} {'Acc':>14s} "
            f"{'Support Acc':>14s} {'Inc. Acc':>14s} {'Argmax Acc':>14s} "
            f"{'H-measure':>9s} {'AUROC':>6s} {'ECE':>6s} {'Brier':>6s} "
            f"{'tasks':>5s}")
    lines = [f"{setting.capitalize()} context (accuracies: mean +- 95% CI over "
             "tasks; H-measure, AUROC, ECE, Brier: pooled over the run)", head,
             "-" * len(head)]
    any_score = False
    for row in setting_result["rows"]:
        any_score |= not row.get("probability", False)
        cells = " ".join(_accuracy_cell(row, k)
                         for k in (*ACCURACY_COLUMNS, "argmax_accuracy"))
        lines.append(
            f"{METHOD_NAMES[row['method']]:14s} {row['pretrain']:9s} "
            f"{_EMBEDDING_SHORT[row.get('embedding', 'pre-trained')]:4s} {cells} "
            f"{row['h_measure']:9.3f} {row['auroc']:6.3f} {_cell(row, 'ece')} "
            f"{_cell(row, 'brier')} {row['n_tasks']:5d}")
    notes = [f"Acc: novel iff P(novel) >= tau, tau set at novelty TPR "
             f"{setting_result['tpr']}. Argmax Acc: the threshold-free decision, "
             "the argmax over the N+1 probabilities. ECE (over "
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
        from ._benchmark_discovery import format_discovery_table

        lines.extend(["", format_discovery_table(setting_result["discovery"],
                                                 setting)])
    return "\n".join(lines)


def _mean_se_cell(figures, key, width=12):
    value, se = figures.get(key), figures.get(key + "_se")
    if value is None:
        return f"{'n/a':>{width}s}"
    if se is None:
        return f"{value:{width}.3f}"
    return f"{f'{value:.3f}+-{se:.3f}':>{width}s}"


def format_conformal_table(setting_result, setting) -> str:
    """The conformal novelty decision of every row of one setting: the
    false-novel rate at each level of ``ALPHAS``, the power at the largest,
    and Benjamini-Hochberg's FDR and power (mean +- standard error over
    tasks)."""
    levels = [str(alpha) for alpha in ALPHAS]
    head = (f"{'Method':14s} {'Pre-train':9s} {'Emb.':4s} "
            + " ".join(f"{'FNR@' + level:>12s}" for level in levels)
            + f" {'Power@' + levels[-1]:>12s} {'BH FDR':>12s} {'BH power':>12s} "
            f"{'n cal':>6s}")
    lines = [f"{setting.capitalize()} context, conformal novelty decision "
             "(mean +- standard error over tasks)", head, "-" * len(head)]
    for row in setting_result["rows"]:
        figures = row.get("conformal")
        label = (f"{METHOD_NAMES[row['method']]:14s} {row['pretrain']:9s} "
                 f"{_EMBEDDING_SHORT[row.get('embedding', 'pre-trained')]:4s} ")
        if figures is None:
            lines.append(label + "n/a (no calibration set: see the log)")
            continue
        cells = [_mean_se_cell(figures["alpha"][level], "false_novel_rate")
                 for level in levels]
        cells.append(_mean_se_cell(figures["alpha"][levels[-1]], "power"))
        cells.extend(_mean_se_cell(figures["bh"], key) for key in ("fdr", "power"))
        lines.append(label + " ".join(cells) + f" {figures['n_calibration']:6d}")
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


def _label(row):
    embedding = _EMBEDDING_SHORT[row.get("embedding", "pre-trained")]
    return f"{METHOD_NAMES[row['method']]} ({row['pretrain']}, {embedding})"


def plot_figures(results, path) -> None:
    """Per setting, ROC curves of every method (top), the reliability
    diagram of P(novel) of the methods with a probability (middle) and the
    false-novel rate of the conformal decision against its level alpha, with
    the diagonal it promises not to exceed (bottom), as a PNG written to
    ``path`` (a file name or a binary file object)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # A colour per method, a line style per pre-training: rows stay apart
    # however many there are.
    pretrains = list(dict.fromkeys(row["pretrain"]
                                   for result in results["settings"].values()
                                   for row in result["rows"]))

    def style(row):
        return dict(color=f"C{METHODS.index(row['method']) % 10}",
                    ls=("-", "--", ":", "-.")[pretrains.index(row["pretrain"]) % 4])

    settings = list(results["settings"])
    fig, axes = plt.subplots(3, len(settings), figsize=(5.5 * len(settings), 14),
                             squeeze=False)
    name = results["dataset"]["name"]
    for column, setting in enumerate(settings):
        rows = results["settings"][setting]["rows"]
        roc, reliability = axes[0, column], axes[1, column]
        for row in rows:
            roc.plot(row["roc"]["fpr"], row["roc"]["tpr"], **style(row),
                     label=f"{_label(row)}, AUROC {row['auroc']:.2f}")
        roc.plot([0, 1], [0, 1], color="grey", lw=0.5, ls="--")
        roc.set(title=f"{name}: {setting} context", xlabel="false novel rate",
                ylabel="novelty TPR")
        roc.legend(fontsize=6)
        reliability.plot([0, 1], [0, 1], color="grey", lw=0.5, ls="--",
                         label="perfectly calibrated")
        for row in rows:
            if row.get("reliability") is None:
                continue
            bins = row["reliability"]
            reliability.plot(bins["prob_pred"], bins["prob_true"], marker="o",
                             ms=3, **style(row),
                             label=f"{_label(row)}, ECE {row['ece']:.3f}")
        reliability.set(
            title=f"{name}: {setting} context, reliability of P(novel) "
            f"({DEFAULT_N_BINS} bins)", xlabel="mean predicted P(novel) in bin",
            ylabel="fraction of first sightings in bin", xlim=(0, 1), ylim=(0, 1))
        reliability.legend(fontsize=6, title="baselines: no probability",
                           title_fontsize=6)
        promise = axes[2, column]
        right, top = ALPHA_GRID[-1], ALPHA_GRID[-1]
        for row in rows:
            curve = (row.get("conformal") or {}).get("curve")
            if curve is None:
                continue
            rates = [float("nan") if rate is None else rate
                     for rate in curve["false_novel_rate"]]
            top = max([top, *(rate for rate in rates if rate == rate)])
            promise.plot(curve["alpha"], rates, **style(row), label=_label(row))
        promise.plot([0, right], [0, right], color="grey", lw=0.8, ls="--",
                     label="the promise: rate = alpha")
        promise.set(
            title=f"{name}: {setting} context, conformal novelty decision",
            xlabel="level alpha (novel when p-value <= alpha)",
            ylabel="false-novel rate (mean over tasks)", xlim=(0, right),
            ylim=(0, min(1.0, 1.05 * top)))
        promise.legend(fontsize=6)
    fig.tight_layout()
    try:
        # PNG whatever the name: the caller writes under a temporary one.
        fig.savefig(path, dpi=120, format="png")
    finally:
        plt.close(fig)
