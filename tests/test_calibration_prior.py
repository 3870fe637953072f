"""NoveltyCalibratedClassifier for batches: its stated share of new rows
(``novel_prior``), batch scoring (``stream=False``), its folds' design and raw
scores that keep their order beyond the output's clip."""

import numpy as np
import pytest
from sklearn.base import BaseEstimator, clone
from sklearn.metrics import make_scorer, roc_auc_score
from sklearn.model_selection import GridSearchCV
from sklearn.utils._param_validation import InvalidParameterError

from sklearn_flowr import CRPGaussianClassifier
from sklearn_flowr.calibration import NoveltyCalibratedClassifier
from sklearn_flowr.metrics import expected_calibration_error, h_measure
from sklearn_flowr.model_selection import OpenWorldSplit


@pytest.fixture(scope="module")
def batch():
    """25 known classes (20 fitting rows each), a batch of 10 other rows of each
    and 10 rows of each of 15 new classes: 150 of 400 rows are new."""
    rng = np.random.default_rng(1)
    means = rng.normal(scale=2.0, size=(40, 6))
    y_fit = np.repeat(np.arange(25), 20)
    X_fit = means[y_fit] + rng.standard_t(4, (500, 6))
    y_new = np.repeat(np.arange(40), 10)
    X_new = means[y_new] + rng.standard_t(4, (400, 6))
    return X_fit, y_fit, X_new, y_new >= 25


def test_novel_prior_calibrates_a_batch_with_that_share_of_new_rows(batch):
    X, y, X_new, is_new = batch
    share = is_new.mean()
    own = NoveltyCalibratedClassifier(stream=False, random_state=0).fit(X, y)
    stated = NoveltyCalibratedClassifier(stream=False, novel_prior=share,
                                         random_state=0).fit(X, y)
    p_own = own.predict_novelty_proba(X_new)
    p_stated = stated.predict_novelty_proba(X_new)
    # The folds' own share: every row of a third of the classes is new, and
    # the known queries are weighted to stand for two thirds of the classes.
    rows = own.calibration_rows_
    own_share = rows.weight[rows.is_first_sighting].sum() / rows.weight.sum()
    assert own_share == pytest.approx(2 / 3, abs=0.02)
    assert abs(p_stated.mean() - share) < 0.08, p_stated.mean()
    assert p_own.mean() > share + 0.15, p_own.mean()
    assert (expected_calibration_error(is_new, p_stated)
            < expected_calibration_error(is_new, p_own) - 0.08)
    # Weighting moves the map, not the order of the rows.
    auroc = roc_auc_score(is_new, p_own)
    assert roc_auc_score(is_new, p_stated) == pytest.approx(auroc)


def test_batch_scoring_flags_every_row_of_a_held_out_class(batch):
    X, y, _, _ = batch
    streamed = NoveltyCalibratedClassifier(random_state=0).fit(X, y)
    at_once = NoveltyCalibratedClassifier(stream=False, random_state=0).fit(X, y)
    # Every class is held out by one fold: streamed, its first row is the
    # first sighting; scored at once, all 20 rows are new.
    assert streamed.calibration_rows_.is_first_sighting.sum() == 25
    assert at_once.calibration_rows_.is_first_sighting.sum() == 500


class _CountingHead(CRPGaussianClassifier):
    fitted_counts: list = []

    def fit(self, X, y):
        type(self).fitted_counts.append(np.unique(y, return_counts=True))
        return super().fit(X, y)


def test_known_queries_come_from_one_other_fold_so_most_classes_keep_every_row(batch):
    X, y, _, _ = batch
    _CountingHead.fitted_counts.clear()
    clf = NoveltyCalibratedClassifier(_CountingHead(), cv=5, random_state=0).fit(X, y)
    folds, final = _CountingHead.fitted_counts[:-1], _CountingHead.fitted_counts[-1]
    assert len(folds) == 5 and np.all(final[1] == 20)
    reduced = []
    for labels, counts in folds:
        assert labels.shape[0] == 20  # four fifths of the 25 classes
        assert np.sum(counts == 20) == 15 and np.sum(counts == 15) == 5
        reduced += labels[counts == 15].tolist()
    # Each class gives known queries in exactly one fold, weighted to stand
    # for the queries of the fold's four times as many training rows.
    assert sorted(reduced) == list(range(25))
    weight = clf.calibration_rows_.weight
    assert np.sum(weight == 4.0) == 125 and np.sum(weight == 1.0) == 500


def test_raw_scores_keep_their_order_beyond_thirty_nats():
    rng = np.random.default_rng(2)
    y = np.repeat(np.arange(12), 8)
    X = rng.normal(scale=6.0, size=(12, 48))[y] + rng.normal(size=(96, 48))
    clf = NoveltyCalibratedClassifier(CRPGaussianClassifier(covariance="isotropic"),
                                      stream=False, random_state=0).fit(X, y)
    score = clf.calibration_rows_.score
    assert score.min() < -60 and score.max() > 60, (score.min(), score.max())
    assert roc_auc_score(clf.calibration_rows_.is_first_sighting, score) > 0.99


