"""The Platt map of P(novel): its maths, the heads that apply it, and
``calibrate_novelty`` that fits it on episodes of training classes."""

import copy

import numpy as np
import pytest
import torch
from scipy.optimize import minimize
from scipy.special import expit, logit

from sklearn_flowr import CRPGaussianClassifier
from sklearn_flowr._core import recalibrate_novel_column
from sklearn_flowr.metrics import expected_calibration_error
from sklearn_flowr.protocol import (
    SmallContextTasks,
    calibrate_novelty,
    calibration_scores,
    evaluate_online,
)


def _mapped_reference(proba, slope, intercept):
    """Brute force: map P(novel), rescale the known columns by one factor."""
    p = proba[:, -1]
    mapped = expit(slope * logit(p) + intercept)
    known = proba[:, :-1] * ((1.0 - mapped) / (1.0 - p))[:, None]
    return np.column_stack([known, mapped])


def _heavy_tailed(rng, n_classes=30, per_class=25, d=4, df=3.0):
    y = np.repeat(np.arange(n_classes), per_class)
    X = (rng.normal(scale=2.0, size=(n_classes, d))[y]
         + rng.standard_t(df, size=(y.shape[0], d)))
    return X, y


def test_map_matches_platt_formula_and_keeps_known_ratios(rng):
    """Check the mapped novel column is sigmoid(slope * logit p + intercept)
    and the known classes keep their ratios, in NumPy and torch alike."""
    logits = rng.normal(scale=3.0, size=(7, 5))
    proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    out = recalibrate_novel_column(logits, 0.3, -1.2)
    got = np.exp(out) / np.exp(out).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(got, _mapped_reference(proba, 0.3, -1.2), rtol=1e-10)
    t_out = recalibrate_novel_column(torch.from_numpy(logits), 0.3, -1.2)
    np.testing.assert_allclose(t_out.numpy(), out, rtol=1e-12)
    # Identity map: nothing changes (up to rounding of the log-sum-exp).
    np.testing.assert_allclose(recalibrate_novel_column(logits, 1.0, 0.0), logits,
                               rtol=1e-12, atol=1e-12)


def test_map_leaves_rows_without_known_class(rng):
    """Check a row whose known columns are all -inf keeps P(novel) = 1."""
    scores = np.array([[-np.inf, -np.inf, 0.5], [0.0, 1.0, 0.5]])
    out = recalibrate_novel_column(scores, 0.5, 2.0)
    assert out[0, -1] == 0.5 and np.isfinite(out[1, -1])
    np.testing.assert_array_equal(out[:, :-1], scores[:, :-1])


@pytest.mark.parametrize("covariance", ["isotropic", "full"])
def test_head_applies_map_in_every_prediction(rng, covariance):
    """Check predict_proba, predict_log_proba and predict follow the map,
    and open_world_step (chunked and one row at a time) returns the mapped
    P(novel) with the same best known class as without it."""
    X, y = _heavy_tailed(rng)
    head = CRPGaussianClassifier(covariance=covariance).fit(X[y < 20], y[y < 20])
    query = X[y >= 18]
    plain = head.predict_proba(query)
    mapped = head.set_params(novelty_calibration=(0.4, -1.0))  # after fit
    np.testing.assert_allclose(mapped.predict_proba(query),
                               _mapped_reference(plain, 0.4, -1.0), rtol=1e-8,
                               atol=1e-12)
    np.testing.assert_allclose(np.exp(mapped.predict_log_proba(query)),
                               mapped.predict_proba(query), rtol=1e-8, atol=1e-12)
    best = np.argmax(_mapped_reference(plain, 0.4, -1.0), axis=1)
    labels = np.append(head.classes_, head.novel_label_)
    argmax_rule = copy.deepcopy(mapped).set_params(novelty_alpha=None)
    np.testing.assert_array_equal(argmax_rule.predict(query), labels[best])
    # The conformal rule reads the log-odds before the map: the same decisions.
    unmapped = copy.deepcopy(mapped).set_params(novelty_calibration=None)
    np.testing.assert_array_equal(mapped.predict(query), unmapped.predict(query))

    stream_y = y[y >= 18]
    raw = CRPGaussianClassifier(covariance=covariance).fit(X[y < 20], y[y < 20])
    expected = raw.open_world_step(query, stream_y)
    for rows in (slice(None), slice(0, 1)):  # chunked path, one-row path
        fresh = CRPGaussianClassifier(
            covariance=covariance, novelty_calibration=(0.4, -1.0)
        ).fit(X[y < 20], y[y < 20])
        out = fresh.open_world_step(query[rows], stream_y[rows])
        np.testing.assert_allclose(
            out.p_novel, expit(0.4 * logit(expected.p_novel[rows]) - 1.0),
            rtol=1e-7)
        np.testing.assert_array_equal(out.y_known, expected.y_known[rows])
        np.testing.assert_array_equal(out.is_novel, expected.is_novel[rows])


