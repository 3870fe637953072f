"""Tests of open-world scoring in model selection: novelty_scorer,
neg_novelty_ece_scorer, and make_scorer over h_measure and open_world_log_loss."""

import numpy as np
import pytest
from numpy.testing import assert_allclose
from sklearn.base import clone
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import make_scorer
from sklearn.model_selection import GridSearchCV, StratifiedKFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklearn_flowr import CRPGaussianClassifier
from sklearn_flowr.calibration import NoveltyCalibratedClassifier
from sklearn_flowr.metrics import (
    expected_calibration_error,
    h_measure,
    neg_novelty_ece_scorer,
    novelty_scorer,
    open_world_log_loss,
)
from sklearn_flowr.model_selection import OpenWorldSplit


@pytest.fixture
def digits():
    """A 600-row slice of scikit-learn's bundled 8x8 digits (10 classes)."""
    X, y = load_digits(return_X_y=True)
    return X[:600], y[:600]


def _manual_cv_scores(estimator, X, y, cv):
    """novelty_scorer fold by fold, without any scikit-learn CV machinery."""
    return [
        novelty_scorer(clone(estimator).fit(X[train], y[train]), X[test], y[test])
        for train, test in cv.split(X, y)
    ]


def test_novelty_scorer_is_h_measure_of_novel_column(blobs):
    """Check the score is H of the last predict_proba column vs unknown labels."""
    X, y = blobs
    head = CRPGaussianClassifier().fit(X[y < 3], y[y < 3])
    expected = h_measure(y == 3, head.predict_proba(X)[:, -1])
    assert novelty_scorer(head, X, y) == expected
    # Well separated blobs: the novel class is recognised.
    assert expected > 0.8


def test_novelty_scorer_on_pipeline(blobs):
    """Check that a Pipeline ending in the head is scored through its classes_."""
    X, y = blobs
    pipe = make_pipeline(StandardScaler(), PCA(n_components=3), CRPGaussianClassifier())
    pipe.fit(X[y != 1], y[y != 1])
    expected = h_measure(y == 1, pipe.predict_proba(X)[:, -1])
    assert novelty_scorer(pipe, X, y) == expected


@pytest.mark.parametrize("fold_classes, kind", [((0, 1), "known"), ((2, 3), "novel")])
def test_novelty_scorer_needs_known_and_novel_rows(blobs, fold_classes, kind):
    """Check that a fold without novel rows (or without known rows) is refused."""
    X, y = blobs
    head = CRPGaussianClassifier().fit(X[y < 2], y[y < 2])
    rows = np.isin(y, fold_classes)
    with pytest.raises(ValueError, match=f"Cannot score this fold.*a {kind} label"):
        novelty_scorer(head, X[rows], y[rows])


def test_novelty_scorer_rejects_closed_world_probabilities(blobs):
    """Check that predict_proba without a novel column is refused."""
    X, y = blobs
    clf = LogisticRegression().fit(X[y < 3], y[y < 3])
    with pytest.raises(ValueError, match="expects 4 columns"):
        novelty_scorer(clf, X, y)


def test_novelty_scorer_needs_classes(blobs):
    """Check that an estimator without classes_ is refused."""
    X, y = blobs
    with pytest.raises(ValueError, match="has no classes_"):
        novelty_scorer(StandardScaler().fit(X), X, y)


def test_cross_val_score_with_open_world_split(digits):
    """Check cross_val_score(scoring=novelty_scorer) against a manual loop."""
    X, y = digits
    cv = OpenWorldSplit(n_splits=3, n_novel_classes=2, random_state=0)
    head = CRPGaussianClassifier(a=0.5, sigma=0.5)
    scores = cross_val_score(head, X, y, cv=cv, scoring=novelty_scorer)
    assert_allclose(scores, _manual_cv_scores(head, X, y, cv), rtol=0, atol=1e-12)


def test_grid_search_over_a_and_sigma(digits):
    """Check GridSearchCV over a and sigma with OpenWorldSplit and the scorer."""
    X, y = digits
    cv = OpenWorldSplit(n_splits=3, n_novel_classes=2, random_state=0)
    grid = {"a": [0.1, 0.5], "sigma": [0.3, 1.0]}
    search = GridSearchCV(
        CRPGaussianClassifier(),
        grid,
        cv=cv,
        scoring=novelty_scorer,
        error_score="raise",
    ).fit(X, y)
    results = search.cv_results_
    for params, mean in zip(results["params"], results["mean_test_score"], strict=True):
        manual = _manual_cv_scores(CRPGaussianClassifier(**params), X, y, cv)
        assert mean == pytest.approx(np.mean(manual), abs=1e-12)
    assert (
        search.best_params_ == results["params"][np.argmax(results["mean_test_score"])]
    )
    assert_allclose(search.best_estimator_.classes_, np.arange(10))


