"""float32 features (a network's outputs) through the two-covariance whitener
and the default head: the map and its output keep float32, the estimate and
the head's own maths stay float64."""

import pickle
import warnings

import numpy as np
import pytest
from sklearn.base import clone

import sklearn_flowr
from sklearn_flowr import CRPGaussianClassifier, WhitenedCRPClassifier
from sklearn_flowr.head import TwoCovarianceWhitener
from sklearn_flowr.validation import check_magnitude


def classes_of(rng, n_classes, per_class, n_features):
    """Gaussian classes with anisotropic noise, away from the origin."""
    means = rng.normal(scale=2.0, size=(n_classes, n_features)) + 3.0
    scales = rng.uniform(0.3, 1.5, size=n_features)
    y = np.repeat(np.arange(n_classes), per_class)
    X = means[y] + scales * rng.normal(size=(y.shape[0], n_features))
    return X.astype(np.float32), y


# (classes, rows each, features) and the solvers that fit it.
CASES = [((12, 4, 10), "eigen"), ((12, 4, 10), "gram"), ((5, 3, 40), "span")]


@pytest.mark.parametrize(("shape", "solver"), CASES)
def test_float32_rows_give_a_float32_map_of_the_float64_estimate(rng, shape, solver):
    """Check that a whitener fitted on float32 rows keeps its map and output in
    float32 (for float32 and float64 rows alike), equal to the float64 map of
    the same values up to float32 rounding."""
    X32, y = classes_of(rng, *shape)
    X64 = X32.astype(np.float64)
    single = TwoCovarianceWhitener(solver=solver).fit(X32, y)
    double = TwoCovarianceWhitener(solver=solver).fit(X64, y)
    expected = double.transform(X64)
    assert single.scalings_.dtype == np.float32
    for rows in (X32, X64, X32[:1]):
        got = single.transform(rows)
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, expected[: rows.shape[0]], rtol=0,
                                   atol=1e-5 * np.abs(expected).max())
    fitted = TwoCovarianceWhitener(solver=solver).fit_transform(X32, y)
    assert fitted.dtype == np.float32
    np.testing.assert_allclose(fitted, expected, rtol=0,
                               atol=1e-5 * np.abs(expected).max())
    # The estimate itself is float64's: the same prior and noise.
    np.testing.assert_array_equal(single.prior_var_, double.prior_var_)
    np.testing.assert_array_equal(single.prior_mean_, double.prior_mean_)


def test_float64_fit_keeps_float64_for_float32_rows(rng):
    """Check that a whitener fitted on float64 rows maps float32 rows in
    float64, exactly as their float64 values."""
    X32, y = classes_of(rng, 12, 4, 10)
    whitener = TwoCovarianceWhitener().fit(X32.astype(np.float64), y)
    got = whitener.transform(X32)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, whitener.transform(X32.astype(np.float64)))


