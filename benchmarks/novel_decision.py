"""What predict's novel label means on digits: the share of held-out rows of
known digits called novel (the false-novel rate) and the share of unseen
digits called novel, under the conformal rule (``novelty_alpha=0.05``, the
default) and the argmax rule (``novelty_alpha=None``).

    OMP_NUM_THREADS=1 python benchmarks/novel_decision.py [--seeds 3]
        [--budget readme|default]

FLOWRClassifier with the README's budget (or the defaults), trained on half
the images of digits 0-6 (the other half held out), digits 7-9 unseen; then
the head alone
on raw pixels, same split. One fit per seed: both rules read the same head.
"""

import argparse
import json

import numpy as np

from sklearn_flowr import CRPGaussianClassifier, FLOWRClassifier
from sklearn_flowr.datasets import load_digits_images
from sklearn_flowr.training import MetaTraining, SupE


def rates(head, Z_known, Z_unseen):
    out = {}
    for alpha in (None, 0.05):
        head.set_params(novelty_alpha=alpha)
        out[str(alpha)] = (float(np.mean(head.predict(Z_known) == -1)),
                           float(np.mean(head.predict(Z_unseen) == -1)))
    head.set_params(novelty_alpha=0.05)
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--budget", choices=["readme", "default"], default="readme")
    args = parser.parse_args()
    digits = load_digits_images()
    X, y = digits.data, digits.target
    results = {"flowr": [], "head": []}
    for seed in range(args.seeds):
        known = np.flatnonzero(y < 7)
        fit = np.random.default_rng(seed).random(known.shape[0]) < 0.5
        train, test, unseen = known[fit], known[~fit], np.flatnonzero(y >= 7)
        budget = (dict(pretrain=SupE(epochs=2),
                       meta=MetaTraining(epochs=1, episodes_per_epoch=5))
                  if args.budget == "readme" else {})
        clf = FLOWRClassifier(**budget, random_state=seed, verbose=0).fit(
            X[train], y[train])
        results["flowr"].append(rates(clf.head_, clf.transform(X[test]),
                                      clf.transform(X[unseen])))
        flat = X.reshape(X.shape[0], -1)
        head = CRPGaussianClassifier().fit(flat[train], y[train])
        results["head"].append(rates(head, flat[test], flat[unseen]))
        print(seed, json.dumps({k: v[-1] for k, v in results.items()}), flush=True)
    for model, runs in results.items():
        for rule in ("None", "0.05"):
            fnr, found = np.mean([r[rule] for r in runs], axis=0)
            print(f"{model:6s} novelty_alpha={rule:5s} false-novel {fnr:.3f}  "
                  f"unseen called novel {found:.3f}  (n_test {int((~fit).sum())}, "
                  f"n_unseen {unseen.shape[0]}, {len(runs)} seeds)")


if __name__ == "__main__":
    main()