def test_grid_search_over_pipeline(digits):
    """Check a search over the head inside StandardScaler -> PCA -> head."""
    X, y = digits
    pipe = make_pipeline(
        StandardScaler(), PCA(n_components=10), CRPGaussianClassifier()
    )
    grid = {
        "crpgaussianclassifier__a": [0.1, 0.5],
        "crpgaussianclassifier__sigma": [0.3, 1.0],
    }
    cv = OpenWorldSplit(n_splits=3, n_novel_classes=2, random_state=0)
    search = GridSearchCV(
        pipe, grid, cv=cv, scoring=novelty_scorer, error_score="raise"
    ).fit(X, y)
    scores = search.cv_results_["mean_test_score"]
    assert scores.shape == (4,)
    assert np.all((scores >= 0) & (scores <= 1))
    best = search.best_params_
    manual = _manual_cv_scores(clone(pipe).set_params(**best), X, y, cv)
    assert search.best_score_ == pytest.approx(np.mean(manual), abs=1e-12)


# ------------------------------------------ make_scorer on the N + 1 columns

H_SCORER = make_scorer(h_measure, response_method="predict_proba")
GRID = {"a": [0.0, 0.5], "sigma": ["auto", 0.5]}


def _hand_h_measure(params, X, y, train, test):
    """H of one fold's P(novel) column vs "label not in the training fold"."""
    head = CRPGaussianClassifier(**params).fit(X[train], y[train])
    p_novel = np.asarray(head.predict_proba(X[test]))[:, -1]
    is_novel = ~np.isin(y[test], y[train])
    return h_measure(is_novel.astype(int), p_novel)


def test_grid_search_with_h_measure_scorer_equals_hand_computation(digits):
    """Check the users' GridSearchCV(make_scorer(h_measure)) fold by fold."""
    X, y = digits
    cv = OpenWorldSplit(n_splits=3, n_novel_classes=2, random_state=0)
    search = GridSearchCV(
        CRPGaussianClassifier(), GRID, scoring=H_SCORER, cv=cv, error_score="raise"
    ).fit(X, y)
    results = search.cv_results_
    for i, params in enumerate(results["params"]):
        for fold, (train, test) in enumerate(cv.split(X, y)):
            expected = _hand_h_measure(params, X, y, train, test)
            assert results[f"split{fold}_test_score"][i] == pytest.approx(
                expected, abs=1e-12
            )
    assert np.all(np.isfinite(results["mean_test_score"]))


def test_h_measure_scorer_equals_novelty_scorer(digits):
    """Check that make_scorer(h_measure) and novelty_scorer give the same scores."""
    X, y = digits
    cv = OpenWorldSplit(n_splits=3, n_novel_classes=2, random_state=0)
    head = CRPGaussianClassifier(a=0.5, sigma=0.5)
    assert_allclose(
        cross_val_score(head, X, y, cv=cv, scoring=H_SCORER),
        cross_val_score(head, X, y, cv=cv, scoring=novelty_scorer),
        rtol=0,
        atol=1e-12,
    )


def test_cross_val_score_with_h_measure_scorer_is_finite(digits):
    """Check cross_val_score with the h_measure scorer: finite, in [0, 1]."""
    X, y = digits
    cv = OpenWorldSplit(n_splits=4, random_state=1)
    scores = cross_val_score(CRPGaussianClassifier(), X, y, cv=cv, scoring=H_SCORER)
    assert np.all((scores >= 0) & (scores <= 1))


def test_h_measure_log_proba_scorer_equals_proba_scorer(digits):
    """Check that the scorer on predict_log_proba gives predict_proba's score."""
    X, y = digits
    cv = OpenWorldSplit(n_splits=3, n_novel_classes=2, random_state=0)
    log_scorer = make_scorer(h_measure, response_method=("predict_log_proba",))
    assert_allclose(
        cross_val_score(CRPGaussianClassifier(), X, y, cv=cv, scoring=log_scorer),
        cross_val_score(CRPGaussianClassifier(), X, y, cv=cv, scoring=H_SCORER),
        rtol=0,
        atol=1e-12,
    )


def test_h_measure_scorer_without_novel_rows_errs_clearly(digits):
    """Check that a closed-world splitter gets an error that names the fix."""
    X, y = digits
    with pytest.raises(
        ValueError, match="no row of a class the estimator did not train on.*Open"
    ):
        cross_val_score(
            CRPGaussianClassifier(), X, y, cv=StratifiedKFold(3),
            scoring=H_SCORER, error_score="raise",
        )