@pytest.mark.parametrize("params", [{"novel_prior": 0.0}, {"novel_prior": 1.0},
                                    {"novel_prior": "auto"}, {"stream": "yes"}])
def test_bad_settings_are_refused_before_any_state(batch, params):
    X, y, _, _ = batch
    clf = NoveltyCalibratedClassifier(**params)
    with pytest.raises(InvalidParameterError, match=next(iter(params))):
        clf.fit(X, y)
    assert not hasattr(clf, "estimator_")


def test_cv_none_means_three_folds(batch):
    X, y, _, _ = batch
    default = NoveltyCalibratedClassifier(random_state=0).fit(X, y)
    none = NoveltyCalibratedClassifier(cv=None, random_state=0).fit(X, y)
    np.testing.assert_array_equal(none.calibration_rows_.score,
                                  default.calibration_rows_.score)


def test_the_new_settings_in_scikit_learn_tools(batch):
    """clone keeps them; GridSearchCV over them with make_scorer(h_measure) and
    an open-world split runs with the wrapper's other defaults."""
    X, y, _, _ = batch
    clf = NoveltyCalibratedClassifier(novel_prior=0.3, stream=False)
    assert clone(clf).get_params()["novel_prior"] == 0.3
    assert clone(clf).get_params()["stream"] is False
    search = GridSearchCV(
        NoveltyCalibratedClassifier(random_state=0),
        {"novel_prior": [None, 0.4], "stream": [True, False]},
        scoring=make_scorer(h_measure, response_method="predict_proba"),
        cv=OpenWorldSplit(n_splits=2, n_novel_classes=5, random_state=0),
    ).fit(X, y)
    assert np.isfinite(search.cv_results_["mean_test_score"]).all()
    assert search.best_estimator_.calibration_rows_.weight.shape[0] > 0


class _NoiseScore(BaseEstimator):
    """A score-only estimator whose novelty score is noise of size ``scale``."""

    def __init__(self, scale=1.0):
        self.scale = scale

    def fit(self, X, y):
        self.classes_ = np.unique(y)
        return self

    partial_fit = open_world_step = fit  # (stream=False calls neither)

    def novelty_score(self, X):
        return self.scale * (5.0 + np.random.default_rng(len(X)).random(len(X)))

    def predict_known(self, X):
        return np.full(len(X), self.classes_[0])


@pytest.mark.parametrize("scale", [1.0, 1e4])
def test_uninformative_scores_calibrate_to_the_stated_share(scale):
    """Check that scores which do not tell new rows from known ones, in any
    units, map to about the stated share: the map's least slope (it must stay
    increasing) comes with the intercept fitted for it."""
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(200, 3)), np.repeat(np.arange(20), 10)
    wrapper = NoveltyCalibratedClassifier(_NoiseScore(scale), cv=5, novel_prior=0.3,
                                          stream=False, random_state=0).fit(X, y)
    assert wrapper.slope_ > 0
    p_novel = wrapper.predict_novelty_proba(rng.normal(size=(300, 3)))
    assert abs(p_novel.mean() - 0.3) < 0.05


@pytest.mark.parametrize("prior", [0.99, 1e-4])
def test_an_extreme_novel_prior_moves_the_sigmoid_map_by_bayes_rule(batch, prior):
    """Check that the stated share moves the sigmoid map's odds by the ratio of
    the prior's odds to the stream's, and leaves its slope as it was (a map
    fitted on rows reweighted to 0.99 lost most of its slope to Platt's
    smoothing)."""
    X, y, X_new, _ = batch
    own = NoveltyCalibratedClassifier(random_state=0).fit(X, y)
    stated = NoveltyCalibratedClassifier(novel_prior=prior, random_state=0).fit(X, y)
    assert stated.slope_ == pytest.approx(own.slope_, rel=1e-9)
    rows = own.calibration_rows_
    share = rows.weight[rows.is_first_sighting].sum() / rows.weight.sum()
    p_own = own.predict_novelty_proba(X_new)
    p_stated = stated.predict_novelty_proba(X_new)
    ratio = (p_stated / (1 - p_stated)) / (p_own / (1 - p_own))
    np.testing.assert_allclose(ratio, (prior / (1 - prior)) / (share / (1 - share)),
                               rtol=1e-6)
    # The reported weights are the prior's.
    weight = stated.calibration_rows_.weight
    assert (weight[stated.calibration_rows_.is_first_sighting].sum() / weight.sum()
            == pytest.approx(prior))