def test_default_head_on_float32_features_predicts_as_on_float64(rng):
    """Check that CRPGaussianClassifier() fitted on float32 features predicts
    the classes it predicts on their float64 values, with probabilities equal
    up to float32 rounding, and returns float64 probabilities."""
    X32, y = classes_of(rng, 12, 4, 10)
    queries = classes_of(rng, 16, 2, 10)[0]
    single = CRPGaussianClassifier().fit(X32, y)
    double = CRPGaussianClassifier().fit(X32.astype(np.float64), y)
    proba = single.predict_proba(queries)
    assert proba.dtype == np.float64
    np.testing.assert_allclose(proba, double.predict_proba(
        queries.astype(np.float64)), rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(single.predict(queries),
                                  double.predict(queries.astype(np.float64)))


def test_float32_stream_equals_batch(rng):
    """Check that on float32 features, fit on part of the rows then
    open_world_step and partial_fit of the rest (known and new classes)
    equals the batch head on the whitened rows, up to float32 rounding of the
    map's products."""
    X, y = classes_of(rng, 8, 4, 12)
    queries = classes_of(rng, 10, 2, 12)[0]
    first = np.tile([True, True, False, False], 8) & (y < 6)
    stepped = CRPGaussianClassifier().fit(X[first], y[first])
    online = clone(stepped).fit(X[first], y[first])
    stepped.open_world_step(X[~first], y[~first])
    online.partial_fit(X[~first], y[~first])
    whitener = stepped.whitener_
    assert whitener.scalings_.dtype == np.float32
    head = CRPGaussianClassifier(
        covariance="isotropic", sigma=1.0, prior_mean=np.zeros(12),
        prior_var=whitener.prior_var_, b=stepped.b_, known_count="observed")
    batch = head.fit(whitener.transform(X).astype(np.float64), y)
    expected = batch.predict_proba(whitener.transform(queries).astype(np.float64))
    for model in (stepped, online):
        np.testing.assert_allclose(model.predict_proba(queries), expected,
                                   rtol=1e-5, atol=1e-8)


def test_wrapped_whitener_on_float32_features(rng):
    """Check that WhitenedCRPClassifier takes float32 features online: its head
    learns float64 rows from the float32 map."""
    X, y = classes_of(rng, 8, 4, 12)
    clf = WhitenedCRPClassifier().fit(X[y < 6], y[y < 6])
    result = clf.open_world_step(X[y >= 6], y[y >= 6])
    assert clf.whitener_.scalings_.dtype == np.float32
    assert result.p_novel.dtype == np.float64
    assert np.all(np.isfinite(clf.predict_proba(X)))


def test_float32_extremes_are_checked_without_overflow_warnings():
    """Check that float32 rows at float32's largest values pass the magnitude
    check (they are below its bound) without an overflow warning, and that
    the default head predicts on them (rows are scaled to unit length in
    float64)."""
    big = np.full((2, 3), np.finfo(np.float32).max, dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_magnitude(big)
        clf = CRPGaussianClassifier(novelty_alpha=None).fit(  # (4 rows: no
            np.array([[1, 0, 0], [2, 0, 1], [0, 1, 0], [0, 2, 1]], np.float32),
            [0, 0, 1, 1])                                  # calibration)
        assert clf.predict(big).shape == (2,)


def test_whitener_saved_without_its_precision_loads_as_float64(rng, tmp_path):
    """Check that a whitener state without the precision attribute (as files
    saved before float32 was kept hold) transforms in float64, pickled or
    saved with skops."""
    X, y = classes_of(rng, 12, 4, 10)
    whitener = TwoCovarianceWhitener().fit(X.astype(np.float64), y)
    expected = whitener.transform(X)
    del whitener.__dict__["_dtype"]
    sklearn_flowr.save(whitener, tmp_path / "old.skops")
    for loaded in (pickle.loads(pickle.dumps(whitener)),
                   sklearn_flowr.load(tmp_path / "old.skops")):
        got = loaded.transform(X)
        assert got.dtype == np.float64
        np.testing.assert_array_equal(got, expected)


def test_float32_head_saves_and_loads(rng, tmp_path):
    """Check that a default head fitted on float32 rows comes back from
    sklearn_flowr.save/load with its float32 map and the same probabilities."""
    X, y = classes_of(rng, 12, 4, 10)
    clf = CRPGaussianClassifier().fit(X, y)
    sklearn_flowr.save(clf, tmp_path / "head.skops")
    loaded = sklearn_flowr.load(tmp_path / "head.skops")
    assert loaded.whitener_.scalings_.dtype == np.float32
    np.testing.assert_array_equal(loaded.predict_proba(X), clf.predict_proba(X))


def test_mixed_precision_rows_after_a_float32_fit(rng):
    """Check that float64 rows learned after a float32 fit give what their
    float32 values give (the map's precision is fit's)."""
    X, y = classes_of(rng, 12, 4, 10)
    first = y < 8
    single = CRPGaussianClassifier().fit(X[first], y[first])
    double = clone(single).fit(X[first], y[first])
    single.partial_fit(X[~first], y[~first])
    double.partial_fit(X[~first].astype(np.float64), y[~first])
    np.testing.assert_array_equal(single.predict_proba(X), double.predict_proba(X))


def test_unlabelled_float32_rows_are_corrected_by_their_float64_copies(rng):
    """Check that rows streamed without labels in float32 are found again by
    ``correct`` when given as float64 (a row's identity is its float64
    value), and the head then equals one that learned them labelled."""
    X, y = classes_of(rng, 8, 4, 10)
    first = y < 6
    head = CRPGaussianClassifier(unlabelled_threshold=0.0).fit(X[first], y[first])
    labelled = clone(head).fit(X[first], y[first])
    out = head.open_world_step(X[~first])
    assert out.learned.all()
    head.correct(X[~first].astype(np.float64), out.y_assigned, y[~first])
    labelled.partial_fit(X[~first], y[~first])
    order = np.argsort(head.classes_)
    np.testing.assert_array_equal(head.classes_[order], labelled.classes_)
    np.testing.assert_allclose(head.predict_proba(X)[:, np.r_[order, -1]],
                               labelled.predict_proba(X), rtol=1e-8, atol=1e-12)


def test_float32_features_in_scikit_learn_tools(rng):
    """Check that the default head on float32 features runs in
    cross_val_score, and in GridSearchCV over a and sigma with
    make_scorer(h_measure) on class-disjoint folds, as the README calls them."""
    from sklearn.metrics import make_scorer
    from sklearn.model_selection import GridSearchCV, cross_val_score

    from sklearn_flowr.metrics import h_measure
    from sklearn_flowr.model_selection import OpenWorldSplit

    X, y = classes_of(rng, 12, 10, 8)
    scores = cross_val_score(CRPGaussianClassifier(), X, y, cv=3)
    assert scores.shape == (3,) and np.all(scores > 0.5)
    search = GridSearchCV(
        CRPGaussianClassifier(), {"a": [0.1, 0.5], "sigma": ["auto", 2.0]},
        scoring=make_scorer(h_measure, response_method="predict_proba"),
        cv=OpenWorldSplit(n_splits=2, n_novel_classes=3, random_state=0),
    ).fit(X, y)
    assert np.isfinite(search.cv_results_["mean_test_score"]).all()
    assert search.best_estimator_.whitener_.scalings_.dtype == np.float32
