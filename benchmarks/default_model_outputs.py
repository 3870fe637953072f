"""Save, or compare, what the default FLOWRClassifier computes on digits.

The composed API (issue 25) must not change the model users get by default.
This script fits the default model (Conv4, full-covariance head, P(novel)
calibrated on training-class tasks) with a small training budget, in both
settings, through whichever API the imported ``sklearn_flowr`` has (the
composed one, or the flat one of commit b24b716), and saves the embeddings
of all digits and the probabilities of 200 rows of unseen digits (after a
3-shot ``adapt`` in the small context). ``--compare A.npz B.npz`` prints
the largest difference of each array.

Before and after, from a clone of the repository::

    git worktree add /tmp/flowr-old b24b716
    PYTHONPATH=/tmp/flowr-old python benchmarks/default_model_outputs.py old.npz
    python benchmarks/default_model_outputs.py new.npz
    python benchmarks/default_model_outputs.py --compare old.npz new.npz
"""

import argparse
import time

import numpy as np
from sklearn.datasets import load_digits

from sklearn_flowr import FLOWRClassifier


def default_model(setting):
    """The default model at a small budget, in the API this version has."""
    try:
        from sklearn_flowr.training import MetaTraining, SupE
    except ImportError:  # the flat API of b24b716
        return FLOWRClassifier(setting=setting, embedding_dim=16, pretrain_epochs=3,
                               meta_epochs=2, episodes_per_epoch=30,
                               random_state=0, verbose=0)
    return FLOWRClassifier(setting=setting, embedding_dim=16,
                           pretrain=SupE(epochs=3),
                           meta=MetaTraining(epochs=2, episodes_per_epoch=30),
                           random_state=0, verbose=0)


def save(path):
    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).reshape(-1, 8, 8).astype(np.float32)
    train = y < 5
    out = {}
    for setting in ("small", "large"):
        clf = default_model(setting)
        start = time.perf_counter()
        clf.fit(X[train], y[train])
        out[f"{setting}/fit_seconds"] = time.perf_counter() - start
        out[f"{setting}/embedding"] = clf.transform(X)
        if setting == "small":
            support = np.concatenate([np.flatnonzero(y == c)[:3] for c in (5, 6, 7)])
            clf.adapt(X[support], y[support])
        out[f"{setting}/proba"] = np.asarray(clf.predict_proba(X[~train][:200]))
        out[f"{setting}/classes"] = np.asarray(clf.classes_)
    np.savez(path, **out)
    print(f"saved {path}")


def compare(first, second):
    a, b = np.load(first), np.load(second)
    for key in a.files:
        if key.endswith("fit_seconds"):
            continue
        x, z = a[key].astype(float), b[key].astype(float)
        diff = np.abs(x - z).max() if x.shape == z.shape else float("nan")
        print(f"{key:18s} shape {x.shape} vs {z.shape}: largest difference {diff:.3g}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", help="write the arrays here (.npz)")
    parser.add_argument("--compare", nargs=2, metavar=("A", "B"))
    args = parser.parse_args(argv)
    if args.compare:
        compare(*args.compare)
    elif args.path:
        save(args.path)
    else:
        parser.error("give an output path or --compare A B")


if __name__ == "__main__":
    main()
