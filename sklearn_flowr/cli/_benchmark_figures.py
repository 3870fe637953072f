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


_LEGEND = dict(fontsize=8, title_fontsize=8)
_MARKERS = "osD^vP*X"


def _label(row):
    embedding = EMBEDDING_SHORT[row.get("embedding", "pre-trained")]
    return f"{METHOD_NAMES[row['method']]} ({embedding})"


def plot_figures(results, path) -> None:
    """Per setting (a column), per pre-training the ROC curves of every method,
    the reliability diagram of P(novel) of the methods with a probability, and
    per pre-training the conformal false-novel rate against its level alpha
    beside the diagonal it promises not to exceed: a PNG written to ``path``
    (a file name or a binary file object)."""
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
                             label=f"{_label(row)}, {row['pretrain']}, "
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
                label=f"{_label(row)}, AUROC {row['auroc']:.2f}")
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
                  [_label(row) for row, _ in curves], fontsize=8)
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
