"""Tests of sklearn_flowr.metrics: h_measure, novelty threshold, open-world report."""

import numpy as np
import pytest
from hmeasure import h_score  # test-only oracle (PyPI port of the R package)
from numpy.testing import assert_allclose, assert_array_equal
from scipy import stats
from scipy.integrate import quad
from sklearn.base import clone
from sklearn.datasets import make_classification
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss, make_scorer, roc_auc_score, roc_curve
from sklearn.model_selection import StratifiedKFold, cross_val_score
from sklearn.utils._param_validation import InvalidParameterError

from sklearn_flowr import CRPGaussianClassifier
from sklearn_flowr.metrics import (
    h_measure,
    novelty_threshold_at_tpr,
    open_world_log_loss,
    open_world_report,
)

# --------------------------------------------------------------------- helpers


def _random_case(rng, kind):
    """A random binary problem whose ROC lies mostly above the diagonal."""
    n = int(rng.integers(4, 80))
    y = rng.integers(0, 2, size=n)
    y[:2] = [0, 1]  # both classes present
    shift = rng.uniform(0.0, 2.5)
    if kind == "continuous":
        scores = rng.normal(size=n) + shift * y
    elif kind == "integer":  # heavy ties: few distinct score values
        scores = rng.integers(0, int(rng.integers(1, 6)), size=n) + np.rint(shift * y)
    else:  # "mixed": ties within classes, some across
        scores = np.round(rng.normal(size=n) + shift * y, 1)
    if roc_auc_score(y, scores) < 0.5:
        scores = -scores
    return y, scores.astype(float)


def _oracle(y, scores, severity_ratio):
    """hmeasure.h_score needs 0/1 labels and scores inside [0, 1]."""
    span = scores.max() - scores.min()
    scores01 = (scores - scores.min()) / span if span > 0 else np.full_like(scores, 0.5)
    return h_score(np.asarray(y), scores01, severity_ratio=severity_ratio)


def _brute_force_h(y, scores, alpha, beta):
    """H by quadrature of the minimum loss over *all* ROC points (no hull)."""
    fpr, tpr, _ = roc_curve(y, scores, drop_intermediate=False)
    pi1 = np.mean(y)
    pi0 = 1.0 - pi1
    density = stats.beta(alpha, beta).pdf

    def minimum_loss(c):
        return np.min(c * pi0 * fpr + (1 - c) * pi1 * (1 - tpr)) * density(c)

    def trivial_loss(c):
        return min(c * pi0, (1 - c) * pi1) * density(c)

    options = dict(limit=2000, epsabs=1e-14, epsrel=1e-12)
    loss = quad(minimum_loss, 0.0, 1.0, **options)[0]
    loss_max = quad(trivial_loss, 0.0, 1.0, points=[pi1], **options)[0]
    return 1.0 - loss / loss_max


# ------------------------------------------------------------------- h_measure


@pytest.mark.parametrize("kind", ["continuous", "integer", "mixed"])
@pytest.mark.parametrize("severity_ratio", [None, 0.2, 1.0, 3.0])
def test_h_measure_matches_hmeasure_package(rng, kind, severity_ratio):
    """Check that h_measure equals hmeasure.h_score to 1e-10 on random cases."""
    ours_sr = "auto" if severity_ratio is None else severity_ratio
    for _ in range(80):
        y, scores = _random_case(rng, kind)
        expected = _oracle(y, scores, severity_ratio)
        assert h_measure(y, scores, severity_ratio=ours_sr) == pytest.approx(
            expected, abs=1e-10
        )


