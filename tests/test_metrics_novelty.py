"""Tests of the calibration and novelty-detection metrics: adaptive and
class-wise ECE, the Brier decomposition, FPR at a TPR, AUROC, OpenAUC, and the
error rates of p-value decisions and selections.

Each metric is checked against an independent computation (a loop over bins,
over pairs or over thresholds) and on small hand-computed cases.
"""

import numpy as np
import pytest
from numpy.testing import assert_allclose
from sklearn.calibration import calibration_curve
from sklearn.metrics import roc_auc_score
from sklearn.utils._param_validation import InvalidParameterError

from sklearn_flowr.head import OpenWorldProba
from sklearn_flowr.metrics import (
    brier_decomposition,
    classwise_calibration_error,
    expected_calibration_error,
    false_discovery_proportion,
    false_novel_rate,
    fpr_at_tpr,
    novelty_power,
    open_auc,
    selection_power,
)
from sklearn_flowr.metrics._calibration import _reliability_bins as reliability_bins


# ------------------------------------------------------------------ helpers
def _bins_by_loop(p, n_bins, strategy):
    """Boolean membership of each bin, written out edge by edge.

    uniform: (k / n_bins, (k + 1) / n_bins], 0 in the first bin; quantile: the
    edges are the k / n_bins percentiles of p, the first bin holding all
    values up to its upper edge, the others (e_k, e_{k+1}], the last one all
    values above its lower edge.
    """
    if strategy == "uniform":
        edges = [k / n_bins for k in range(n_bins + 1)]
    else:
        # The levels exactly as calibration_curve computes them: 100 * k /
        # n_bins can differ from linspace's by one ulp, which moves an edge
        # that falls on a data value just past it.
        levels = np.linspace(0.0, 1.0, n_bins + 1) * 100
        edges = [np.percentile(p, level) for level in levels]
    members = []
    for k in range(n_bins):
        lower = p > edges[k] if k > 0 else np.ones(p.shape, dtype=bool)
        upper = p <= edges[k + 1] if k < n_bins - 1 else np.ones(p.shape, dtype=bool)
        members.append(lower & upper)
    return members


def _ece_by_loop(y, p, n_bins, strategy="uniform"):
    y = np.asarray(y, dtype=float)
    p = np.asarray(p, dtype=float)
    total = 0.0
    for in_bin in _bins_by_loop(p, n_bins, strategy):
        if in_bin.any():
            total += in_bin.mean() * abs(p[in_bin].mean() - y[in_bin].mean())
    return total


