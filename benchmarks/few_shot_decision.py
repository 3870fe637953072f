"""``predict``'s novel label with few rows a class: the share of held-out rows
of known classes called novel (the false-novel rate, promised at most
``novelty_alpha``, ``--alpha``, default 0.05) and the share of rows of unseen
classes called novel, for the heads with a conformal decision, by rows a class.

    OMP_NUM_THREADS=1 python benchmarks/few_shot_decision.py [--draws 5]
        [--rows 3,10,30,90] [--features digits|PATH.npz] [--known 8]
        [--alpha 0.05]

``digits``: scikit-learn's digits, the first ``--known`` digits known
(``--rows`` of each fitted, their other rows held out), the others
unseen. ``PATH.npz``: cached features (``Z`` or ``X``, ``y``), ``--known``
classes drawn at random, the same split within them. Each draw redraws the
fitted rows (and the known classes). Printed per head and rows a class: the
mean over draws of the false-novel rate with its standard error over draws,
one fit's binomial standard error ``sqrt(alpha (1 - alpha) / n_held)``, and
the mean share of unseen rows caught.
"""

import argparse

import numpy as np
from sklearn.datasets import load_digits

from sklearn_flowr import CRPGaussianClassifier, WhitenedCRPClassifier
from sklearn_flowr.head import TwoCovarianceWhitener

HEADS = {
    "CRPGaussianClassifier()": lambda alpha: CRPGaussianClassifier(
        novelty_alpha=alpha),
    "WhitenedCRPClassifier()": lambda alpha: WhitenedCRPClassifier().set_params(
        head__novelty_alpha=alpha),
    "covariance='isotropic'": lambda alpha: CRPGaussianClassifier(
        covariance="isotropic", novelty_alpha=alpha),
    "prior_spectrum='spiked'": lambda alpha: WhitenedCRPClassifier(
        TwoCovarianceWhitener(prior_spectrum="spiked")).set_params(
            head__novelty_alpha=alpha),
}


def load(features):
    if features == "digits":
        return load_digits(return_X_y=True)
    data = np.load(features)
    return (data["Z"] if "Z" in data else data["X"]), data["y"]


def draw(y, rows, n_known, seed, *, random_classes):
    """Fitted rows, held-out rows of the known classes, rows of unseen ones."""
    rng = np.random.default_rng(seed)
    classes = np.unique(y)
    known = (rng.permutation(classes) if random_classes else classes)[:n_known]
    order = rng.permutation(y.shape[0])
    fit = np.concatenate([order[y[order] == c][:rows] for c in known])
    held = np.setdiff1d(np.flatnonzero(np.isin(y, known)), fit)
    return fit, held, np.flatnonzero(~np.isin(y, known))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--draws", type=int, default=5,
                        help="draws of the fitted rows (default 5)")
    parser.add_argument("--rows", default="3,10,30,90",
                        help="rows a class to fit, comma-separated")
    parser.add_argument("--features", default="digits",
                        help="'digits' or an .npz of cached features")
    parser.add_argument("--known", type=int, default=8,
                        help="known classes (default 8)")
    parser.add_argument("--alpha", type=float, default=0.05,
                        help="the heads' novelty_alpha (default 0.05)")
    args = parser.parse_args(argv)
    X, y = load(args.features)
    print(f"{'head':26s} {'rows':>4s} {'false-novel':>17s} {'1-fit SE':>8s} "
          f"{'unseen caught':>13s}")
    for name, make in HEADS.items():
        for rows in (int(r) for r in args.rows.split(",")):
            rates, caught, n_held = [], [], []
            for seed in range(args.draws):
                fit, held, unseen = draw(y, rows, args.known, seed,
                                         random_classes=args.features != "digits")
                head = make(args.alpha).fit(X[fit], y[fit])
                novel = head.novel_label_
                rates.append(np.mean(head.predict(X[held]) == novel))
                caught.append(np.mean(head.predict(X[unseen]) == novel))
                n_held.append(held.shape[0])
            se = np.std(rates, ddof=1) / np.sqrt(len(rates)) if len(rates) > 1 else 0
            one_fit = np.sqrt(args.alpha * (1 - args.alpha) / np.mean(n_held))
            print(f"{name:26s} {rows:4d} {np.mean(rates):8.3f} +- {se:.3f} "
                  f"{one_fit:8.3f} {np.mean(caught):13.3f}", flush=True)


if __name__ == "__main__":
    main()
