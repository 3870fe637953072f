"""``FLOWRClassifier``'s novel label on a frozen pretrained network: the share
of held-out rows of known classes that ``predict`` calls novel (the
false-novel rate, promised at most ``novelty_alpha`` = 0.05) and the share of
rows of unseen classes it calls novel, by rows a class.

    OMP_NUM_THREADS=2 python benchmarks/frozen_backbone_decision.py
        [--rows 20,40] [--draws 3]

The network is EfficientNet-Lite0 with its ImageNet weights (the
``efficientnet`` extra; random weights without it, said so) on its own 1280
features (``embedding_dim=None, pretrain=None, meta=None``), with
``CRPGaussianClassifier()`` as the head and ``calibration=None``. The images
are scikit-learn's digits (8 x 8, uint8, as a folder of images would give
them): ``--rows`` images of each of the digits 0-4 fit the model, their other
images are the known queries, the digits 5-9 are unseen. Each draw redraws
the fitted images. Printed per rows a class: ``predict``'s held-out scores,
the false-novel rate (mean over draws and its standard error over the
``--draws``, at least 2),
the share of unseen rows caught; and the same for the argmax rule
(``head__novelty_alpha=None``: the known classes and the novel class by
posterior).
"""

import argparse
import warnings

import numpy as np
import torch
from sklearn.datasets import load_digits

from sklearn_flowr import CRPGaussianClassifier, FLOWRClassifier
from sklearn_flowr.encoders import EfficientNetLite0Encoder


def encoder():
    try:
        return EfficientNetLite0Encoder(in_channels=1, embedding_dim=None)
    except ImportError:
        print("the efficientnet extra is not installed: random weights")
        return EfficientNetLite0Encoder(in_channels=1, embedding_dim=None,
                                        pretrained=False)


def decision_rates(X, y, rows, draw, alpha):
    """Held-out scores, false-novel rate and unseen share caught, one draw."""
    rng = np.random.default_rng(draw)
    fit = np.concatenate([rng.permutation(np.flatnonzero(y == c))[:rows]
                          for c in range(5)])
    queries = np.setdiff1d(np.arange(y.shape[0]), fit)
    unseen = y[queries] >= 5
    torch.manual_seed(0)
    model = FLOWRClassifier(backbone=encoder(), embedding_dim=None, pretrain=None,
                            meta=None, head=CRPGaussianClassifier(novelty_alpha=alpha),
                            calibration=None, verbose=0, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the argmax rule's notice
        model.fit(X[fit], y[fit])
    novel = model.predict(X[queries]) == model.novel_label_
    n_scores = (0 if alpha is None
                else model.head_.conformal_scores_.shape[0])
    return n_scores, novel[~unseen].mean(), novel[unseen].mean()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="20,40",
                        help="comma-separated images a known digit (default 20,40)")
    parser.add_argument("--draws", type=int, default=3,
                        help="draws of the fitted images, at least 2 (default 3)")
    args = parser.parse_args(argv)
    if args.draws < 2:
        parser.error("--draws must be at least 2 (the standard error is over draws)")
    digits = load_digits()
    X = (digits.images * 255 / 16).astype(np.uint8)
    for rows in map(int, args.rows.split(",")):
        for alpha, rule in ((0.05, "conformal, alpha 0.05"), (None, "argmax")):
            figures = np.array([decision_rates(X, digits.target, rows, draw, alpha)
                                for draw in range(args.draws)])
            scores, false_novel, caught = figures.T
            print(f"{rows} images a digit, {rule}: {scores.mean():.0f} held-out "
                  f"scores, false-novel {false_novel.mean():.3f} +- "
                  f"{false_novel.std(ddof=1) / np.sqrt(args.draws):.3f}, unseen "
                  f"caught {caught.mean():.3f}", flush=True)


if __name__ == "__main__":
    main()
