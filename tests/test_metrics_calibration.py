"""Tests of the calibration figures: expected calibration error, and the
calibration and argmax keys of open_world_report."""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.calibration import calibration_curve
from sklearn.metrics import brier_score_loss
from sklearn.utils._param_validation import InvalidParameterError

from sklearn_flowr.metrics import expected_calibration_error, open_world_report
from sklearn_flowr.metrics._calibration import _reliability_bins as reliability_bins


def _brute_force_ece(y, p, n_bins):
    """ECE with each bin written out: (k / n_bins, (k + 1) / n_bins], 0 in the
    first bin."""
    y = np.asarray(y, dtype=float)
    p = np.asarray(p, dtype=float)
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    total = 0.0
    for k in range(n_bins):
        if k == 0:
            in_bin = (p >= edges[0]) & (p <= edges[1])
        else:
            in_bin = (p > edges[k]) & (p <= edges[k + 1])
        if in_bin.any():
            total += in_bin.mean() * abs(p[in_bin].mean() - y[in_bin].mean())
    return total


# ------------------------------------------------------ expected_calibration_error
@pytest.mark.parametrize("n_bins", [1, 2, 10, 15])
def test_ece_equals_brute_force(rng, n_bins):
    """Check the ECE against a loop over the bins, with values on bin edges."""
    for _ in range(20):
        n = int(rng.integers(1, 300))
        p = rng.uniform(size=n)
        # Values exactly on the edges (and 0 and 1) test the bin boundaries.
        p[: n // 3] = rng.integers(0, n_bins + 1, size=n // 3) / n_bins
        y = rng.uniform(size=n) < p
        assert_allclose(expected_calibration_error(y, p, n_bins=n_bins),
                        _brute_force_ece(y, p, n_bins), atol=1e-12)


def test_ece_matches_calibration_curve_bins(rng):
    """Check the ECE is the count-weighted gap of calibration_curve's
    (strategy="uniform") bins: the reliability diagram shows the same bins."""
    p = rng.beta(0.5, 2.0, size=500)
    y = rng.uniform(size=500) < np.sqrt(p)
    prob_true, prob_pred = calibration_curve(y, p, n_bins=15, strategy="uniform")
    bins = reliability_bins(y, p, n_bins=15)
    assert_array_equal(bins.prob_true, prob_true)
    assert_array_equal(bins.prob_pred, prob_pred)
    assert bins.count.sum() == 500 and np.all(bins.count > 0)
    weighted = np.sum(bins.count / 500 * np.abs(prob_true - prob_pred))
    assert_allclose(expected_calibration_error(y, p), weighted, atol=1e-12)


def test_ece_of_calibrated_probabilities_is_near_zero(rng):
    """Check that outcomes drawn with the predicted probabilities give an ECE
    of sampling noise only."""
    p = rng.uniform(size=200_000)
    y = rng.uniform(size=p.shape[0]) < p
    assert expected_calibration_error(y, p) < 0.005


def test_ece_known_cases():
    """Check constant 1.0 on a 50/50 target gives 0.5, the base rate gives 0,
    and certain wrong predictions give 1."""
    y = np.array([0, 1] * 50)
    assert expected_calibration_error(y, np.ones(100)) == 0.5
    assert expected_calibration_error(y, np.full(100, 0.5)) == 0.0
    assert expected_calibration_error(y, 1.0 - y) == 1.0
    assert expected_calibration_error(y.astype(bool), y) == 0.0


def test_ece_with_one_bin_is_the_gap_of_the_means(rng):
    """Check n_bins=1 gives |mean prediction - base rate|."""
    p = rng.uniform(size=50)
    y = rng.integers(0, 2, size=50)
    assert_allclose(expected_calibration_error(y, p, n_bins=1),
                    abs(p.mean() - y.mean()))


@pytest.mark.parametrize(
    "y, p, match",
    [
        ([0, 1], [0.5, 1.5], "outside \\[0, 1\\]"),
        ([0, 1], [-0.1, 0.5], "outside \\[0, 1\\]"),
        ([0, 1], [np.nan, 0.5], "NaN"),
        ([0, 2], [0.5, 0.5], "boolean or in"),
        ([0, 1, 1], [0.5, 0.5], "inconsistent"),
        ([], [], "empty"),
    ],
)
def test_ece_rejects_bad_input(y, p, match):
    """Check a non-probability, a non-binary target or mismatched lengths fail
    with a clear error."""
    with pytest.raises(ValueError, match=match):
        expected_calibration_error(y, p)


def test_ece_rejects_bad_n_bins():
    """Check n_bins must be a positive integer."""
    with pytest.raises(InvalidParameterError, match="n_bins"):
        expected_calibration_error([0, 1], [0.2, 0.8], n_bins=0)


# ------------------------------------------------- open_world_report: calibration
def _stream(rng, n_tasks=5, n=40):
    """Pooled rows of a few tasks with a probability P(novel)."""
    y_true = rng.integers(0, 6, size=n_tasks * n)
    is_novel = rng.uniform(size=y_true.shape[0]) < 0.2
    p_novel = np.clip(0.2 + 0.6 * is_novel + rng.normal(scale=0.2,
                                                        size=is_novel.shape), 0, 1)
    y_known = np.where(rng.uniform(size=y_true.shape[0]) < 0.8, y_true,
                       (y_true + 1) % 6)
    task_ids = np.repeat(np.arange(n_tasks), n)
    return y_true, y_known, p_novel, is_novel, task_ids


def test_report_calibration_equals_sklearn_and_ece(rng):
    """Check ECE, Brier score and reliability bins of the report are those of
    P(novel) against the first sightings, pooled over the run."""
    y_true, y_known, p_novel, is_novel, task_ids = _stream(rng)
    report = open_world_report(y_true, y_known, p_novel, is_novel,
                               task_ids=task_ids)
    assert report.probability is True
    assert report.ece == expected_calibration_error(is_novel, p_novel, n_bins=15)
    assert report.brier == brier_score_loss(is_novel, p_novel)
    prob_true, prob_pred = calibration_curve(is_novel, p_novel, n_bins=15)
    assert_array_equal(report.reliability.prob_true, prob_true)
    assert_array_equal(report.reliability.prob_pred, prob_pred)
    assert report.reliability.n_bins == 15
    coarse = open_world_report(y_true, y_known, p_novel, is_novel, n_bins=5)
    assert coarse.ece == expected_calibration_error(is_novel, p_novel, n_bins=5)


def test_report_has_no_calibration_for_a_score(rng):
    """Check a novelty score outside [0, 1] gets no calibration or argmax
    figure (None), and the ranking figures are unchanged."""
    y_true, y_known, p_novel, is_novel, task_ids = _stream(rng)
    distance = 5.0 * p_novel + 1.0
    report = open_world_report(y_true, y_known, distance, is_novel,
                               task_ids=task_ids, y_pred=y_known, novel_label=-1)
    proba = open_world_report(y_true, y_known, p_novel, is_novel,
                              task_ids=task_ids)
    assert report.probability is False
    for key in ("ece", "brier", "reliability", "argmax_accuracy",
                "argmax_accuracy_ci", "argmax_novel_tpr", "task_argmax_accuracy"):
        assert report[key] is None, key
    assert report.h_measure == proba.h_measure
    assert report.accuracy == proba.accuracy


def test_report_probability_can_be_forced(rng):
    """Check probability=False drops calibration for a score inside [0, 1], and
    probability=True refuses values outside it."""
    y_true, y_known, p_novel, is_novel, _ = _stream(rng)
    report = open_world_report(y_true, y_known, p_novel, is_novel,
                               probability=False)
    assert report.ece is None and report.brier is None
    with pytest.raises(ValueError, match="outside \\[0, 1\\]"):
        open_world_report(y_true, y_known, p_novel + 1.0, is_novel,
                          probability=True)


# ---------------------------------------------- open_world_report: argmax decision
def test_report_argmax_accuracy_by_hand():
    """Check the threshold-free decision is scored like the thresholded one:
    novel decisions are right on first sightings, known ones on their class."""
    y_true = np.array([0, 1, 2, 2, 0, 1, 3, 3])
    y_known = np.array([0, 1, 0, 2, 0, 0, 0, 3])
    p_novel = np.array([0.1, 0.2, 0.9, 0.3, 0.6, 0.4, 0.2, 0.1])
    is_novel = np.array([False, False, True, False, False, False, True, False])
    y_pred = np.array([0, 1, -1, 2, -1, 0, 0, 3])
    task_ids = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    report = open_world_report(y_true, y_known, p_novel, is_novel,
                               task_ids=task_ids, y_pred=y_pred, novel_label=-1)
    # Task 0: all four right. Task 1: a false novel, a wrong class, a missed
    # novel (predicted class 0), a right class: 1 of 4.
    assert_allclose(report.task_argmax_accuracy, [1.0, 0.25])
    assert_allclose(report.argmax_accuracy, 0.625)
    assert report.argmax_novel_tpr == 0.5
    assert np.isfinite(report.argmax_accuracy_ci)


def test_report_argmax_with_string_labels_and_int_novel_label():
    """Check the argmax decision compares labels of mixed types without
    numpy refusing the comparison."""
    y_true = np.array(["a", "b", "c", "a"])
    y_pred = np.array(["a", "b", -1, "b"], dtype=object)
    report = open_world_report(y_true, y_true, [0.1, 0.2, 0.9, 0.3],
                               [False, False, True, False], tpr=1.0,
                               y_pred=y_pred, novel_label=-1)
    assert report.argmax_accuracy == 0.75
    assert report.argmax_novel_tpr == 1.0


def test_report_y_pred_needs_novel_label(rng):
    """Check y_pred without novel_label fails with a clear error."""
    y_true, y_known, p_novel, is_novel, _ = _stream(rng)
    with pytest.raises(ValueError, match="novel_label is required"):
        open_world_report(y_true, y_known, p_novel, is_novel, y_pred=y_known)
    with pytest.raises(ValueError, match="inconsistent"):
        open_world_report(y_true, y_known, p_novel, is_novel,
                          y_pred=y_known[:-1], novel_label=-1)
