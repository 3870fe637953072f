"""Speed and memory of the CRP-Gaussian head, as ratios measured in one run.

Run with ``python benchmarks/bench_head.py`` (``--quick``: fewer repeats and a
smaller memory probe, under two minutes on two cores; river is needed for the
river row: ``pip install -e ".[benchmark]"``). Machines are shared and noisy,
so every speed figure is a ratio of two timings taken back to back, each the
fastest of several interleaved rounds of this process's CPU time (time
slices other processes take count for neither), with BLAS on one thread for
both (``--blas-threads``); no absolute time is asserted anywhere.

Rows, each printed with its goal:

- one-row ``open_world_step`` over the bare matrix-vector product it cannot
  beat, at 10^4 classes (3x) and 10^2 classes (d=128; 20x: 20 us a step is
  fast enough for any stream);
- one-row ``predict_proba`` over the same floor, 10^4 classes;
- the full-covariance head's peak memory in ``fit`` over the size of its
  state, its pickle (10^4 classes, d=512; 2,000 with ``--quick``; measured
  in a fresh subprocess with ``tracemalloc``, which sees every NumPy
  allocation, on top of the training rows);
- the longest single one-row step of a stream of new classes, from 5,000
  (the buffers ``fit`` sized exactly) past 10,000 (d=128): the buffers grow
  twice, and no step may pause the stream;
- river's ``GaussianNB`` per row (``predict_proba_one`` + ``learn_one``) over
  the head's one-row ``open_world_step`` (15 classes, d=64);
- ``CRPGaussianClassifier()``'s one-row ``open_world_step`` (whitening
  included) at the frozen-feature shape (1,200 classes x 3 rows, d=1280,
  random rows) over the
  (1200, 1280) mat-vec floor (5x): a known and a new class with warm caches,
  and with caches flushed before each call (the floor's too), each the median of three
  rounds with their range, and the step's two products alone (the whitening
  map's and the scores', 25 MB between them: the part no overhead cut can
  reach); and the state's size (its pickle less the
  whitener's d x d matrix) over the class means' (2x), and held in memory
  (every array the fitted head holds, the whitener's d x d matrix excepted).
"""

import argparse
import copy
import itertools
import json
import pickle
import subprocess
import sys
import time

import numpy as np

from sklearn_flowr import CRPGaussianClassifier


def mean_time(fn, number):
    """CPU seconds per call: on one BLAS thread, the wall time of a quiet
    machine."""
    start = time.process_time()
    for _ in range(number):
        fn()
    return (time.process_time() - start) / number


def paired_times(ours, reference, *, repeat=9, number=1):
    """Time ``ours`` and ``reference`` alternately, ``repeat`` rounds.

    Interleaving exposes both to the same load on a shared machine. Each
    figure is the fastest round's mean per call (as ``timeit`` advises: the
    slower rounds measure the other processes), the ratio that of the two.
    """
    ours(), reference()  # warm caches and lazy initialisation
    pairs = [(mean_time(ours, number), mean_time(reference, number))
             for _ in range(repeat)]
    a, b = np.array(pairs).T
    return float(a.min()), float(b.min()), float(a.min() / b.min())


def fitted_head(rng, n_classes, d, per_class=2, **params):
    y = np.repeat(np.arange(n_classes), per_class)
    centres = rng.normal(scale=3.0, size=(n_classes, d))
    X = centres[y] + rng.normal(size=(y.shape[0], d))
    params = {"covariance": "isotropic", **params}  # the paper's head unless named
    return CRPGaussianClassifier(**params).fit(X, y), centres


def stream_of(rng, centres, n_rows):
    labels = rng.integers(0, centres.shape[0], size=n_rows)
    return centres[labels] + rng.normal(size=(n_rows, centres.shape[1])), labels


