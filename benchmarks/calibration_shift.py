"""Where the calibration folds' novelty scores part from the deployed head's.

:class:`~sklearn_flowr.calibration.NoveltyCalibratedClassifier` fits its map
on the novelty log-odds of fold models (fewer classes; the classes of its known
queries one row short) and applies it to the deployed head's. On each split of
a cached-features file (split as ``frozen_features.py`` splits it), this prints
the median log-odds of the test queries under the deployed
``CRPGaussianClassifier()`` and under each calibration fold's model, fitted on
every row of its classes and with its known queries held out (as the
calibration fits it), and the medians of the folds' calibration rows (ten
class-disjoint folds, at most one per class; a quarter of each of the next
fold's classes' rows, at least one, as known queries; as ``frozen_features.py
--ece`` calibrates). Read across a line, the difference is the shift between
the models on the same rows; down the last column, the calibration rows
against the test rows of their kind.

Run: ``OMP_NUM_THREADS=1 python benchmarks/calibration_shift.py feats/kanji.npz
--splits 0,1``.
"""

import argparse
import sys
from pathlib import Path

import numpy as np
from sklearn.utils import check_random_state

from sklearn_flowr import CRPGaussianClassifier
from sklearn_flowr.calibration import calibration_folds

sys.path.insert(0, str(Path(__file__).resolve().parent))
from frozen_features import (  # noqa: E402
    add_split_arguments,
    known_and_novelty,
    load,
    split,
)


def fold_scores(X_fit, y_fit, X_query, y_query, novel, *, cv=10, share=0.25,
                seed=0):
    """Novelty log-odds of each kind of row under each model.

    The folds and known queries are those
    ``NoveltyCalibratedClassifier(cv=cv, known_query_share=share,
    random_state=seed)`` draws (:func:`~sklearn_flowr.calibration.calibration_folds`).

    Parameters
    ----------
    X_fit, y_fit : ndarray
        The fitting rows and their labels.
    X_query, y_query : ndarray
        The test queries and their labels.
    novel : ndarray of bool
        Which queries are of classes not in ``y_fit``.
    cv : int, default=10
        Class-disjoint calibration folds (at most the number of classes).
    share : float, default=0.25
        ``known_query_share``: the share of a partner class's rows held out
        as known queries (rounded, at least one).
    seed : int, default=0
        ``random_state`` of the calibration.

    Returns
    -------
    scores : dict
        ``{row kind: [deployed head's, fold models', fold models' less their
        known queries]}``, each an array (empty where that model trained on
        those rows or the calibration does not score them with it).
    """
    def score(rows, X):
        model = CRPGaussianClassifier().fit(X_fit[rows], y_fit[rows])
        return known_and_novelty(model, X)[1]

    deployed = score(np.arange(y_fit.shape[0]), X_query)
    kinds = ("test, known classes", "test, classes one row short in the fold",
             "test, new classes", "calibration, known queries",
             "calibration, held-out classes")
    scores = {kind: ([], [], []) for kind in kinds}
    for fit_rows, known_rows, stream, _ in calibration_folds(
            cv, X_fit, y_fit, share, check_random_state(seed)):
        train = np.union1d(fit_rows, known_rows)
        held = np.setdiff1d(stream, known_rows)
        short = np.isin(y_query, y_fit[known_rows])
        known = ~novel & np.isin(y_query, y_fit[train])
        masks = {"test, known classes": known & ~short,
                 "test, classes one row short in the fold": short,
                 "test, new classes": novel}
        X = np.concatenate([X_query, X_fit[known_rows], X_fit[held]])
        n, n_known = X_query.shape[0], known_rows.shape[0]
        whole, less = (score(rows, X) for rows in (train, fit_rows))
        for kind, mask in masks.items():
            for column, values in enumerate((deployed, whole[:n], less[:n])):
                scores[kind][column].append(values[mask])
        scores["calibration, known queries"][2].append(less[n : n + n_known])
        scores["calibration, held-out classes"][1].append(whole[n + n_known :])
        scores["calibration, held-out classes"][2].append(less[n + n_known :])
    return {kind: [np.concatenate(column) if column else np.empty(0)
                   for column in columns] for kind, columns in scores.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", help=".npz with Z (or X), y and g")
    parser.add_argument("--splits", default="0,1")
    add_split_arguments(parser)
    args = parser.parse_args(argv)
    features, y, groups = load(args.path)
    print("| split | rows | deployed head | fold model | fold less its known "
          "queries |\n" + "| --- " * 5 + "|")
    for s in map(int, args.splits.split(",")):
        data = split(features, y, groups, s, args)
        cv = min(10, np.unique(data[1]).shape[0])
        for kind, columns in fold_scores(*data, cv=cv).items():
            print(f"| {s} | {kind} | " + " | ".join(
                f"{np.median(values):.1f}" if values.size else ""
                for values in columns) + " |")


if __name__ == "__main__":
    main()
