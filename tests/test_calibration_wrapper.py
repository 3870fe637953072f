"""NoveltyCalibratedClassifier: the novelty map as a wrapper over public methods."""

import copy
import pickle

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.metrics import make_scorer
from sklearn.model_selection import GridSearchCV
from sklearn.utils._param_validation import InvalidParameterError

from sklearn_flowr import CRPGaussianClassifier
from sklearn_flowr._core import novel_log_odds
from sklearn_flowr._novelty_wrapper import clip_log_odds
from sklearn_flowr.baselines import EVMClassifier, NCMClassifier
from sklearn_flowr.calibration import NoveltyCalibratedClassifier
from sklearn_flowr.metrics import expected_calibration_error, h_measure
from sklearn_flowr.model_selection import OpenWorldSplit
from sklearn_flowr.protocol import SmallContextTasks, evaluate_online


@pytest.fixture(scope="module")
def heavy_tails():
    """40 classes with Student-t (3 dof) noise: the head's P(novel) is
    over-confident there. Classes 0-24 train, 25-39 are new."""
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(40), 30)
    X = rng.normal(scale=2.5, size=(40, 6))[y] + rng.standard_t(3, (1200, 6))
    train = y < 25
    stream = rng.permutation(np.flatnonzero(~train))
    return X[train], y[train], X[stream], y[stream]


def test_defaults_calibrate_p_novel_on_new_classes(heavy_tails):
    X, y, X_new, y_new = heavy_tails
    clf = NoveltyCalibratedClassifier(CRPGaussianClassifier(covariance="isotropic"),
                                      random_state=0).fit(X, y)
    assert isinstance(clf.estimator_, CRPGaussianClassifier)
    raw = copy.deepcopy(clf.estimator_).open_world_step(X_new, y_new)
    out = copy.deepcopy(clf).open_world_step(X_new, y_new)
    np.testing.assert_array_equal(out.is_novel, raw.is_novel)
    before = expected_calibration_error(raw.is_novel, raw.p_novel)
    after = expected_calibration_error(out.is_novel, out.p_novel)
    assert after < 0.5 * before, (before, after)
    proba = clf.predict_proba(X_new[:20])
    assert proba.shape == (20, 26)
    np.testing.assert_allclose(np.asarray(proba).sum(axis=1), 1.0)
    np.testing.assert_array_equal(proba.known_classes, clf.classes_)


def test_sigmoid_map_is_the_heads_own_novelty_calibration(heavy_tails):
    X, y, X_new, _ = heavy_tails
    clf = NoveltyCalibratedClassifier(CRPGaussianClassifier(covariance="isotropic"),
                                      random_state=0).fit(X, y)
    # The wrapper decides by the argmax of its probabilities: the head's
    # argmax rule (novelty_alpha=None), not its conformal one.
    head = copy.deepcopy(clf.estimator_).set_params(
        novelty_calibration=(clf.slope_, clf.intercept_), novelty_alpha=None)
    np.testing.assert_allclose(clf.predict_proba(X_new), head.predict_proba(X_new),
                               atol=1e-12)
    np.testing.assert_array_equal(clf.predict(X_new), head.predict(X_new))


def test_step_equals_predict_then_partial_fit(heavy_tails):
    X, y, X_new, y_new = heavy_tails
    clf = NoveltyCalibratedClassifier(random_state=0).fit(X, y)
    loop = copy.deepcopy(clf)
    expected = []
    for i in range(40):
        expected.append(loop.predict_novelty_proba(X_new[i : i + 1])[0])
        loop.partial_fit(X_new[i : i + 1], y_new[i : i + 1])
    out = clf.open_world_step(X_new[:40], y_new[:40])
    np.testing.assert_allclose(out.p_novel, expected, rtol=1e-12)
    np.testing.assert_array_equal(clf.classes_, loop.classes_)
    np.testing.assert_allclose(clf.predict_proba(X_new), loop.predict_proba(X_new))


