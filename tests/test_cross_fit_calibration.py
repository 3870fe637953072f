"""Cross-fitted novelty calibration: the map of P(novel) fitted on classes held
out of training (protocol.cross_fit_novelty_calibration and
FLOWRClassifier(calibration=k))."""

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import expit, logit
from sklearn.base import BaseEstimator, clone
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.model_selection import GroupKFold, GroupShuffleSplit, KFold
from sklearn.utils import check_random_state

from sklearn_flowr import CRPGaussianClassifier, FLOWRClassifier
from sklearn_flowr.head import empirical_bayes_head
from sklearn_flowr.model_selection import class_disjoint_folds
from sklearn_flowr.protocol import (
    LargeContextTasks,
    SmallContextTasks,
    calibrate_novelty,
    cross_fit_novelty_calibration,
    evaluate_online,
)
from sklearn_flowr.protocol._calibrate import fit_novelty_map, small_context_sizes
from sklearn_flowr.protocol._cross_fit import _choose_shrinkage as choose_shrinkage
from sklearn_flowr.protocol._cross_fit import cross_fit_plan
from sklearn_flowr.training import MetaTraining, SupE
from sklearn_flowr.training._memo import ENCODER_MEMO

# The head template SqueezingEncoder takes by default. Shared, as a default
# part of FLOWRClassifier is: the cross-fit sets head__* only on clones.
SQUEEZING_HEAD = CRPGaussianClassifier(covariance="full", b=1.0)


class SqueezingEncoder(BaseEstimator):
    """A stand-in for a trained encoder that squeezes its training classes:
    linear discriminant analysis fitted on few rows per class, followed by
    FLOWR's full head by empirical Bayes on its output (``head`` is the
    template, reached as ``head__noise_shrinkage`` as on FLOWRClassifier).
    New classes come out wider than the training classes, as with the
    five-class encoders."""

    def __init__(self, setting="small", n_components=8, stretch=False,
                 head=SQUEEZING_HEAD, calibration=None, random_state=None):
        self.setting = setting
        self.n_components = n_components
        self.stretch = stretch
        self.head = head
        self.calibration = calibration
        self.random_state = random_state

    def fit(self, X, y):
        self.lda_ = LinearDiscriminantAnalysis(
            n_components=self.n_components).fit(X, y)
        Z = self.transform(X)
        # As FLOWRClassifier: the prior alone, and the head fitted on y.
        self.prior_head_ = empirical_bayes_head(self.head, Z, y, setting="small")
        self.head_ = empirical_bayes_head(self.head, Z, y, setting="large")
        return self

    def transform(self, X):
        # LDA whitens the within-class noise, which leaves nothing for a
        # noise shrinkage to change; ``stretch`` scales its axes unequally.
        Z = self.lda_.transform(X)
        return Z * np.geomspace(0.1, 10, Z.shape[1]) if self.stretch else Z


@pytest.fixture
def squeezed():
    """30 training and 30 new Gaussian classes of 12 rows in 30 dimensions."""
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(60), 12)
    X = rng.normal(size=(60, 30))[y] + rng.normal(size=(y.size, 30))
    return X[y < 30], y[y < 30], X[y >= 30], y[y >= 30]


def _scipy_platt_fit(p, targets):
    """Minimise the cross-entropy of sigmoid(slope * logit p + intercept)
    against ``targets`` (hard or soft) with scipy."""
    def nll(w):
        z = w[0] * logit(p) + w[1]
        return np.sum(np.logaddexp(0, z) - targets * z)

    return minimize(nll, [1.0, 0.0], method="BFGS").x


