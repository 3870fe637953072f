"""
===================================================
Large context: known classes plus novel ones online
===================================================

In the large context the training classes stay *known-known* classes of the
head: their Gaussian embeddings come from training, and at deployment the
model must recognise them, flag the classes it never saw, and learn those
online from their labels. Here a Conv4 encoder is trained on the digits 0-6;
the stream holds held-out images of 0-6 and of 7, 8 and 9.
"""

# %%
# Train on seven digits
# ---------------------
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits

from sklearn_flowr import FLOWRClassifier
from sklearn_flowr.training import MetaTraining, SupE

X, y = load_digits(return_X_y=True)
X = (X.reshape(-1, 8, 8) / 16.0).astype(np.float32)
rng = np.random.default_rng(0)
order = rng.permutation(len(y))
is_fit = np.zeros(len(y), dtype=bool)
is_fit[order[: len(y) // 2]] = True
is_fit &= y < 7  # the digits 7, 8, 9 are never trained on

clf = FLOWRClassifier(setting="large", embedding_dim=16,
                      pretrain=SupE(epochs=10),
                      meta=MetaTraining(epochs=3, episodes_per_epoch=30, n_way=5,
                                        n_unknown=1),
                      random_state=0, verbose=0).fit(X[is_fit], y[is_fit])
print("known-known classes:", clf.classes_)

# %%
# An open-world stream
# --------------------
# 300 held-out images in random order: each is predicted first, then learned.
stream = rng.permutation(np.flatnonzero(~is_fit))[:300]
out = clf.open_world_step(X[stream], y[stream])
y_true = y[stream]
correct = np.where(out.is_novel, out.y_pred == clf.head_.novel_label_,
                   out.y_pred == y_true)
known = y_true < 7
print(f"accuracy on the training classes {correct[known].mean():.2f}, "
      f"on the new classes {correct[~known].mean():.2f}")
print("classes after the stream:", clf.classes_)

fig, (ax0, ax1) = plt.subplots(2, 1, figsize=(9, 5), sharex=True)
t = np.arange(len(stream))
ax0.scatter(t[known], out.p_novel[known], s=8, color="C0",
            label="digit 0-6 (known-known)")
ax0.scatter(t[~known & ~out.is_novel], out.p_novel[~known & ~out.is_novel], s=8,
            color="C2", label="digit 7-9 after its first label")
ax0.scatter(t[out.is_novel], out.p_novel[out.is_novel], s=60, marker="*",
            color="C3", label="first sight of 7, 8 or 9")
ax0.set_ylabel("P(novel)")
ax0.legend(loc="center right", fontsize=8)
for label, colour in zip([7, 8, 9], ["C2", "C4", "C5"], strict=True):
    rows = y_true == label
    ax1.plot(t[rows], np.cumsum(correct[rows]) / np.arange(1, rows.sum() + 1),
             color=colour, label=f"digit {label}")
ax1.plot(t[known], np.cumsum(correct[known]) / np.arange(1, known.sum() + 1),
         color="C0", label="digits 0-6")
ax1.set_xlabel("stream position")
ax1.set_ylabel("accuracy so far")
ax1.legend(loc="lower right", fontsize=8, ncol=2)
fig.tight_layout()
plt.show()

# %%
# What the picture shows
# ----------------------
# The first sight of 7, 8 and 9 is flagged as novel, and the known digits are
# recognised. After its first label a new digit becomes a class of the head --
# ``open_world_step`` updates only sufficient statistics, in constant time per
# sample, never the network -- but later images of it are still often called
# novel. The embeddings of images the encoder did not train on scatter more
# widely than the head's class noise, which the default head
# (``head__sigma="auto"``) estimates from the *training* images, on an
# embedding that ``meta.match_episode_noise`` scaled to a within-class
# variance near ``meta.episode_noise``: the small encoder overfits its 630
# training images, and the digits it never learned spread wider still.
Z = clf.transform(X)


def within_class_variance(rows, digits):
    return np.mean([Z[rows & (y == k)].var(axis=0).mean() for k in digits])


print(f"meta.episode_noise = {clf.meta.episode_noise}; head's class noise: "
      "mean variance "
      f"{np.diag(clf.head_.sigma_).mean():.2f}; mean within-class variance: "
      f"training images {within_class_variance(is_fit, range(7)):.2f}, "
      f"held-out images of 0-6 {within_class_variance(~is_fit, range(7)):.2f}, "
      f"of 7-9 {within_class_variance(~is_fit, (7, 8, 9)):.2f}")

# %%
# This is what the *incremental accuracy* of the benchmark measures, and where
# more training classes (``glyphs``, hundreds of characters) and a longer
# meta-training, which holds classes out as unknown-unknowns, help.