def matvec_floor(rng, n_classes, d, *, candidates=8):
    """The bare product a one-row prediction cannot avoid: (N, d) @ (d,).

    Its time depends on where its arrays land in memory (at N=100 one
    allocation takes 2.0 us, another 2.6 us, run after run), which made the
    ratios of single allocations swing by a quarter; the fastest of
    ``candidates`` allocations (all alive while they are compared) is the
    floor.
    """
    products = []
    for _ in range(candidates):
        matrix = np.ascontiguousarray(rng.normal(size=(n_classes, d)))
        vector = rng.normal(size=d)
        products.append(lambda matrix=matrix, vector=vector: matrix @ vector)
    number = max(1, 20_000 // n_classes)
    return min(products, key=lambda product: min(
        mean_time(product, number) for _ in range(3)))


def bench_single_step(rng, n_classes, d=128, *, repeat=15, number=50):
    clf, centres = fitted_head(rng, n_classes, d)
    rows, labels = stream_of(rng, centres, 4000)
    # The one-row slices are made before timing: the floor times its product
    # alone, so the step is timed alone too (slicing here cost ~0.35 us a row).
    batches = itertools.cycle([(rows[t : t + 1], labels[t : t + 1])
                               for t in range(4000)])

    def step():
        clf.open_world_step(*next(batches))

    return paired_times(step, matvec_floor(rng, n_classes, d), repeat=repeat,
                        number=number)


def bench_single_proba(rng, n_classes=10_000, d=128, *, repeat=15, number=50):
    clf, centres = fitted_head(rng, n_classes, d)
    row = stream_of(rng, centres, 1)[0]
    return paired_times(lambda: clf.predict_proba(row),
                        matvec_floor(rng, n_classes, d), repeat=repeat,
                        number=number)


def bench_growth(rng, n_classes=5_000, d=128, n_steps=5_500):
    """Longest and median one-row step while the buffers grow past 10^4.

    Every step of the stream is a new class. ``fit`` sizes the buffers to its
    5,000 classes exactly, so they grow on the first new class (to 10,000)
    and again when the stream passes 10,000 classes: the doubling at the
    issue's size. Each step's CPU time (user and system: page faults count,
    another process's time slice does not).
    """
    clf, _ = fitted_head(rng, n_classes, d)
    rows = rng.normal(scale=3.0, size=(n_steps, d))
    labels = np.arange(n_classes, n_classes + n_steps)
    times = np.empty(n_steps)
    for t in range(n_steps):
        start = time.process_time()
        clf.open_world_step(rows[t : t + 1], labels[t : t + 1])
        times[t] = time.process_time() - start
    at_doubling = times[n_classes]  # the step that adds the 10,001st class
    return float(times.max()), float(np.median(times)), float(at_doubling)


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


def bench_river(rng, d=64, n_classes=15, n_rows=500, *, repeat=5):
    """Per row: river's GaussianNB (predict_proba_one + learn_one) and the
    head's one-row ``open_world_step``, from the same warm start."""
    from river.naive_bayes import GaussianNB

    centres = rng.normal(scale=3.0, size=(n_classes, d))
    rows, labels = stream_of(rng, centres, n_rows)
    warm_y = np.repeat(np.arange(n_classes), 2)
    warm_X = centres[warm_y] + rng.normal(size=(warm_y.shape[0], d))
    # Python floats: river's own fast case.
    dict_rows = [dict(enumerate(r)) for r in rows.tolist()]
    dict_warm = [dict(enumerate(r)) for r in warm_X.tolist()]
    label_list = labels.tolist()

    def river_stream():
        model = GaussianNB()
        for x, label in zip(dict_warm, warm_y.tolist(), strict=True):
            model.learn_one(x, label)
        for x, label in zip(dict_rows, label_list, strict=True):
            model.predict_proba_one(x)
            model.learn_one(x, label)

    head = CRPGaussianClassifier(covariance="isotropic").fit(warm_X, warm_y)
    copies = [copy.deepcopy(head) for _ in range(repeat + 1)]

    def ours_rows():
        model = copies.pop()
        for t in range(n_rows):
            model.open_world_step(rows[t : t + 1], labels[t : t + 1])

    river, ours, ratio = paired_times(river_stream, ours_rows, repeat=repeat)
    return river / n_rows, ours / n_rows, ratio


def bench_predict_proba_batch(rng, n_classes=10_000, d=128, n_rows=1024):
    clf, _ = fitted_head(rng, n_classes, d)
    X = rng.normal(scale=3.0, size=(n_rows, d))
    weights = np.ascontiguousarray(rng.normal(size=(n_classes, d)))
    return paired_times(lambda: clf.predict_proba(X), lambda: X @ weights.T)


def held_bytes(obj, seen=None):
    """Bytes of every NumPy array ``obj`` holds, through attributes, dicts,
    lists and tuples (buffers at their capacity; each memory block once)."""
    seen = set() if seen is None else seen
    if isinstance(obj, np.ndarray):
        base = obj if obj.base is None else obj.base
        if id(base) in seen or not isinstance(base, np.ndarray):
            return 0
        seen.add(id(base))
        return base.nbytes
    if isinstance(obj, dict):
        items = obj.values()
    elif isinstance(obj, list | tuple):
        items = obj
    elif hasattr(obj, "__dict__"):
        items = vars(obj).values()
    else:
        return 0
    return sum(held_bytes(item, seen) for item in items)


def cold_time(fn, number, flush):
    """CPU seconds per call of ``fn``, ``flush()`` (untimed) before each."""
    total = 0.0
    for _ in range(number):
        flush()
        start = time.process_time()
        fn()
        total += time.process_time() - start
    return total / number


def bench_whitened_step(rng, n_classes=1200, d=1280, *, repeat=7, number=20,
                        rounds=3, dtype=np.float64):
    """Ratios of one-row steps of ``CRPGaussianClassifier()`` over the (N, d)
    mat-vec, ``rounds`` times each (the spread): a known class and a new one
    with warm caches and with caches flushed (the floor's too), and the step's two
    products alone; and its state's size over the class means' with the
    whitener's d x d matrix taken out, saved (its pickle) and held
    (:func:`held_bytes`). Every timed call starts each round from a copy of
    the fitted head, so a round's steps run at N = ``n_classes`` (the new
    classes' at N = ``n_classes`` to ``n_classes + repeat * number``). Rows
    are of ``dtype`` (a network's features are float32: the whitener keeps
    its map in it); the floor is float64's."""
    y = np.repeat(np.arange(n_classes), 3)
    X = (rng.normal(size=(n_classes, d))[y]
         + rng.normal(size=(y.shape[0], d))).astype(dtype)
    # (At 1200 classes "auto" whitens with the eigen solver; below ~850 it
    # takes the Gram solver, whose factored map doubles a step's time.)
    fitted = CRPGaussianClassifier().fit(X, y)
    whitener_bytes = fitted.whitener_.scalings_.nbytes  # d x d, X's precision
    saved = len(pickle.dumps(fitted)) - whitener_bytes
    held = held_bytes(fitted) - whitener_bytes
    model = fitted
    memory = saved / (8 * n_classes * d), held / (8 * n_classes * d)
    rows = (rng.normal(size=(64, d)) + X[:64]).astype(dtype)
    labels, new_labels = y[:64], itertools.count(n_classes)
    steps = itertools.cycle(range(64))
    floor = matvec_floor(rng, n_classes, d)

    def step():
        t = next(steps)
        model.open_world_step(rows[t : t + 1], labels[t : t + 1])

    def new_class_step():
        t = next(steps)
        model.open_world_step(rows[t : t + 1], np.array([next(new_labels)]))

    def products():  # what a step cannot skip: whiten the row, score it
        t = next(steps)
        model._state.joint_log_numerators(model.whitener_.transform(rows[t : t + 1]))

    scratch = np.ones(2**23)  # 64 MB: more than a shared L3

    def flush():
        scratch.sum()

    def cold(ours):
        pairs = [(cold_time(ours, number, flush), cold_time(floor, number, flush))
                 for _ in range(repeat)]
        ours, bare = np.array(pairs).T
        return float(ours.min() / bare.min())

    ratios = {"known class, warm": [], "new class, warm": [],
              "known class, cold": [], "new class, cold": [],
              "its two products alone, warm": []}
    for _ in range(rounds):
        for name, ours in (("known class, warm", step),
                           ("new class, warm", new_class_step),
                           ("its two products alone, warm", products),
                           ("known class, cold", step),
                           ("new class, cold", new_class_step)):
            model = copy.deepcopy(fitted)  # N = n_classes again
            ratios[name].append(cold(ours) if name.endswith("cold") else
                                paired_times(ours, floor, repeat=repeat,
                                             number=number)[2])
    return ratios, memory


# ------------------------------------------------------------------ memory
def _memory_probe(n_classes, d):
    """Run in a fresh process: peak traced memory of a full-covariance fit and
    of a batch ``open_world_step`` and ``predict_proba``, and the state's size.

    The training rows exist before tracing starts: the figure is what the
    head allocates on top of its input.
    """
    import resource
    import tracemalloc

    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(n_classes), 2)
    X = rng.normal(scale=3.0, size=(n_classes, d))[y] + rng.normal(size=(y.shape[0], d))
    queries = rng.normal(scale=3.0, size=(256, d))
    query_labels = rng.integers(0, n_classes, size=256)
    clf = CRPGaussianClassifier(covariance="full")
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.start()
    clf.fit(X, y)
    fit_peak = tracemalloc.get_traced_memory()[1]
    rss_fit = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    clf.open_world_step(queries, query_labels)
    step_peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    clf.predict_proba(queries)
    proba_peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    state_bytes = held_bytes(clf)  # every array the fitted head holds
    print(json.dumps({"fit_peak": fit_peak, "step_peak": step_peak,
                      "proba_peak": proba_peak, "state": state_bytes,
                      "rss_fit_rise": (rss_fit - rss_before) * 1024}))