def test_fit_novelty_map_is_the_maximum_likelihood_platt_fit(rng):
    """Check the map against a direct maximum-likelihood fit of
    P(first) = sigmoid(slope * logit p + intercept) by scipy: on hard 0/1
    targets, and on Platt's smoothed ones (the default), written out from
    his paper: (N+ + 1) / (N+ + 2) and 1 / (N- + 2)."""
    p = rng.uniform(0.001, 0.999, 400)
    first = rng.uniform(size=400) < expit(0.6 * logit(p) - 0.5)
    n_first, n_known = first.sum(), (~first).sum()
    platt = np.where(first, (n_first + 1) / (n_first + 2), 1 / (n_known + 2))
    for targets, values in (("hard", first.astype(float)), ("platt", platt)):
        out = fit_novelty_map(logit(p), first, targets=targets)
        np.testing.assert_allclose([out.slope, out.intercept],
                                   _scipy_platt_fit(p, values), atol=2e-3)
        assert (out.n_rows, out.n_first_sightings) == (400, int(first.sum()))
        assert out.ece_after < out.ece_before
    default = fit_novelty_map(logit(p), first)
    assert (default.slope, default.intercept) == (out.slope, out.intercept)


def test_platt_targets_keep_a_separated_fit_finite(rng):
    """Check the point of Platt's targets: on perfectly separated rows the
    hard fit's slope runs off (the optimiser stops somewhere large), the
    smoothed fit's is the finite optimum scipy finds."""
    p = np.concatenate([rng.uniform(0.0, 0.1, 200), rng.uniform(0.5, 1.0, 10)])
    first = np.arange(210) >= 200
    with pytest.warns(UserWarning, match="Platt's target smoothing"):
        soft = fit_novelty_map(logit(p), first)
    with pytest.warns(UserWarning, match="the optimiser"):
        hard = fit_novelty_map(logit(p), first, targets="hard")
    targets = np.where(first, 11 / 12, 1 / 202)
    np.testing.assert_allclose([soft.slope, soft.intercept],
                               _scipy_platt_fit(p, targets), rtol=1e-2)
    assert hard.slope > 2 * soft.slope


@pytest.mark.parametrize("call", [
    lambda: fit_novelty_map([-2.0, 2.0], [False, True], targets="soft"),
    lambda: calibrate_novelty(CRPGaussianClassifier(), np.zeros((4, 2)),
                              [0, 0, 1, 1], targets=1),
])
def test_unknown_targets_are_refused(call):
    with pytest.raises(ValueError, match=r"'targets' parameter .* must be a str "
                       r"among \{.*'platt'.*\}"):
        call()


@pytest.mark.parametrize("kwargs, message", [
    (dict(n_jobs=0), r"'n_jobs' parameter .* range \(-inf, -1\], .* Got 0"),
    (dict(n_known_query_classes=0), "'n_known_query_classes' parameter"),
])
def test_calibrate_novelty_checks_its_options_first(monkeypatch, kwargs, message):
    """Check bad options fail before the large context refits a clone."""
    from sklearn_flowr.protocol import _calibrate

    def no_work(*args, **kwargs):
        raise AssertionError("work started before the options were checked")

    monkeypatch.setattr(_calibrate, "calibration_scores", no_work)
    X = np.random.default_rng(0).normal(size=(40, 2))
    with pytest.raises(ValueError, match=message):
        calibrate_novelty(CRPGaussianClassifier(), X, np.repeat(np.arange(4), 10),
                          setting="large", **kwargs)


def test_perfectly_separated_calibration_rows_warn(rng):
    """Check a map fitted on rows where every first sighting has a higher
    P(novel) than every known-class query warns: its slope is the
    optimiser's, not the data's."""
    p = np.concatenate([rng.uniform(0.0, 0.1, 50), rng.uniform(0.5, 1.0, 5)])
    first = np.arange(55) >= 50
    with pytest.warns(UserWarning, match="separate first sightings"):
        fit_novelty_map(logit(p), first)
    p[0] = 0.9  # one known query above a first sighting: no warning
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        fit_novelty_map(logit(p), first)


