"""What a GridSearchCV over FLOWR's head costs, and whether its parameters matter.

Run with ``python benchmarks/grid_search_cost.py`` (about 5 minutes on a
2-core CPU with the defaults). In one run it times

- one ``fit`` of ``FLOWRClassifier`` on all the training rows (conv4 on
  scikit-learn's 8x8 digit images, digits 0-6 known, 7-9 new),
- ``GridSearchCV`` over ``head__a`` x ``head__sigma`` with 3-fold
  ``OpenWorldSplit`` and ``make_scorer(h_measure, response_method=
  "predict_proba")``, with ``reuse_encoder=True`` (the default) and, with
  ``--compare-retrain``, with ``reuse_encoder=False`` (every candidate retrains),

and prints the ratios grid / one fit measured back to back (machines are
shared and noisy: only ratios from the same run are reported). Then it says
how much the head's parameters move the answer on classes the encoder never
saw: the largest change of P(novel) between ``head__sigma`` values, and the
spread of the held-out H-measure over the grid.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from sklearn.datasets import load_digits
from sklearn.metrics import make_scorer
from sklearn.model_selection import GridSearchCV

from sklearn_flowr import FLOWRClassifier
from sklearn_flowr.metrics import h_measure
from sklearn_flowr.model_selection import OpenWorldSplit
from sklearn_flowr.training import MetaTraining, SupE
from sklearn_flowr.training._memo import ENCODER_MEMO

GRID = {"head__a": [0.0, 0.5], "head__sigma": ["auto", 0.1, 1.0]}


def build(args, **params) -> FLOWRClassifier:
    """The estimator a user builds: defaults but for the training budget."""
    return FLOWRClassifier(
        pretrain=SupE(epochs=args.pretrain_epochs),
        meta=MetaTraining(epochs=args.meta_epochs,
                          episodes_per_epoch=args.episodes, n_way=4, n_unknown=1),
        verbose=0, random_state=args.seed, **params)


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def grid(args, X, y, **params):
    search = GridSearchCV(
        build(args, **params), GRID, refit=True, error_score="raise",
        scoring=make_scorer(h_measure, response_method="predict_proba"),
        cv=OpenWorldSplit(n_splits=3, n_novel_classes=2, random_state=args.seed))
    return search.fit(X, y)


def sigma_effect(args, X, y, X_new):
    """P(novel) of rows of new classes under each head__sigma, one encoder."""
    p_novel = {}
    for sigma in GRID["head__sigma"]:
        clf = build(args).set_params(head__sigma=sigma).fit(X, y)
        p_novel[sigma] = clf.predict_proba(X_new)[:, -1]
    values = list(p_novel.values())
    return {f"{s}": float(np.mean(p)) for s, p in p_novel.items()}, max(
        float(np.max(np.abs(p - q))) for p in values for q in values)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pretrain-epochs", type=int, default=10)
    parser.add_argument("--meta-epochs", type=int, default=2)
    parser.add_argument("--episodes", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--compare-retrain", action="store_true",
                        help="also time the grid with reuse_encoder=False")
    parser.add_argument("--json", default=None, help="write the figures here")
    args = parser.parse_args(argv)

    X, y = load_digits(return_X_y=True)
    images = (X.reshape(-1, 8, 8) / 16.0).astype(np.float32)
    known = y < 7
    X_train, y_train, X_new = images[known], y[known], images[~known]

    # Warm up (torch's lazy imports, first-call dispatch) so that one-time
    # costs of the process do not flatter the ratios.
    FLOWRClassifier(pretrain=SupE(epochs=1), meta=None, verbose=0,
                    random_state=args.seed).fit(X_train[::20], y_train[::20])
    ENCODER_MEMO.clear()
    _, one_fit = timed(lambda: build(args).fit(X_train, y_train))
    ENCODER_MEMO.clear()
    search, grid_time = timed(lambda: grid(args, X_train, y_train))
    scores = search.cv_results_["mean_test_score"]
    result = {
        "one_fit_s": one_fit, "grid_s": grid_time,
        "grid_over_one_fit": grid_time / one_fit,
        "n_candidates": len(scores), "n_splits": 3,
        "best_params": {k: repr(v) for k, v in search.best_params_.items()},
        "h_best": float(np.max(scores)), "h_worst": float(np.min(scores)),
        "h_by_candidate": {repr(p): float(s) for p, s in
                           zip(search.cv_results_["params"], scores, strict=True)},
    }
    if args.compare_retrain:
        ENCODER_MEMO.clear()
        _, retrain_time = timed(lambda: grid(args, X_train, y_train,
                                             reuse_encoder=False))
        result["grid_retrain_s"] = retrain_time
        result["grid_retrain_over_one_fit"] = retrain_time / one_fit
    ENCODER_MEMO.clear()
    result["mean_p_novel_by_sigma"], result["max_p_novel_change"] = sigma_effect(
        args, X_train, y_train, X_new)

    print(f"one fit: {one_fit:.1f} s; grid of {len(scores)} candidates x 3 folds "
          f"+ refit: {grid_time:.1f} s = {result['grid_over_one_fit']:.2f}x one fit")
    if args.compare_retrain:
        print(f"same grid retraining every candidate (reuse_encoder=False): "
              f"{result['grid_retrain_s']:.1f} s = "
              f"{result['grid_retrain_over_one_fit']:.2f}x one fit")
    print(f"held-out H-measure over the grid: best {result['h_best']:.4f} "
          f"({search.best_params_}), worst {result['h_worst']:.4f}")
    print("mean P(novel) of new-class rows by head__sigma: "
          + ", ".join(f"{k}: {v:.3f}" for k, v in
                      result["mean_p_novel_by_sigma"].items())
          + f"; largest change of one row's P(novel): "
            f"{result['max_p_novel_change']:.3f}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as file:
            json.dump(result, file, indent=2)
    return result


if __name__ == "__main__":
    main()
