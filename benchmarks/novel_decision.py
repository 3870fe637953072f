"""What predict's novel label means: the share of held-out rows of known
classes called novel (the false-novel rate, at most ``novelty_alpha`` = 0.05
within 2 standard errors) and the share of rows of unseen classes called novel,
under the conformal rule (``novelty_alpha=0.05``, the default) and the argmax
rule (``novelty_alpha=None``).

    OMP_NUM_THREADS=1 python benchmarks/novel_decision.py [--seeds 3]
        [--budget readme|default]
        [--dataset digits|glyphs|debian-fonts|kanji|fashion-mnist]
        [--max-per-class N]

The first 70% of the classes are known: FLOWRClassifier with the README's
budget (or the defaults) is fitted on half of their images, the other half is
held out; the other classes are unseen. Digits also runs the head alone on raw
pixels, same split. One fit per seed: both rules read the same head. Each
seed's false-novel rate comes with its own standard error (``one_fit_se``),
which also serves a single seed.

A last line per model and seed says why the share of unseen rows is what it
is: the number of calibration rows, the share of unseen rows the novelty score
ranks above the 5% most novel-looking held-out rows (``tpr_at_5%``, the most
any threshold at a 5% false-novel rate can catch; ``tpr_-known_mass`` and
``tpr_-max_class`` the same for two other scores of the same head), the rate a
calibration set drawn like the held-out rows gives (``expected_fnr``), the 95%
quantiles of the calibration and held-out scores and the held-out rows' mean
p-value (0.5 when they are drawn alike).
"""

import argparse
import functools
import json

import numpy as np
from scipy.special import logsumexp

from sklearn_flowr import CRPGaussianClassifier, FLOWRClassifier
from sklearn_flowr._core import novel_log_odds
from sklearn_flowr.datasets import (
    load_digits_images,
    load_fashion_mnist,
    load_glyphs,
    load_kanji,
)
from sklearn_flowr.training import MetaTraining, SupE

LOADERS = {"digits": load_digits_images, "glyphs": load_glyphs,
           # flowr-benchmark's --font-dir /usr/share/fonts --max-fonts 40
           "debian-fonts": functools.partial(load_glyphs, "/usr/share/fonts",
                                             max_fonts=40),
           # 40 drawings a character: half of them leave every class >= 6 rows
           "kanji": functools.partial(load_kanji, n_instances=40),
           "fashion-mnist": load_fashion_mnist}


def tpr_at(known, unseen, fpr):
    """Share of ``unseen`` above the ``1 - fpr`` quantile of ``known`` (higher
    score: more novel): the best any threshold of this score can do."""
    return float(np.mean(unseen > np.quantile(known, 1.0 - fpr)))


def score_quality(head, Z_known, Z_unseen):
    """The novelty score's own quality and how its calibration scores compare
    with the held-out rows of known classes."""
    J_known = head._joint_log_numerators_unmapped(Z_known)
    J_unseen = head._joint_log_numerators_unmapped(Z_unseen)
    known, unseen = novel_log_odds(J_known), novel_log_odds(J_unseen)
    alternatives = {
        "tpr_-known_mass": (-logsumexp(J_known[:, :-1], axis=1),
                            -logsumexp(J_unseen[:, :-1], axis=1)),
        "tpr_-max_class": (-J_known[:, :-1].max(axis=1),
                           -J_unseen[:, :-1].max(axis=1))}
    calibration = head.conformal_scores_
    n = calibration.shape[0]
    return {"n_calibration": n, "tpr_at_5%": tpr_at(known, unseen, 0.05),
            # The rate a calibration set drawn like the held-out rows gives.
            "expected_fnr": float(np.floor(0.05 * (n + 1)) / (n + 1)) if n else None,
            "calibration_q95": float(np.quantile(calibration, 0.95)) if n else None,
            "held_out_q95": float(np.quantile(known, 0.95)),
            "mean_pvalue": float(np.mean(head.novelty_pvalues(Z_known))),
            **{key: tpr_at(*pair, 0.05) for key, pair in alternatives.items()}}