def test_cross_fitted_map_is_calibrated_on_new_classes(squeezed):
    """Check the claim: on an encoder that squeezes its training classes, the
    map fitted on tasks of the training classes stays over-confident on new
    classes, while the cross-fitted one (classes the fold's encoder never
    saw) gives a lower ECE and Brier score on them, with a flatter slope."""
    X_train, y_train, X_new, y_new = squeezed
    model = SqueezingEncoder().fit(X_train, y_train)
    own = calibrate_novelty(model.prior_head_, model.transform(X_train), y_train,
                            random_state=0)
    crossed = cross_fit_novelty_calibration(SqueezingEncoder(), X_train, y_train,
                                            cv=3, random_state=0)
    tasks = SmallContextTasks(y_new, n_support_classes=10, n_novel_classes=5,
                              shots=(1, 5), n_query=5, n_tasks=200, random_state=1)
    Z_new = model.transform(X_new)
    reports = {}
    for name, fitted in (("own", own), ("crossed", crossed)):
        head = clone(model.prior_head_).set_params(
            novelty_calibration=(fitted.slope, fitted.intercept))
        reports[name] = evaluate_online(head, Z_new, y_new, tasks, setting="small")
    assert crossed.n_folds == 3 and crossed.slope < own.slope
    assert reports["crossed"].ece < 0.75 * reports["own"].ece
    assert reports["crossed"].brier < reports["own"].brier
    assert reports["crossed"].h_measure == pytest.approx(reports["own"].h_measure)


def _by_hand(X, y, setting, plan, shrinkage=None, stretch=False):
    """What the docstring says a cross-fit does, written out per fold: a
    SqueezingEncoder trained on the fold's rows, its head (rebuilt with
    ``shrinkage`` when given) run through tasks of the held-out classes --
    small context: 10 support + 5 novel in proportion; large: the fold's
    training classes known, at most 5 held-out ones novel. Returns the map
    and each fold's H-measure and accuracy at the setting's fixed TPR."""
    log_odds, first, h, accuracy = [], [], [], []
    for fold in plan:
        assert np.intersect1d(fold.fit_rows, fold.query_rows).size == 0
        y_fit, y_query = y[fold.fit_rows], y[fold.query_rows]
        model = SqueezingEncoder(setting=setting, stretch=stretch,
                                 random_state=fold.seed).fit(X[fold.fit_rows], y_fit)
        head = model.prior_head_ if setting == "small" else model.head_
        if shrinkage is not None:
            head = empirical_bayes_head(head, model.transform(X[fold.fit_rows]),
                                        y_fit, setting=setting, covariance="full",
                                        noise_shrinkage=shrinkage)
        smallest = int(np.unique(y_query, return_counts=True)[1].min())
        if setting == "small":
            n_support, n_novel = small_context_sizes(fold.n_held_classes)
            tasks = SmallContextTasks(y_query, n_support_classes=n_support,
                                      n_novel_classes=n_novel,
                                      shots=(1, smallest - smallest // 2),
                                      n_query=smallest // 2, n_tasks=200,
                                      random_state=fold.seed)
        else:
            tasks = LargeContextTasks(y_query, np.unique(y_fit),
                                      n_novel_classes=min(5, fold.n_held_classes),
                                      n_query=min(10, smallest), n_tasks=200,
                                      random_state=fold.seed)
        report = evaluate_online(head, model.transform(X[fold.query_rows]),
                                 y_query, tasks, setting=setting, return_rows=True)
        log_odds.append(report.rows.novelty_score)
        first.append(report.rows.is_novel)
        h.append(report.h_measure)
        accuracy.append(report.accuracy)
    return (fit_novelty_map(np.concatenate(log_odds), np.concatenate(first)), h,
            accuracy)


@pytest.mark.parametrize("setting", ["small", "large"])
def test_cross_fit_pools_every_fold_as_documented(squeezed, setting):
    """Check the wiring against the folds written out by hand, in both
    contexts: every fold's rows pooled into one Platt fit."""
    X, y = squeezed[:2]
    plan = cross_fit_plan(3, X, y, setting=setting, random_state=5)
    expected, _, _ = _by_hand(X, y, setting, plan)
    got = cross_fit_novelty_calibration(SqueezingEncoder(setting=setting), X, y,
                                        cv=3, random_state=5)
    assert (got.slope, got.intercept, got.n_rows) == (
        expected.slope, expected.intercept, expected.n_rows)
    assert got.h_measures is None and got.accuracies is None


@pytest.fixture(scope="module")
def stretched_by_hand():
    """The squeezed data, its 2-fold plan and each candidate's map and
    scores computed by hand on the stretched encoder (shared by the
    tolerance cases: it does not depend on the tolerance)."""
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(60), 12)
    X = rng.normal(size=(60, 30))[y] + rng.normal(size=(y.size, 30))
    X, y = X[y < 30], y[y < 30]
    plan = cross_fit_plan(2, X, y, setting="small", random_state=1)
    hand = {value: _by_hand(X, y, "small", plan, shrinkage=value, stretch=True)
            for value in (0.0, 0.5, 1.0)}
    return X, y, hand


