"""The CRP head's unlabelled stream against DP-means, on digits PCA features.

Run ``python benchmarks/discovery_threshold.py``: the head knows digits 0-5
(600 rows, PCA(12) fitted on them), then 600 rows of all ten digits come
without labels. For both covariances and ``unlabelled_threshold`` in {0.5,
0.9, 0.99}, and for DPMeansClassifier (its threshold from the known classes),
it prints the known-class accuracy, the clustering accuracy and NMI on the
rows of new digits and the number of classes opened
(:func:`~sklearn_flowr.metrics.discovery_report` of ``y_assigned``). The new
digits are the ones scored here, so this chooses nothing: a threshold is
chosen on validation classes.
"""

import numpy as np
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklearn_flowr import CRPGaussianClassifier
from sklearn_flowr.baselines import DPMeansClassifier
from sklearn_flowr.metrics import discovery_report


def report(estimator, Z, y, stream):
    """One line of discovery figures of ``estimator``'s unlabelled stream."""
    out = estimator.open_world_step(Z[stream])
    r = discovery_report(y[stream], out.y_assigned, known_classes=np.arange(6))
    return (f"known acc {r.known_accuracy:.3f}  acc new {r.accuracy_new:.3f}  "
            f"NMI new {r.nmi_new:.3f}  classes opened {r.n_discovered}  "
            f"learned {np.mean(out.learned):.2f}")


def main():
    X, y = load_digits(return_X_y=True)
    order = np.random.default_rng(0).permutation(y.shape[0])
    X, y = X[order], y[order]
    train = np.flatnonzero(y < 6)[:600]
    stream = np.setdiff1d(np.arange(y.shape[0]), train)[:600]
    embed = make_pipeline(StandardScaler(), PCA(12, whiten=True, random_state=0))
    Z = embed.fit(X[train]).transform(X)
    for covariance in ("isotropic", "full"):
        for threshold in (0.5, 0.9, 0.99):
            head = CRPGaussianClassifier(covariance=covariance,
                                         unlabelled_threshold=threshold)
            print(f"head {covariance:9s} threshold {threshold:<4}: "
                  + report(head.fit(Z[train], y[train]), Z, y, stream))
    print(f"{'DP-means':35s}: "
          + report(DPMeansClassifier().fit(Z[train], y[train]), Z, y, stream))


if __name__ == "__main__":
    main()