def test_the_map_keeps_the_order_of_novelty(heavy_tails):
    X, y, X_new, _ = heavy_tails
    for method in ("sigmoid", "isotonic"):
        clf = NoveltyCalibratedClassifier(method=method, random_state=0).fit(X, y)
        raw = np.asarray(clf.estimator_.predict_proba(X_new))[:, -1]
        mapped = clf.predict_novelty_proba(X_new)
        order = np.argsort(raw, kind="stable")
        assert np.all(np.diff(mapped[order]) >= -1e-12), method


@pytest.mark.parametrize("baseline", [NCMClassifier(), EVMClassifier()])
def test_baselines_are_calibrated_through_their_novelty_score(heavy_tails, baseline):
    X, y, X_new, y_new = heavy_tails
    clf = NoveltyCalibratedClassifier(baseline, random_state=0).fit(X, y)
    assert not hasattr(clf, "predict_proba")  # a distance has no class probabilities
    p = clf.predict_novelty_proba(X_new)
    score = clf.estimator_.novelty_score(X_new)
    order = np.argsort(score, kind="stable")
    assert np.all(np.diff(p[order]) >= -1e-12)
    y_pred = clf.predict(X_new)
    novel = y_pred == clf.novel_label_
    np.testing.assert_array_equal(novel, p >= 0.5)
    np.testing.assert_array_equal(y_pred[~novel],
                                  clf.estimator_.predict_known(X_new)[~novel])
    raw = copy.deepcopy(clf.estimator_).open_world_step(X_new, y_new)
    out = clf.open_world_step(X_new, y_new)
    assert expected_calibration_error(out.is_novel, out.p_novel) < 0.05
    np.testing.assert_array_equal(out.y_known, raw.y_known)


def test_prefit_uses_the_fitted_estimator_as_it_is(heavy_tails):
    X, y, X_new, y_new = heavy_tails
    head = CRPGaussianClassifier().fit(X[::2], y[::2])
    before = copy.deepcopy(head)
    rows = np.concatenate([np.arange(1, X.shape[0], 2)])
    X_cal = np.concatenate([X[rows], X_new[:200]])
    y_cal = np.concatenate([y[rows], y_new[:200]])
    clf = NoveltyCalibratedClassifier(head, cv="prefit").fit(X_cal, y_cal)
    np.testing.assert_array_equal(clf.classes_, head.classes_)
    clf.partial_fit(X_new[200:210], y_new[200:210])
    # The wrapper learns on its own copy; the user's estimator is untouched.
    np.testing.assert_array_equal(head.classes_, before.classes_)
    np.testing.assert_array_equal(head.predict_proba(X_new),
                                  before.predict_proba(X_new))
    assert clf.calibration_rows_.is_first_sighting.sum() == np.unique(y_new[:200]).size


def test_evaluate_online_runs_the_wrapper(heavy_tails):
    X, y, X_new, y_new = heavy_tails
    clf = NoveltyCalibratedClassifier(random_state=0).fit(X, y)
    tasks = SmallContextTasks(y_new, n_support_classes=5, n_novel_classes=3,
                              shots=(1, 5), n_query=4, n_tasks=3, random_state=0)
    # Small context through partial_fit on top of the fitted classes.
    report = evaluate_online(clf, X_new, y_new, tasks, setting="small")
    assert np.isfinite(report.h_measure)


def test_in_scikit_learn_tools(heavy_tails):
    X, y, _, _ = heavy_tails
    clf = NoveltyCalibratedClassifier(random_state=0)
    params = clf.get_params()
    # estimator=None: the default head's parameters, reached as a given one's
    assert params["estimator__sigma"] == CRPGaussianClassifier().sigma
    search = GridSearchCV(
        NoveltyCalibratedClassifier(CRPGaussianClassifier(), random_state=0),
        {"estimator__a": [0.0, 0.5], "method": ["sigmoid", "isotonic"]},
        scoring=make_scorer(h_measure, response_method="predict_proba"),
        cv=OpenWorldSplit(n_splits=2, n_novel_classes=5, random_state=0),
    ).fit(X, y)
    assert np.isfinite(search.cv_results_["mean_test_score"]).all()
    fitted = search.best_estimator_
    restored = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_array_equal(restored.predict_proba(X), fitted.predict_proba(X))
    assert clone(fitted).get_params()["estimator__a"] == fitted.estimator.a