@pytest.mark.parametrize(
    "severity_ratio, expected",
    [
        ("auto", 0.18889596344769588),
        (0.7, 0.13502616807120948),
        (0.1, 0.001212529211507385),
        (0.5, 0.10750123502531805),
    ],
)
def test_h_measure_matches_published_hmeasure_values(severity_ratio, expected):
    """Check h_measure against the worked values in the hmeasure documentation.

    Source: the usage example of the PyPI ``hmeasure`` package 0.1.6
    (https://pypkg-hmeasure.readthedocs.io, docstring of ``h_score``), whose
    data come from ``numpy.random.default_rng(66)``.
    """
    rng = np.random.default_rng(66)
    y_true = rng.integers(low=0, high=2, size=10)
    y_score = rng.random(10)
    assert_array_equal(y_true, [1, 1, 0, 1, 1, 0, 1, 1, 1, 0])
    result = h_measure(y_true, y_score, severity_ratio=severity_ratio)
    assert result == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize(
    "cost_beta", [(2.0, 2.0), (1.0, 1.0), (3.0, 1.5), (2.0, 5.0), (0.7, 2.0)]
)
def test_h_measure_matches_brute_force_quadrature(rng, cost_beta):
    """Check that the exact integral equals quadrature over all ROC points."""
    for kind in ["continuous", "integer", "mixed"]:
        y, scores = _random_case(rng, kind)
        expected = _brute_force_h(y, scores, *cost_beta)
        assert h_measure(y, scores, cost_beta=cost_beta) == pytest.approx(
            expected, abs=1e-8
        )


def test_h_measure_default_is_beta_2_2(rng):
    """Check that the default cost distribution is Beta(2, 2), i.e. SR = 1."""
    y, scores = _random_case(rng, "continuous")
    default = h_measure(y, scores)
    assert default == h_measure(y, scores, cost_beta=(2.0, 2.0))
    assert default == pytest.approx(h_measure(y, scores, severity_ratio=1.0), abs=0)


def test_h_measure_severity_ratio_overrides_cost_beta(rng):
    """Check that severity_ratio=SR means Beta(2, 1 + 1/SR), whatever cost_beta."""
    y, scores = _random_case(rng, "continuous")
    from_ratio = h_measure(y, scores, cost_beta=(9.0, 9.0), severity_ratio=0.25)
    assert from_ratio == h_measure(y, scores, cost_beta=(2.0, 5.0))


def test_h_measure_auto_severity_ratio_is_class_ratio():
    """Check that severity_ratio="auto" uses SR = n_pos / n_neg."""
    y = np.array([0, 0, 0, 0, 0, 0, 1, 1])
    scores = np.array([0.1, 0.2, 0.6, 0.3, 0.9, 0.15, 0.7, 0.4])
    assert h_measure(y, scores, severity_ratio="auto") == h_measure(
        y, scores, severity_ratio=2 / 6
    )


def test_h_measure_perfect_ranking_is_one(rng):
    """Check that a ranking separating the classes scores exactly 1."""
    y = rng.integers(0, 2, size=50)
    y[:2] = [0, 1]
    assert h_measure(y, y + rng.uniform(0.0, 0.9, size=50)) == 1.0


def test_h_measure_constant_scores_is_zero():
    """Check that uninformative (all tied) scores score exactly 0."""
    assert h_measure([0, 1, 1, 0, 1], np.full(5, 0.3)) == 0.0


def test_h_measure_reversed_ranking_is_not_switched():
    """Check that scores are taken as given: a reversed ranking scores 0."""
    y = np.array([0, 0, 1, 1])
    assert h_measure(y, [0.9, 0.8, 0.2, 0.1]) == 0.0


def test_h_measure_invariant_to_monotone_transform(rng):
    """Check that any increasing transform of the scores leaves H unchanged."""
    y, scores = _random_case(rng, "continuous")
    assert h_measure(y, np.exp(3 * scores) - 7) == pytest.approx(
        h_measure(y, scores), abs=1e-14
    )


def test_h_measure_pos_label_selects_positive_class(rng):
    """Check that string labels with pos_label equal the 0/1 encoding."""
    y, scores = _random_case(rng, "continuous")
    labels = np.where(y == 1, "yes", "no")
    assert h_measure(labels, scores, pos_label="yes") == h_measure(y, scores)
    # The other class as positive is the same problem with negated scores.
    assert h_measure(labels, -scores, pos_label="no") == pytest.approx(
        h_measure(1 - y, -scores), abs=0
    )


