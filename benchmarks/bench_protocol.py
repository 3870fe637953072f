"""Speed of the few-shot open-world evaluation protocol on cached features.

Runs ``--n-tasks`` small-context tasks (10 support classes with 1-10 shots,
5 novel classes, 10 queries per class) drawn from synthetic cached features
(``--n-classes`` Gaussian classes x ``--rows`` rows in ``--dim`` dimensions,
well separated) through :func:`sklearn_flowr.protocol.evaluate_online`, for
each ``--n-jobs`` value and each method, and prints the wall times, the cost
per task and ratios measured in the same run (n_jobs speed-up, method vs
FLOWR). Run with::

    python benchmarks/bench_protocol.py
    python benchmarks/bench_protocol.py --profile          # where time goes
    python benchmarks/bench_protocol.py --methods flowr \\
        'sklearn_flowr.baselines.EVMClassifier:{"tail_size": 10}'

``--methods`` takes ``flowr`` (the head with a given prior) and import paths
``package.module.Class`` with optional JSON keyword arguments after a colon;
each must follow the protocol's online interface (``partial_fit`` or
``adapt``, then ``open_world_step``). When ``sklearn_flowr.baselines`` has an
``EVMClassifier`` it joins the default methods. Methods after the first run on
the first ``--other-tasks`` tasks only (EVM costs far more per task), and the
first method is timed again on exactly those tasks for the ratio. Parallel
runs are timed once
the joblib workers are up (a warm-up run starts them); the cold start is
printed apart. Nothing here asserts a time: machines are shared and noisy.
"""

import argparse
import cProfile
import importlib
import io
import json
import pstats
import time

import numpy as np

from sklearn_flowr import CRPGaussianClassifier
from sklearn_flowr.protocol import SmallContextTasks, evaluate_online


def make_features(n_classes, rows, dim, seed):
    """Cached-feature stand-in: well-separated Gaussian classes."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(n_classes), rows)
    centres = rng.normal(scale=1.0, size=(n_classes, dim))
    X = centres[y] + rng.normal(scale=1.0, size=(y.shape[0], dim))
    return X, y


def make_method(spec):
    """``flowr`` or ``package.module.Class[:json-kwargs]`` -> (name, estimator)."""
    if spec == "flowr":
        # The prior matches the generator: class means ~ N(0, 1), noise 1.
        return "FLOWR", CRPGaussianClassifier(covariance="isotropic", prior_mean=0.0,
                                              prior_var=1.0, b=1.0, sigma=1.0)
    path, _, kwargs = spec.partition(":")
    module, _, name = path.rpartition(".")
    estimator_class = getattr(importlib.import_module(module), name)
    return name, estimator_class(**(json.loads(kwargs) if kwargs else {}))


def default_methods():
    methods = ["flowr"]
    try:
        from sklearn_flowr.baselines import EVMClassifier  # noqa: F401
    except ImportError:
        print("(sklearn_flowr.baselines.EVMClassifier not found: timing FLOWR "
              "only; add methods with --methods)")
    else:
        methods.append("sklearn_flowr.baselines.EVMClassifier")
    return methods


def timed(estimator, X, y, tasks, n_jobs):
    start = time.perf_counter()
    report = evaluate_online(estimator, X, y, tasks, n_jobs=n_jobs)
    return time.perf_counter() - start, report


def profile(estimator, X, y, tasks, top):
    profiler = cProfile.Profile()
    profiler.enable()
    evaluate_online(estimator, X, y, tasks, n_jobs=1)
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(top)
    print(out.getvalue())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n-tasks", type=int, default=1000)
    parser.add_argument("--n-classes", type=int, default=100)
    parser.add_argument("--rows", type=int, default=60)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--n-jobs", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--methods", nargs="+", default=None,
                        help="'flowr' or package.module.Class[:json-kwargs]")
    parser.add_argument("--other-tasks", type=int, default=100,
                        help="tasks for the methods after the first (the "
                             "ratio compares them on these same tasks)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="timed runs per setting (the median is shown)")
    parser.add_argument("--profile", action="store_true",
                        help="cProfile one n_jobs=1 run per method")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    X, y = make_features(args.n_classes, args.rows, args.dim, args.seed)
    tasks = SmallContextTasks(y, n_tasks=args.n_tasks, random_state=args.seed)
    start = time.perf_counter()
    drawn = list(tasks)
    sampling = time.perf_counter() - start
    del drawn
    print(f"{args.n_tasks} small-context tasks on {args.n_classes} classes x "
          f"{args.rows} rows, {args.dim}-d features")
    print(f"drawing the tasks alone: {sampling:.2f} s "
          f"({1e3 * sampling / args.n_tasks:.2f} ms per task)")

    methods = [make_method(spec) for spec in (args.methods or default_methods())]
    warm_up = SmallContextTasks(y, n_tasks=4, random_state=args.seed + 1)
    subset = tasks[: args.other_tasks]

    def run(name, estimator, task_list, label):
        times = {}
        for n_jobs in args.n_jobs:
            cold, _ = timed(estimator, X, y, warm_up, n_jobs)
            runs = [timed(estimator, X, y, task_list, n_jobs)
                    for _ in range(args.repeat)]
            seconds = float(np.median([t for t, _ in runs]))
            report = runs[0][1]
            times[n_jobs] = seconds
            print(f"{name:>14} {label:>11} n_jobs={n_jobs}: {seconds:7.2f} s  "
                  f"({1e3 * seconds / len(task_list):.2f} ms per task; warm-up "
                  f"incl. worker start {cold:.2f} s)  accuracy "
                  f"{report.accuracy:.3f} ± {report.accuracy_ci:.4f}, "
                  f"H {report.h_measure:.3f}, AUROC {report.auroc:.3f}")
        return times

    (reference, reference_estimator), others = methods[0], methods[1:]
    if args.profile:
        profile(reference_estimator, X, y, tasks, top=30)
    full = run(reference, reference_estimator, tasks, f"{len(tasks)} tasks")
    for n_jobs in args.n_jobs[1:]:
        print(f"  ratio in this run, {reference}: n_jobs={args.n_jobs[0]} / "
              f"n_jobs={n_jobs} = {full[args.n_jobs[0]] / full[n_jobs]:.2f}x")
    if not others:
        return
    label = f"{len(subset)} tasks"
    on_subset = run(reference, reference_estimator, subset, label)
    for name, estimator in others:
        if args.profile:
            profile(estimator, X, y, subset, top=30)
        times = run(name, estimator, subset, label)
        for n_jobs in args.n_jobs:
            print(f"  ratio in this run, {name} / {reference} on the same "
                  f"{len(subset)} tasks "
                  f"(n_jobs={n_jobs}) = {times[n_jobs] / on_subset[n_jobs]:.1f}x")

if __name__ == "__main__":
    main()
