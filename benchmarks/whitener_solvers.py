"""The whitener's solvers by shape, and the default head's time over SimpleShot's.

For each shape (classes x rows per class, d features; random non-negative
rows, as pooled ReLU features are), prints the CPU time of each
:class:`~sklearn_flowr.head.TwoCovarianceWhitener` solver's ``fit_transform``
of the fitting rows plus ``transform`` of half as many queries, the solver
``"auto"`` picks, and ``CRPGaussianClassifier()``'s fit + predict CPU time
(its log-probabilities) over SimpleShot's (known class and novelty score) on
the same rows: the fastest of ``--repeats`` tries each. Times depend on the
machine; the ratios and which solver is fastest are what to read.

Run: ``OMP_NUM_THREADS=1 python benchmarks/whitener_solvers.py`` (``--quick``:
three small shapes, seconds; ``--shapes 800x3,1111x3``: those shapes only).
"""

import argparse
import sys
from pathlib import Path

import numpy as np

from sklearn_flowr import CRPGaussianClassifier
from sklearn_flowr.baselines import SimpleShotClassifier
from sklearn_flowr.head import TwoCovarianceWhitener

sys.path.insert(0, str(Path(__file__).resolve().parent))
from frozen_features import best_seconds  # noqa: E402

SHAPES = [(20, 5), (50, 5), (100, 5), (200, 3), (272, 3), (400, 2), (150, 6),
          (300, 3), (250, 4), (300, 4), (600, 2), (800, 3), (900, 3), (1111, 3)]
QUICK_SHAPES = [(10, 3), (20, 5), (60, 4)]


def rows_of(rng, n_classes, per_class, d):
    y = np.repeat(np.arange(n_classes), per_class)
    X = np.abs(rng.normal(size=(n_classes, d)))[y] + 0.7 * np.abs(
        rng.normal(size=(y.shape[0], d)))
    return X, y, np.abs(rng.normal(size=(y.shape[0] // 2 + 1, d)))


def measure(n_classes, per_class, d, repeats, rng):
    """Each solver's seconds, "auto"'s pick and the head's ratio to SimpleShot."""
    X, y, queries = rows_of(rng, n_classes, per_class, d)
    seconds = {}
    for solver in ("eigen", "gram", "span"):
        if solver == "span" and X.shape[0] >= d:
            continue  # the rows span everything: the span is the eigen solver

        def whiten(solver=solver):
            whitener = TwoCovarianceWhitener(solver=solver)
            whitener.fit_transform(X, y)
            whitener.transform(queries)
        seconds[solver] = best_seconds(whiten, repeats)
    auto = TwoCovarianceWhitener().fit(X, y).solver_
    head, simpleshot = (best_seconds(lambda make=make: predict(make().fit(X, y),
                                                               queries), repeats)
                        for make in (CRPGaussianClassifier, SimpleShotClassifier))
    return seconds, auto, head / simpleshot


def predict(model, queries):
    """A known class and a novelty figure per query, as the comparison uses."""
    if hasattr(model, "novelty_score"):  # an anchor
        return model.predict_known(queries), model.novelty_score(queries)
    return model.predict_log_proba(queries)


def _shapes(text):
    """``"800x3,1111x3"`` as ``[(800, 3), (1111, 3)]``."""
    shapes = []
    for shape in text.split(","):
        parts = shape.split("x")
        if not (len(parts) == 2 and all(p.isdigit() for p in parts)
                and int(parts[0]) >= 2 and int(parts[1]) >= 2):
            raise argparse.ArgumentTypeError(
                "--shapes takes classes x rows per class, both at least 2, "
                f"e.g. 800x3,1111x3; got {shape!r}")
        shapes.append((int(parts[0]), int(parts[1])))
    return shapes


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="three small shapes at d=64")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--shapes", type=_shapes, default=None,
                        help="comma-separated classes x rows, e.g. 800x3,1111x3")
    args = parser.parse_args(argv)
    shapes, d = (QUICK_SHAPES, 64) if args.quick else (SHAPES, 1280)
    shapes = args.shapes or shapes
    rng = np.random.default_rng(0)
    print(f"d = {d}; CPU seconds of fit_transform + transform of n/2 queries")
    print("| classes x rows | n | eigen | gram | span | fastest | auto "
          "| default / SimpleShot |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for n_classes, per_class in shapes:
        seconds, auto, ratio = measure(n_classes, per_class, d, args.repeats, rng)
        cells = [f"{seconds[s]:.3f}" if s in seconds else "--"
                 for s in ("eigen", "gram", "span")]
        print(f"| {n_classes} x {per_class} | {n_classes * per_class} | "
              f"{' | '.join(cells)} | {min(seconds, key=seconds.get)} | {auto} "
              f"| {ratio:.1f}x |")


if __name__ == "__main__":
    main()
