"""
=====================================================================
The four calls: fit, predict, learn online, tune the head
=====================================================================

:class:`~sklearn_flowr.FLOWRClassifier` is a scikit-learn classifier with two
more calls for the open world. On scikit-learn's 8x8 digit images:

1. ``clf = FLOWRClassifier(...)`` composes the model from parts, as a
   :class:`~sklearn.pipeline.Pipeline` does: the encoder's training stages
   (``pretrain=SupE(...)``, ``meta=MetaTraining(...)``) and the online head
   (``head``, by default ``CRPGaussianClassifier(covariance="full")``), whose
   settings are reached as ``pretrain__epochs`` or ``head__sigma``;
2. ``clf.fit(X, y)``, then ``predict`` and ``predict_proba``: the training
   classes are the known classes, and the last column of ``predict_proba`` is
   P(novel);
3. ``clf.partial_fit`` and ``clf.open_world_step`` learn new classes from
   their labels, without touching the network;
4. ``GridSearchCV(clf, {"head__sigma": ..., "head__prior_scale": ...},
   cv=OpenWorldSplit(...))`` tunes the head on folds that hold whole classes
   out. A grid over the head alone trains the encoder once per fold.

The training budget is tiny, so that the example runs in about a minute on a
CPU; the figures mean little beyond that.
"""

# %%
# 1. The estimator and its parts
# ------------------------------
# Only the training budget differs from the defaults. ``random_state`` makes
# the fits reproducible (and lets the grid below reuse their encoders).
import time

import matplotlib.pyplot as plt
import numpy as np
from sklearn.base import clone
from sklearn.datasets import load_digits
from sklearn.metrics import make_scorer
from sklearn.model_selection import GridSearchCV

from sklearn_flowr import FLOWRClassifier
from sklearn_flowr.metrics import h_measure
from sklearn_flowr.model_selection import OpenWorldSplit
from sklearn_flowr.training import MetaTraining, SupE

X, y = load_digits(return_X_y=True)
X = (X.reshape(-1, 8, 8) / 16.0).astype(np.float32)  # images in [0, 1]
rng = np.random.default_rng(0)
# Half of the images of 0-7 train; the digits 8 and 9 come later.
is_train = (y < 8) & (rng.random(len(y)) < 0.5)
is_test = (y < 8) & ~is_train
X_train, y_train = X[is_train], y[is_train]

clf = FLOWRClassifier(
    embedding_dim=16,
    pretrain=SupE(epochs=3),
    meta=MetaTraining(epochs=1, episodes_per_epoch=20, n_way=4, n_unknown=1),
    random_state=0,
    verbose=0,
)
print("the default head:", clf.head)

# %%
# 2. ``fit``, then ``predict``
# ----------------------------
# ``fit`` pre-trains and meta-trains the Conv4 encoder, then builds the head
# on the training embeddings. The training classes are its known classes.
start = time.perf_counter()
clf.fit(X_train, y_train)
fit_time = time.perf_counter() - start
print(f"one fit: {fit_time:.1f} s; known classes {clf.classes_}")
accuracy = np.mean(clf.predict(X[is_test]) == y[is_test])
print(f"accuracy on held-out images of 0-7: {accuracy:.2f}")
proba = clf.predict_proba(X[is_test])  # shape (n, 8 known classes + novel)
print(f"mean P(novel): held-out images of 0-7 {proba[:, -1].mean():.2f}, "
      f"images of 8 {clf.predict_proba(X[y == 8])[:, -1].mean():.2f}")

# %%
# 3. A new class from three labels, then a stream
# -----------------------------------------------
# ``partial_fit`` with an unseen label adds the class. ``open_world_step``
# predicts each image with what the model knows at that moment, then learns
# its label: the first 9 is a first sighting of a new class. Whether one
# first sighting is flagged is a single draw: here the encoder, trained on
# 0-7 only, takes it for an 8 (P(novel) near 0), a miss of the kind the
# measured results in the documentation count.
eights = np.flatnonzero(y == 8)
clf.partial_fit(X[eights[:3]], y[eights[:3]])
print("after three labelled 8s:", clf.classes_)

stream = rng.permutation(np.r_[np.flatnonzero(y == 9)[:20], eights[3:23],
                               np.flatnonzero(is_test)[:40]])
out = clf.open_world_step(X[stream], y[stream])
print(f"P(novel) of the first 9: {out.p_novel[out.is_novel][0]:.2f}; "
      f"mean over the other {len(stream) - 1} images: "
      f"{out.p_novel[~out.is_novel].mean():.2f}")
print("classes after the stream:", clf.classes_)

