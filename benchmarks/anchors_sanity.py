"""The frozen-feature anchors against NCM and the default head, in one table.

Run with ``OMP_NUM_THREADS=1 python benchmarks/anchors_sanity.py`` (about two
minutes; ``--seeds`` splits). Each method fits few rows of the known classes and
scores held-out rows of the known classes and every row of new classes:
known-class accuracy (``predict_known``), AUROC and H-measure of the novelty
score (new class vs known class), and the seconds of fit plus scoring.

Data: ``digits``: scikit-learn's digits (64 pixels), five random digits known
with 5 rows each, the other five new. ``frozen``: synthetic backbone-like
features, 200 classes in 256-d (ReLU of Gaussian classes with a shared
low-rank noise), 120 known with 3 rows each, 80 new, 10 queries a class.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from sklearn.datasets import load_digits
from sklearn.metrics import roc_auc_score

from sklearn_flowr import CRPGaussianClassifier
from sklearn_flowr.baselines import (
    FeCAMClassifier,
    KNNClassifier,
    MahalanobisPlusPlusClassifier,
    NCMClassifier,
    RanPACClassifier,
    SimpleShotClassifier,
)
from sklearn_flowr.metrics import h_measure

METHODS = {
    "NCM": NCMClassifier, "SimpleShot": SimpleShotClassifier,
    "Mahalanobis++": MahalanobisPlusPlusClassifier,
    "RanPAC": lambda: RanPACClassifier(random_state=0),
    "kNN (k=1)": KNNClassifier, "FeCAM": FeCAMClassifier,
    "CRPGaussianClassifier()": CRPGaussianClassifier,
}


def split(X, y, known, shots, rng):
    """Fit rows (``shots`` of each known class) and query rows (the rest)."""
    fit = np.zeros(y.shape[0], dtype=bool)
    for label in known:
        fit[rng.choice(np.flatnonzero(y == label), shots, replace=False)] = True
    return X[fit], y[fit], X[~fit], y[~fit], ~np.isin(y[~fit], known)


def data(name, seed):
    rng = np.random.default_rng(seed)
    if name == "digits":
        X, y = load_digits(return_X_y=True)
        return split(X / 16.0, y, rng.permutation(10)[:5], 5, rng)
    n_classes, dim, rank = 200, 256, 16
    centres = rng.normal(size=(n_classes, dim))
    y = np.repeat(np.arange(n_classes), 13)
    noise = rng.normal(size=(y.shape[0], rank)) @ rng.normal(size=(rank, dim)) / 4
    X = np.maximum(centres[y] + noise + rng.normal(size=(y.shape[0], dim)), 0)
    return split(X, y, np.arange(120), 3, rng)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    print("| data | method | known acc | novelty AUROC | novelty H | fit + score s |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name in ("digits", "frozen"):
        rows = {method: [] for method in METHODS}
        for seed in range(args.seeds):
            X_fit, y_fit, X_query, y_query, novel = data(name, seed)
            for method, make in METHODS.items():
                start = time.perf_counter()
                model = make().fit(X_fit, y_fit)
                if hasattr(model, "novelty_score"):
                    known = model.predict_known(X_query[~novel])
                    score = model.novelty_score(X_query)
                else:  # the head: P(novel) and its best known class
                    proba = model.predict_proba(X_query)
                    known = model.classes_[proba[~novel, :-1].argmax(axis=1)]
                    score = proba[:, -1]
                seconds = time.perf_counter() - start
                rows[method].append((np.mean(known == y_query[~novel]),
                                     roc_auc_score(novel, score),
                                     h_measure(novel, score), seconds))
        for method, values in rows.items():
            acc, auroc, h, seconds = np.mean(values, axis=0)
            print(f"| {name} | {method} | {acc:.3f} | {auroc:.3f} | {h:.3f} "
                  f"| {seconds:.2f} |")


if __name__ == "__main__":
    main()