@pytest.mark.parametrize("value", [(0.0, 1.0), (-1.0, 0.0), (np.nan, 0.0),
                                   (1.0, np.inf), (1.0, 2.0, 3.0), ("a", "b"), 0.5])
def test_invalid_map_fails_before_changing_state(rng, value):
    """Check a bad novelty_calibration fails with a clear message and leaves
    the fitted head as it was."""
    X, y = _heavy_tailed(rng, n_classes=4)
    head = CRPGaussianClassifier().fit(X, y)
    before = head.class_count_.copy()
    head.set_params(novelty_calibration=value)
    with pytest.raises(ValueError, match="novelty_calibration"):
        head.predict_proba(X[:2])
    with pytest.raises(ValueError, match="novelty_calibration"):
        head.open_world_step(X[:3], y[:3])
    np.testing.assert_array_equal(head.class_count_, before)


def test_calibration_slope_near_one_when_model_is_right(rng):
    """Check the fitted slope is about 1 on data drawn from the head's own
    Gaussian model (only the intercept absorbs the stream's novelty rate,
    which is the protocol's, not the CRP's), and far below 1 on heavy-tailed
    classes, where the Gaussian odds are over-confident."""
    y = np.repeat(np.arange(60), 25)
    X = rng.normal(scale=2.0, size=(60, 8))[y] + rng.normal(size=(1500, 8))
    head = CRPGaussianClassifier(covariance="isotropic", prior_mean=0.0,
                                 prior_var=4.0, b=1.0, sigma=1.0)
    right = calibrate_novelty(head, X, y, n_tasks=300, random_state=0)
    assert 0.75 < right.slope < 1.35
    X_t = rng.normal(scale=2.0, size=(60, 8))[y] + rng.standard_t(3, (1500, 8))
    heavy = calibrate_novelty(head, X_t, y, n_tasks=300, random_state=0)
    assert heavy.slope < 0.3
    assert heavy.ece_after < heavy.ece_before / 5
    assert heavy.n_rows == 300 * 15 * 10 and heavy.n_first_sightings == 300 * 5


def test_calibration_from_training_classes_helps_on_new_classes(rng):
    """Check the honest use: a map fitted on episodes of training classes
    lowers the ECE of P(novel) on tasks of classes it never saw, while the
    H-measure and the fixed-TPR accuracy (rank-based) stay the same."""
    X, y = _heavy_tailed(rng, n_classes=60)
    train, test = y < 30, y >= 30
    head = CRPGaussianClassifier(prior_mean=0.0, prior_var=4.0, b=1.0, sigma=1.0)
    fitted = calibrate_novelty(head, X[train], y[train], n_tasks=150,
                               random_state=1)
    tasks = SmallContextTasks(y[test], n_tasks=100, random_state=2)
    plain = evaluate_online(head, X[test], y[test], tasks)
    mapped = evaluate_online(
        head.set_params(novelty_calibration=(fitted.slope, fitted.intercept)),
        X[test], y[test], tasks)
    assert mapped.ece < plain.ece / 2
    assert mapped.brier < plain.brier
    assert mapped.h_measure == pytest.approx(plain.h_measure, abs=1e-9)
    assert mapped.accuracy == pytest.approx(plain.accuracy, abs=1e-12)