def rates(head, Z_known, Z_unseen):
    out = {"quality": score_quality(head, Z_known, Z_unseen),
           "n_test": Z_known.shape[0]}
    for alpha in (None, 0.05):
        head.set_params(novelty_alpha=alpha)
        out[str(alpha)] = (float(np.mean(head.predict(Z_known) == head.novel_label_)),
                           float(np.mean(head.predict(Z_unseen) == head.novel_label_)))
    head.set_params(novelty_alpha=0.05)
    return out


def one_fit_se(run, alpha=0.05):
    """Standard error of one fit's false-novel rate: the calibration draw (the
    conformal threshold's coverage is Beta-distributed, variance about
    ``alpha (1 - alpha) / (n + 2)`` for ``n`` calibration rows) plus the
    binomial of the held-out rows."""
    fnr, n = run[str(alpha)][0], run["quality"]["n_calibration"]
    return float(np.sqrt(alpha * (1 - alpha) / (n + 2)
                         + fnr * (1 - fnr) / run["n_test"]))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--budget", choices=["readme", "default"], default="readme")
    parser.add_argument("--dataset", choices=sorted(LOADERS), default="digits")
    parser.add_argument("--max-per-class", type=int, default=None)
    args = parser.parse_args()
    data = LOADERS[args.dataset]()
    X, y = data.data, data.target
    if args.max_per_class:
        keep = np.concatenate([np.flatnonzero(y == label)[:args.max_per_class]
                               for label in np.unique(y)])
        X, y = X[keep], y[keep]
    labels = np.unique(y)
    is_known = np.isin(y, labels[:int(round(0.7 * labels.shape[0]))])
    results = {"flowr": []} if args.dataset != "digits" else {"flowr": [], "head": []}
    for seed in range(args.seeds):
        known = np.flatnonzero(is_known)
        fit = np.random.default_rng(seed).random(known.shape[0]) < 0.5
        train, test, unseen = known[fit], known[~fit], np.flatnonzero(~is_known)
        budget = (dict(pretrain=SupE(epochs=2),
                       meta=MetaTraining(epochs=1, episodes_per_epoch=5))
                  if args.budget == "readme" else {})
        clf = FLOWRClassifier(**budget, random_state=seed, verbose=0).fit(
            X[train], y[train])
        results["flowr"].append(rates(clf.head_, clf.transform(X[test]),
                                      clf.transform(X[unseen])))
        if "head" in results:
            flat = X.reshape(X.shape[0], -1)
            head = CRPGaussianClassifier(covariance="isotropic")
            head.fit(flat[train], y[train])
            results["head"].append(rates(head, flat[test], flat[unseen]))
        print(seed, json.dumps({k: v[-1] for k, v in results.items()}), flush=True)
    for model, runs in results.items():
        for rule in ("None", "0.05"):
            per_seed = np.array([r[rule] for r in runs])
            fnr, found = per_seed.mean(axis=0)
            # Standard error of the mean over seeds (each seed draws its own
            # calibration rows, so the rate varies more than a binomial's).
            se = per_seed[:, 0].std(ddof=1) / np.sqrt(len(runs)) if len(runs) > 1 else 0
            print(f"{args.dataset} {model:6s} novelty_alpha={rule:5s} false-novel "
                  f"{fnr:.3f} +- {se:.3f} (per seed "
                  f"{', '.join(f'{v:.3f}' for v in per_seed[:, 0])})  unseen called "
                  f"novel {found:.3f}  (n_test {int((~fit).sum())}, n_unseen "
                  f"{unseen.shape[0]}, {len(runs)} seeds)")
        print(f"{args.dataset} {model:6s} per seed false-novel +- 1 SE of one fit: "
              + ", ".join(f"{r['0.05'][0]:.3f} +- {one_fit_se(r):.3f}" for r in runs))
        quality = {key: [r["quality"][key] for r in runs]
                   for key in runs[0]["quality"]}
        print(f"{args.dataset} {model:6s} " + "  ".join(
            f"{key} {', '.join(f'{v:.3g}' for v in values)}"
            for key, values in quality.items()))

if __name__ == "__main__":
    main()