def test_bad_input_fails_clearly_before_any_state(heavy_tails):
    X, y, X_new, y_new = heavy_tails
    with pytest.raises(NotFittedError):
        NoveltyCalibratedClassifier(CRPGaussianClassifier(), cv="prefit").fit(X, y)
    with pytest.raises(InvalidParameterError, match="method"):
        NoveltyCalibratedClassifier(method="platt").fit(X, y)
    with pytest.raises(ValueError, match="cv=50 folds"):
        NoveltyCalibratedClassifier(cv=50).fit(X, y)
    with pytest.raises(ValueError, match="different numbers of rows"):
        NoveltyCalibratedClassifier().fit(X, y[:-1])
    head = CRPGaussianClassifier().fit(X, y)
    with pytest.raises(ValueError, match="first sightings"):
        # Every row of a known class: nothing new to calibrate on.
        NoveltyCalibratedClassifier(head, cv="prefit").fit(X, y)

    clf = NoveltyCalibratedClassifier(random_state=0).fit(X, y)
    snapshot = copy.deepcopy(clf)
    calls = {"n": 0}
    real = CRPGaussianClassifier.partial_fit

    def interrupted(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 5:
            raise KeyboardInterrupt
        return real(self, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(CRPGaussianClassifier, "partial_fit", interrupted)
        with pytest.raises(KeyboardInterrupt):
            clf.open_world_step(X_new[:20], y_new[:20])
    np.testing.assert_array_equal(clf.classes_, snapshot.classes_)
    np.testing.assert_array_equal(clf.predict_proba(X_new),
                                  snapshot.predict_proba(X_new))


def test_an_empty_step_is_refused_before_any_state(heavy_tails):
    """Check that ``open_world_step`` and ``partial_fit`` of no rows say so,
    the model unchanged."""
    X, y, X_new, _ = heavy_tails
    clf = NoveltyCalibratedClassifier(random_state=0).fit(X, y)
    before = clf.predict_proba(X_new)
    for call in (clf.open_world_step, clf.partial_fit):
        with pytest.raises(ValueError, match="0 sample"):
            call(np.zeros((0, X.shape[1])), np.zeros(0, dtype=int))
    np.testing.assert_array_equal(clf.predict_proba(X_new), before)


def test_a_label_of_minus_one_is_a_class_in_every_fold(heavy_tails):
    """Check that rows labelled -1 (a class, as for the plain estimator, which
    then calls new classes -2) calibrate with the default stream: no fold's
    model takes -1 for its novel label."""
    X, y, X_new, y_new = heavy_tails
    y = np.where(y == 0, -1, y)
    with pytest.warns(UserWarning, match="novel class -2"):
        clf = NoveltyCalibratedClassifier(random_state=0).fit(X, y)
    assert clf.novel_label_ == -2 and -1 in clf.classes_
    assert set(np.unique(clf.predict(X_new))) <= {*clf.classes_, -2}


def test_grid_search_reaches_the_default_estimators_parameters(heavy_tails):
    """Check that ``GridSearchCV`` over ``estimator__a`` of the default
    ``NoveltyCalibratedClassifier()`` (its estimator left None) searches the
    default head's ``a``, and that the unfitted template stays None."""
    X, y, _, _ = heavy_tails
    clf = NoveltyCalibratedClassifier(random_state=0)
    assert clf.get_params()["estimator__a"] == CRPGaussianClassifier().a
    search = GridSearchCV(clf, {"estimator__a": [0.0, 0.5]}, cv=2).fit(X, y)
    assert search.best_params_["estimator__a"] in (0.0, 0.5)
    assert search.best_estimator_.estimator_.a == search.best_params_["estimator__a"]
    assert clf.estimator is None


def test_an_estimator_without_a_novelty_score_is_refused(heavy_tails):
    from sklearn.linear_model import LogisticRegression

    class NoScore(LogisticRegression):
        predict_log_proba = None  # neither log-probabilities nor a score

        def partial_fit(self, X, y):
            return self

        def open_world_step(self, X, y):
            return {}

    X, y, _, _ = heavy_tails
    with pytest.raises(TypeError, match="novelty score"):
        NoveltyCalibratedClassifier(NoScore()).fit(X, y)


def test_wraps_a_fitted_flowr_classifier():
    from sklearn_flowr.training._examples import flowr_example

    model, X, y = flowr_example("large")  # knows digits 0-4
    rows = np.flatnonzero((y < 5) | (y >= 7))[::3]
    clf = NoveltyCalibratedClassifier(model, cv="prefit").fit(X[rows], y[rows])
    proba = clf.predict_proba(X[y == 5][:4])
    assert proba.shape == (4, 6)
    out = clf.open_world_step(X[y == 5][:3], y[y == 5][:3])
    np.testing.assert_array_equal(out.is_novel, [True, False, False])
    assert 5 in clf.classes_ and 5 not in model.classes_


def test_a_baseline_distance_is_mapped_as_it_is_at_any_scale(heavy_tails):
    """NCM's squared distances run far beyond the +-30 clip of log-odds; the
    map must keep them apart (a clip would tie every far row)."""
    X, y, X_new, y_new = heavy_tails
    clf = NoveltyCalibratedClassifier(NCMClassifier(), random_state=0).fit(
        X * 100.0, y)
    score = clf.estimator_.novelty_score(X_new * 100.0)
    assert score.min() > 30.0
    p = clf.predict_novelty_proba(X_new * 100.0)
    assert np.unique(p).size > 0.9 * np.unique(score).size
    np.testing.assert_array_equal(np.argsort(p, kind="stable"),
                                  np.argsort(score, kind="stable"))


def test_predict_says_novel_where_calibrated_p_novel_reaches_one_half(heavy_tails):
    """Check predict (and open_world_step's y_pred) gives the novel label
    exactly where the calibrated P(novel) >= 0.5, else the best known class,
    also where the argmax over the N+1 probabilities would say otherwise."""
    X, y, X_new, y_new = heavy_tails
    clf = NoveltyCalibratedClassifier(random_state=0).fit(X, y)
    # A row midway between two classes, its calibrated P(novel) set to 0.4:
    # more than either known class's 0.3 (the argmax says novel), below 0.5.
    means = [X[y == k].mean(axis=0) for k in (0, 1)]
    row = ((means[0] + means[1]) / 2)[None]
    score = clip_log_odds(novel_log_odds(clf.estimator_.predict_log_proba(row)))
    clf.slope_, clf.intercept_ = 1.0, float(np.log(0.4 / 0.6) - score[0])
    proba = clf.predict_proba(row)
    assert proba.argmax() == proba.shape[1] - 1 and proba[0, -1] < 0.5
    assert clf.predict(row)[0] in clf.classes_
    rows = np.r_[row, X_new[:40]]
    p_novel = clf.predict_novelty_proba(rows)
    best = clf.predict_proba(rows)[:, :-1].argmax(axis=1)
    expected = np.where(p_novel >= 0.5, clf.novel_label_, clf.classes_[best])
    np.testing.assert_array_equal(clf.predict(rows), expected)
    out = copy.deepcopy(clf).open_world_step(rows[:1], [0])
    np.testing.assert_array_equal(out.y_pred, expected[:1])


def test_wrappers_report_the_fitted_estimators_features():
    """Check both novelty wrappers expose the wrapped model's
    ``n_features_in_`` and, fitted on a DataFrame, its ``feature_names_in_``
    (as scikit-learn's meta-estimators do); none before fit or without names."""
    pd = pytest.importorskip("pandas")
    from sklearn_flowr.conformal import ConformalNoveltyClassifier

    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(60, 3)), columns=["a", "b", "c"])
    y = np.arange(60) % 4
    calibrated = NoveltyCalibratedClassifier(NCMClassifier())
    assert not hasattr(calibrated, "n_features_in_")
    calibrated.fit(X, y)
    conformal = ConformalNoveltyClassifier(NCMClassifier().fit(X[:30], y[:30]))
    conformal.fit(X[30:], y[30:])
    for wrapper in (calibrated, conformal):
        assert wrapper.n_features_in_ == 3
        assert list(wrapper.feature_names_in_) == ["a", "b", "c"]
    unnamed = NoveltyCalibratedClassifier(NCMClassifier()).fit(X.to_numpy(), y)
    assert unnamed.n_features_in_ == 3
    assert not hasattr(unnamed, "feature_names_in_")