def test_h_measure_minus_one_one_labels_default_to_one(rng):
    """Check that {-1, 1} labels take 1 as the positive class by default."""
    y, scores = _random_case(rng, "continuous")
    assert h_measure(2 * y - 1, scores) == h_measure(y, scores)


@pytest.mark.parametrize(
    "y_true, y_score, kwargs, match",
    [
        ([0, 1, 2, 1], [0.1, 0.2, 0.3, 0.4], {}, "only supports binary"),
        ([0.5, 1.5, 0.2, 0.1], [0.1, 0.2, 0.3, 0.4], {}, "only supports binary"),
        ([1, 1, 1], [0.1, 0.2, 0.3], {}, "only one class"),
        (["a", "b", "a"], [0.1, 0.2, 0.3], {}, "pos_label must be given"),
        ([0, 1, 0], [0.1, 0.2, 0.3], {"pos_label": 2}, "not a label of y_true"),
        ([0, 1, 0], [0.1, np.nan, 0.3], {}, "NaN"),
        ([0, 1, 0], [0.1, np.inf, 0.3], {}, "infinity"),
        ([0, 1, 0], [0.1, 0.2], {}, "inconsistent numbers of samples"),
        ([0, 1], [[0.1, 0.9], [0.8, 0.2]], {}, "one-dimensional"),
        ([0, 1], [0.1, 0.2], {"cost_beta": (2.0, -1.0)}, "cost_beta must be"),
        ([0, 1], [0.1, 0.2], {"cost_beta": (2.0,)}, "cost_beta must be"),
    ],
)
def test_h_measure_rejects_bad_input(y_true, y_score, kwargs, match):
    """Check that invalid labels, scores and cost shapes raise a clear error."""
    with pytest.raises(ValueError, match=match):
        h_measure(y_true, y_score, **kwargs)


@pytest.mark.parametrize("severity_ratio", [0.0, -1.0, "other"])
def test_h_measure_rejects_bad_severity_ratio(severity_ratio):
    """Check that a non-positive or unknown severity_ratio is refused."""
    with pytest.raises(InvalidParameterError, match="severity_ratio"):
        h_measure([0, 1], [0.1, 0.2], severity_ratio=severity_ratio)


def test_h_measure_scorer_on_predict_proba():
    """Check make_scorer(h_measure, response_method="predict_proba") in CV."""
    X, y = make_classification(n_samples=200, flip_y=0.2, random_state=0)
    clf = LogisticRegression()
    cv = StratifiedKFold(n_splits=4, shuffle=True, random_state=0)
    scorer = make_scorer(h_measure, response_method="predict_proba")
    scores = cross_val_score(clf, X, y, cv=cv, scoring=scorer)
    expected = [
        h_measure(
            y[test], clone(clf).fit(X[train], y[train]).predict_proba(X[test])[:, 1]
        )
        for train, test in cv.split(X, y)
    ]
    assert_allclose(scores, expected, rtol=0, atol=1e-14)
    assert np.all((scores > 0) & (scores < 1))


def test_h_measure_scorer_on_decision_function():
    """Check the decision_function-first scorer: same H as the probabilities."""
    X, y = make_classification(n_samples=200, flip_y=0.2, random_state=0)
    cv = StratifiedKFold(n_splits=4, shuffle=True, random_state=0)
    decision = make_scorer(
        h_measure, response_method=("decision_function", "predict_proba")
    )
    proba = make_scorer(h_measure, response_method="predict_proba")
    # The logistic link is monotone, so the two responses rank rows alike.
    assert_allclose(
        cross_val_score(LogisticRegression(), X, y, cv=cv, scoring=decision),
        cross_val_score(LogisticRegression(), X, y, cv=cv, scoring=proba),
        rtol=0,
        atol=1e-12,
    )


def _open_world_head(blobs, known=(0, 1, 2)):
    """The head fitted on some classes of the blobs, with all the rows."""
    X, y = blobs
    seen = np.isin(y, known)
    return CRPGaussianClassifier().fit(X[seen], y[seen]), X, y


