"""The PNGs of ``flowr-benchmark``: ROC curves, reliability diagrams and the
conformal false-novel rate against alpha (roc.png), and class discovery
against the label fraction (discovery.png)."""

from __future__ import annotations

from ._benchmark_conformal import ALPHA_GRID
from ._benchmark_discovery import DISCOVERY_METHODS, DISCOVERY_NAMES
from ._benchmark_report import CALIBRATION, EMBEDDING_SHORT
from ._benchmark_setup import METHOD_NAMES, METHODS


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _label(row):
    embedding = EMBEDDING_SHORT[row.get("embedding", "pre-trained")]
    return f"{METHOD_NAMES[row['method']]} ({row['pretrain']}, {embedding})"


def plot_figures(results, path) -> None:
    """Per setting, ROC curves of every method (top), the reliability
    diagram of P(novel) of the methods with a probability (middle) and the
    false-novel rate of the conformal decision against its level alpha, with
    the diagonal it promises not to exceed (bottom), as a PNG written to
    ``path`` (a file name or a binary file object)."""
    plt = _pyplot()
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
            f"({CALIBRATION['n_bins']} bins)", xlabel="mean predicted P(novel) in bin",
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
