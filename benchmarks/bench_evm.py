"""Speed of EVM's vectorised stream against the per-row loop it replaces.

``EVMClassifier.open_world_step`` used to predict and learn one row at a
time, with one Weibull fit call per row for the points whose tail the row
changed; it now learns a chunk of rows at once, with one fit call for every
tail that changes in the chunk. This script runs both on the same fitted
model and the same streams, in the same process, and prints their wall
times, the ratio, and how far their outputs agree (labels, novelty scores,
Weibull parameters).

Settings (synthetic Gaussian classes in ``--dim`` dimensions, as in
``bench_protocol.py``):

- small context, once per ``--classes`` value: that many support classes
  with ``--shots`` rows each (uniform), then a stream of ``--rows`` rows of
  every support class and of ``--novel`` new classes (the protocol's tasks);
- large context: ``--large-classes`` classes of ``--large-shots`` rows fitted,
  then a stream of ``--rows`` rows of ``--large-query-classes`` of them and of
  ``--novel`` new classes.

Run with::

    python benchmarks/bench_evm.py
    python benchmarks/bench_evm.py --classes 10 60 --rows 20 --tasks 5
    python benchmarks/bench_evm.py --blas-threads 1   # pin BLAS threads
    python benchmarks/bench_evm.py --large-classes 224 --large-shots 17 \
        --dim 32 --rows 10 --chunk-elements 16000000 8000000 4000000 2000000

Nothing here asserts a time: machines are shared and noisy.
"""

import argparse
import copy
import time

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

from sklearn_flowr.baselines import EVMClassifier, _evm
from sklearn_flowr.baselines._base import OpenWorldBaseline


class RowLoopEVM(EVMClassifier):
    """The former stream: the base class's loop, ``_score`` then ``_learn``
    (one Weibull fit call) per row."""

    def _stream(self, X, index, is_new):
        return OpenWorldBaseline._stream(self, X, index, is_new)


def make_task(rng, n_known, shots, n_stream_known, n_novel, rows, dim):
    """Fit rows of ``n_known`` classes, then a shuffled stream of ``rows`` rows
    of ``n_stream_known`` of them and of ``n_novel`` new classes."""
    centres = rng.normal(size=(n_known + n_novel, dim))
    counts = rng.integers(shots[0], shots[1] + 1, size=n_known)
    y_fit = np.repeat(np.arange(n_known), counts)
    streamed = np.r_[rng.choice(n_known, n_stream_known, replace=False),
                     np.arange(n_known, n_known + n_novel)]
    y = rng.permutation(np.repeat(streamed, rows))
    X_fit = centres[y_fit] + rng.normal(size=(y_fit.shape[0], dim))
    return X_fit, y_fit, centres[y] + rng.normal(size=(y.shape[0], dim)), y


def timed_stream(model, X, y):
    start = time.perf_counter()
    out = model.open_world_step(X, y)
    return time.perf_counter() - start, out


def run_setting(name, tasks, tail_size):
    """Time both streams on every task; print times, ratio and agreement."""
    old_time = new_time = 0.0
    rows = same_pred = same_known = 0
    score_diff = param_diff = 0.0
    for X_fit, y_fit, X, y in tasks:
        fitted = EVMClassifier(tail_size=tail_size).fit(X_fit, y_fit)
        new = copy.deepcopy(fitted)
        old = RowLoopEVM(tail_size=tail_size)
        old.__dict__.update(copy.deepcopy(fitted.__dict__))
        seconds, out_old = timed_stream(old, X, y)
        old_time += seconds
        seconds, out_new = timed_stream(new, X, y)
        new_time += seconds
        rows += y.shape[0]
        same_pred += int(np.sum(out_old.y_pred == out_new.y_pred))
        same_known += int(np.sum(out_old.y_known == out_new.y_known))
        score_diff = max(score_diff, np.max(np.abs(out_old.p_novel - out_new.p_novel)))
        for got, expected in [(new.weibull_shape_, old.weibull_shape_),
                              (new.weibull_scale_, old.weibull_scale_)]:
            finite = np.isfinite(expected)
            assert np.array_equal(finite, np.isfinite(got))
            param_diff = max(param_diff, np.max(
                np.abs(got[finite] / expected[finite] - 1.0), initial=0.0))
    points = np.mean([task[1].shape[0] for task in tasks])
    print(f"{name:>24}: {len(tasks)} tasks, {rows} stream rows, {points:6.0f} "
          f"points fitted | row loop {old_time:7.3f} s, vectorised "
          f"{new_time:6.3f} s, ratio {old_time / new_time:5.1f}x")
    print(f"{'':>24}  agreement: y_pred {same_pred / rows:.4f}, y_known "
          f"{same_known / rows:.4f}, max |p_novel diff| {score_diff:.1e}, max "
          f"rel. Weibull diff {param_diff:.1e}")
    return old_time, new_time