def test_h_measure_of_open_world_proba_scores_novel_column(blobs):
    """Check that predict_proba's output is scored as P(novel) vs unseen label."""
    head, X, y = _open_world_head(blobs)
    proba = head.predict_proba(X)
    expected = h_measure((y == 3).astype(int), np.asarray(proba)[:, -1])
    assert h_measure(y, proba) == expected
    assert h_measure(y, proba, severity_ratio="auto") == h_measure(
        (y == 3).astype(int), np.asarray(proba)[:, -1], severity_ratio="auto"
    )


def test_h_measure_of_open_world_log_proba_matches_proba(blobs):
    """Check that predict_log_proba's output gives predict_proba's H-measure."""
    head, X, y = _open_world_head(blobs)
    assert h_measure(y, head.predict_log_proba(X)) == pytest.approx(
        h_measure(y, head.predict_proba(X)), abs=1e-12
    )


def test_h_measure_open_world_fold_without_novel_rows_is_refused(blobs):
    """Check the clear error when no test row is of a class left out of fit."""
    head, X, y = _open_world_head(blobs)
    known = y < 3
    with pytest.raises(ValueError, match="no row of a class the estimator did not"):
        h_measure(y[known], head.predict_proba(X[known]))
    with pytest.raises(ValueError, match="no row of a class the estimator trained"):
        h_measure(y[~known], head.predict_proba(X[~known]))


def test_h_measure_rejects_plain_2d_scores_with_open_world_hint(blobs):
    """Check that a plain 2-D array is refused with how to score novelty."""
    head, X, y = _open_world_head(blobs)
    with pytest.raises(ValueError, match="one-dimensional.*novelty_scorer"):
        h_measure(y, np.asarray(head.predict_proba(X)))


def test_h_measure_open_world_refuses_pos_label(blobs):
    """Check that pos_label is refused: the positive class is 'novel'."""
    head, X, y = _open_world_head(blobs)
    with pytest.raises(ValueError, match="pos_label=3 does not apply"):
        h_measure(y, head.predict_proba(X), pos_label=3)


def test_h_measure_of_a_column_slice_is_not_open_world(blobs):
    """Check that a sliced P(novel) column is an ordinary score, not an output."""
    head, X, y = _open_world_head(blobs)
    with pytest.raises(ValueError, match="only supports binary"):
        h_measure(y, head.predict_proba(X)[:, -1])


def test_default_make_scorer_of_an_open_world_head_names_the_fix(blobs):
    """Check that make_scorer(h_measure) with its default response_method
    (predict's labels) on an open-world head says which one to pass."""
    from sklearn.metrics import make_scorer

    head, X, y = _open_world_head(blobs)
    with pytest.raises(ValueError, match='response_method="predict_proba"'):
        make_scorer(h_measure)(head, X, y)
    proba_scorer = make_scorer(h_measure, response_method="predict_proba")
    assert proba_scorer(head, X, y) == h_measure(y, head.predict_proba(X))


# --------------------------------------------------------- open_world_log_loss


def _brute_force_log_loss(y_true, proba, known_classes):
    """-mean log p of each row's own column, or of the novel column."""
    known = list(known_classes)
    total = 0.0
    for label, row in zip(y_true, np.asarray(proba), strict=True):
        column = known.index(label) if label in known else len(known)
        total -= np.log(row[column])
    return total / len(y_true)


def test_open_world_log_loss_matches_brute_force(blobs):
    """Check the loss against a row-by-row loop, novel rows on P(novel)."""
    head, X, y = _open_world_head(blobs, known=(0, 2))
    proba = head.predict_proba(X)
    expected = _brute_force_log_loss(y, proba, head.classes_)
    assert open_world_log_loss(y, proba) == pytest.approx(expected, rel=1e-12)


def test_open_world_log_loss_matches_sklearn_log_loss_with_novel_label(blobs):
    """Check the loss equals log_loss once unseen labels become one novel label."""
    head, X, y = _open_world_head(blobs, known=(0, 1))
    proba = head.predict_proba(X)
    novel = 99  # sorts after the known classes, like the last column
    relabelled = np.where(np.isin(y, head.classes_), y, novel)
    expected = log_loss(relabelled, np.asarray(proba), labels=[0, 1, novel])
    assert open_world_log_loss(y, proba) == pytest.approx(expected, rel=1e-12)