def test_open_world_log_loss_scorer_in_cross_val_score(digits):
    """Check the open-world neg log-loss scorer against a manual loop."""
    X, y = digits
    cv = OpenWorldSplit(n_splits=3, n_novel_classes=2, random_state=0)
    scorer = make_scorer(
        open_world_log_loss, greater_is_better=False, response_method="predict_proba"
    )
    head = CRPGaussianClassifier(a=0.5, sigma="auto")
    scores = cross_val_score(head, X, y, cv=cv, scoring=scorer, error_score="raise")
    manual = [
        -open_world_log_loss(
            y[test], clone(head).fit(X[train], y[train]).predict_proba(X[test])
        )
        for train, test in cv.split(X, y)
    ]
    assert_allclose(scores, manual, rtol=1e-12)
    assert np.all(np.isfinite(scores))


@pytest.mark.parametrize("scoring, match", [
    ("neg_log_loss", "different number of classes: 10 vs 9"),
    ("roc_auc_ovr", "Number of classes in y_true not equal to the number of col"),
])
def test_sklearn_scorers_cannot_score_novel_column(digits, scoring, match):
    """Check the documented failure of sklearn's own scorers (user guide,
    "Scoring in GridSearchCV") when two classes are held out."""
    X, y = digits
    cv = OpenWorldSplit(n_splits=2, n_novel_classes=2, random_state=0)
    with pytest.raises(ValueError, match=match):
        cross_val_score(CRPGaussianClassifier(), X, y, cv=cv, scoring=scoring,
                        error_score="raise")


# ------------------------------------------ neg_novelty_ece_scorer


@pytest.fixture(scope="module")
def open_batch():
    """40 classes of 30 heavy-tailed rows around random means in 6-d."""
    rng = np.random.default_rng(1)
    means = rng.normal(scale=2.0, size=(40, 6))
    y = np.repeat(np.arange(40), 30)
    return means[y] + rng.standard_t(4, (1200, 6)), y


def test_neg_novelty_ece_scorer_ranks_novel_prior_by_calibration(open_batch):
    """Check GridSearchCV over novel_prior prefers the prior that matches the
    test folds' share of new rows, where the H-measure ties (same order)."""
    X, y = open_batch
    # 15 held-out classes (450 rows) and a third of 25 others (250): 64% new.
    cv = OpenWorldSplit(n_splits=2, n_novel_classes=15, test_size=1 / 3,
                        random_state=0)
    wrapper = NoveltyCalibratedClassifier(CRPGaussianClassifier(), stream=False,
                                          random_state=0)
    # The bad setting first: a tie would make it best_params_.
    grid = {"novel_prior": [0.05, 0.64]}
    search = GridSearchCV(wrapper, grid, scoring=neg_novelty_ece_scorer, cv=cv,
                          error_score="raise").fit(X, y)
    scores = search.cv_results_["mean_test_score"]
    assert search.best_params_ == {"novel_prior": 0.64}
    assert scores[1] > scores[0] + 0.1 and np.all(scores <= 0), scores
    h_scores = GridSearchCV(wrapper, grid, scoring=novelty_scorer, cv=cv).fit(X, y)
    assert_allclose(h_scores.cv_results_["mean_test_score"][0],
                    h_scores.cv_results_["mean_test_score"][1], atol=1e-6)
    # Fold by fold, minus the ECE of the last predict_proba column.
    train, test = next(cv.split(X, y))
    fitted = clone(wrapper).set_params(novel_prior=0.64).fit(X[train], y[train])
    expected = -expected_calibration_error(
        ~np.isin(y[test], y[train]), np.asarray(fitted.predict_proba(X[test]))[:, -1])
    assert search.cv_results_["split0_test_score"][1] == pytest.approx(expected)


def test_neg_novelty_ece_scorer_refuses_an_unfitted_estimator(blobs):
    """Check that an unfitted classifier is refused with a message naming it."""
    X, y = blobs
    with pytest.raises(ValueError, match="NoveltyCalibratedClassifier has no "
                       "classes_; neg_novelty_ece_scorer needs a fitted"):
        neg_novelty_ece_scorer(NoveltyCalibratedClassifier(), X, y)


def test_neg_novelty_ece_scorer_needs_novel_rows(blobs):
    """Check that a fold whose labels are all known is refused."""
    X, y = blobs
    head = CRPGaussianClassifier().fit(X[y < 2], y[y < 2])
    with pytest.raises(ValueError, match="Cannot score this fold.*OpenWorldSplit"):
        neg_novelty_ece_scorer(head, X[y < 2], y[y < 2])