@pytest.mark.slow
@pytest.mark.parametrize("tolerance, chosen", [(None, 0.5), (0.01, 0.0),
                                               (0.2, 0.5)])
def test_cross_fit_chooses_the_shrinkage_with_the_best_held_out_h(
        stretched_by_hand, tolerance, chosen):
    """Check noise_shrinkages: each candidate's scores are the folds' mean
    H-measure and accuracy of the head rebuilt with it; the best H-measure
    among the candidates within ``accuracy_tolerance`` of the best accuracy
    is chosen (ties to the smaller), and the map is fitted on its rows. On
    the stretched encoder 0.5 ranks novelty best and costs accuracy, so the
    tolerance decides."""
    X, y, hand = stretched_by_hand
    got = cross_fit_novelty_calibration(SqueezingEncoder(stretch=True), X, y, cv=2,
                                        noise_shrinkages=[0.0, 0.5, 1.0],
                                        accuracy_tolerance=tolerance,
                                        random_state=1)
    means = {value: float(np.mean(h)) for value, (_, h, _) in hand.items()}
    accuracy = {value: float(np.mean(a)) for value, (_, _, a) in hand.items()}
    assert got.h_measures == pytest.approx(means)
    assert got.accuracies == pytest.approx(accuracy)
    eligible = [v for v in means if tolerance is None
                or accuracy[v] >= max(accuracy.values()) - tolerance]
    best = max(eligible, key=lambda v: (means[v], -v))
    assert got.noise_shrinkage == best == chosen
    assert (got.slope, got.intercept) == (hand[best][0].slope,
                                          hand[best][0].intercept)


@pytest.mark.parametrize("cv, warns", [(GroupShuffleSplit(2, test_size=2,
                                                           random_state=0), True),
                                       (GroupShuffleSplit(2, test_size=3,
                                                          random_state=0), False)])
def test_one_support_class_folds_warn_when_choosing(squeezed, cv, warns):
    """Check small-context folds of 2 held-out classes (tasks of 1 support + 1
    novel class) warn when they choose the shrinkage -- they cannot see
    confusion between known classes -- and 3 held-out classes do not."""
    import warnings

    X, y = squeezed[:2]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cross_fit_novelty_calibration(SqueezingEncoder(), X, y, cv=cv,
                                      noise_shrinkages=[0.0, 0.5], n_tasks=10,
                                      random_state=0)
        cross_fit_novelty_calibration(SqueezingEncoder(), X, y, cv=cv, n_tasks=10,
                                      random_state=0)  # nothing chosen
    messages = [str(w.message) for w in caught
                if "one support class" in str(w.message)]
    assert len(messages) == int(warns)


def test_accuracy_tolerance_keeps_an_accurate_candidate():
    """Check the guard itself: the best H-measure is passed over when it costs
    more accuracy than the tolerance, kept when the tolerance allows it."""
    h = {0.0: 0.30, 0.1: 0.35, 0.3: 0.50}
    accuracy = {0.0: 0.800, 0.1: 0.795, 0.3: 0.700}
    assert choose_shrinkage(h, accuracy, 0.01) == 0.1
    assert choose_shrinkage(h, accuracy, 0.001) == 0.0
    assert choose_shrinkage(h, accuracy, 0.2) == 0.3
    assert choose_shrinkage(h, accuracy, None) == 0.3
    assert choose_shrinkage({0.0: 0.3, 0.1: 0.3}, {0.0: 0.8, 0.1: 0.8}, 0.0) == 0.0