def test_open_world_log_loss_follows_unsorted_classes(blobs):
    """Check that columns follow classes_ in arrival order, not sorted order."""
    X, y = blobs
    order = np.r_[np.flatnonzero(y == 2), np.flatnonzero(y == 0)]
    head = CRPGaussianClassifier(
        prior_mean=0.0, prior_var=16.0, b=1.0, sigma=0.5
    ).partial_fit(X[order], y[order])
    assert_array_equal(head.classes_, [2, 0])
    proba = head.predict_proba(X)
    expected = _brute_force_log_loss(y, proba, [2, 0])
    assert open_world_log_loss(y, proba) == pytest.approx(expected, rel=1e-12)


def test_open_world_log_loss_of_log_proba_matches_proba(blobs):
    """Check that predict_log_proba's output gives the same loss."""
    head, X, y = _open_world_head(blobs)
    assert open_world_log_loss(y, head.predict_log_proba(X)) == pytest.approx(
        open_world_log_loss(y, head.predict_proba(X)), rel=1e-10
    )


def test_open_world_log_loss_sample_weight(blobs, rng):
    """Check that sample weights weight the rows' negative log-likelihoods."""
    head, X, y = _open_world_head(blobs)
    proba = head.predict_proba(X)
    weight = rng.uniform(size=y.shape[0])
    per_row = [_brute_force_log_loss(y[[i]], proba[[i]], head.classes_)
               for i in range(y.shape[0])]
    assert open_world_log_loss(y, proba, sample_weight=weight) == pytest.approx(
        np.average(per_row, weights=weight), rel=1e-12
    )


def test_open_world_log_loss_scores_a_fold_without_novel_rows(blobs):
    """Check that a closed-world fold is scored like sklearn's log_loss."""
    head, X, y = _open_world_head(blobs, known=(0, 1, 2, 3))
    proba = head.predict_proba(X)
    expected = log_loss(y, np.asarray(proba), labels=[0, 1, 2, 3, 4])
    assert open_world_log_loss(y, proba) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("is_log_proba", [False, True])
def test_open_world_log_loss_clips_a_zero_probability(is_log_proba):
    """Check that a zero probability costs -log(eps), like sklearn's log_loss."""
    from sklearn_flowr.head import OpenWorldProba

    values = np.array([[1.0, 0.0], [0.0, 1.0]])
    if is_log_proba:
        with np.errstate(divide="ignore"):
            values = np.log(values)
    proba = OpenWorldProba(values, [0], is_log_proba=is_log_proba)
    # Both rows put probability 0 on their true column (class 0 is column 0,
    # the unseen class 5 the novel column).
    expected = log_loss([1, 0], [[1.0, 0.0], [0.0, 1.0]], labels=[0, 1])
    assert expected == pytest.approx(-np.log(np.finfo(float).eps))
    assert open_world_log_loss([5, 0], proba) == pytest.approx(expected, rel=1e-12)


def test_open_world_log_loss_rejects_plain_array(blobs):
    """Check that an array without known classes is refused, saying why."""
    head, X, y = _open_world_head(blobs)
    with pytest.raises(ValueError, match="carries the classes the classifier knew"):
        open_world_log_loss(y, np.asarray(head.predict_proba(X)))


# ------------------------------------------------------ novelty_threshold_at_tpr


def test_threshold_is_largest_reaching_tpr(rng):
    """Check that tau reaches the target TPR and any larger tau does not."""
    p_novel = rng.uniform(size=200)
    is_novel = rng.uniform(size=200) < 0.3
    for tpr in [0.05, 0.15, 0.6, 1.0]:
        tau = novelty_threshold_at_tpr(p_novel, is_novel, tpr)
        assert np.mean(p_novel[is_novel] >= tau) >= tpr
        assert np.mean(p_novel[is_novel] >= np.nextafter(tau, 2.0)) < tpr


