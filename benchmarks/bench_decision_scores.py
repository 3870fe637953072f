"""Cost of one labelled ``open_world_step`` against the number of conformal
calibration scores the head holds (N=100 classes, d=128, BLAS at one thread).

Each step adds its held-out score to the calibration; the figure shows that a
step's cost does not grow with how many scores there are. Prints the fastest of
five rounds of 300 steps, in the process's CPU time::

    OMP_NUM_THREADS=1 python benchmarks/bench_decision_scores.py
"""

import itertools
import time

import numpy as np
from threadpoolctl import threadpool_limits

from sklearn_flowr import CRPGaussianClassifier

N_CLASSES, DIM, N_ROWS = 100, 128, 4000


def main():
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(N_CLASSES), 2)
    centres = rng.normal(scale=3.0, size=(N_CLASSES, DIM))
    X = centres[y] + rng.normal(size=(y.shape[0], DIM))
    labels = rng.integers(0, N_CLASSES, size=N_ROWS)
    rows = centres[labels] + rng.normal(size=(N_ROWS, DIM))
    batches = [(rows[t:t + 1], labels[t:t + 1]) for t in range(N_ROWS)]
    with threadpool_limits(1, "blas"):
        for n_scores in (10**3, 10**5, 10**6):
            clf = CRPGaussianClassifier(covariance="isotropic").fit(X, y)
            clf.set_conformal_scores(rng.normal(-5, 2, size=n_scores))
            stream = itertools.cycle(batches)
            for _ in range(200):  # warm up
                clf.open_world_step(*next(stream))
            rounds = []
            for _ in range(5):
                start = time.process_time()
                for _ in range(300):
                    clf.open_world_step(*next(stream))
                rounds.append((time.process_time() - start) / 300)
            per_step = min(rounds) * 1e6
            print(f"{n_scores:>9,} calibration scores: {per_step:6.1f} us a step")


if __name__ == "__main__":
    main()
