"""
==============================================
Heads fitted per partition, merged, and Dask
==============================================

The CRP-Gaussian head is a function of a few statistics per class: the number
of embeddings, their mean and their scatter. Two heads fitted on two parts of
the data therefore combine exactly: :meth:`~sklearn_flowr.CRPGaussianClassifier.merge`
returns the head that ``fit`` on all the embeddings gives, empirical-Bayes
prior and noise included. This is how the head scales past one machine: embed
and summarise each partition where it lives, then merge the small heads.
``fit`` does this by itself on a Dask array, chunk by chunk.
"""

# %%
# Embeddings in four partitions
# -----------------------------
# PCA-whitened digits stand in for a trained encoder; digits 0-6 are the known
# classes and 7-9 come later as novel ones. The known rows are dealt to four
# "machines" at random, so every partition holds some rows of most classes.
import dask
import dask.array as da
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklearn_flowr import CRPGaussianClassifier

rng = np.random.default_rng(0)
X, y = load_digits(return_X_y=True)
embed = make_pipeline(StandardScaler(), PCA(n_components=16, whiten=True,
                                            random_state=0))
Z = embed.fit_transform(X)
known = y < 7
Z_known, y_known = Z[known], y[known]
partition = rng.integers(0, 4, size=y_known.shape[0])

# %%
# Fit per partition, then merge
# -----------------------------
# Each head estimates its own prior and noise from its partition only; the
# merge pools the class statistics and estimates them again from all rows.
heads = [CRPGaussianClassifier(covariance="isotropic").fit(
    Z_known[partition == k], y_known[partition == k]) for k in range(4)]
merged = heads[0]
for head in heads[1:]:
    merged = merged.merge(head)

whole = CRPGaussianClassifier(covariance="isotropic").fit(Z_known, y_known)
p_merged = merged.predict_proba(Z)[:, -1]  # P(novel), the last column
p_whole = whole.predict_proba(Z)[:, -1]
print(f"merged vs whole fit: max |P difference| = "
      f"{np.abs(merged.predict_proba(Z) - whole.predict_proba(Z)).max():.1e}, "
      f"sigma {merged.sigma_:.6f} vs {whole.sigma_:.6f}")

# %%
# The same fit on a Dask array
# ----------------------------
# ``fit`` on a Dask array computes the statistics of every chunk as a Dask task
# and merges them. Here the threaded scheduler runs the tasks; with a
# ``distributed.Client`` connected to a cluster (``Client("tcp://...")``) the
# same line runs them on the cluster's workers, next to the chunks.
Z_dask = da.from_array(Z_known, chunks=(250, -1))
y_dask = da.from_array(y_known, chunks=250)
with dask.config.set(scheduler="threads"):
    on_dask = CRPGaussianClassifier(covariance="isotropic").fit(Z_dask, y_dask)
print(f"Dask fit ({Z_dask.numblocks[0]} chunks) vs whole fit: max |P difference| "
      f"= {np.abs(on_dask.predict_proba(Z) - whole.predict_proba(Z)).max():.1e}")

# %%
# Merging is not averaging
# ------------------------
# Averaging the four heads' probabilities, the obvious alternative, is not the
# head of all rows: each part has a quarter of the rows per class and its own
# estimates of the prior and the noise. The merged head lies on the diagonal.
p_average = np.mean([head.predict_proba(Z)[:, -1] for head in heads], axis=0)
fig, axes = plt.subplots(1, 2, figsize=(8, 4), sharex=True, sharey=True)
is_novel = ~known
for ax, p_head, title in ((axes[0], p_average, "four heads averaged"),
                          (axes[1], p_merged, "four heads merged")):
    ax.plot([0, 1], [0, 1], color="0.7", lw=1)
    ax.scatter(p_whole[~is_novel], p_head[~is_novel], s=6, alpha=0.5,
               label="known digits (0-6)")
    ax.scatter(p_whole[is_novel], p_head[is_novel], s=6, alpha=0.5, color="C3",
               label="novel digits (7-9)")
    ax.set_title(title)
    ax.set_xlabel("P(novel), head fitted on all rows")
axes[0].set_ylabel("P(novel)")
axes[0].legend(loc="upper left", fontsize="small")
fig.tight_layout()
plt.show()
