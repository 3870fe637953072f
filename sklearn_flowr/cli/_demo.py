"""``flowr-demo``: a short open-world run of the CRP-Gaussian head on digits
(PCA-whitened pixels, no encoder) through ``open_world_step``.
"""

import argparse
import time

import numpy as np
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from .. import CRPGaussianClassifier
from ..protocol import LargeContextTasks, evaluate_online
from ._benchmark_parser import MAX_SEED, MAX_TASKS, integer, real


def run_demo(*, n_tasks=200, n_known=5, n_novel=5, queries_per_class=10, tpr=0.6,
             random_state=0):
    """Run the demo; the report of :func:`~sklearn_flowr.protocol.evaluate_online`."""
    rng = np.random.default_rng(random_state)
    X, y = load_digits(return_X_y=True)
    classes = rng.permutation(10)
    known = classes[:n_known]
    pool = np.isin(y, classes[: n_known + n_novel])
    train = np.zeros(y.shape[0], dtype=bool)
    for label in known:
        rows = np.flatnonzero(y == label)
        train[rng.choice(rows, size=rows.shape[0] // 2, replace=False)] = True
    embed = make_pipeline(StandardScaler(), PCA(n_components=20, whiten=True,
                                                random_state=random_state))
    head = CRPGaussianClassifier().fit(embed.fit_transform(X[train]), y[train])
    Z_pool, y_pool = embed.transform(X[pool & ~train]), y[pool & ~train]
    tasks = LargeContextTasks(y_pool, known_classes=known, n_novel_classes=n_novel,
                              n_query=queries_per_class, n_tasks=n_tasks,
                              random_state=random_state)
    return evaluate_online(head, Z_pool, y_pool, tasks, setting="large", tpr=tpr)


def main(argv=None):
    """Run ``flowr-demo``: print the open-world report of the head on digits.

    Parameters
    ----------
    argv : list of str or None, default=None
        Command-line arguments (``--n-tasks``, ``--tpr``, ``--random-state``);
        ``None`` reads ``sys.argv``.

    Returns
    -------
    int
        The exit status, 0 (an option out of range: ``SystemExit`` 2).

    Examples
    --------
    >>> from sklearn_flowr.cli import demo_main
    >>> demo_main(["--n-tasks", "3"])  # doctest: +ELLIPSIS
    FLOWR head on digits: 5 known + 5 novel classes, 3 tasks of 100 queries,
    threshold at novelty TPR 0.6
      accuracy               0... +/- 0...
      support_accuracy       0... +/- 0...
      incremental_accuracy   0... +/- 0...
      h_measure              ...
      auroc                  0...
      (... s)
    0
    """
    parser = argparse.ArgumentParser(prog="flowr-demo", description=(
        "a short open-world run of the CRP-Gaussian head on digits (PCA-whitened "
        "pixels, no encoder) through open_world_step"))
    parser.add_argument("--n-tasks", type=integer(1, cap=MAX_TASKS), default=200,
                        help=f"tasks to run, 1 to {MAX_TASKS}")
    parser.add_argument("--tpr", type=real(0.0, 1.0, closed=False), default=0.6,
                        help="novelty TPR that fixes the threshold, in (0, 1] "
                        "(default: 0.6, the paper's large-context value)")
    parser.add_argument("--random-state", type=integer(0, MAX_SEED), default=0,
                        help="seed, 0 to 2**32 - 1")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    report = run_demo(n_tasks=args.n_tasks, tpr=args.tpr,
                      random_state=args.random_state)
    print(f"FLOWR head on digits: 5 known + 5 novel classes, {args.n_tasks} tasks "
          f"of 100 queries, threshold at novelty TPR {args.tpr}")
    for key in ("accuracy", "support_accuracy", "incremental_accuracy"):
        print(f"  {key:<22} {report[key]:.3f} +/- {report[key + '_ci']:.3f}")
    print(f"  {'h_measure':<22} {report['h_measure']:.3f}")
    print(f"  {'auroc':<22} {report['auroc']:.3f}")
    print(f"  ({time.perf_counter() - start:.1f} s)")
    return 0
