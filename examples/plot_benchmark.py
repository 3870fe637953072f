"""
==========================================
The benchmark table and ROC curves
==========================================

``flowr-benchmark`` runs the paper's few-shot open-world protocol: it trains
the encoder (Sup-E here), extracts features, and streams seeded tasks through
FLOWR and the baselines (NCM, ProtoNet, PEELER, EVM), all behind the same
``open_world_step`` interface and scored at the same novelty TPR. This example
runs a miniature small-context benchmark on the embedded ``glyphs`` data from
Python, prints the paper-style table and draws the ROC curves of P(novel).

From a shell the same run is::

    flowr-benchmark --setting small --pretrain sup-e --tasks 100 ...

and ``flowr-benchmark --quick`` is the README's few-minute version of the full
benchmark. The budget here is far too small for the figures to mean much: see
the README for figures from longer runs.
"""

# %%
# Run the benchmark
# -----------------
import tempfile

import matplotlib.pyplot as plt

from sklearn_flowr.cli._benchmark import format_table, parse_args, run_benchmark

with tempfile.TemporaryDirectory() as tmp:
    args = parse_args([
        "--dataset", "glyphs", "--setting", "small", "--pretrain", "sup-e",
        "--tasks", "60", "--evm-tasks", "20", "--max-per-class", "20",
        "--embedding-dim", "16", "--pretrain-epochs", "2", "--meta-epochs", "1",
        "--episodes-per-epoch", "20", "--seed", "0", "--cache-dir", tmp,
        "--out", tmp, "--verbose", "0",
    ])
    results = run_benchmark(args, log=lambda *a, **k: None)
print(format_table(results["settings"]["small"], "small"))

# %%
# ROC curves of the novelty probability
# -------------------------------------
# Every method's P(novel) (or its novelty score) against whether the query's
# class was unseen at that moment, pooled over the tasks.
fig, ax = plt.subplots(figsize=(6, 4.5))
for row in results["settings"]["small"]["rows"]:
    ax.plot(row["roc"]["fpr"], row["roc"]["tpr"],
            label=f"{row['method']}: H {row['h_measure']:.2f}, "
            f"AUROC {row['auroc']:.2f}")
ax.plot([0, 1], [0, 1], color="0.7", lw=0.8, ls="--")
ax.set_xlabel("false novel rate")
ax.set_ylabel("novelty TPR")
ax.set_title("glyphs, small context (miniature run)")
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()