@pytest.mark.parametrize("covariance", ["isotropic", "full"])
def test_large_context_calibration_refits_a_clone(rng, covariance):
    """Check the large context holds classes out, leaves the fitted estimator
    (its state and its own map) untouched, and returns an increasing map."""
    X, y = _heavy_tailed(rng, n_classes=12, per_class=30)
    head = CRPGaussianClassifier(covariance=covariance,
                                 novelty_calibration=(2.0, 0.0)).fit(X, y)
    head.freeze_classes(True)
    before = (head.class_mean_.copy(), head.predict_proba(X[:5]))
    out = calibrate_novelty(head, X, y, setting="large", n_tasks=40,
                            n_novel_classes=3, random_state=0)
    assert out.slope > 0 and np.isfinite(out.intercept)
    assert out.n_first_sightings == 40 * 3
    assert head.novelty_calibration == (2.0, 0.0)
    np.testing.assert_array_equal(head.class_mean_, before[0])
    np.testing.assert_array_equal(head.predict_proba(X[:5]), before[1])


def test_calibration_is_reproducible(rng):
    """Check the same seed gives the same map."""
    X, y = _heavy_tailed(rng, n_classes=20)
    head = CRPGaussianClassifier(prior_mean=0.0, prior_var=4.0, b=1.0, sigma=1.0)
    first = calibrate_novelty(head, X, y, n_tasks=30, random_state=3)
    again = calibrate_novelty(head, X, y, n_tasks=30, random_state=3, n_jobs=2)
    assert (first.slope, first.intercept) == (again.slope, again.intercept)


@pytest.mark.parametrize("kwargs, match", [
    (dict(setting="medium"), "setting"),
    (dict(n_tasks=0), "n_tasks"),
    (dict(n_query=1.5), "n_query"),
    (dict(n_novel_classes=20), "n_novel_classes"),
    (dict(n_novel_classes=0), "n_novel_classes"),
])
def test_calibrate_novelty_rejects_bad_arguments(rng, kwargs, match):
    """Check each bad argument fails with a message naming it."""
    X, y = _heavy_tailed(rng, n_classes=20)
    head = CRPGaussianClassifier(prior_mean=0.0, prior_var=4.0, b=1.0, sigma=1.0)
    with pytest.raises(ValueError, match=match):
        calibrate_novelty(head, X, y, **kwargs)


def test_calibrate_novelty_rejects_bad_data(rng):
    """Check mismatched rows and a single class are refused."""
    X, y = _heavy_tailed(rng, n_classes=3)
    head = CRPGaussianClassifier(prior_mean=0.0, prior_var=4.0, b=1.0, sigma=1.0)
    with pytest.raises(ValueError, match="different numbers of rows"):
        calibrate_novelty(head, X[:-1], y)
    with pytest.raises(ValueError, match="at least 2 labelled classes"):
        calibrate_novelty(head, X[y == 0], y[y == 0])


def test_model_saved_before_the_parameter_loads_without_map(rng):
    """Check a head pickled before ``novelty_calibration`` existed loads with
    the default (no map), clones, and predicts as it did."""
    import pickle

    from sklearn.base import clone

    X, y = _heavy_tailed(rng, n_classes=5)
    head = CRPGaussianClassifier().fit(X, y)
    expected = head.predict_proba(X[:4])
    del head.__dict__["novelty_calibration"]  # as an older version saved it
    loaded = pickle.loads(pickle.dumps(head))
    assert loaded.novelty_calibration is None
    np.testing.assert_array_equal(loaded.predict_proba(X[:4]), expected)
    assert clone(loaded).get_params()["novelty_calibration"] is None


def test_log_odds_rank_queries_whose_p_novel_rounds_to_one(rng):
    """Check the protocol ranks FLOWR's queries by the log-odds: far from
    every known class P(novel) is exactly 1.0 in float64 and ties, which
    would put the fixed-TPR operating point far above its target; with the
    log-odds it is met, and the log-odds follow P(novel)'s order."""
    y = np.repeat(np.arange(30), 25)
    X = rng.normal(scale=30.0, size=(30, 6))[y] + rng.normal(size=(750, 6))
    head = CRPGaussianClassifier(prior_mean=0.0, prior_var=900.0, b=1.0, sigma=1.0)
    tasks = SmallContextTasks(y, n_tasks=30, random_state=0)
    report = evaluate_online(head, X, y, tasks, return_rows=True)
    rows = report.rows
    first = rows.p_novel[rows.is_novel]
    assert np.mean(first == 1.0) > 0.5  # the ties the log-odds break
    assert report.novel_tpr == pytest.approx(0.15, abs=0.01)
    order = np.argsort(rows.novelty_score, kind="stable")
    assert np.all(np.diff(rows.p_novel[order]) >= -1e-12)
    np.testing.assert_allclose(expit(rows.novelty_score[rows.p_novel < 0.999]),
                               rows.p_novel[rows.p_novel < 0.999], rtol=1e-9,
                               atol=1e-300)
    from sklearn_flowr.metrics import open_world_report

    tied = open_world_report(rows.y_true, rows.y_known, rows.p_novel,
                             rows.is_novel, task_ids=rows.task_id)
    assert tied.novel_tpr > 0.5  # what the report did before