def bench_memory(n_classes, d):
    out = subprocess.run(
        [sys.executable, __file__, "--memory-probe", str(n_classes), str(d)],
        check=True, capture_output=True, text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------ report
def goal_met(value, goal):
    """Whether ``value`` meets ``goal`` ("<= 3x", ">= 20x", "<= 50 ms"); None
    for a row without one ("(info)")."""
    if goal.startswith("("):
        return None
    bound = float(goal[2:].split()[0].rstrip("x"))
    return value <= bound if goal.startswith("<=") else value >= bound


def report(name, value, goal, fmt="{:.2f}x"):
    met = goal_met(value, goal)
    verdict = "" if met is None else ("   met" if met else "   MISSED")
    goal = goal if goal.startswith("(") else f"goal {goal}"
    print(f"{name:62s} {fmt.format(value):>10s}   {goal}{verdict}", flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="fewer repeats and a 2,000-class memory probe "
                        "(under ~2 minutes)")
    parser.add_argument("--skip-river", action="store_true")
    parser.add_argument("--blas-threads", type=int, default=1,
                        help="BLAS threads for every timing, ours and the floors "
                        "alike (default 1: a one-row product is memory-bound, and "
                        "threads that wait for busy cores make it erratic; 0 "
                        "leaves BLAS as it is)")
    parser.add_argument("--memory-probe", nargs=2, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.memory_probe:
        _memory_probe(*args.memory_probe)
        return
    if args.blas_threads:
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=args.blas_threads, user_api="blas"):
            run(args)
    else:
        run(args)


def run(args):
    rng = np.random.default_rng(0)
    repeat, number = (7, 30) if args.quick else (15, 50)

    ours, bare, ratio = bench_single_step(rng, 10_000, repeat=repeat, number=number)
    report(f"1-row open_world_step / mat-vec, N=10k, d=128 ({ours * 1e6:.0f} us)",
           ratio, "<= 3x")
    ours, bare, ratio = bench_single_step(rng, 100, repeat=repeat, number=number * 4)
    report(f"1-row open_world_step / mat-vec, N=100, d=128 ({ours * 1e6:.1f} us)",
           ratio, "<= 20x")
    ours, bare, ratio = bench_single_proba(rng, repeat=repeat, number=number)
    report(f"1-row predict_proba / mat-vec, N=10k, d=128 ({ours * 1e6:.0f} us)",
           ratio, "<= 5x")

    n_mem = 2_000 if args.quick else 10_000
    mem = bench_memory(n_mem, 512)
    state_mb = mem["state"] / 2**20
    report(f"full-covariance fit, N={n_mem}, d=512: peak / state "
           f"({mem['fit_peak'] / 2**20:.0f} / {state_mb:.0f} MB)",
           mem["fit_peak"] / mem["state"], "<= 2x")
    print(f"    (same head: 256-row open_world_step peak "
          f"{mem['step_peak'] / 2**20:.0f} MB, 256-row predict_proba "
          f"{mem['proba_peak'] / 2**20:.0f} MB; fit's rise of the process's "
          f"max RSS {mem['rss_fit_rise'] / 2**20:.0f} MB)")

    longest, median, at_doubling = bench_growth(rng)
    report(f"longest 1-row step, N=5k -> 10.5k new classes, d=128 (median "
           f"{median * 1e3:.2f} ms, at 10k {at_doubling * 1e3:.1f} ms)",
           longest * 1e3, "<= 50 ms", fmt="{:.1f} ms")

    if args.skip_river:
        print("river row skipped (--skip-river)")
    else:
        try:
            import river  # noqa: F401
        except ImportError:
            print("river row skipped: river is not installed "
                  '(pip install -e ".[benchmark]")')
        else:
            river_row, ours_row, ratio = bench_river(
                rng, repeat=3 if args.quick else 5)
            report(f"river GaussianNB per row / 1-row open_world_step, 15 classes,"
                   f" d=64 ({river_row * 1e6:.0f} / {ours_row * 1e6:.1f} us)",
                   ratio, ">= 20x")

    for dtype in (np.float32, np.float64):
        print(f"CRPGaussianClassifier() at N=1200, d=1280, {dtype.__name__} rows"
              + (" (a network's features)" if dtype is np.float32 else "")
              + ": 1-row step / float64 mat-vec (range over 3 rounds)")
        ratios, (saved, held) = bench_whitened_step(
            rng, repeat=3 if args.quick else 7, dtype=dtype)
        for name, values in ratios.items():
            report(f"  {name} (range {min(values):.1f}-{max(values):.1f})",
                   float(np.median(values)), "(info)" if "alone" in name else "<= 5x")
        report("  its state (pickle) less the d x d whitener / class means", saved,
               "<= 2x")
        report("  held in memory (every array), less the d x d whitener / class "
               "means", held, "<= 2x")

    if not args.quick:
        looped, batched, ratio = bench_task_batch(rng)
        # Two figures of earlier issues, without a goal here: the first
        # shrinks as one-row calls get cheaper.
        report(f"150-row task: 150 one-row calls / one batched call "
               f"({looped * 1e3:.1f} / {batched * 1e3:.2f} ms)", ratio, "(info)")
        ours, bare, ratio = bench_predict_proba_batch(rng)
        report(f"predict_proba 1024 rows / bare GEMM, N=10k, d=128 "
               f"({ours * 1e3:.1f} ms)", ratio, "(info)")


if __name__ == "__main__":
    main()