def test_threshold_exact_fraction_is_not_rounded_up():
    """Check that TPR 0.15 of 20 novel rows needs exactly 3 rows, not 4."""
    p_novel = np.linspace(1.0, 0.05, 20)
    tau = novelty_threshold_at_tpr(p_novel, np.ones(20, dtype=bool), 0.15)
    assert tau == p_novel[2]


def test_threshold_ties_declare_all_tied_rows_novel():
    """Check that rows tied at tau are all declared novel (TPR may overshoot)."""
    p_novel = [0.5, 0.5, 0.5, 0.1]
    tau = novelty_threshold_at_tpr(p_novel, [True] * 4, 0.25)
    assert tau == 0.5


def test_threshold_ignores_order_and_known_rows(rng):
    """Check that tau depends only on the novel rows' values."""
    p_novel = rng.uniform(size=60)
    is_novel = np.arange(60) % 3 == 0
    tau = novelty_threshold_at_tpr(p_novel, is_novel, 0.4)
    order = rng.permutation(60)
    assert novelty_threshold_at_tpr(p_novel[order], is_novel[order], 0.4) == tau
    changed = np.where(is_novel, p_novel, rng.uniform(size=60))
    assert novelty_threshold_at_tpr(changed, is_novel, 0.4) == tau


@pytest.mark.parametrize(
    "p_novel, is_novel, match",
    [
        ([0.2, 0.3], [False, False], "no True row"),
        ([0.2, 0.3], [0, 1], "must be a boolean array"),
        ([0.2, np.nan], [False, True], "NaN"),
        ([0.2, 0.3, 0.1], [False, True], "inconsistent numbers of samples"),
    ],
)
def test_threshold_rejects_bad_input(p_novel, is_novel, match):
    """Check that invalid probabilities or novelty flags raise a clear error."""
    with pytest.raises(ValueError, match=match):
        novelty_threshold_at_tpr(p_novel, is_novel, 0.5)


@pytest.mark.parametrize("tpr", [0.0, 1.5, -0.1])
def test_threshold_rejects_tpr_outside_unit_interval(tpr):
    """Check that tpr must lie in (0, 1]."""
    with pytest.raises(InvalidParameterError, match="tpr"):
        novelty_threshold_at_tpr([0.2, 0.3], [False, True], tpr)


# ----------------------------------------------------------- open_world_report


def _two_task_run():
    """A hand-made run: task 0 meets class 2 as new, task 1 meets class 5."""
    y_true = np.array([0, 1, 2, 2, 0, 1, 3, 4, 5, 5, 5, 3])
    y_known = np.array([0, 0, 0, 2, 0, 1, 3, 3, 3, 5, 3, 4])
    p_novel = np.array([0.1, 0.2, 0.9, 0.3, 0.6, 0.2, 0.1, 0.1, 0.7, 0.2, 0.8, 0.3])
    is_novel = np.array([0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0], dtype=bool)
    task_ids = np.repeat([0, 1], 6)
    return y_true, y_known, p_novel, is_novel, task_ids


def test_report_applies_decision_rule():
    """Check tau, the novel/known decision and the per-task accuracies."""
    y_true, y_known, p_novel, is_novel, task_ids = _two_task_run()
    report = open_world_report(
        y_true, y_known, p_novel, is_novel, tpr=0.5, task_ids=task_ids
    )
    # TPR 0.5 of two novel rows (0.9, 0.7) needs one: tau = 0.9.
    assert report.threshold == 0.9
    assert report.novel_tpr == 0.5
    # Task 0: rows 0, 2, 3, 5 right (row 1 wrong class, row 4 known as 0 right).
    # Task 1: rows 6, 9 right; 7, 11 wrong class; 8 missed novel; 10 is class 5
    # again (not novel) but y_known is 3.
    assert_allclose(report.task_accuracy, [5 / 6, 2 / 6])
    assert report.accuracy == pytest.approx(0.5 * (5 / 6 + 2 / 6))
    assert_allclose(report.task_support_accuracy, [3 / 4, 1 / 3])
    assert_allclose(report.task_incremental_accuracy, [1.0, 1 / 3])


