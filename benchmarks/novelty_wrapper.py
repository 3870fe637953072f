"""How well NoveltyCalibratedClassifier calibrates P(novel) on new classes.

Run with ``python benchmarks/novelty_wrapper.py`` (about a minute on a 2-core
CPU). On features whose new classes the estimators never saw it streams a
third of the training classes' rows (kept out of training) and every row of
the new classes, shuffled, through each estimator, raw and wrapped (``cv=3``
class-disjoint folds of the training classes, ``method="sigmoid"`` and
``"isotonic"``), and prints the expected calibration error of P(novel) against
"first sighting" (15 equal-width bins), the H-measure of the score (unchanged
by the map, printed to show it) and the share of first sightings called novel,
per seed. The raw baselines' novelty score is a distance, not a probability:
their ECE column reads ``-``.

Data: scikit-learn's digits, 64 pixels standardised and reduced by PCA to 16
dimensions fitted on the training rows (digits 0-5 known, 6-9 new), and
``heavy``: 40 synthetic classes in 6-d with Student-t (3 dof) noise, 25 train
and 15 new, 30 rows a class (the Gaussian head's P(novel) is over-confident
there).
"""

from __future__ import annotations

import argparse
import copy
import json

import numpy as np
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklearn_flowr import CRPGaussianClassifier
from sklearn_flowr.baselines import EVMClassifier, NCMClassifier
from sklearn_flowr.calibration import NoveltyCalibratedClassifier
from sklearn_flowr.metrics import expected_calibration_error, h_measure


def datasets(seed):
    """``name -> (X_train, y_train, X_stream, y_stream)``, the stream shuffled."""
    rng = np.random.default_rng(seed)
    X, y = load_digits(return_X_y=True)
    train, stream = _split(y, 6, rng)
    embed = make_pipeline(StandardScaler(), PCA(16, random_state=0)).fit(X[train])
    out = {"digits": (embed.transform(X[train]), y[train],
                      embed.transform(X[stream]), y[stream])}
    y = np.repeat(np.arange(40), 30)
    X = rng.normal(scale=2.5, size=(40, 6))[y] + rng.standard_t(3, (1200, 6))
    train, stream = _split(y, 25, rng)
    out["heavy"] = (X[train], y[train], X[stream], y[stream])
    return out


def _split(y, n_known, rng):
    """Training rows (two thirds of each class below ``n_known``) and the
    shuffled stream: the other third of those and every row of the rest."""
    rows = rng.permutation(y.shape[0])
    known = y[rows] < n_known
    rank = np.zeros(y.shape[0], dtype=bool)
    for label in np.unique(y[rows][known]):
        of_class = rows[y[rows] == label]
        rank[of_class[: 2 * of_class.shape[0] // 3]] = True
    train = np.flatnonzero(rank)
    stream = rng.permutation(np.setdiff1d(np.arange(y.shape[0]), train))
    return train, stream


def evaluate(estimator, X_stream, y_stream, probability):
    out = copy.deepcopy(estimator).open_world_step(X_stream, y_stream)
    first = np.asarray(out.is_novel, dtype=bool)
    p = np.asarray(out.p_novel, dtype=np.float64)
    score = np.asarray(out.get("novelty_score", p), dtype=np.float64)
    called = np.asarray(out.y_pred).astype(object) == estimator.novel_label_
    return {"ece": expected_calibration_error(first, p) if probability else None,
            "h": h_measure(first, np.clip(score, -1e300, 1e300)),
            "first_called_novel": float(called[first].mean()),
            "known_called_novel": float(called[~first].mean())}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--json", default=None, help="write the figures here")
    args = parser.parse_args(argv)
    rows = []
    for seed in range(args.seeds):
        for data, (X, y, X_new, y_new) in datasets(seed).items():
            for name, base in (("head", CRPGaussianClassifier(covariance="isotropic")),
                               ("ncm", NCMClassifier()), ("evm", EVMClassifier())):
                raw = clone_fit(base, X, y)
                variants = {"raw": (raw, name == "head")}
                for method in ("sigmoid", "isotonic"):
                    variants[method] = (NoveltyCalibratedClassifier(
                        base, method=method, cv=3, random_state=seed).fit(X, y), True)
                for variant, (model, probability) in variants.items():
                    figures = evaluate(model, X_new, y_new, probability)
                    rows.append({"seed": seed, "data": data, "estimator": name,
                                 "variant": variant, **figures})
                    ece = "-" if figures["ece"] is None else f"{figures['ece']:.3f}"
                    print(f"seed {seed} {data:6s} {name:4s} {variant:8s} ECE {ece:>5s}"
                          f"  H {figures['h']:.3f}  first sightings called novel "
                          f"{figures['first_called_novel']:.2f}  known called novel "
                          f"{figures['known_called_novel']:.2f}", flush=True)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(rows, handle, indent=1)


def clone_fit(estimator, X, y):
    from sklearn.base import clone

    return clone(estimator).fit(X, y)


if __name__ == "__main__":
    main()
