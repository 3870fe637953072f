"""What one labelled row of a new class does to the default head's answers.

On cached feature vectors (``frozen_features.py``'s ``.npz`` and splits),
fits ``CRPGaussianClassifier()`` (and the isotropic head) on a split's
fitting rows, then learns the first unseen class's first query row with
``partial_fit`` and prints, per split: the share of the other unseen
classes' query rows that ``predict`` gives to that one-row class, the share
it calls novel, and the share of the known classes' query rows whose
``predict_proba`` P(novel) exceeds 0.5 (before the new row). With
``--prior-floors``, the same for :class:`WhitenedCRPClassifier` with
``TwoCovarianceWhitener(prior_floor=...)`` (and with ``--prior-spectra``,
``prior_spectrum=...``), with its accuracy, novelty AUROC and H-measure,
means over the splits.

Run: ``OMP_NUM_THREADS=1 python benchmarks/one_row_new_class.py
feats/icons.npz --splits 0,1 --prior-floors 1e-3,1e-2,3e-2,1e-1``.
"""

import argparse
import sys
from pathlib import Path

import numpy as np
from sklearn.metrics import roc_auc_score

from sklearn_flowr import CRPGaussianClassifier, WhitenedCRPClassifier
from sklearn_flowr.head import TwoCovarianceWhitener
from sklearn_flowr.metrics import h_measure

sys.path.insert(0, str(Path(__file__).resolve().parent))
from frozen_features import (  # noqa: E402
    add_split_arguments,
    known_and_novelty,
    load,
    split,
)


def one_row_effect(model, X_query, y_query, novel):
    """Accuracy, AUROC and H of the fitted ``model``, the share of known rows
    with P(novel) > 0.5; after learning one row of the first unseen class,
    the shares of the other unseen rows taken by it and called novel."""
    known, score = known_and_novelty(model, X_query)
    accuracy = np.mean(known[~novel] == y_query[~novel])
    auroc, h = roc_auc_score(novel, score), h_measure(novel, score)
    p_novel = model.predict_proba(X_query[~novel])[:, -1]
    X_new, y_new = X_query[novel], y_query[novel]
    model.partial_fit(X_new[:1], y_new[:1])
    others = y_new != y_new[0]
    predicted = model.predict(X_new[others])
    return (accuracy, auroc, h, np.mean(p_novel > 0.5),
            np.mean(predicted == y_new[0]), np.mean(predicted == model.novel_label_))


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("path", help=".npz with Z (or X), y and g")
    parser.add_argument("--splits", default="0,1", help="comma-separated splits")
    parser.add_argument("--prior-floors", default="",
                        help="comma-separated prior_floor values to compare")
    parser.add_argument("--prior-spectra", default="",
                        help="comma-separated prior_spectrum values to compare")
    add_split_arguments(parser)
    args = parser.parse_args(argv)
    features, y, groups = load(args.path)
    splits = [split(features, y, groups, int(s), args)
              for s in args.splits.split(",")]
    print("| split | head | fitting rows | known P(novel) > 0.5 | "
          "unseen to the one-row class | unseen called novel |")
    print("| --- | --- | --- | --- | --- | --- |")
    for s, (X_fit, y_fit, X_query, y_query, novel) in zip(
            args.splits.split(","), splits, strict=True):
        for name in ("whitened", "isotropic"):
            model = CRPGaussianClassifier(covariance=name).fit(X_fit, y_fit)
            effect = one_row_effect(model, X_query, y_query, novel)
            print(f"| {s} | {name} | {X_fit.shape[0]} | {effect[3]:.3f} | "
                  f"{effect[4]:.3f} | {effect[5]:.3f} |")
    if args.prior_floors:
        _compare(splits, "prior_floor", args.prior_floors.split(","),
                 lambda floor: TwoCovarianceWhitener(prior_floor=float(floor)))
    if args.prior_spectra:
        _compare(splits, "prior_spectrum", args.prior_spectra.split(","),
                 lambda spectrum: TwoCovarianceWhitener(prior_spectrum=spectrum))


def _compare(splits, name, values, whitener_of):
    """Print the effects of WhitenedCRPClassifier with ``whitener_of(value)``
    for each of ``values``, means over the ``splits``."""
    print(f"\nWhitenedCRPClassifier by {name}, means over the splits\n")
    print(f"| {name} | known acc | AUROC | H | known P(novel) > 0.5 | "
          "unseen to the one-row class | unseen called novel |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for value in values:
        effects = [one_row_effect(
            WhitenedCRPClassifier(whitener_of(value)).fit(X_fit, y_fit),
            X_query, y_query, novel)
            for X_fit, y_fit, X_query, y_query, novel in splits]
        print(f"| {value} | " + " | ".join(
            f"{effect:.3f}" for effect in np.mean(effects, axis=0)) + " |")


if __name__ == "__main__":
    main()