def test_report_support_mask_overrides_default_rule():
    """Check that an explicit support_mask selects the support rows."""
    y_true, y_known, p_novel, is_novel, task_ids = _two_task_run()
    support_mask = np.isin(y_true, [0, 3])
    report = open_world_report(
        y_true,
        y_known,
        p_novel,
        is_novel,
        tpr=0.5,
        task_ids=task_ids,
        support_mask=support_mask,
    )
    assert_allclose(report.task_support_accuracy, [1.0, 1 / 2])
    # Incremental rows still follow the classes that were novel in each task.
    assert_allclose(report.task_incremental_accuracy, [1.0, 1 / 3])


def test_report_confidence_interval_is_t_based(rng):
    """Check that the *_ci half-width is t * sd / sqrt(n_tasks)."""
    n_tasks, per_task = 7, 20
    y_true = rng.integers(0, 5, size=n_tasks * per_task)
    y_known = np.where(rng.uniform(size=y_true.shape) < 0.7, y_true, 9)
    p_novel = rng.uniform(size=y_true.shape)
    is_novel = rng.uniform(size=y_true.shape) < 0.2
    task_ids = np.repeat(np.arange(n_tasks), per_task)
    report = open_world_report(
        y_true, y_known, p_novel, is_novel, task_ids=task_ids, confidence=0.9
    )
    acc = report.task_accuracy
    low, high = stats.t.interval(
        0.9, df=n_tasks - 1, loc=acc.mean(), scale=stats.sem(acc)
    )
    assert report.accuracy == pytest.approx(acc.mean())
    assert report.accuracy_ci == pytest.approx((high - low) / 2)


def test_report_single_task_has_nan_interval():
    """Check that without task_ids the run is one task and CIs are nan."""
    y_true, y_known, p_novel, is_novel, _ = _two_task_run()
    report = open_world_report(y_true, y_known, p_novel, is_novel, tpr=0.5)
    assert report.n_tasks == 1
    assert np.isnan(report.accuracy_ci)
    assert report.accuracy == pytest.approx(7 / 12)


def test_report_ranking_metrics_are_pooled():
    """Check that h_measure and auroc score p_novel against is_novel, pooled."""
    y_true, y_known, p_novel, is_novel, task_ids = _two_task_run()
    report = open_world_report(
        y_true, y_known, p_novel, is_novel, tpr=0.5, task_ids=task_ids
    )
    assert report.h_measure == h_measure(is_novel, p_novel)
    assert report.auroc == roc_auc_score(is_novel, p_novel)


def test_report_task_without_support_rows_is_left_out():
    """Check that a task with no support rows does not enter the support mean."""
    y_true = np.array([0, 0, 1, 1])
    y_known = np.array([0, 0, 1, 0])
    p_novel = np.array([0.9, 0.1, 0.1, 0.1])
    is_novel = np.array([True, False, False, False])
    report = open_world_report(
        y_true, y_known, p_novel, is_novel, tpr=1.0, task_ids=[0, 0, 1, 1]
    )
    assert np.isnan(report.task_support_accuracy[0])
    assert report.support_accuracy == 0.5


@pytest.mark.parametrize(
    "change, match",
    [
        ({"is_novel": [0, 1, 0]}, "must be a boolean array"),
        ({"p_novel": [0.1, 0.2]}, "inconsistent numbers of samples"),
        ({"p_novel": [0.1, np.inf, 0.3]}, "infinity"),
        ({"support_mask": [1, 0, 1]}, "must be a boolean array"),
        ({"is_novel": [True, True, True]}, "Every row is novel"),
        ({"task_ids": [0, 1]}, "inconsistent numbers of samples"),
    ],
)
def test_report_rejects_bad_input(change, match):
    """Check that inconsistent or invalid inputs raise a clear error."""
    kwargs = dict(
        y_true=[0, 1, 1],
        y_known=[0, 0, 1],
        p_novel=[0.1, 0.8, 0.3],
        is_novel=[False, True, False],
    )
    kwargs.update(change)
    with pytest.raises(ValueError, match=match):
        open_world_report(**kwargs)