def _random_binary(rng, n, n_bins, ties=True):
    """Outcomes and probabilities, some on bin edges and some tied."""
    p = rng.uniform(size=n)
    if ties:
        p[: n // 3] = rng.integers(0, n_bins + 1, size=n // 3) / n_bins
        p[n // 3: n // 2] = 0.37
    y = rng.uniform(size=n) < p
    return y, p


# ------------------------------------------------------- adaptive (quantile) ECE
@pytest.mark.parametrize("n_bins", [1, 2, 5, 15])
def test_quantile_ece_equals_loop_over_bins(rng, n_bins):
    """Check the equal-mass ECE against a loop over percentile bins, with
    tied predictions and values on the edges."""
    for trial in range(20):
        n = int(rng.integers(1, 300))
        y, p = _random_binary(rng, n, n_bins, ties=trial % 2 == 0)
        assert_allclose(
            expected_calibration_error(y, p, n_bins=n_bins, strategy="quantile"),
            _ece_by_loop(y, p, n_bins, "quantile"), atol=1e-12,
        )


@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
def test_ece_matches_calibration_curve_bins(rng, strategy):
    """Check that the ECE is the count-weighted gap of calibration_curve's own
    bins, for both strategies."""
    y, p = _random_binary(rng, 500, 10)
    prob_true, prob_pred = calibration_curve(y, p, n_bins=10, strategy=strategy)
    counts = [m.sum() for m in _bins_by_loop(p, 10, strategy) if m.any()]
    expected = np.sum(np.array(counts) * np.abs(prob_pred - prob_true)) / len(y)
    assert_allclose(expected_calibration_error(y, p, n_bins=10, strategy=strategy),
                    expected, atol=1e-12)
    bins = reliability_bins(y, p, n_bins=10, strategy=strategy)
    assert bins.count.tolist() == counts


def test_quantile_bins_have_equal_mass(rng):
    """Check that with distinct predictions each quantile bin holds n / n_bins
    rows, while equal-width bins of a skewed probability do not."""
    p = rng.beta(0.3, 5.0, size=200)  # mostly near 0
    y = rng.uniform(size=200) < p
    assert reliability_bins(y, p, n_bins=10, strategy="quantile").count.tolist() \
        == [20] * 10
    assert reliability_bins(y, p, n_bins=10).count.max() > 100


def test_quantile_ece_hand_case():
    """Check a hand-computed case where the two strategies differ: all four
    predictions fall in one equal-width bin (gap 0.5 - 0.25), two equal-mass
    bins have gaps 0.15 and 0.65."""
    y, p = [0, 0, 1, 1], [0.1, 0.2, 0.3, 0.4]
    assert_allclose(expected_calibration_error(y, p, n_bins=2), 0.25)
    assert_allclose(expected_calibration_error(y, p, n_bins=2, strategy="quantile"),
                    0.4)


def test_ece_default_strategy_is_uniform(rng):
    """Check that the default is today's equal-width ECE."""
    y, p = _random_binary(rng, 200, 15)
    assert_allclose(expected_calibration_error(y, p), _ece_by_loop(y, p, 15),
                    atol=1e-12)
    assert expected_calibration_error(y, p) == expected_calibration_error(
        y, p, strategy="uniform")
    assert not np.isclose(expected_calibration_error(y, p),
                          expected_calibration_error(y, p, strategy="quantile"))


def test_ece_refuses_unknown_strategy():
    """Check that a strategy other than uniform or quantile is refused."""
    with pytest.raises(InvalidParameterError, match="strategy"):
        expected_calibration_error([0, 1], [0.2, 0.8], strategy="kmeans")


# ------------------------------------------------------------ class-wise ECE
def _classwise_by_loop(y_true, proba, columns, n_bins, strategy="uniform"):
    """Mean over columns of the ECE of (y_true == label) vs the column; the
    label None stands for the novel column (every label not in columns)."""
    proba = np.asarray(proba, dtype=float)
    y_true = np.asarray(y_true)
    known = [label for label in columns if label is not None]
    errors = []
    for column, label in enumerate(columns):
        if label is None:
            target = np.array([value not in known for value in y_true.tolist()])
        else:
            target = y_true == label
        errors.append(_ece_by_loop(target, proba[:, column], n_bins, strategy))
    return float(np.mean(errors))


def _random_proba(rng, n, n_columns):
    logits = rng.normal(scale=2.0, size=(n, n_columns))
    proba = np.exp(logits)
    return proba / proba.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
def test_classwise_ece_closed_world_equals_loop(rng, strategy):
    """Check the class-wise ECE of a closed-world output (one label per
    column, in an unsorted order) against a loop over classes and bins."""
    classes = np.array([2, 0, 1])
    for _ in range(10):
        n = int(rng.integers(5, 200))
        proba = _random_proba(rng, n, 3)
        y = rng.choice(classes, size=n)
        assert_allclose(
            classwise_calibration_error(y, proba, classes, n_bins=7,
                                        strategy=strategy),
            _classwise_by_loop(y, proba, classes.tolist(), 7, strategy),
            atol=1e-12,
        )


def test_classwise_ece_open_world_equals_loop(rng):
    """Check an open-world output (known columns, then novel): the novel
    column's positives are the rows of labels outside the known classes, as
    a plain array with n_columns - 1 classes or an OpenWorldProba."""
    known = np.array(["b", "a"])
    for _ in range(10):
        n = int(rng.integers(5, 200))
        values = _random_proba(rng, n, 3)
        y = rng.choice(["a", "b", "c", "d"], size=n)
        expected = _classwise_by_loop(y, values, ["b", "a", None], 10)
        assert_allclose(classwise_calibration_error(y, values, known, n_bins=10),
                        expected, atol=1e-12)
        proba = OpenWorldProba(values, known)
        assert_allclose(classwise_calibration_error(y, proba, n_bins=10),
                        expected, atol=1e-12)
        log_proba = OpenWorldProba(np.log(values), known, is_log_proba=True)
        assert_allclose(classwise_calibration_error(y, log_proba, n_bins=10),
                        expected, atol=1e-12)


def test_classwise_ece_with_estimator_output():
    """Check the class-wise ECE of a real predict_proba output against the
    loop, with a held-out class scored on the novel column."""
    from sklearn_flowr import CRPGaussianClassifier

    X = np.array([[0.0], [0.3], [0.1], [5.0], [5.2], [4.7], [9.0], [9.4]])
    y = np.array([0, 0, 0, 1, 1, 1, 2, 2])
    head = CRPGaussianClassifier(covariance="isotropic", sigma=0.5)
    head.fit(X[y < 2], y[y < 2])
    proba = head.predict_proba(X)
    assert_allclose(classwise_calibration_error(y, proba, n_bins=5),
                    _classwise_by_loop(y, np.asarray(proba), [0, 1, None], 5),
                    atol=1e-12)


def test_classwise_ece_hand_case():
    """Check a hand-computed case with one bin: each column's gap between
    its mean probability and its frequency (0.1, 0.025 and 0.075)."""
    proba = [[0.8, 0.1, 0.1], [0.2, 0.6, 0.2], [0.1, 0.1, 0.8], [0.5, 0.3, 0.2]]
    y = ["a", "b", "c", "a"]
    assert_allclose(classwise_calibration_error(y, proba, ["a", "b"], n_bins=1),
                    0.2 / 3)


@pytest.mark.parametrize(
    "y, proba, classes, match",
    [
        ([0, 1], [[0.5, 0.5], [0.2, 0.8]], None, "classes is required"),
        ([0, 1], [[0.5, 0.5], [0.2, 0.8]], [0, 1, 2], "columns"),
        ([0, 2], [[0.5, 0.5], [0.2, 0.8]], [0, 1], "not in classes"),
        ([0, 1], [[0.5, 0.5], [0.2, 0.8]], [1, 1], "repeated"),
        ([0, 1], [[1.5, -0.5], [0.2, 0.8]], [0, 1], r"outside \[0, 1\]"),
        ([0, 1], [[np.nan, 0.5], [0.2, 0.8]], [0, 1], "NaN"),
        ([0, 1, 1], [[0.5, 0.5], [0.2, 0.8]], [0, 1], "inconsistent"),
        ([], np.empty((0, 2)), [0, 1], "0 sample"),
    ],
)
def test_classwise_ece_bad_input(y, proba, classes, match):
    """Check the errors on a plain array without classes, a class count that
    fits neither layout, an unknown label, repeated classes, values outside
    [0, 1], NaN, mismatched lengths and empty input."""
    with pytest.raises(ValueError, match=match):
        classwise_calibration_error(y, proba, classes)


def test_classwise_ece_refuses_classes_that_contradict_the_output():
    """Check that classes differing from an OpenWorldProba's known classes
    are refused."""
    proba = OpenWorldProba([[0.5, 0.3, 0.2]], [0, 1])
    with pytest.raises(ValueError, match="differ"):
        classwise_calibration_error([0], proba, [1, 0])


# --------------------------------------------------------- Brier decomposition
def _brier_by_loop(y, p, n_bins, strategy="uniform"):
    y = np.asarray(y, dtype=float)
    p = np.asarray(p, dtype=float)
    n = len(y)
    base = y.mean()
    rel = res = within = 0.0
    for in_bin in _bins_by_loop(p, n_bins, strategy):
        if not in_bin.any():
            continue
        p_bar, y_bar = p[in_bin].mean(), y[in_bin].mean()
        rel += in_bin.sum() / n * (p_bar - y_bar) ** 2
        res += in_bin.sum() / n * (y_bar - base) ** 2
        for p_i, y_i in zip(p[in_bin], y[in_bin], strict=True):
            within += ((p_i - p_bar) ** 2 - 2 * (p_i - p_bar) * (y_i - y_bar)) / n
    brier = sum((p_i - y_i) ** 2 for p_i, y_i in zip(p, y, strict=True)) / n
    return dict(brier=brier, reliability=rel, resolution=res,
                uncertainty=base * (1 - base), within_bin=within)


@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
@pytest.mark.parametrize("n_bins", [1, 3, 10])
def test_brier_decomposition_equals_loop(rng, n_bins, strategy):
    """Check every term against a loop over bins and rows, and the identity
    brier = reliability - resolution + uncertainty + within_bin."""
    for _ in range(10):
        n = int(rng.integers(2, 200))
        y, p = _random_binary(rng, n, n_bins)
        parts = brier_decomposition(y, p, n_bins=n_bins, strategy=strategy)
        expected = _brier_by_loop(y, p, n_bins, strategy)
        assert set(parts) == set(expected)
        for key, value in expected.items():
            assert_allclose(parts[key], value, atol=1e-12, err_msg=key)
        assert_allclose(
            parts.brier,
            parts.reliability - parts.resolution + parts.uncertainty
            + parts.within_bin,
            atol=1e-12,
        )


def test_brier_within_bin_term_matters(rng):
    """Check that with spread predictions the three-term form misses the
    Brier score by the (nonzero) within-bin term."""
    y, p = _random_binary(rng, 300, 5, ties=False)
    parts = brier_decomposition(y, p, n_bins=5)
    three_terms = parts.reliability - parts.resolution + parts.uncertainty
    assert abs(parts.within_bin) > 1e-4
    assert_allclose(parts.brier - three_terms, parts.within_bin, atol=1e-12)


def test_brier_murphy_identity_exact_with_constant_bins(rng):
    """Check Murphy's three-term identity with predictions constant within
    bins (a forecaster issuing a few fixed probabilities)."""
    levels = np.array([0.05, 0.25, 0.5, 0.75, 0.95])
    p = rng.choice(levels, size=400)
    y = rng.uniform(size=400) < p
    parts = brier_decomposition(y, p, n_bins=10)
    assert parts.within_bin == pytest.approx(0.0, abs=1e-15)
    assert_allclose(parts.brier,
                    parts.reliability - parts.resolution + parts.uncertainty,
                    atol=1e-14)


def test_brier_decomposition_hand_case():
    """Check a hand-computed case: bins {0.2, 0.2} with no positive and
    {0.8, 0.8} with two; REL = 0.04, RES = 0.25, UNC = 0.25, BS = 0.04."""
    parts = brier_decomposition([0, 0, 1, 1], [0.2, 0.2, 0.8, 0.8], n_bins=2)
    assert_allclose([parts.brier, parts.reliability, parts.resolution,
                     parts.uncertainty, parts.within_bin],
                    [0.04, 0.04, 0.25, 0.25, 0.0], atol=1e-15)


def test_brier_with_a_single_class():
    """Check a sample with no positive: uncertainty and resolution are 0 and
    the Brier score is the mean squared prediction."""
    parts = brier_decomposition([0, 0, 0], [0.1, 0.2, 0.3], n_bins=1)
    assert_allclose(parts.brier, (0.01 + 0.04 + 0.09) / 3)
    assert parts.uncertainty == 0.0 and parts.resolution == 0.0


@pytest.mark.parametrize("function", [expected_calibration_error,
                                      brier_decomposition])
@pytest.mark.parametrize(
    "y, p, match",
    [
        ([], [], "empty"),
        ([0, 1], [0.2, np.nan], "NaN"),
        ([0, 1], [0.2, 1.2], r"outside \[0, 1\]"),
        ([0, 1], [-0.1, 0.5], r"outside \[0, 1\]"),
        ([0, 1, 1], [0.2, 0.5], "inconsistent"),
        ([0, 2], [0.2, 0.5], "boolean or in"),
    ],
)
def test_binary_calibration_bad_input(function, y, p, match):
    """Check the errors of the ECE and the Brier decomposition on empty
    input, NaN, probabilities outside [0, 1], mismatched lengths and labels
    other than 0 and 1, for both strategies."""
    for strategy in ["uniform", "quantile"]:
        with pytest.raises(ValueError, match=match):
            function(y, p, strategy=strategy)


# ----------------------------------------------------------------- FPR at TPR
def _fpr_at_tpr_by_scan(positive, score, tpr):
    """Smallest FPR over every threshold (each distinct score, and one above
    all) whose TPR is at least tpr; positive iff score >= threshold."""
    best = np.inf
    for threshold in list(np.unique(score)) + [np.inf]:
        declared = score >= threshold
        if np.mean(declared[positive]) >= tpr:
            best = min(best, np.mean(declared[~positive]))
    return best


@pytest.mark.parametrize("tpr", [0.05, 0.15, 0.5, 0.6, 0.95, 1.0])
def test_fpr_at_tpr_equals_threshold_scan(rng, tpr):
    """Check FPR@TPR against a scan over all thresholds, with tied scores
    across and within the classes."""
    for trial in range(30):
        n = int(rng.integers(2, 120))
        positive = rng.uniform(size=n) < 0.4
        positive[0], positive[1] = True, False
        score = rng.normal(size=n) + positive
        if trial % 2:
            score = np.round(score, 1)  # many ties
        assert_allclose(fpr_at_tpr(positive, score, tpr=tpr),
                        _fpr_at_tpr_by_scan(positive, score, tpr))


def test_fpr_at_tpr_hand_cases():
    """Check hand-computed cases, labels as 0/1 or booleans, and the
    in-distribution-positive convention by flipping labels and scores."""
    y = [1, 1, 1, 1, 0, 0, 0, 0]
    score = [0.9, 0.8, 0.7, 0.3, 0.6, 0.4, 0.2, 0.1]
    assert fpr_at_tpr(y, score, tpr=0.75) == 0.0
    assert fpr_at_tpr(y, score, tpr=0.95) == 0.5  # tau 0.3: 0.6 and 0.4 above
    assert fpr_at_tpr(np.array(y, dtype=bool), score) == 0.5
    # Known rows positive (score -s): 95% of them needs tau = -0.6, above
    # which lie the novel scores -0.3 (of 0.3): 1 of 4.
    assert fpr_at_tpr(1 - np.array(y), -np.array(score)) == 0.25


def test_fpr_at_tpr_default_is_95():
    """Check that the default operating point is a TPR of 0.95: with 20
    positives it needs 19 of them, so the 19th positive score is tau."""
    positive = np.r_[np.ones(20, dtype=bool), np.zeros(10, dtype=bool)]
    score = np.r_[np.arange(20, 0, -1), np.arange(10) + 1.5]  # 20..1, 1.5..10.5
    # tau = 2 (19 positives), negatives at or above 2: 2.5, ..., 10.5 -> 9.
    assert fpr_at_tpr(positive, score) == 0.9


@pytest.mark.parametrize(
    "y, score, match",
    [
        ([], [], "empty"),
        ([0, 1], [0.2, np.nan], "NaN"),
        ([0, 1, 1], [0.2, 0.5], "inconsistent"),
        ([1, 1], [0.2, 0.5], "no negative"),
        ([0, 0], [0.2, 0.5], "no True"),
        ([0, 2], [0.2, 0.5], "boolean or in"),
    ],
)
def test_fpr_at_tpr_bad_input(y, score, match):
    """Check the errors on empty input, NaN scores, mismatched lengths, a
    single class and labels other than 0 and 1."""
    with pytest.raises(ValueError, match=match):
        fpr_at_tpr(y, score)


def test_fpr_at_tpr_refuses_tpr_out_of_range():
    """Check that a TPR outside (0, 1] is refused."""
    for tpr in [0.0, 1.5]:
        with pytest.raises(InvalidParameterError, match="tpr"):
            fpr_at_tpr([0, 1], [0.1, 0.9], tpr=tpr)


# ----------------------------------------------------------- AUROC, OpenAUC
def _auroc_by_pairs(is_novel, score):
    wins = 0.0
    pairs = 0
    for s_known in score[~is_novel]:
        for s_novel in score[is_novel]:
            pairs += 1
            wins += 1.0 if s_known < s_novel else 0.5 if s_known == s_novel else 0.0
    return wins / pairs


def _open_auc_by_pairs(y_true, y_known, score, is_novel):
    wins = 0.0
    pairs = 0
    for i in np.flatnonzero(~is_novel):
        for j in np.flatnonzero(is_novel):
            pairs += 1
            if y_known[i] != y_true[i]:
                continue  # a misclassified known row fails every pair
            wins += 1.0 if score[i] < score[j] else 0.5 if score[i] == score[j] else 0
    return wins / pairs


def _random_open_set(rng, n, ties):
    is_novel = rng.uniform(size=n) < 0.3
    is_novel[0], is_novel[1] = True, False
    y_true = np.where(is_novel, rng.integers(5, 8, size=n), rng.integers(0, 5, size=n))
    y_known = np.where(rng.uniform(size=n) < 0.7, y_true, rng.integers(0, 5, size=n))
    score = rng.normal(size=n) + is_novel
    if ties:
        score = np.round(score, 1)
    return y_true, y_known, score, is_novel


def test_auroc_equals_pairs(rng):
    """Check the documented AUROC, roc_auc_score(is_novel, score), against
    the brute-force share of (known, novel) pairs ranked right, ties 1/2."""
    for trial in range(20):
        _, _, score, is_novel = _random_open_set(rng, int(rng.integers(2, 80)),
                                                 ties=trial % 2 == 0)
        assert_allclose(roc_auc_score(is_novel, score),
                        _auroc_by_pairs(is_novel, score), atol=1e-12)


def test_open_auc_equals_pairs(rng):
    """Check OpenAUC against a brute-force loop over (known, novel) pairs,
    with misclassified known rows and tied scores."""
    for trial in range(30):
        y_true, y_known, score, is_novel = _random_open_set(
            rng, int(rng.integers(2, 80)), ties=trial % 2 == 0)
        assert_allclose(open_auc(y_true, y_known, score, is_novel),
                        _open_auc_by_pairs(y_true, y_known, score, is_novel),
                        atol=1e-12)


def test_open_auc_bounds(rng):
    """Check that OpenAUC is at most the AUROC and the closed-set accuracy,
    and equals the AUROC when every known row is classified correctly."""
    y_true, y_known, score, is_novel = _random_open_set(rng, 200, ties=True)
    value = open_auc(y_true, y_known, score, is_novel)
    accuracy = np.mean(y_known[~is_novel] == y_true[~is_novel])
    assert value <= roc_auc_score(is_novel, score) + 1e-12
    assert value <= accuracy + 1e-12
    assert value < roc_auc_score(is_novel, score)  # some rows misclassified
    assert_allclose(open_auc(y_true, y_true, score, is_novel),
                    roc_auc_score(is_novel, score), atol=1e-12)


def test_open_auc_hand_case():
    """Check a hand case: the correct known rows win 2 and 1.5 pairs (one
    tie), the misclassified one none: 3.5 / 6. String labels, and y_known
    ignored on novel rows."""
    y_true = np.array(["a", "b", "b", "x", "y"])
    y_known = np.array(["a", "a", "b", "a", "b"])
    score = [0.1, 0.2, 0.6, 0.6, 0.9]
    is_novel = [False, False, False, True, True]
    assert_allclose(open_auc(y_true, y_known, score, is_novel), 3.5 / 6)
    assert open_auc(y_true, np.array(["b", "a", "a", "a", "b"]), score,
                    is_novel) == 0.0


@pytest.mark.parametrize(
    "y_true, y_known, score, is_novel, match",
    [
        ([0, 1], [0, 1], [0.1, 0.9], [False, False], "both known and novel"),
        ([0, 1], [0, 1], [0.1, 0.9], [True, True], "both known and novel"),
        ([0, 1], [0, 1], [0.1, np.nan], [False, True], "NaN"),
        ([0, 1, 2], [0, 1], [0.1, 0.9], [False, True], "inconsistent"),
        ([0, 1], [0, 1], [0.1, 0.9], [0, 1], "boolean"),
        ([], [], [], [], "0 sample"),
    ],
)
def test_open_auc_bad_input(y_true, y_known, score, is_novel, match):
    """Check the errors on a single kind of row, NaN scores, mismatched
    lengths, a non-boolean is_novel and empty input."""
    with pytest.raises(ValueError, match=match):
        open_auc(y_true, y_known, score, np.asarray(is_novel))


# ---------------------------------------------- p-values and selection masks
def _rates_by_loop(is_novel, pvalues, alpha):
    known_hits = known = novel_hits = novel = 0
    for flag, p in zip(is_novel, pvalues, strict=True):
        if flag:
            novel += 1
            novel_hits += p <= alpha
        else:
            known += 1
            known_hits += p <= alpha
    return known_hits / known, novel_hits / novel


@pytest.mark.parametrize("alpha", [0.0, 0.01, 0.05, 0.1, 0.5, 1.0])
def test_false_novel_rate_and_power_equal_loop(rng, alpha):
    """Check the false-novel rate and the power against a loop over rows,
    with p-values exactly at alpha (which count as declared novel)."""
    for _ in range(20):
        n = int(rng.integers(2, 100))
        is_novel = rng.uniform(size=n) < 0.3
        is_novel[0], is_novel[1] = True, False
        pvalues = np.where(is_novel, rng.beta(0.3, 3.0, size=n), rng.uniform(size=n))
        pvalues[rng.uniform(size=n) < 0.2] = alpha
        expected_fnr, expected_power = _rates_by_loop(is_novel, pvalues, alpha)
        assert_allclose(false_novel_rate(is_novel, pvalues, alpha), expected_fnr)
        assert_allclose(novelty_power(is_novel, pvalues, alpha), expected_power)


def test_false_novel_rate_hand_case():
    """Check hand cases: 0.04 and 0.05 of four known rows are at most 0.05,
    only 0.01 of two novel rows."""
    is_novel = [False, False, False, False, True, True]
    pvalues = [0.8, 0.04, 0.3, 0.05, 0.01, 0.2]
    assert false_novel_rate(is_novel, pvalues, 0.05) == 0.5
    assert novelty_power(is_novel, pvalues, 0.05) == 0.5
    assert false_novel_rate(is_novel, pvalues, 0.049) == 0.25
    assert novelty_power(is_novel, pvalues, 0.2) == 1.0


def test_false_novel_rate_of_uniform_pvalues_is_alpha(rng):
    """Check that known rows with uniform p-values (valid ones) have a
    false-novel rate close to alpha."""
    is_novel = np.zeros(20000, dtype=bool)
    is_novel[0] = True
    pvalues = rng.uniform(size=20000)
    for alpha in [0.01, 0.05, 0.1]:
        assert abs(false_novel_rate(is_novel, pvalues, alpha) - alpha) < 0.01


@pytest.mark.parametrize("function", [false_novel_rate, novelty_power])
@pytest.mark.parametrize(
    "is_novel, pvalues, match",
    [
        ([], [], "0 sample"),
        ([False, True], [0.2, np.nan], "NaN"),
        ([False, True], [0.2, 1.2], r"outside \[0, 1\]"),
        ([False, True], [-0.1, 0.5], r"outside \[0, 1\]"),
        ([False, True, True], [0.2, 0.5], "inconsistent"),
        ([0, 1], [0.2, 0.5], "boolean"),
    ],
)
def test_pvalue_rates_bad_input(function, is_novel, pvalues, match):
    """Check the errors on empty input, NaN, p-values outside [0, 1],
    mismatched lengths and a non-boolean is_novel."""
    with pytest.raises(ValueError, match=match):
        function(np.asarray(is_novel), pvalues, 0.05)


def test_pvalue_rates_need_their_rows():
    """Check that the false-novel rate needs known rows and the power novel
    rows, and that alpha outside [0, 1] is refused."""
    with pytest.raises(ValueError, match="no known row"):
        false_novel_rate([True, True], [0.1, 0.2], 0.05)
    with pytest.raises(ValueError, match="no novel row"):
        novelty_power([False, False], [0.1, 0.2], 0.05)
    with pytest.raises(InvalidParameterError, match="alpha"):
        false_novel_rate([False, True], [0.1, 0.2], 1.5)


def _selection_by_loop(is_novel, selected):
    false = true = 0
    for flag, chosen in zip(is_novel, selected, strict=True):
        if chosen:
            true += bool(flag)
            false += not flag
    n_selected = false + true
    fdp = false / n_selected if n_selected else 0.0
    return fdp, true / sum(is_novel)


def test_selection_metrics_equal_loop(rng):
    """Check the false discovery proportion and the selection's power against
    a loop over rows, empty selections included."""
    for trial in range(40):
        n = int(rng.integers(1, 60))
        is_novel = rng.uniform(size=n) < 0.4
        is_novel[0] = True
        selected = rng.uniform(size=n) < (0.0 if trial % 5 == 0 else 0.5)
        expected_fdp, expected_power = _selection_by_loop(is_novel, selected)
        assert_allclose(false_discovery_proportion(is_novel, selected), expected_fdp)
        assert_allclose(selection_power(is_novel, selected), expected_power)


def test_selection_hand_cases():
    """Check hand cases: one of three selections is known (FDP 1/3), two of
    three novel rows found; nothing selected gives FDP 0 and power 0."""
    is_novel = [True, True, False, False, True]
    selected = [True, True, True, False, False]
    assert_allclose(false_discovery_proportion(is_novel, selected), 1 / 3)
    assert_allclose(selection_power(is_novel, selected), 2 / 3)
    assert false_discovery_proportion(is_novel, [False] * 5) == 0.0
    assert selection_power(is_novel, [False] * 5) == 0.0


@pytest.mark.parametrize("function", [false_discovery_proportion,
                                      selection_power])
@pytest.mark.parametrize(
    "is_novel, selected, match",
    [
        ([], [], "empty"),
        ([True, False, True], [True, False], "inconsistent"),
        ([True, False], [0, 1], "selected must be a boolean"),  # indices
        ([1, 0], [True, False], "is_novel must be a boolean"),
    ],
)
def test_selection_bad_input(function, is_novel, selected, match):
    """Check the errors on empty input, mismatched lengths, and index or
    integer arrays where boolean masks are expected."""
    with pytest.raises(ValueError, match=match):
        function(np.asarray(is_novel, dtype=None if is_novel else bool),
                 np.asarray(selected, dtype=None if selected else bool))


def test_selection_power_needs_novel_rows():
    """Check that the power of a selection needs a novel row."""
    with pytest.raises(ValueError, match="no novel row"):
        selection_power([False, False], [True, False])
