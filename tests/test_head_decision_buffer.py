"""Tests of the calibration scores one-row steps hold: the sorted ones and,
unsorted in a buffer merged into them when full, the latest ones."""

import copy
import pickle
import tracemalloc

import numpy as np
import pytest
from sklearn.base import BaseEstimator, clone

from sklearn_flowr import CRPGaussianClassifier, saving
from sklearn_flowr.head import _decision


class Decider(_decision.ConformalDecision, BaseEstimator):
    """The decision alone, over scores given directly."""

    def __init__(self, novelty_alpha=0.1):
        self.novelty_alpha = novelty_alpha


@pytest.mark.parametrize("alpha", [0.1, 0.25, 0.5, None])
def test_one_row_steps_over_recent_scores_equal_the_block_path(rng, monkeypatch,
                                                                alpha):
    """Check that one-row decisions over the sorted and the recent scores
    equal stream_decisions' block path over one sorted array, ties, merges
    of the recent scores, deep copies and pickling included; that reads between
    steps count the recent scores without merging them; and that the scores
    end as the sorted array of every held-out one."""
    monkeypatch.setattr(_decision, "_RECENT", 3)
    n_rows = 1500
    scores = rng.normal(size=n_rows).round(1)
    scores[::2] = rng.integers(-2, 3, size=n_rows // 2)  # many ties
    held = rng.random(n_rows) < 0.8
    fallback = rng.random(n_rows) < 0.5
    start = np.sort(rng.integers(-2, 3, size=5).astype(float))
    if alpha is None:
        expected = fallback
    else:
        expected, _ = _decision.stream_decisions(start, scores, held, fallback, alpha)
    head, novel, buffers = Decider(alpha), [], [None]
    head._conformal = start
    probe = np.linspace(-3, 3, 13)
    for t in range(n_rows):
        out = head._decide_stream((None, None, fallback[t:t + 1], scores[t:t + 1]),
                                  ~held[t:t + 1], None)
        novel.append(out[2][0])
        if head._buffer is not buffers[-1]:  # a merge
            buffers.append(head._buffer)
        if t % 97 == 0:
            head = copy.deepcopy(head)
        elif t % 101 == 0:
            head = pickle.loads(pickle.dumps(head))
        if t % 89 == 0:
            reference = np.sort(np.r_[start, scores[:t + 1][held[:t + 1]]])
            recent = head._recent.copy()
            at_least, n = head._n_at_least(probe)
            np.testing.assert_array_equal(at_least,
                                          _decision.n_at_least(reference, probe))
            assert n == reference.shape[0]
            np.testing.assert_array_equal(head._recent, recent)  # not merged
            if t % 2:
                np.testing.assert_array_equal(head._conformal, reference)
                assert head._recent.shape[0] == 0
    np.testing.assert_array_equal(novel, expected)
    np.testing.assert_array_equal(head._conformal, np.sort(np.r_[start, scores[held]]))
    assert len(buffers) > 10


def test_one_row_stream_equals_a_batch_step_through_saving_and_copies(
        blobs, rng, monkeypatch, tmp_path):
    """Check that a stream of one-row open_world_steps decides and ends with
    the calibration scores of one batch step (and of one-row partial_fits)
    when its buffer merges, the head is saved and loaded, deep copied and
    pickled on the way; that predict and novelty_pvalues equal those of the
    merged scores; that merge pools them; that the buffer is not saved; and
    that clone starts afresh."""
    monkeypatch.setattr(_decision, "_RECENT", 2)
    X, y = blobs
    order = rng.permutation(y.shape[0])
    fit_rows, rows = order[:20], order[20:]
    head = CRPGaussianClassifier(covariance="isotropic", novelty_alpha=0.2, sigma=0.7,
                                 prior_mean=0.0, prior_var=16.0)
    head.fit(X[fit_rows], y[fit_rows])
    batch, by_fit = copy.deepcopy(head), copy.deepcopy(head)
    expected = batch.open_world_step(X[rows], y[rows]).y_pred
    queries = np.r_[X, rng.normal(scale=6.0, size=(20, 5))]
    y_pred = []
    for t, i in enumerate(rows):
        y_pred.append(head.open_world_step(X[i][None], y[i][None]).y_pred[0])
        by_fit.partial_fit(X[i][None], y[i][None])
        if t == 10:
            assert "_buffer" not in head.__getstate__()
            saving.save(head, tmp_path / "head.skops")
            head = saving.load(tmp_path / "head.skops")
        elif t in (20, 30):
            head = copy.deepcopy(head) if t == 20 else pickle.loads(pickle.dumps(head))
        if t % 7 == 3:
            assert head._recent.shape[0] > 0
            merged = copy.deepcopy(head)
            merged._conformal = merged._conformal  # the recent scores merged
            np.testing.assert_array_equal(head.novelty_pvalues(queries),
                                          merged.novelty_pvalues(queries))
            np.testing.assert_array_equal(head.predict(queries),
                                          merged.predict(queries))
    np.testing.assert_array_equal(y_pred, expected)
    assert (expected == -1).any() and (expected != -1).any()
    other = clone(head).fit(X[fit_rows] + 0.1, y[fit_rows])
    assert head._recent.shape[0] > 0
    np.testing.assert_array_equal(
        head.merge(other).conformal_scores_,
        np.sort(np.r_[head.conformal_scores_, other.conformal_scores_]))
    for other in (head, by_fit):
        np.testing.assert_allclose(other.conformal_scores_, batch.conformal_scores_,
                                   rtol=1e-10)
    fresh = clone(head).fit(X[fit_rows], y[fit_rows])
    np.testing.assert_array_equal(
        fresh.conformal_scores_,
        CRPGaussianClassifier(**head.get_params()).fit(X[fit_rows], y[fit_rows])
        .conformal_scores_)


def test_one_row_steps_do_not_copy_the_calibration_scores(blobs):
    """Check that one-row steps, partial_fits and predictions allocate far
    less than the calibration scores: a step's cost does not grow with
    their number (each step copied them all before)."""
    X, y = blobs
    n_scores = 200_000
    head = CRPGaussianClassifier().fit(X, y)
    head.set_conformal_scores(np.linspace(-30.0, 0.0, n_scores))
    tracemalloc.start()
    try:
        for t in range(30):
            head.open_world_step(X[t:t + 1], y[t:t + 1])
            head.partial_fit(X[t:t + 1], y[t:t + 1])
            head.predict(X[t:t + 1])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < n_scores * 8 / 10, peak
    assert head.conformal_scores_.shape == (n_scores + 60,)
