"""
===================================================
Kanji drawn from KanjiVG strokes: an open-world run
===================================================

:func:`~sklearn_flowr.datasets.load_kanji` draws characters from the stroke
data of the optional ``kanji`` extra (``pip install sklearn-flowr[kanji]``;
KanjiVG, CC BY-SA 3.0, read from the installed package): every control
point, stroke and pen width is jittered per drawing, the way Omniglot's
drawers vary. Class = character; train and test characters are disjoint.

A tiny :class:`~sklearn_flowr.FLOWRClassifier` (a few epochs, so the example
runs in well under a minute) is trained on training characters, which it
then knows, and streams test characters it never saw, flagging each first
sighting as novel.
``flowr-benchmark --dataset kanji`` runs the paper's protocols at scale.
"""

# %%
# Drawings
# --------
import matplotlib.pyplot as plt
import numpy as np

from sklearn_flowr import FLOWRClassifier
from sklearn_flowr.datasets import load_kanji, render_kanji
from sklearn_flowr.metrics import h_measure
from sklearn_flowr.training import MetaTraining, SupE

train = load_kanji(split="train", max_classes=80, n_instances=20)
test = load_kanji(split="test", max_classes=80, n_instances=20)
print(f"{len(train.target_names)} training and {len(test.target_names)} test "
      "characters")

fig, axes = plt.subplots(3, 7, figsize=(7, 3.3))
for row, character in zip(axes, train.target_names[:3], strict=True):
    index = list(train.target_names).index(character)
    row[0].imshow(render_kanji(character), cmap="gray_r")
    row[0].set_title("clean", fontsize=8)
    for ax, image in zip(row[1:], train.data[train.target == index], strict=False):
        ax.imshow(image, cmap="gray_r")
for ax in axes.ravel():
    ax.set_axis_off()
plt.show()

# %%
# Train, then stream unseen characters
# ------------------------------------
# The labels are the characters themselves: ``target`` numbers the classes of
# each split from 0, and the fitted model knows the training classes, so a
# test character must not share a label with a training one.
X_train = train.data.astype(np.float32) / 255.0
model = FLOWRClassifier(setting="small", embedding_dim=16,
                        pretrain=SupE(epochs=3),
                        meta=MetaTraining(epochs=1, episodes_per_epoch=10),
                        verbose=0, random_state=0)
model.fit(X_train, train.target_names[train.target])

rng = np.random.default_rng(0)
classes = rng.choice(np.unique(test.target), 5, replace=False)
rows = rng.permutation(np.flatnonzero(np.isin(test.target, classes)))[:60]
truth = test.target_names[test.target[rows]]
out = model.open_world_step(test.data[rows].astype(np.float32) / 255.0, truth)
correct = np.where(out.is_novel, out.y_pred == model.novel_label_,
                   out.y_pred == truth)
print(f"accuracy {correct.mean():.3f}, H-measure of P(novel) "
      f"{h_measure(out.is_novel, out.p_novel):.3f} on {len(rows)} rows")