def test_report_scores_an_online_run_of_the_head(rng):
    """Check the report on CRPGaussianClassifier.open_world_step over tasks."""
    centres = rng.normal(scale=5.0, size=(8, 4))
    fields = {"y_true": [], "y_known": [], "p_novel": [], "is_novel": []}
    task_ids, support = [], []
    for task in range(5):
        classes = rng.permutation(8)
        base, novel = classes[:4], classes[4:6]
        X_fit = np.repeat(centres[base], 5, axis=0) + rng.normal(size=(20, 4))
        head = CRPGaussianClassifier().fit(X_fit, np.repeat(base, 5))
        y_stream = rng.permutation(np.repeat(np.r_[base, novel], 4))
        X_stream = centres[y_stream] + rng.normal(size=(y_stream.size, 4))
        step = head.open_world_step(X_stream, y_stream)
        fields["y_true"].append(y_stream)
        for name in ["y_known", "p_novel", "is_novel"]:
            fields[name].append(np.asarray(step[name]))
        task_ids.append(np.full(y_stream.size, task))
        support.append(np.isin(y_stream, base))
    arrays = {name: np.concatenate(v) for name, v in fields.items()}
    report = open_world_report(
        **arrays,
        tpr=0.6,
        task_ids=np.concatenate(task_ids),
        support_mask=np.concatenate(support),
    )
    assert report.n_tasks == 5
    assert report.novel_tpr >= 0.6
    for key in ["accuracy", "support_accuracy", "incremental_accuracy", "auroc"]:
        assert 0.0 <= report[key] <= 1.0
        if key != "auroc":
            assert np.isfinite(report[f"{key}_ci"])
    # Well separated classes: the novelty probability ranks new classes first.
    assert report.auroc > 0.8


def test_open_world_report_accepts_unbounded_scores(rng):
    """Check that a distance-like novelty score gives the same report as its
    order-preserving squash into [0, 1] (only the ranking matters)."""
    from sklearn_flowr.metrics import open_world_report

    n = 120
    y_true = rng.integers(0, 4, size=n)
    y_known = np.where(rng.uniform(size=n) < 0.8, y_true, (y_true + 1) % 4)
    is_novel = rng.uniform(size=n) < 0.2
    distance = rng.gamma(2.0, size=n) + 3.0 * is_novel
    squashed = distance / (1.0 + distance)
    a = open_world_report(y_true, y_known, distance, is_novel, tpr=0.6)
    b = open_world_report(y_true, y_known, squashed, is_novel, tpr=0.6)
    for key in ("accuracy", "support_accuracy", "h_measure", "auroc", "novel_tpr"):
        assert a[key] == pytest.approx(b[key], abs=1e-12, nan_ok=True)


def test_novelty_scorers_take_a_calibrated_distance_baseline():
    """Check that novelty_scorer and neg_novelty_ece_scorer score
    NoveltyCalibratedClassifier around a baseline without predict_proba
    (NCM) from its calibrated P(novel), also in GridSearchCV."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import GridSearchCV

    from sklearn_flowr.baselines import NCMClassifier
    from sklearn_flowr.calibration import NoveltyCalibratedClassifier
    from sklearn_flowr.metrics import neg_novelty_ece_scorer, novelty_scorer
    from sklearn_flowr.model_selection import OpenWorldSplit

    X, y = load_digits(return_X_y=True)
    known = y < 7
    model = NoveltyCalibratedClassifier(NCMClassifier()).fit(X[known], y[known])
    assert not hasattr(model, "predict_proba")
    p_novel = model.predict_novelty_proba(X)
    assert novelty_scorer(model, X, y) == h_measure(~known, p_novel)
    assert -1.0 <= neg_novelty_ece_scorer(model, X, y) <= 0.0
    search = GridSearchCV(NoveltyCalibratedClassifier(NCMClassifier()),
                          {"novel_prior": [None, 0.4]}, error_score="raise",
                          scoring=neg_novelty_ece_scorer,
                          cv=OpenWorldSplit(n_splits=2, random_state=0))
    assert np.isfinite(search.fit(X[known], y[known]).cv_results_[
        "mean_test_score"]).all()
