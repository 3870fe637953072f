"""
==========================================
An open-world stream on handwritten digits
==========================================

The CRP-Gaussian head learns five digit classes with ``fit``. A stream then
brings all ten digits: each sample is predicted *before* its label is revealed
(is it one of the known classes, or something new?), then the head learns from
the label. A class never seen often gets a raised novelty probability on its
first samples, though not always (here some first sightings stay below 0.5),
and after a few labels it is recognised, some digits (a 6 here) more slowly
than others: the plot shows both.
"""

# %%
# Known classes and a feature space
# ---------------------------------
# PCA-whitened pixels stand in for a trained encoder here.
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklearn_flowr import CRPGaussianClassifier

rng = np.random.default_rng(0)
X, y = load_digits(return_X_y=True)
known = y < 5
embed = make_pipeline(StandardScaler(), PCA(n_components=20, whiten=True,
                                            random_state=0))
Z_known = embed.fit_transform(X[known][::2])
head = CRPGaussianClassifier(covariance="isotropic").fit(Z_known, y[known][::2])

# %%
# Stream: predict, then learn
# ---------------------------
stream = rng.permutation(np.flatnonzero(~np.isin(np.arange(len(y)),
                                                 np.flatnonzero(known)[::2])))[:400]
out = head.open_world_step(embed.transform(X[stream]), y[stream])
correct = np.where(out.is_novel, out.y_pred == head.novel_label_,
                   out.y_pred == y[stream])

fig, (ax0, ax2, ax1) = plt.subplots(3, 1, figsize=(8, 6.5), sharex=True)
t = np.arange(len(stream))
ax0.plot(t, out.p_novel, lw=0.6, color="0.6")
ax0.scatter(t[out.is_novel], out.p_novel[out.is_novel], color="C3", zorder=3,
            label="first sample of a new class")
ax0.set_ylabel("P(novel)")
ax0.legend(loc="upper right")
# A class is known from its first label on: five from fit, then each new one.
ax2.step(t, 5 + np.cumsum(out.is_novel), where="post")
ax2.set_ylabel("known classes\n(after the label)")
ax1.plot(t, np.cumsum(correct) / (t + 1))
ax1.set_xlabel("stream position")
ax1.set_ylabel("accuracy so far")
fig.tight_layout()
plt.show()
