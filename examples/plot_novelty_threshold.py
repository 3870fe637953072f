"""
=====================================================================
Choose a novelty threshold with a guarantee
=====================================================================

"How do I choose the threshold?" is the question every novelty detector
raises. A calibrated P(novel) is right *on average*, but flagging rows with
P(novel) > 1 - alpha promises nothing about how many known objects are called
new. Conformal p-values do: with calibration rows of the known classes that
the model never learned from, a known-class row gets ``p <= alpha`` with
probability at most ``alpha`` (Bates et al., 2023), whatever the data.

On scikit-learn's digits (PCA features; digits 0-5 known, 6-9 new) this
example compares, for a range of ``alpha``,

1. the head's own P(novel) thresholded at ``1 - alpha``,
2. :class:`~sklearn_flowr.conformal.ConformalNoveltyClassifier`, which calls a
   row novel when its p-value is at most ``alpha``,

and then selects the new rows of a batch with Benjamini-Hochberg at a target
false discovery rate.
"""

# %%
# Data and the head
# -----------------
# The head learns the known classes from half their rows; the other half is
# split into calibration rows (never learned from) and test rows.
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklearn_flowr import CRPGaussianClassifier
from sklearn_flowr.conformal import ConformalNoveltyClassifier
from sklearn_flowr.metrics import (
    false_discovery_proportion,
    false_novel_rate,
    novelty_power,
    selection_power,
)

X, y = load_digits(return_X_y=True)
rng = np.random.default_rng(0)
known = np.flatnonzero(y < 6)
rng.shuffle(known)
fit_rows, cal_rows, test_known = np.array_split(known, [len(known) // 2,
                                                        3 * len(known) // 4])
novel_rows = np.flatnonzero(y >= 6)
embed = make_pipeline(StandardScaler(), PCA(16, random_state=0)).fit(X[fit_rows])
Z = embed.transform(X)

head = CRPGaussianClassifier(covariance="isotropic").fit(Z[fit_rows], y[fit_rows])
conformal = ConformalNoveltyClassifier(head).fit(Z[cal_rows], y[cal_rows])

test = np.r_[test_known, novel_rows]
is_novel = y[test] >= 6
p_novel = np.asarray(head.predict_proba(Z[test]))[:, -1]
pvalues = conformal.novelty_pvalues(Z[test])
print(f"{conformal.n_calibration_} calibration rows, {(~is_novel).sum()} known "
      f"and {is_novel.sum()} new test rows")

# %%
# The promise, and what thresholding P(novel) gives
# --------------------------------------------------
# The diagonal is the promise: the conformal false-novel rate stays on or
# under it for every ``alpha``. Thresholding the head's P(novel) at
# ``1 - alpha`` has no such link: it may sit far on either side.
alphas = np.linspace(0.01, 0.3, 30)
rates = {"conformal p <= alpha": [], "P(novel) > 1 - alpha": []}
power = {"conformal p <= alpha": [], "P(novel) > 1 - alpha": []}
for alpha in alphas:
    rates["conformal p <= alpha"].append(false_novel_rate(is_novel, pvalues, alpha))
    power["conformal p <= alpha"].append(novelty_power(is_novel, pvalues, alpha))
    # "p <= alpha" with p = 1 - P(novel) is "P(novel) >= 1 - alpha".
    as_p = 1.0 - p_novel
    rates["P(novel) > 1 - alpha"].append(false_novel_rate(is_novel, as_p, alpha))
    power["P(novel) > 1 - alpha"].append(novelty_power(is_novel, as_p, alpha))

fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.8))
for name in rates:
    left.plot(alphas, rates[name], marker=".", label=name)
    right.plot(alphas, power[name], marker=".", label=name)
left.plot(alphas, alphas, "k--", lw=1, label="the promise (alpha)")
left.set(xlabel="alpha", ylabel="known rows called novel",
         title="False-novel rate")
right.set(xlabel="alpha", ylabel="new rows called novel", title="Power")
left.legend(fontsize=8)
fig.tight_layout()

for alpha in (0.01, 0.05, 0.1):
    print(f"alpha={alpha:.2f}: conformal false-novel rate "
          f"{false_novel_rate(is_novel, pvalues, alpha):.3f} (power "
          f"{novelty_power(is_novel, pvalues, alpha):.2f}); P(novel) > 1 - alpha "
          f"{false_novel_rate(is_novel, 1 - p_novel, alpha):.3f} (power "
          f"{novelty_power(is_novel, 1 - p_novel, alpha):.2f})")

# %%
# A batch: Benjamini-Hochberg
# ---------------------------
# Deciding a whole batch at once, ``select_novel`` keeps the expected share
# of known rows among those it flags (the false discovery rate) under ``fdr``.
for fdr in (0.05, 0.1, 0.2):
    selected = conformal.select_novel(Z[test], fdr=fdr)
    print(f"fdr={fdr:.2f}: {selected.sum()} rows flagged, false discovery "
          f"proportion {false_discovery_proportion(is_novel, selected):.3f}, "
          f"power {selection_power(is_novel, selected):.2f}")

# %%
# The guarantee assumes the calibration rows and the future known-class rows
# are exchangeable (drawn alike). It says nothing about new classes: power
# depends on how well the embedding separates them. On a stream,
# ``open_world_step`` learns each label and re-scores the calibration rows
# under the updated model, so the promise keeps holding for the known
# classes; ``add_calibration`` extends it to classes learned online.
plt.show()
