"""
==========================================
The benchmark table and ROC curves
==========================================

``flowr-benchmark`` runs the paper's few-shot open-world protocol on the
estimator you would build yourself: ``FLOWRClassifier()`` with its defaults
(the full-covariance empirical-Bayes head, P(novel) calibrated on the
training classes), the run's options and any ``--set KEY=VALUE`` applied with
``set_params``. It fits that model (Sup-E pre-training here), and streams
seeded tasks through FLOWR's own head, NCM on the same embedding and the
baselines (NCM, ProtoNet, PEELER, EVM on the pre-trained embedding), all
behind the same ``open_world_step`` interface and scored at the same novelty
TPR. This example runs a miniature small-context benchmark on the embedded
``glyphs`` data from Python, then the paper's isotropic head through
``--set``, prints the paper-style tables and draws the ROC curves of
P(novel).

From a shell the same runs are::

    flowr-benchmark --setting small --pretrain sup-e --tasks 60 ...
    flowr-benchmark ... --methods flowr \\
        --set head__covariance=isotropic --set calibration=None

and ``flowr-benchmark --quick`` is the README's few-minute version of the full
benchmark. ``--data PATH`` runs it on your own data (a folder of class
folders, or an ``.npz`` of ``X_train``, ``y_train``, ``X_test``, ``y_test``).
The budget here is far too small for the figures to mean much: see the
results page for figures from longer runs.
"""

# %%
# Run the benchmark
# -----------------
# The default model and every method. ``--set`` reaches any nested parameter
# (``head__*``, ``pretrain__*``, ``meta__*``); a key or value the model refuses
# stops the command before any data is loaded.
import tempfile

import matplotlib.pyplot as plt

from sklearn_flowr.cli._benchmark import run_benchmark
from sklearn_flowr.cli._benchmark_parser import parse_args
from sklearn_flowr.cli._benchmark_report import format_table

options = [
    "--dataset", "glyphs", "--setting", "small", "--pretrain", "sup-e",
    "--tasks", "60", "--evm-tasks", "20", "--max-per-class", "20",
    "--embedding-dim", "16", "--pretrain-epochs", "2", "--meta-epochs", "1",
    "--episodes-per-epoch", "20", "--seed", "0", "--verbose", "0",
]
with tempfile.TemporaryDirectory() as tmp:
    folders = ["--cache-dir", tmp, "--out", tmp]
    results = run_benchmark(parse_args([*options, *folders]),
                            log=lambda *a, **k: None)
    # The paper's head on the same encoder: only head settings change, so the
    # fit reuses the encoder trained above (FLOWRClassifier's reuse_encoder).
    paper = run_benchmark(parse_args([
        *options, *folders, "--methods", "flowr",
        "--set", "head__covariance=isotropic", "--set", "calibration=None"]),
        log=lambda *a, **k: None)
print(format_table(results["settings"]["small"], "small"))
print()
print(format_table(paper["settings"]["small"], "small"))

# %%
# What was evaluated
# ------------------
# ``results.json`` records every fitted model's parameters, nested ones
# included.
model = results["settings"]["small"]["models"]["sup-e"]
print({key: model[key] for key in ("head__covariance", "calibration",
                                   "pretrain__epochs", "meta__epochs")})

# %%
# ROC curves of the novelty probability
# -------------------------------------
# Every method's P(novel) (or its novelty score) against whether the query's
# class was unseen at that moment, pooled over the tasks.
fig, ax = plt.subplots(figsize=(6, 4.5))
rows = [*results["settings"]["small"]["rows"],
        *({**row, "method": "flowr (paper's head)"}
          for row in paper["settings"]["small"]["rows"])]
for row in rows:
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