def test_folds_split_whole_classes():
    y = np.repeat(np.arange(6), 3)
    X = np.zeros((18, 1))
    for cv in (3, GroupShuffleSplit(n_splits=4, test_size=2, random_state=0),
               [(np.flatnonzero(y < 4), np.flatnonzero(y >= 4))]):
        folds = class_disjoint_folds(cv, X, y)
        for train, held in folds:
            assert np.intersect1d(y[train], y[held]).size == 0
    held = np.concatenate([held for _, held in class_disjoint_folds(3, X, y)])
    np.testing.assert_array_equal(np.sort(held), np.arange(18))


@pytest.mark.parametrize("cv, message", [
    (KFold(2, shuffle=True, random_state=0), "must split whole classes"),
    (1, "must be >= 2"),
    (7, "need at least 7 classes"),
    (True, "must be an int >= 2"),
    ("three", "must be an int >= 2"),
    ([], "gave no fold"),
    ([(np.arange(3), np.arange(3, 18))], "trains on 1 classes"),
    ([(np.arange(18) < 9, np.arange(18) >= 9)], "boolean mask"),
    ([(np.arange(9) + 0.5, np.arange(9, 18))], "integer indices"),
    ([(np.arange(9), np.arange(9, 20))], r"must lie in \[0, 18\)"),
])
@pytest.mark.filterwarnings("ignore:The groups parameter is ignored")
def test_bad_folds_are_refused(cv, message):
    y = np.repeat(np.arange(6), 3)
    with pytest.raises(ValueError, match=message):
        class_disjoint_folds(cv, np.zeros((18, 1)), y)


def test_small_context_folds_hold_out_two_classes():
    y = np.repeat(np.arange(4), 3)
    with pytest.raises(ValueError, match="holds out 1"):
        cross_fit_plan(4, np.zeros((12, 1)), y, setting="small")
    assert len(cross_fit_plan(4, np.zeros((12, 1)), y, setting="large")) == 4


