"""
=====================================================
Tuning ``a`` and ``sigma`` with open-world validation
=====================================================

The CRP discount ``a`` and the class noise ``sigma`` decide how readily the
head calls a sample novel. They can be tuned like any scikit-learn
hyper-parameter, as long as the validation folds contain classes the training
fold never saw. :class:`~sklearn_flowr.model_selection.OpenWorldSplit` holds
whole classes out of each training fold, and
:func:`~sklearn_flowr.metrics.novelty_scorer` scores the novelty probability
with the H-measure. The head sits at the end of an ordinary pipeline.
"""

# %%
# A pipeline and an open-world grid search
# ----------------------------------------
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklearn_flowr import CRPGaussianClassifier
from sklearn_flowr.metrics import novelty_scorer
from sklearn_flowr.model_selection import OpenWorldSplit

X, y = load_digits(return_X_y=True)
pipe = make_pipeline(StandardScaler(), PCA(n_components=16, whiten=True,
                                           random_state=0),
                     CRPGaussianClassifier())
grid = {"crpgaussianclassifier__a": [0.0, 0.25, 0.5, 0.75, 0.9],
        "crpgaussianclassifier__sigma": [0.1, 0.25, 0.5, 1.0, 2.0]}
cv = OpenWorldSplit(n_splits=5, n_novel_classes=2, random_state=0)
search = GridSearchCV(pipe, grid, scoring=novelty_scorer, cv=cv).fit(X, y)
print("best:", search.best_params_, f"H-measure {search.best_score_:.3f}")

# %%
# The score surface
# -----------------
# ``sigma`` matters and ``a`` does not, here. ``sigma`` sets how wide every
# class's predictive is next to the novel class's, which changes how the rows
# are *ranked* by P(novel). ``a`` changes only the CRP masses; with balanced
# classes and ``b="auto"`` (refitted for each ``a``) they shift every row's
# novelty log-odds by about the same constant, and the H-measure, like AUROC,
# depends on the ranking alone. ``a`` matters in a stream, where the masses
# change as classes appear.
scores = search.cv_results_["mean_test_score"].reshape(
    len(grid["crpgaussianclassifier__a"]), len(grid["crpgaussianclassifier__sigma"]))
fig, ax = plt.subplots(figsize=(5.5, 4.2))
image = ax.imshow(scores, cmap="viridis", origin="lower")
ax.set_xticks(range(scores.shape[1]), grid["crpgaussianclassifier__sigma"])
ax.set_yticks(range(scores.shape[0]), grid["crpgaussianclassifier__a"])
ax.set_xlabel("sigma")
ax.set_ylabel("a")
for (i, j), value in np.ndenumerate(scores):
    ax.text(j, i, f"{value:.2f}", ha="center", va="center", color="w", fontsize=8)
fig.colorbar(image, label="mean H-measure over folds")
ax.set_title("novelty H-measure, 5 open-world folds")
fig.tight_layout()
plt.show()
