"""The full-covariance head's ``unlabelled_threshold``, measured on validation
classes, to choose its default.

Run ``python benchmarks/discovery_default_threshold.py`` (options: ``--tasks``,
``--datasets``, ``--fractions``, ``--n-jobs``). For each data set a linear
"encoder" (digits: standardising and whitened PCA to 12 dimensions; glyphs:
standardising, PCA to 64 and linear discriminant analysis to 24, a metric
learned on the training classes as an encoder's) and the head's
empirical-Bayes prior and noise are fitted on training classes only; the candidates of
``unlabelled_threshold`` are then scored by
:func:`~sklearn_flowr.protocol.select_discovery_params` on discovery tasks of
classes the encoder never saw, in both contexts and at each label fraction:

- ``glyphs``: the ``train`` split's classes fit the encoder, the ``val``
  split's classes are the validation classes (``flowr-benchmark`` tests on
  the ``test`` split, so nothing here touches its test classes);
- ``digits`` (scikit-learn's 8x8 digits): digits 0-4 fit the encoder and 5-9
  are the validation classes. These are the classes ``flowr-benchmark
  --dataset digits`` tests on (with another encoder), so digits is a second
  opinion and glyphs the evidence for the default.

Small context: the head learns each task's support set from the prior, as
``FLOWRClassifier``'s ``prior_head_`` does. Large context: it is fitted on
half the rows of every training class (kept fixed online), and the tasks
query the other half of 20 of them (all of them below 20, as
``flowr-benchmark --quick``) with 5 validation classes. The score is
``"balanced"``: the mean of the clustering accuracy on the unlabelled rows of
new classes and the accuracy on those of known classes.
"""

import argparse
import time

import numpy as np
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklearn_flowr import CRPGaussianClassifier
from sklearn_flowr.head import empirical_bayes_head
from sklearn_flowr.protocol import LargeContextTasks, select_discovery_params

THRESHOLDS = (0.3, 0.5, 0.7, 0.9, 0.99)


def encoder(name, seed):
    """The data set's linear embedding, fitted on the training classes."""
    if name == "digits":
        return make_pipeline(StandardScaler(), PCA(12, whiten=True,
                                                   random_state=seed))
    return make_pipeline(StandardScaler(), PCA(64, random_state=seed),
                         LinearDiscriminantAnalysis(n_components=24))


def load(name):
    """``(X_train, y_train, X_val, y_val)`` as flat float rows."""
    if name == "digits":
        X, y = load_digits(return_X_y=True)
        train = y < 5
        return X[train], y[train], X[~train], y[~train]
    from sklearn_flowr.datasets import load_glyphs

    train, val = load_glyphs(split="train"), load_glyphs(split="val")
    flat = [part.data.reshape(part.data.shape[0], -1).astype(np.float64) / 255.0
            for part in (train, val)]
    return flat[0], train.target, flat[1], val.target + train.target.max() + 1


def setting_data(setting, Z_train, y_train, Z_val, y_val, seed=0):
    """The head template and the validation rows of one context."""
    template = CRPGaussianClassifier(covariance="full")
    if setting == "small":
        return (empirical_bayes_head(template, Z_train, y_train, setting="small"),
                Z_val, y_val)
    rng = np.random.default_rng(seed)
    fit = np.zeros(y_train.shape[0], dtype=bool)
    for label in np.unique(y_train):
        rows = rng.permutation(np.flatnonzero(y_train == label))
        fit[rows[: rows.shape[0] // 2]] = True
    head = empirical_bayes_head(template, Z_train[fit], y_train[fit],
                                setting="large")
    return (head, np.concatenate([Z_train[~fit], Z_val]),
            np.concatenate([y_train[~fit], y_val]))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["digits", "glyphs"],
                        choices=["digits", "glyphs"])
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--fractions", type=float, nargs="+", default=[0.0, 0.1])
    parser.add_argument("--n-jobs", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    for name in args.datasets:
        X_train, y_train, X_val, y_val = load(name)
        embed = encoder(name, args.seed)
        Z_train = embed.fit_transform(X_train, y_train)
        Z_val = embed.transform(X_val)
        print(f"\n{name}: {np.unique(y_train).size} training classes, "
              f"{np.unique(y_val).size} validation classes, "
              f"{Z_train.shape[1]}-d embedding, {args.tasks} tasks per run")
        for setting in ("small", "large"):
            head, Z, y = setting_data(setting, Z_train, y_train, Z_val, y_val,
                                      args.seed)
            tasks = None
            if setting == "large":
                n_known = head.classes_.shape[0]
                tasks = LargeContextTasks(
                    y, head.classes_, n_tasks=args.tasks,
                    n_known_query_classes=min(20, n_known),
                    random_state=args.seed)
            for fraction in args.fractions:
                tic = time.perf_counter()
                found = select_discovery_params(
                    head, Z, y, {"unlabelled_threshold": list(THRESHOLDS)},
                    setting=setting, tasks=tasks, n_tasks=args.tasks,
                    label_fraction=fraction, n_jobs=args.n_jobs,
                    random_state=args.seed)
                print(f"  {setting} context, label fraction {fraction:g} "
                      f"({time.perf_counter() - tic:.0f} s): chosen "
                      f"{found.best_params['unlabelled_threshold']}")
                print(f"    {'threshold':>9s} {'balanced':>8s} {'acc new':>15s} "
                      f"{'known acc':>15s} {'NMI new':>7s} {'found/true':>10s}")
                for result in found.results:
                    mean, se = result["report"].mean, result["report"].se
                    print(f"    {result['params']['unlabelled_threshold']:9g} "
                          f"{result['score']:8.3f} "
                          f"{mean['accuracy_new']:7.3f}+-{se['accuracy_new']:.3f} "
                          f"{mean['known_accuracy']:7.3f}+-"
                          f"{se['known_accuracy']:.3f} {mean['nmi_new']:7.3f} "
                          f"{mean['n_discovered']:4.1f}/{mean['n_true_new']:.1f}")


if __name__ == "__main__":
    main()