# %%
# 4. A grid over the head
# -----------------------
# :class:`~sklearn_flowr.model_selection.OpenWorldSplit` holds two whole
# classes out of each training fold, so every test fold has images of
# classes the fold's model never saw. ``make_scorer(h_measure,
# response_method="predict_proba")`` scores P(novel), the last column,
# against "the label is not a class the fold trained on" with the H-measure.
#
# What the two parameters mean for the default head:
#
# - ``head__sigma``: the class noise. ``"auto"`` estimates a full noise
#   covariance from the training embeddings (empirical Bayes). A float ``s``
#   is isotropic noise ``s * I`` instead, on an embedding that meta-training
#   scaled so that its within-class variance is near
#   ``meta.episode_noise = 0.5``:
#   ``0.1`` makes every class narrow, ``1.0`` wide.
# - ``head__prior_scale``: a factor on the estimated prior variance of the
#   class means, the spread a new class is expected to have around the prior
#   mean; above 1 a new class may lie further from the known ones.
#
# The H-measure scores how P(novel) *ranks* the rows, so it can only choose
# among parameters that change that order. ``head__a`` (the CRP discount)
# multiplies the odds of "novel" against "known" by the same factor for every
# row (with the default ``known_count``): it never changes the ranking, and a
# grid over it would give every candidate the same H-measure. Search it with a
# scorer of the probabilities themselves, such as ``make_scorer(open_world_log_loss,
# greater_is_better=False, response_method="predict_proba")``.
#
# Only the head changes between candidates, and the head is built after
# training from the encoder's embeddings. With ``reuse_encoder=True`` (the
# default) a fit that sees the same data and the same training settings as an
# earlier one in this process reuses its trained encoder: the grid trains
# once per fold (for the first candidate), and the refit on all of
# ``X_train`` reuses the encoder of ``clf.fit`` above.
grid = {"head__sigma": ["auto", 0.1, 1.0], "head__prior_scale": [0.5, 1.0, 2.0]}
search = GridSearchCV(
    clf, grid,
    scoring=make_scorer(h_measure, response_method="predict_proba"),
    cv=OpenWorldSplit(n_splits=3, n_novel_classes=2, random_state=0),
)
start = time.perf_counter()
search.fit(X_train, y_train)
grid_time = time.perf_counter() - start
n_fits = len(search.cv_results_["params"]) * search.n_splits_ + 1
print(f"grid: {n_fits} fits ({len(search.cv_results_['params'])} candidates x "
      f"{search.n_splits_} folds + refit) in {grid_time:.1f} s, "
      f"{grid_time / fit_time:.1f} times one fit")
for params, seconds, score in zip(search.cv_results_["params"],
                                  search.cv_results_["mean_fit_time"],
                                  search.cv_results_["mean_test_score"],
                                  strict=True):
    print(f"  {params}: mean fit {seconds:5.1f} s, H-measure {score:.3f}")
print("best:", search.best_params_, f"H-measure {search.best_score_:.3f}")

# %%
# The first candidate's fits train the encoders (one per fold); every other
# fit only builds and calibrates a head on embeddings, which is why a grid
# over ``head__*`` costs about a training per fold, whatever its size. A grid
# over an encoder-side parameter (``pretrain__epochs``, ``meta__episode_noise``,
# ``embedding_dim``, ...) trains for every candidate and fold.
#
# P(novel) against sigma
# ----------------------
# Refitting the best model with other values of ``head__sigma`` reuses its
# encoder too. A narrow class noise leaves images far from every class mean,
# even known ones, so P(novel) rises for all images; a wide one lets the
# known classes explain everything. What ranks novel images above known ones
# is the gap between the two curves; ``"auto"`` (dashed) takes the noise's
# shape from the data instead of one variance for every direction.
sigmas = [0.05, 0.1, 0.2, 0.5, 1.0, 2.0]
rows = {"held-out images of 0-7 (known)": is_test,
        "images of 8 and 9 (novel)": y >= 8}


def mean_p_novel(sigma):
    model = clone(search.best_estimator_).set_params(head__sigma=sigma)
    model.fit(X_train, y_train)
    return {name: model.predict_proba(X[mask])[:, -1].mean()
            for name, mask in rows.items()}


curves = [mean_p_novel(sigma) for sigma in sigmas]
auto = mean_p_novel("auto")
fig, ax = plt.subplots(figsize=(6, 4))
for colour, name in zip(["C0", "C3"], rows, strict=True):
    ax.plot(sigmas, [curve[name] for curve in curves], marker="o",
            color=colour, label=name)
    ax.axhline(auto[name], color=colour, ls="--", lw=1)
ax.set_xscale("log")
ax.set_xlabel("head__sigma (isotropic class noise)")
ax.set_ylabel("mean P(novel)")
ax.set_title('dashed: head__sigma="auto" (full noise covariance)', fontsize=9)
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()
