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


def mean_time(fn, number):
    start = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - start) / number


def paired_times(ours, reference, *, repeat=9, number=1):
    """Time ``ours`` and ``reference`` alternately, ``repeat`` rounds.

    Interleaving exposes both to the same load on a shared machine; the ratio
    is the median of the per-round ratios, the times are per-call medians.
    """
    ours(), reference()  # warm caches and lazy initialisation
    pairs = [(mean_time(ours, number), mean_time(reference, number))
             for _ in range(repeat)]
    a, b = np.array(pairs).T
    return float(np.median(a)), float(np.median(b)), float(np.median(a / b))


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
    return paired_times(step, lambda: matrix @ vector, repeat=15, number=50)


def bench_task_batch(rng, d=64):
    clf, centres = fitted_head(rng, 10, d, per_class=5)
    labels = rng.integers(0, 15, size=150)
    extra = rng.normal(scale=3.0, size=(15, d))
    rows = extra[labels] + rng.normal(size=(150, d))

    # Fresh copies made outside the timed calls: each run must start from the
    # same state, and copying is not part of either path.
    copies = [copy.deepcopy(clf) for _ in range(24)]

    def batched():
        copies.pop().open_world_step(rows, labels)

    def one_by_one():
        head = copies.pop()
        for t in range(150):
            head.open_world_step(rows[t : t + 1], labels[t : t + 1])

    return paired_times(one_by_one, batched, repeat=5)


def bench_predict_proba(rng, n_classes=10_000, d=128, n_rows=1024):
    clf, centres = fitted_head(rng, n_classes, d)
    X = rng.normal(scale=3.0, size=(n_rows, d))
    weights = np.ascontiguousarray(rng.normal(size=(n_classes, d)))
    return paired_times(lambda: clf.predict_proba(X), lambda: X @ weights.T)


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
    copies = [copy.deepcopy(head) for _ in range(16)]

    def ours_stream():
        copies.pop().open_world_step(rows, labels)

    def ours_rows():
        model = copies.pop()
        for t in range(n_rows):
            model.open_world_step(rows[t : t + 1], labels[t : t + 1])

    river, stream, ratio_stream = paired_times(river_stream, ours_stream, repeat=3)
    _, rows, ratio_rows = paired_times(river_stream, ours_rows, repeat=3)
    return river / n_rows, stream / n_rows, rows / n_rows, ratio_stream, ratio_rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-river", action="store_true")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)

    ours, bare, ratio = bench_single_step(rng)
    print(f"open_world_step, 1 row, N=10000, d=128: {ours * 1e3:.3f} ms; "
          f"bare mat-vec {bare * 1e3:.3f} ms; ratio {ratio:.2f}x (target <= 3x)")
    looped, batched, ratio = bench_task_batch(rng)
    print(f"150-row small-context task: batched {batched * 1e3:.2f} ms; "
          f"150 single-row calls {looped * 1e3:.2f} ms; speed-up "
          f"{ratio:.1f}x (target >= 10x)")
    ours, bare, ratio = bench_predict_proba(rng)
    print(f"predict_proba 1024 rows, N=10000, d=128: {ours * 1e3:.1f} ms; "
          f"bare GEMM {bare * 1e3:.1f} ms; ratio {ratio:.2f}x (target <= 3x)")
    if not args.skip_river:
        river, stream, rows, ratio_stream, ratio_rows = bench_river(rng)
        print(f"per row vs river GaussianNB (d=64, 10 classes): river "
              f"{river * 1e6:.1f} us; ours vectorised stream {stream * 1e6:.2f} us "
              f"({ratio_stream:.0f}x, target >= 20x); ours one call per row "
              f"{rows * 1e6:.1f} us ({ratio_rows:.1f}x)")


if __name__ == "__main__":
    main()
