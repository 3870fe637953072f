"""Which head should be the default: the heads and the simple anchors on the
embeddings a FLOWRClassifier trains itself, all on the same vectors in one run.

``--part heads`` (default): per seed, one ``FLOWRClassifier`` with
``flowr-benchmark --quick``'s training budget (Sup-E 3 epochs, 3 x 30
meta-training episodes) is fitted on half of the rows of the first 70% of the
classes (digits: 0-6); every head is then fitted on ``transform`` of those
rows and scored on ``transform`` of the other half (known) and of the other
classes' rows (new): known-class accuracy, novelty AUROC, H-measure, ECE of
P(novel) as the head gives it (against "new class") and fit + predict CPU
time (``time.process_time``, fastest of up to five tries). The rows ``e2e
default`` and ``e2e whitened`` are the fitted models' own heads (P(novel)
through their Platt map): ``FLOWRClassifier()``'s and the same model with
``head=WhitenedCRPClassifier()`` (its encoder reused, so the same embedding).

``--part raw``: the same heads and split on the pixels (no encoder).

    OMP_NUM_THREADS=1 python benchmarks/default_head.py --dataset digits --seeds 0,1,2
    OMP_NUM_THREADS=1 python benchmarks/default_head.py --dataset glyphs --seeds 0,1,2
"""

import argparse
import copy
import os
import sys

import numpy as np
from sklearn.metrics import roc_auc_score

from sklearn_flowr import CRPGaussianClassifier, FLOWRClassifier, WhitenedCRPClassifier
from sklearn_flowr.baselines import (
    KNNClassifier,
    MahalanobisPlusPlusClassifier,
    NCMClassifier,
    RanPACClassifier,
    SimpleShotClassifier,
)
from sklearn_flowr.datasets import load_digits_images, load_glyphs
from sklearn_flowr.metrics import expected_calibration_error, h_measure
from sklearn_flowr.training import MetaTraining, SupE

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from frozen_features import fit_and_score_seconds, known_and_novelty  # noqa: E402

HEADS = {
    "crp iso": lambda: CRPGaussianClassifier(covariance="isotropic"),
    "crp full": lambda: CRPGaussianClassifier(covariance="full"),
    "whitened": WhitenedCRPClassifier,
    "ncm": NCMClassifier,
    "simpleshot": SimpleShotClassifier,
    "mahalanobis++": MahalanobisPlusPlusClassifier,
    "knn": KNNClassifier,
    "ranpac": lambda: RanPACClassifier(n_components=256, random_state=0),
}
LOADERS = {"digits": load_digits_images, "glyphs": load_glyphs}


def scores(model, Z_known, y_known, Z_new, y_new):
    """Accuracy on the known rows, AUROC, H; ECE of P(novel) against "new
    class" (predict_proba) and against "first sighting" (the rows streamed in
    a shuffled order through open_world_step, the package's target)."""
    Z = np.vstack([Z_known, Z_new])
    novel = np.r_[np.zeros(len(Z_known), bool), np.ones(len(Z_new), bool)]
    y_pred, score = known_and_novelty(model, Z)
    eces = [np.nan, np.nan]
    if hasattr(model, "predict_log_proba"):
        order = np.random.default_rng(0).permutation(len(Z))
        out = copy.deepcopy(model).open_world_step(Z[order],
                                                   np.r_[y_known, y_new][order])
        p_novel = np.asarray(model.predict_proba(Z))[:, -1]
        eces = [expected_calibration_error(novel, p_novel),
                expected_calibration_error(out.is_novel, out.p_novel)]
    return [np.mean(y_pred[~novel] == y_known), roc_auc_score(novel, score),
            h_measure(novel.astype(int), score), *eces]


def part_heads(args):
    data = LOADERS[args.dataset]()
    X, y = data.data, data.target
    labels = np.unique(y)
    is_known = np.isin(y, labels[: round(0.7 * labels.shape[0])])
    rows = {}
    for seed in args.seeds:
        known = np.flatnonzero(is_known)
        half = np.random.default_rng(seed).random(known.shape[0]) < 0.5
        train, test, new = known[half], known[~half], np.flatnonzero(~is_known)
        if args.part == "raw":  # the pixels as features, no encoder
            flat = X.reshape(X.shape[0], -1).astype(np.float64)
            Z_train, Z_test, Z_new = flat[train], flat[test], flat[new]
        else:
            clf = FLOWRClassifier(pretrain=SupE(epochs=args.pretrain_epochs),
                                  meta=MetaTraining(epochs=3, episodes_per_epoch=30),
                                  embedding_dim=args.embedding_dim, random_state=seed,
                                  verbose=0).fit(X[train], y[train])
            Z_train, Z_test, Z_new = (clf.transform(X[i]) for i in (train, test, new))
        print(f"seed {seed}: {args.dataset} {len(np.unique(y[train]))} known classes, "
              f"{len(train)} fitting rows, {len(test)} known / {len(new)} new "
              f"queries, d = {Z_train.shape[1]}", flush=True)
        Z_query = np.vstack([Z_test, Z_new])
        times = {}
        for name in ["simpleshot"] + [n for n in HEADS if n != "simpleshot"]:
            model, _, times[name] = fit_and_score_seconds(
                HEADS[name], Z_train, y[train], Z_query)
            rows.setdefault(name, []).append(
                scores(model, Z_test, y[test], Z_new, y[new])
                + [times[name], times[name] / times["simpleshot"]])
            print(f"  {name}: " + " ".join(f"{v:.4f}" for v in rows[name][-1]),
                  flush=True)
        for name, head in (() if args.part == "raw" else (
                ("e2e default", None), ("e2e whitened", WhitenedCRPClassifier()))):
            if head is not None:  # the same encoder (reused), another head
                clf.set_params(head=head).fit(X[train], y[train])
                assert np.array_equal(clf.transform(X[test]), Z_test)
            rows.setdefault(name, []).append(
                scores(clf.head_, Z_test, y[test], Z_new, y[new]) + [np.nan, np.nan])
            print(f"  {name}: " + " ".join(f"{v:.4f}" for v in rows[name][-1]),
                  flush=True)
    print(f"\n{args.dataset} {args.part}, d = {Z_train.shape[1]}, seeds "
          f"{args.seeds}: means\n")
    print("| head | known acc | AUROC | H | ECE new | ECE stream | CPU s "
          "| x SimpleShot |")
    print("| --- " * 8 + "|")
    for name, values in rows.items():
        acc, auroc, h, ece, stream, sec, ratio = (
            np.mean(column) for column in np.array(values, float).T)
        cells = [f"{acc:.3f}", f"{auroc:.3f}", f"{h:.3f}", f"{ece:.3f}",
                 f"{stream:.3f}", f"{sec:.3f}", f"{ratio:.1f}"]
        print(f"| {name} | "
              + " | ".join("" if c == "nan" else c for c in cells) + " |")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["heads", "raw"],
                        default="heads")
    parser.add_argument("--dataset", choices=sorted(LOADERS), default="digits")
    parser.add_argument("--seeds", type=lambda s: [int(v) for v in s.split(",")],
                        default=[0, 1, 2])
    parser.add_argument("--embedding-dim", type=int, default=64)
    parser.add_argument("--pretrain-epochs", type=int, default=3)
    args = parser.parse_args(argv)
    part_heads(args)


if __name__ == "__main__":
    sys.exit(main())