def chunk_sizes(tasks, tail_size, budgets):
    """Time the vectorised stream of ``tasks`` with each ``_CHUNK_ELEMENTS``
    budget (the chunk's rows follow it); print ms per task and the rows of
    the first chunk. Labels must not depend on the chunking."""
    default = _evm._CHUNK_ELEMENTS
    reference = None
    try:
        for budget in budgets:
            _evm._CHUNK_ELEMENTS = budget
            seconds, labels = 0.0, []
            for X_fit, y_fit, X, y in tasks:
                model = EVMClassifier(tail_size=tail_size).fit(X_fit, y_fit)
                rows = model._chunk_rows()
                elapsed, out = timed_stream(model, X, y)
                seconds += elapsed
                labels.append(out.y_pred)
            labels = np.concatenate(labels)
            reference = labels if reference is None else reference
            print(f"{'':>24}  _CHUNK_ELEMENTS {budget:>9,}: {rows:4d} rows a "
                  f"chunk, {1e3 * seconds / len(tasks):7.1f} ms a task, labels "
                  f"{'same' if np.array_equal(labels, reference) else 'DIFFER'}")
    finally:
        _evm._CHUNK_ELEMENTS = default


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--classes", type=int, nargs="+", default=[10, 30, 60],
                        help="support classes of the small-context settings")
    parser.add_argument("--shots", type=int, nargs=2, default=[1, 10],
                        help="range of fitted rows per support class")
    parser.add_argument("--rows", type=int, default=15,
                        help="stream rows per class")
    parser.add_argument("--novel", type=int, default=5, help="new classes")
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--tasks", type=int, default=3,
                        help="tasks per setting (times are summed)")
    parser.add_argument("--large-classes", type=int, default=200,
                        help="fitted classes of the large context (0: skip)")
    parser.add_argument("--large-shots", type=int, default=10,
                        help="fitted rows per large-context class")
    parser.add_argument("--large-query-classes", type=int, default=20,
                        help="fitted classes the large-context stream queries")
    parser.add_argument("--tail-size", type=int, default=10)
    parser.add_argument("--blas-threads", type=int, default=None,
                        help="limit BLAS threads (default: the library's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--chunk-elements", type=int, nargs="+", default=None,
                        help="also time the large setting's vectorised stream "
                        "with these chunk budgets (EVM's _CHUNK_ELEMENTS; "
                        "default: not run)")
    args = parser.parse_args(argv)

    rng = np.random.default_rng(args.seed)
    settings = [(f"small, {n} classes",
                 [make_task(rng, n, args.shots, n, args.novel, args.rows, args.dim)
                  for _ in range(args.tasks)]) for n in args.classes]
    if args.large_classes:
        shots = (args.large_shots, args.large_shots)
        settings.append((
            f"large, {args.large_classes} classes",
            [make_task(rng, args.large_classes, shots, args.large_query_classes,
                       args.novel, args.rows, args.dim)
             for _ in range(args.tasks)]))
    with threadpool_limits(limits=args.blas_threads, user_api="blas"):
        threads = [info["num_threads"] for info in threadpool_info()
                   if info["user_api"] == "blas"]
        print(f"EVM tail_size={args.tail_size}, {args.dim}-d, BLAS threads "
              f"{threads}")
        # Warm-up: imports, BLAS start-up.
        run_setting("warm-up", settings[0][1][:1], args.tail_size)
        total_old = total_new = 0.0
        for name, tasks in settings:
            old, new = run_setting(name, tasks, args.tail_size)
            total_old, total_new = total_old + old, total_new + new
        if args.chunk_elements and args.large_classes:
            print(f"{'chunk sizes':>24}: {settings[-1][0]}")
            chunk_sizes(settings[-1][1], args.tail_size, args.chunk_elements)
    print(f"{'all settings':>24}: row loop {total_old:.3f} s, vectorised "
          f"{total_new:.3f} s, ratio {total_old / total_new:.1f}x")


if __name__ == "__main__":
    main()
