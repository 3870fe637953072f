"""Does meta-training a projection on a frozen backbone beat its own features
on classes it did not train on?

On cached frozen features (``tools/extract_features.py``: the network is
frozen, so its features stand in for the images exactly as FLOWR's cached
feature path uses them), ``FLOWRClassifier(backbone=PretrainedEncoder(
nn.Identity(), d), embedding_dim=None, pretrain=None, ...)`` is fitted on
``--train-share`` of the classes, once with ``meta=None`` (the frozen
features) and once meta-trained (a learned d x d projection started at the
identity). Both are then judged on the other classes only, as
``benchmarks/frozen_features.py`` splits them (a held-out rendering, 60 % of
those classes known): FLOWR's own head (``prior_head_`` learning the new
classes online), :class:`WhitenedCRPClassifier` and SimpleShot on each
embedding. Prints known accuracy, novelty AUROC and H per split and the mean.

Run: ``OMP_NUM_THREADS=1 python benchmarks/pretrained_projection.py
feats/kanji.npz --splits 0,1``.
"""

import argparse
import copy
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.metrics import roc_auc_score
from torch import nn

from sklearn_flowr import FLOWRClassifier, WhitenedCRPClassifier
from sklearn_flowr.baselines import SimpleShotClassifier
from sklearn_flowr.encoders import PretrainedEncoder
from sklearn_flowr.metrics import h_measure
from sklearn_flowr.training import MetaTraining

sys.path.insert(0, str(Path(__file__).parent))
from frozen_features import known_and_novelty, load, split  # noqa: E402


def encoders(X, y, args):
    """The frozen and the meta-trained FLOWRClassifier on the training classes."""
    common = dict(backbone=PretrainedEncoder(nn.Identity(), X.shape[1]),
                  embedding_dim=None, pretrain=None, calibration=None,
                  verbose=0, random_state=0)
    meta = MetaTraining(epochs=args.epochs, episodes_per_epoch=args.episodes,
                        n_query=1, encoder_lr=args.lr)
    for name, stage in (("frozen", None), ("meta-trained", meta)):
        start = time.perf_counter()
        model = FLOWRClassifier(meta=stage, **common).fit(X, y)
        print(f"{name}: fit in {time.perf_counter() - start:.0f} s", flush=True)
        yield name, model


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path")
    parser.add_argument("--splits", default="0,1")
    parser.add_argument("--train-share", type=float, default=0.4)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--known-share", type=float, default=0.6)
    args = parser.parse_args(argv)
    features, y, groups = load(args.path)
    features = features.astype(np.float32)
    classes = np.random.default_rng(0).permutation(np.unique(y))
    trained = np.isin(y, classes[: round(args.train_share * len(classes))])
    rows = {}
    for name, model in encoders(features[trained], y[trained], args):
        Z = model.transform(features[~trained])
        for s in map(int, args.splits.split(",")):
            Z_fit, y_fit, Z_query, y_query, novel = split(
                Z, y[~trained], groups[~trained], s, args)
            heads = {"FLOWR head": copy.deepcopy(model.prior_head_),
                     "whitened": WhitenedCRPClassifier(),
                     "simpleshot": SimpleShotClassifier()}
            for head_name, head in heads.items():
                head.fit(Z_fit, y_fit)
                y_known, score = known_and_novelty(head, Z_query)
                result = [np.mean(y_known[~novel] == y_query[~novel]),
                          roc_auc_score(novel, score),
                          h_measure(novel.astype(int), score)]
                rows.setdefault((head_name, name), []).append(result)
                print(f"split {s} {name} {head_name}: "
                      + " ".join(f"{v:.4f}" for v in result), flush=True)
    print("\n| head | embedding | known acc | AUROC | H |\n" + "| --- " * 5 + "|")
    for (head_name, name), values in sorted(rows.items()):
        acc, auroc, h = np.mean(values, axis=0)
        print(f"| {head_name} | {name} | {acc:.3f} | {auroc:.3f} | {h:.3f} |")


if __name__ == "__main__":
    main()
