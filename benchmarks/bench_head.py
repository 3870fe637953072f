"""Speed of the CRP-Gaussian head, as ratios measured in the same run.

Run with ``python benchmarks/bench_head.py`` (river needed for the last
figure: ``pip install -e ".[benchmark]"``). Machines are shared and noisy, so
every figure is a ratio of two timings taken back to back, each the median of
several repeats; no absolute time is asserted anywhere.
"""

import argparse
import copy
import time

import numpy as np

from sklearn_flowr import CRPGaussianClassifier


def median_time(fn, *, repeat=7, number=1):
    """Median over ``repeat`` runs of the mean time of ``number`` calls."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - start) / number)
    return float(np.median(times))


def fitted_head(rng, n_classes, d, per_class=2):
    y = np.repeat(np.arange(n_classes), per_class)
    centres = rng.normal(scale=3.0, size=(n_classes, d))
    X = centres[y] + rng.normal(size=(y.shape[0], d))
    return CRPGaussianClassifier().fit(X, y), centres


def bench_single_step(rng, n_classes=10_000, d=128):
    clf, centres = fitted_head(rng, n_classes, d)
    labels = rng.integers(0, n_classes, size=4000)
    rows = centres[labels] + rng.normal(size=(4000, d))
    counter = iter(range(10**9))

    def step():
        t = next(counter) % 4000
        clf.open_world_step(rows[t : t + 1], labels[t : t + 1])

    matrix = np.ascontiguousarray(rng.normal(size=(n_classes, d)))
    vector = rng.normal(size=d)
    ours = median_time(step, number=200)
    bare = median_time(lambda: matrix @ vector, number=200)
    return ours, bare


def bench_task_batch(rng, d=64):
    clf, centres = fitted_head(rng, 10, d, per_class=5)
    labels = rng.integers(0, 15, size=150)
    extra = rng.normal(scale=3.0, size=(15, d))
    rows = extra[labels] + rng.normal(size=(150, d))

    def batched():
        copy.deepcopy(clf).open_world_step(rows, labels)

    def one_by_one():
        head = copy.deepcopy(clf)
        for t in range(150):
            head.open_world_step(rows[t : t + 1], labels[t : t + 1])

    return median_time(batched), median_time(one_by_one)


def bench_predict_proba(rng, n_classes=10_000, d=128, n_rows=1024):
    clf, centres = fitted_head(rng, n_classes, d)
    X = rng.normal(scale=3.0, size=(n_rows, d))
    weights = np.ascontiguousarray(rng.normal(size=(n_classes, d)))
    ours = median_time(lambda: clf.predict_proba(X))
    bare = median_time(lambda: X @ weights.T)
    return ours, bare


def bench_river(rng, d=64, n_classes=10, n_rows=1000):
    from river.naive_bayes import GaussianNB

    centres = rng.normal(scale=3.0, size=(n_classes, d))
    labels = rng.integers(0, n_classes, size=n_rows)
    rows = centres[labels] + rng.normal(size=(n_rows, d))
    warm_y = np.repeat(np.arange(n_classes), 2)
    warm_X = centres[warm_y] + rng.normal(size=(warm_y.shape[0], d))
    dict_rows = [dict(enumerate(r)) for r in rows]

    def river_stream():
        model = GaussianNB()
        for x, label in zip(dict_rows[:20], warm_y, strict=False):
            model.learn_one(x, int(label))
        for x, label in zip(dict_rows, labels.tolist(), strict=True):
            model.predict_proba_one(x)
            model.learn_one(x, label)

    head = CRPGaussianClassifier().fit(warm_X, warm_y)

    def ours_stream():
        copy.deepcopy(head).open_world_step(rows, labels)

    def ours_rows():
        model = copy.deepcopy(head)
        for t in range(n_rows):
            model.open_world_step(rows[t : t + 1], labels[t : t + 1])

    per_row = lambda seconds: seconds / n_rows  # noqa: E731
    return (per_row(median_time(river_stream, repeat=3)),
            per_row(median_time(ours_stream, repeat=5)),
            per_row(median_time(ours_rows, repeat=3)))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-river", action="store_true")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)

    ours, bare = bench_single_step(rng)
    print(f"open_world_step, 1 row, N=10000, d=128: {ours * 1e3:.3f} ms; "
          f"bare mat-vec {bare * 1e3:.3f} ms; ratio {ours / bare:.2f}x "
          "(target <= 3x)")
    batched, looped = bench_task_batch(rng)
    print(f"150-row small-context task: batched {batched * 1e3:.2f} ms; "
          f"150 single-row calls {looped * 1e3:.2f} ms; speed-up "
          f"{looped / batched:.1f}x (target >= 10x)")
    ours, bare = bench_predict_proba(rng)
    print(f"predict_proba 1024 rows, N=10000, d=128: {ours * 1e3:.1f} ms; "
          f"bare GEMM {bare * 1e3:.1f} ms; ratio {ours / bare:.2f}x "
          "(target <= 3x)")
    if not args.skip_river:
        river, stream, rows = bench_river(rng)
        print(f"per row vs river GaussianNB (d=64, 10 classes): river "
              f"{river * 1e6:.1f} us; ours vectorised stream {stream * 1e6:.2f} us "
              f"({river / stream:.0f}x, target >= 20x); ours one call per row "
              f"{rows * 1e6:.1f} us ({river / rows:.1f}x)")


if __name__ == "__main__":
    main()
