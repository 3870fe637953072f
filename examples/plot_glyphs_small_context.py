"""
======================================================
Training FLOWR on glyphs and adapting to a new task
======================================================

``glyphs`` renders characters from the fonts matplotlib ships: a class is a
character, an instance a font. The training split and the test split share no
character, so a test task is made of classes the network never saw.

:class:`~sklearn_flowr.FLOWRClassifier` pre-trains a Conv4 encoder with Sup-E
(``pretrain=SupE(...)``), meta-trains it on small-context episodes
(``meta=MetaTraining(...)``), and builds its head's prior from the training
embeddings. A new task then brings a support set of a few test characters
(one to five fonts each); the model starts the task from the prior alone
(``adapt``: the training characters are set aside) and processes a query
stream in which some characters are new, flagging them as novel before
learning them.
The budget here is tiny so that the example runs in about a minute on a CPU;
``flowr-benchmark`` trains for longer.
"""

# %%
# Data: train and test characters
# -------------------------------
import matplotlib.pyplot as plt
import numpy as np

from sklearn_flowr import FLOWRClassifier
from sklearn_flowr.datasets import load_glyphs
from sklearn_flowr.training import MetaTraining, SupE

train = load_glyphs(split="train")
test = load_glyphs(split="test")
rng = np.random.default_rng(0)
# A subset of the training characters keeps the example fast.
keep = np.isin(train.target, rng.choice(np.unique(train.target), 40, replace=False))
# The labels are the characters themselves: ``target`` numbers the classes of
# each split from 0, and the fitted model knows the training classes, so a
# test character must not share a label with a training one.
X_train, y_train = train.data[keep], train.target_names[train.target[keep]]
test_labels = test.target_names[test.target]
print(f"training on {len(np.unique(y_train))} characters, {len(y_train)} images")

fig, axes = plt.subplots(2, 10, figsize=(10, 2.3))
sample = rng.choice(len(y_train), 20, replace=False)
for ax, row in zip(axes.ravel(), sample, strict=True):
    ax.imshow(X_train[row], cmap="gray_r")
    ax.set_title(y_train[row], fontsize=9)
    ax.axis("off")
fig.suptitle("training glyphs (class = character, instance = font)")
fig.tight_layout()
plt.show()

# %%
# Sup-E pre-training and small-context meta-training
# --------------------------------------------------
clf = FLOWRClassifier(setting="small", embedding_dim=32,
                      pretrain=SupE(epochs=3),
                      meta=MetaTraining(epochs=2, episodes_per_epoch=30),
                      random_state=0, verbose=0).fit(X_train, y_train)
# The default head has full covariances: mean variances along the axes.
print(f"prior of the class means: mean variance "
      f"{np.diag(clf.head_.prior_var_).mean():.2f}; class noise: mean variance "
      f"{np.diag(clf.head_.sigma_).mean():.2f}; meta-learned b = {clf.head_.b_:.2f}")

# %%
# A new task: support set, then an open-world query stream
# --------------------------------------------------------
# Six test characters form the support set; the stream holds them plus three
# characters nobody has labelled yet.
classes = rng.choice(np.unique(test.target), 9, replace=False)
support_classes, novel_classes = classes[:6], classes[6:]
support, stream = [], []
for label in classes:
    rows = rng.permutation(np.flatnonzero(test.target == label))
    shots = rng.integers(1, 6) if label in support_classes else 0
    support.extend(rows[:shots])
    stream.extend(rows[shots:shots + 8])
support, stream = np.array(support), rng.permutation(stream)

clf.adapt(test.data[support], test_labels[support])
y_true = test_labels[stream]
out = clf.open_world_step(test.data[stream], y_true)
correct = np.where(out.is_novel, out.y_pred == clf.head_.novel_label_,
                   out.y_pred == y_true)
print(f"stream accuracy {correct.mean():.2f}; mean P(novel): first sight of a "
      f"new character {out.p_novel[out.is_novel].mean():.2f}, "
      f"others {out.p_novel[~out.is_novel].mean():.2f}")

fig, ax = plt.subplots(figsize=(9, 3))
t = np.arange(len(stream))
ax.plot(t, out.p_novel, color="0.6", lw=0.8)
ax.scatter(t[~out.is_novel], out.p_novel[~out.is_novel], s=12, color="C0",
           label="known character")
ax.scatter(t[out.is_novel], out.p_novel[out.is_novel], s=40, color="C3",
           label="first sight of a new character")
ax.set_xlabel("stream position")
ax.set_ylabel("P(novel)")
ax.legend(loc="upper right", fontsize=8)
fig.tight_layout()
plt.show()

# %%
# ``reset`` returns the model to its post-``fit`` state -- the training
# characters known, this task's classes forgotten -- and the next ``adapt``
# starts another task; the network was never retrained. A test character is
# then new again.
clf.reset()
print(f"after reset: {len(clf.classes_)} known classes (the training characters)")
first = clf.open_world_step(test.data[stream[:1]], y_true[:1])
print(f"P(novel) of a test character after reset: {first.p_novel[0]:.2f}")