@pytest.mark.parametrize("setting", ["small", "large"])
def test_calibration_with_labels_that_reach_minus_one(rng, setting):
    """Check labels {-1, 1, 2, ...} work: the held-out classes must not take
    the novel label the copies would resolve from fewer classes."""
    X, y = _heavy_tailed(rng, n_classes=6, per_class=30)
    y = np.where(y == 0, -1, y)
    head = CRPGaussianClassifier()
    if setting == "large":
        head.fit(X, y)
    else:
        head.set_params(prior_mean=0.0, prior_var=4.0, b=1.0, sigma=1.0)
    out = calibrate_novelty(head, X, y, setting=setting, n_tasks=20, random_state=0)
    assert out.slope > 0


def test_one_row_stream_gives_the_exact_log_odds_far_from_every_class(rng):
    """Check a lone row (the one-row path) far from every known class gets
    the same log-odds as the chunked path, not a clipped or rounded value,
    although its P(novel) is exactly 1.0."""
    X, y = _heavy_tailed(rng, n_classes=4)
    head = CRPGaussianClassifier(covariance="isotropic").fit(X, y)
    far = np.array([[60.0, -60.0, 60.0, -60.0], [-70.0, 70.0, -70.0, 70.0]])
    labels = np.array([90, 91])
    paper = CRPGaussianClassifier(covariance="isotropic")
    chunk = copy.deepcopy(paper).fit(X, y).open_world_step(far, labels)
    lone = [copy.deepcopy(paper).fit(X, y).open_world_step(far[i:i + 1],
                                                           labels[i:i + 1])
            for i in range(2)]
    assert (chunk.p_novel == 1.0).all()
    assert 100 < chunk.novelty_score[0] < 1e10
    assert lone[0].novelty_score[0] == pytest.approx(chunk.novelty_score[0],
                                                     rel=1e-9)
    assert lone[1].novelty_score[0] > 100
    assert head.predict_proba(far)[:, -1].tolist() == [1.0, 1.0]


def test_map_is_the_platt_fit_of_log_odds_beyond_forty_nats():
    """Check calibrate_novelty fits its map on the head's raw log-odds of
    novel: the whitened head's span hundreds of nats, where the logit of
    P(novel) saturates near 36 and ties the rows beyond it (a steeper map)."""
    rng = np.random.default_rng(2)
    y = np.repeat(np.arange(30), 10)
    X = rng.normal(scale=1.5, size=(30, 256))[y] + rng.normal(size=(300, 256))
    head = CRPGaussianClassifier()
    out = calibrate_novelty(head, X, y, n_tasks=20, random_state=0)
    run = calibration_scores(head, X, y, "small", n_tasks=20, seed=0,
                             probability=True)
    log_odds, first = run.novelty_score, run.is_first_sighting
    assert np.mean(np.abs(log_odds) > 40) > 0.3 and np.abs(log_odds).max() < 700
    n_first, n_known = first.sum(), (~first).sum()
    targets = np.where(first, (n_first + 1) / (n_first + 2), 1 / (n_known + 2))

    def mean_nll(w):
        z = w[0] * log_odds + w[1]
        return np.mean(np.logaddexp(0, z) - targets * z)

    expected = minimize(mean_nll, [0.1, 0.0], method="Nelder-Mead",
                        options={"xatol": 1e-8, "fatol": 1e-12}).x
    np.testing.assert_allclose([out.slope, out.intercept], expected, rtol=1e-2)
    # The reported ECE is the map's as the head applies it, on every row.
    assert out.ece_after == pytest.approx(expected_calibration_error(
        first, expit(out.slope * log_odds + out.intercept)))
