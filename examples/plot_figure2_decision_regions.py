"""
=============================================================
Decision regions in 2-D: known classes, novelty, and learning
=============================================================

The paper's Figure 2, in a 2-D embedding space. Three known classes are
Gaussian embeddings with uncertain means; the novel class is the broad
predictive of "a class not met yet", ``N(mu0, s0 + sigma)``. Where no known
class explains a point well, the novel class wins.

Then the head learns from labels, in constant time and without any retraining:
a point from an unseen class instantiates a fourth class from the prior, and
new examples of a known class sharpen (and move) its predictive.
"""

# %%
# Three known classes
# -------------------
# Every stage is kept (a copy of the head and the points it has seen) and drawn
# at the end, as one figure with a panel per stage.
import copy

import matplotlib.pyplot as plt
import numpy as np

from sklearn_flowr import CRPGaussianClassifier

rng = np.random.default_rng(0)
centres = np.array([[-2.0, 0.0], [2.0, 0.5], [0.0, 2.5]])
shots = [6, 2, 1]
X = np.concatenate([c + rng.normal(scale=0.5, size=(k, 2))
                    for c, k in zip(centres, shots, strict=True)])
y = np.repeat([0, 1, 2], shots)

# The prior is the paper's: mean 0, spread s0 = 4 per dimension; sigma = 0.25.
head = CRPGaussianClassifier(covariance="isotropic", a=0.5, b=1.0, sigma=0.25,
                             prior_mean=0.0, prior_var=4.0).fit(X, y)
stages = [("known classes (grey: novel wins)", copy.deepcopy(head), X, y)]

# %%
# A point from a new class, then more examples of a known class
# -------------------------------------------------------------
# ``open_world_step`` predicts the point first (novel, with high probability),
# then learns its label: class 3 is instantiated from the prior.
new_point = np.array([[3.0, 4.0]])
step = head.open_world_step(new_point, [3])
print(f"P(novel) of the new point before its label: {step.p_novel[0]:.2f}")
X, y = np.concatenate([X, new_point]), np.append(y, 3)
stages.append(("one example instantiates class 3", copy.deepcopy(head), X, y))

# Class 2 had one example; four more move its mean towards them, tighten its
# predictive and raise its CRP prior mass (count 5), so its region grows.
more = centres[2] + [0.6, 0.3] + rng.normal(scale=0.5, size=(4, 2))
head.partial_fit(more, [2] * 4)
X, y = np.concatenate([X, more]), np.append(y, [2] * 4)
stages.append(("four more examples update class 2", copy.deepcopy(head), X, y))

# %%
# Decision regions at each stage
# ------------------------------
# Each point of the plane is coloured by the class the head predicts there,
# grey where the novel class wins; the black line is P(novel) = 0.5.
grid = np.stack(np.meshgrid(np.linspace(-5, 5, 241), np.linspace(-4, 6, 241)),
                axis=-1)
flat = grid.reshape(-1, 2)


def draw(ax, head, X, y, title):
    """Colour each point by the predicted class; grey where novel wins."""
    proba = head.predict_proba(flat)
    winner = proba.argmax(axis=1)
    n_known = proba.shape[1] - 1
    colours = np.array([plt.cm.tab10(i) for i in range(n_known)] + [(0.8,) * 4])
    image = colours[winner][:, :3].reshape(*grid.shape[:2], 3)
    ax.imshow(image, origin="lower", extent=(-5, 5, -4, 6), alpha=0.55)
    ax.contour(grid[..., 0], grid[..., 1],
               proba[:, -1].reshape(grid.shape[:2]), levels=[0.5],
               colors="k", linewidths=1)
    for label in np.unique(y):
        ax.scatter(*X[y == label].T, color=plt.cm.tab10(int(label)),
                   edgecolor="k", s=30)
    ax.set_title(title, fontsize=10)
    ax.set_xticks([])
    ax.set_yticks([])


fig, axes = plt.subplots(1, len(stages), figsize=(12, 4.6), layout="constrained")
for ax, (title, stage_head, stage_X, stage_y) in zip(axes, stages, strict=True):
    draw(ax, stage_head, stage_X, stage_y, title)
plt.show()

# %%
# The predictive variance of a class, ``1 / lam_n + sigma``, shrinks towards
# ``sigma`` as its count grows, which is why class 0 (six examples) has a tight
# region and a class with one example a broad one.
print("class counts:", dict(zip(head.classes_.tolist(),
                                head.class_count_.astype(int).tolist(),
                                strict=True)))