def _blobs(n_classes=20, per_class=10, d=16, seed=0):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(n_classes), per_class)
    centres = rng.normal(scale=3.0, size=(n_classes, d))
    return centres[y] + rng.normal(size=(y.size, d)), y


def _wrappers():
    from sklearn_flowr.conformal import ConformalNoveltyClassifier

    return [NoveltyCalibratedClassifier(random_state=0),
            ConformalNoveltyClassifier(cv=3, random_state=0)]


@pytest.mark.parametrize("wrapper", _wrappers(), ids=["calibrated", "conformal"])
@pytest.mark.parametrize("bad, message", [
    (np.nan, "Input y contains NaN"), (np.inf, "Input y contains infinity"),
    (0.5, "Unknown label type: continuous"), (None, "y is None")])
def test_wrappers_name_bad_labels(wrapper, bad, message):
    """Check that missing, infinite, continuous or absent labels get the
    error that names them (not one from deep inside the folds)."""
    X, y = _blobs()
    if bad is None:
        labels = None
    else:
        labels = y.astype(float) + (0.5 if bad == 0.5 else 0.0)
        if bad != 0.5:
            labels[3] = bad
    with pytest.raises(ValueError, match=message):
        clone(wrapper).fit(X, labels)


@pytest.mark.parametrize("wrapper", _wrappers(), ids=["calibrated", "conformal"])
def test_wrappers_take_array_likes_and_unfitted_calls_say_so(wrapper):
    """Check that an object with only ``__array__`` fits as its array does,
    and that predict before fit raises NotFittedError (the head's p-values
    too)."""
    from sklearn.utils.estimator_checks import _NotAnArray

    X, y = _blobs()
    with pytest.raises(NotFittedError):
        clone(wrapper).predict(X[:2])
    with pytest.raises(NotFittedError):
        CRPGaussianClassifier().novelty_pvalues(X[:2])
    wrapped = clone(wrapper).fit(_NotAnArray(X), y)
    np.testing.assert_array_equal(wrapped.predict(X[:20]),
                                  clone(wrapper).fit(X, y).predict(X[:20]))


def test_calibration_folds_keep_their_heads_warnings_to_themselves():
    """Check that fitting the calibration on few rows does not pass on its
    fold heads' warning about their own predict (the wrapper does not use it)."""
    import warnings

    X, y = _blobs(n_classes=3, per_class=10)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*calibration scores, fewer")
        NoveltyCalibratedClassifier(random_state=0).fit(X, y)


def test_add_calibration_names_a_wrong_width_and_keeps_the_scores():
    """Check that add_calibration refuses rows of another width by name,
    before any calibration score changes."""
    from sklearn_flowr.conformal import ConformalNoveltyClassifier

    X, y = _blobs()
    head = CRPGaussianClassifier(novelty_alpha=None).fit(X[::2], y[::2])
    conformal = ConformalNoveltyClassifier(head).fit(X[1::2], y[1::2])
    before = conformal.novelty_pvalues(X[:10])
    with pytest.raises(ValueError, match="add_calibration: X has 5 columns"):
        conformal.add_calibration(X[:3, :5], y[:3])
    np.testing.assert_array_equal(conformal.novelty_pvalues(X[:10]), before)