def test_large_context_plan_keeps_known_queries_out_of_training():
    """Check the large context's folds: the held-out classes are queried
    whole; a quarter (at least one, at most half) of every training class's
    rows is kept out of training and queried as a known class; the same seed
    gives the same plan."""
    y = np.repeat(np.arange(5), [4, 8, 8, 12, 3])
    X = np.zeros((y.size, 1))
    plan = cross_fit_plan(5, X, y, setting="large", random_state=3)
    for fold in plan:
        assert np.intersect1d(fold.fit_rows, fold.query_rows).size == 0
        held = np.setdiff1d(y, y[fold.fit_rows])
        assert held.size == fold.n_held_classes == 1
        assert np.sum(y[fold.query_rows] == held[0]) == np.sum(y == held[0])
        for label in np.unique(y[fold.fit_rows]):
            n_query = np.sum(y[fold.query_rows] == label)
            assert n_query == min(max(1, round(np.sum(y == label) / 4)),
                                  np.sum(y == label) // 2)
    again = cross_fit_plan(5, X, y, setting="large", random_state=3)
    for first, second in zip(plan, again, strict=True):
        np.testing.assert_array_equal(first.fit_rows, second.fit_rows)
        assert first.seed == second.seed
    with pytest.raises(ValueError, match="known_query_share"):
        cross_fit_plan(5, X, y, setting="large", known_query_share=0.7)
    with pytest.raises(ValueError, match="at least 2 rows in every class"):
        y = np.repeat(np.arange(5), [1, 8, 8, 12, 3])
        cross_fit_plan(5, np.zeros((y.size, 1)), y, setting="large")


TINY_MLP = dict(backbone="mlp", embedding_dim=8, pretrain=SupE(epochs=2),
                meta=MetaTraining(epochs=1, episodes_per_epoch=4, n_way=3,
                                  n_unknown=1),
                random_state=0)


@pytest.mark.parametrize("setting", ["small", "large"])
def test_flowr_classifier_cross_fits_its_map(digits, capsys, monkeypatch, setting):
    """Check FLOWRClassifier(calibration=3) with its default verbosity, in
    both contexts: it says what it does, its map is
    cross_fit_novelty_calibration's under the fit's seed, and its encoder is
    the one it trains without cross-fitting (the folds are extra models;
    the plain model trains afresh, not from the encoder memo). The reference
    cross-fit reads the same images, and trains nothing: its fold models
    find the fit's fold encoders in the memo, as they were trained on the
    same rows, settings and fold seeds."""
    from sklearn_flowr.training import pipeline

    X, y = digits
    X, y = X[y < 6], y[y < 6]
    model = FLOWRClassifier(**TINY_MLP, setting=setting, calibration=3).fit(X, y)
    assert "Cross-fitting the novelty map: 3 models" in capsys.readouterr().out
    plain = FLOWRClassifier(**TINY_MLP, setting=setting, verbose=0,
                            reuse_encoder=False).fit(X, y)
    np.testing.assert_array_equal(model.transform(X[:5]), plain.transform(X[:5]))
    seed = int(check_random_state(0).randint(2**31 - 1))
    trainings = []
    train_encoder = pipeline.train_encoder

    def counting(*args, **kwargs):
        trainings.append(1)
        return train_encoder(*args, **kwargs)

    monkeypatch.setattr(pipeline, "train_encoder", counting)
    expected = cross_fit_novelty_calibration(
        FLOWRClassifier(**TINY_MLP, setting=setting, verbose=0),
        X, y, cv=3, random_state=seed)
    assert trainings == []
    assert model.head_.novelty_calibration == (expected.slope, expected.intercept)
    assert model.prior_head_.novelty_calibration == model.head_.novelty_calibration
    assert model.calibration_results_.slope == expected.slope
    assert model.calibration_results_.n_folds == 3
    assert plain.calibration_results_ is None
    assert plain.head_.novelty_calibration != model.head_.novelty_calibration
    unmapped = FLOWRClassifier(**TINY_MLP, setting=setting, verbose=0,
                               calibration=None).fit(X, y)
    assert unmapped.head_.novelty_calibration is None
    assert unmapped.calibration_results_ is None


def test_cross_fitting_takes_folds_as_a_generator_and_negative_labels(digits):
    """Check calibration given as a generator of folds (scikit-learn's cv
    allows one; it is consumed by the check before training) on negative
    labels (a fold's own "auto" novel label would be one of its held-out
    classes): the map is the one an int of the same folds gives."""
    X, y = digits
    X, y = X[y < 6], y[y < 6] - 3
    folds = GroupKFold(3).split(X, y, groups=y)
    model = FLOWRClassifier(**TINY_MLP, verbose=0, setting="large",
                            calibration=folds).fit(X, y)
    assert model.novel_label_ not in set(y.tolist())
    seed = int(check_random_state(0).randint(2**31 - 1))
    expected = cross_fit_novelty_calibration(
        FLOWRClassifier(**TINY_MLP, setting="large", verbose=0),
        X, y, cv=3, random_state=seed)
    assert model.head_.novelty_calibration == (expected.slope, expected.intercept)


def test_noise_shrinkages_are_chosen_with_one_encoder_per_fold(digits, monkeypatch):
    """Check cross_fit_novelty_calibration's noise_shrinkages on a
    FLOWRClassifier: each candidate is a fold model with head__noise_shrinkage
    set, whose encoder comes from the memo after the fold's first (one
    training per fold, not per candidate); the choice follows the documented
    rule under the default one-point guard."""
    from sklearn_flowr.protocol import _cross_fit
    from sklearn_flowr.training import pipeline

    X, y = digits
    X, y = X[y < 6], y[y < 6]
    trainings, tolerances = [], []
    train_encoder = pipeline.train_encoder

    def counting(*args, **kwargs):
        trainings.append(1)
        return train_encoder(*args, **kwargs)

    def recording(h_measures, accuracies, accuracy_tolerance):
        tolerances.append(accuracy_tolerance)
        return choose_shrinkage(h_measures, accuracies, accuracy_tolerance)

    monkeypatch.setattr(pipeline, "train_encoder", counting)
    monkeypatch.setattr(_cross_fit, "_choose_shrinkage", recording)
    ENCODER_MEMO.clear()
    result = cross_fit_novelty_calibration(
        FLOWRClassifier(**TINY_MLP, setting="large", verbose=0),
        X, y, cv=3, noise_shrinkages=[0.0, 0.5, 1.0],
        n_tasks=20, random_state=0)
    assert len(trainings) == 3
    assert tolerances == [0.01]
    assert sorted(result.h_measures) == sorted(result.accuracies) == [0.0, 0.5, 1.0]
    floor = max(result.accuracies.values()) - 0.01
    best = max((v for v in result.h_measures if result.accuracies[v] >= floor),
               key=lambda v: (result.h_measures[v], -v))
    assert result.noise_shrinkage == best


@pytest.mark.parametrize("params, message", [
    (dict(calibration=KFold(2, shuffle=True, random_state=0)),
     "must split whole classes"),
    (dict(calibration=2, meta__n_unknown=2), "Fold 0 of calibration trains on 2"),
    (dict(calibration="classes"), "'calibration' parameter"),
    (dict(calibration=1), "'calibration' parameter"),
    (dict(calibration=5), "calibration=5 folds over the classes need at least 5"),
    (dict(calibration=[(np.arange(10), np.arange(5))]), "class 0 on both sides"),
    (dict(head__noise_shrinkage="ledoit-wolf"), "'noise_shrinkage' parameter"),
])
@pytest.mark.filterwarnings("ignore:The groups parameter is ignored")
def test_bad_cross_fitting_fails_before_training(digits, no_training, params,
                                                 message):
    X, y = digits
    model = FLOWRClassifier(backbone="mlp", meta=MetaTraining(n_way=3, n_unknown=1),
                            verbose=0).set_params(**params)
    with pytest.raises(ValueError, match=message):
        model.fit(X[y < 4], y[y < 4])
    assert not hasattr(model, "head_")


@pytest.mark.parametrize("kwargs, message", [
    (dict(noise_shrinkages=[0.0, 0.1], estimator_params=dict(
        head__covariance="isotropic")), "covariance='isotropic'"),
    (dict(noise_shrinkages=[]), "non-empty list of numbers"),
    (dict(noise_shrinkages=[0.1, 2.0]), "non-empty list of numbers"),
    (dict(n_known_query_classes=-1), "'n_known_query_classes' parameter"),
    (dict(n_jobs="x"), "'n_jobs' parameter"),
    (dict(n_tasks=0), r"'n_tasks' parameter .* must be an int in the range \[1, inf\)"),
    (dict(known_query_share=0.7),
     r"'known_query_share' parameter .* range \(0\.0, 0\.5\]\. Got 0\.7"),
    (dict(noise_shrinkages=[0.0], accuracy_tolerance=-0.1), "accuracy_tolerance"),
    (dict(accuracy_tolerance="1"), "accuracy_tolerance"),
    (dict(targets="smooth"), "'targets' parameter"),
])
def test_cross_fit_options_fail_before_training(digits, no_training, kwargs,
                                                message):
    X, y = digits
    estimator = FLOWRClassifier(**TINY_MLP).set_params(
        **kwargs.pop("estimator_params", {}))
    with pytest.raises(ValueError, match=message):
        cross_fit_novelty_calibration(estimator, X[y < 6], y[y < 6], **kwargs)


def test_cross_fitting_refuses_an_accelerator(digits, no_training):
    accelerate = pytest.importorskip("accelerate")
    X, y = digits
    model = FLOWRClassifier(backbone="mlp", calibration=2, verbose=0,
                            meta=MetaTraining(n_way=3, n_unknown=1),
                            accelerator=accelerate.Accelerator(cpu=True))
    with pytest.raises(ValueError, match="does not run through an accelerator"):
        model.fit(X[y < 6], y[y < 6])


def test_refitted_parameter_check_compares_splitters_by_their_parameters():
    """Check a splitter set back to an equal one (e.g. restored by skops) is
    not taken for a changed calibration, and another one is."""
    from sklearn_flowr.validation import params_equal as _same

    assert _same(GroupKFold(3), GroupKFold(3))
    assert not _same(GroupKFold(3), GroupKFold(2))
    assert not _same(GroupKFold(2), GroupShuffleSplit(2))
