"""Tests of the head's input checks, labels and persistence."""

import pickle

import joblib
import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

from sklearn_flowr import CRPGaussianClassifier


# --------------------------------------------------------------- labels
def test_string_labels_and_custom_novel_label(blobs):
    """Check string labels, the "novel" default and a user novel_label."""
    X, y = blobs
    names = np.array(["ant", "bee", "cat", "dog"])[y]
    clf = CRPGaussianClassifier().fit(X, names)
    far = np.full((1, 5), 50.0)
    assert clf.predict(far)[0] == "novel"
    clf2 = CRPGaussianClassifier(novel_label="??").fit(X, names)
    assert clf2.predict(far)[0] == "??"
    clf2.partial_fit(far, ["a-much-longer-label"])
    assert clf2.predict(far)[0] == "a-much-longer-label"


def test_auto_novel_label_avoids_minus_one_labels(blobs):
    """Check that labels {-1, 1} get novel label -2."""
    X, y = blobs
    clf = CRPGaussianClassifier().fit(X[y < 2], np.where(y[y < 2] == 0, -1, 1))
    assert clf.novel_label_ == -2

def test_auto_novel_label_for_unsigned_labels(rng):
    """Check unsigned integer labels get the novel label -1 (not a wrapped value)."""
    X = rng.normal(size=(30, 3))
    y = np.repeat(np.arange(3, dtype=np.uint8), 10)
    head = CRPGaussianClassifier().fit(X, y)
    assert head.novel_label_ == -1
    assert set(head.predict(X + 100.0).tolist()) <= {-1, 0, 1, 2}


# --------------------------------------------------------------- bad input
def _bad_calls(X, y):
    nan = X.copy()
    nan[0, 0] = np.nan
    inf = X.copy()
    inf[1, 2] = np.inf
    return [
        ("partial_fit", (nan, y), "NaN"),
        ("partial_fit", (inf, y), "infinity"),
        ("partial_fit", (X[:, :3], y), "features"),
        ("partial_fit", (X[:0], y[:0]), "0 sample"),
        ("partial_fit", (X, np.where(y == 0, -1, y)), "novel label"),
        ("partial_fit", (X, y[:-1]), "inconsistent numbers of samples"),
        ("partial_fit", (X, y + 0.5), "Unknown label type"),
        ("partial_fit", (X, np.array(["x"] * len(y))), "cannot join"),
        ("open_world_step", (nan, y), "NaN"),
        ("open_world_step", (X[:, :2], y), "features"),
        ("open_world_step", (X, np.where(y == 0, -1, y)), "novel label"),
        ("predict_proba", (X[:, :2],), "features"),
        ("predict", (nan,), "NaN"),
    ]


@pytest.mark.parametrize("case", range(13))
def test_bad_input_raises_and_leaves_state_unchanged(blobs, case):
    """Check each bad input gives a clear error before any state changes."""
    X, y = blobs
    clf = CRPGaussianClassifier().fit(X, y)
    method, args, message = _bad_calls(X, y)[case]
    before = pickle.dumps(clf)
    with pytest.raises(ValueError, match=message):
        getattr(clf, method)(*args)
    assert pickle.dumps(clf) == before


@pytest.mark.parametrize(
    "params, message",
    [
        (dict(a=1.0), "'a' parameter"),
        (dict(a=-0.1), "'a' parameter"),
        (dict(b=-0.6, a=0.5), "greater than -a"),
        (dict(sigma=0.0), "'sigma' parameter"),
        (dict(sigma="pooled"), "'sigma' parameter"),
        (dict(prior_var=-1.0), "'prior_var' parameter"),
        (dict(prior_mean=[0.0, 1.0]), "prior_mean must be"),
        (dict(known_count=0.3, a=0.5), "must exceed a"),
        (dict(class_prior="dirichlet"), "'class_prior' parameter"),
    ],
)
def test_bad_hyper_parameters_raise(blobs, params, message):
    """Check hyper-parameters out of range raise and leave no fitted state."""
    X, y = blobs
    clf = CRPGaussianClassifier(**params)
    with pytest.raises(ValueError, match=message):
        clf.fit(X, y)
    assert not hasattr(clf, "n_features_in_")


def test_unfitted_use_raises(blobs):
    """Check predictions before fitting raise NotFittedError."""
    with pytest.raises(NotFittedError):
        CRPGaussianClassifier().predict_proba(blobs[0])


def test_partial_fit_unfitted_auto_prior_needs_two_classes(blobs):
    """Check that "auto" prior from a one-class first batch is refused."""
    X, y = blobs
    clf = CRPGaussianClassifier(covariance="isotropic")
    with pytest.raises(ValueError, match="at least 2 classes"):
        clf.partial_fit(X[y == 0], y[y == 0])
    assert not hasattr(clf, "n_features_in_")


def test_partial_fit_classes_guard(blobs):
    """Check that labels outside a given `classes` are refused."""
    X, y = blobs
    with pytest.raises(ValueError, match="not in `classes`"):
        CRPGaussianClassifier().partial_fit(X, y, classes=[0, 1])


# --------------------------------------------------------------- persistence
def test_joblib_round_trip_keeps_online_state(blobs, rng, tmp_path):
    """Check a joblib round trip predicts and continues learning identically."""
    X, y = blobs
    clf = CRPGaussianClassifier().fit(X, y)
    clf.partial_fit(X[:4], [9, 9, 8, 1])
    joblib.dump(clf, tmp_path / "head.joblib")
    loaded = joblib.load(tmp_path / "head.joblib")
    queries = rng.normal(size=(6, 5))
    np.testing.assert_array_equal(loaded.predict_proba(queries),
                                  clf.predict_proba(queries))
    X_more, y_more = rng.normal(size=(10, 5)), rng.integers(0, 12, size=10)
    np.testing.assert_array_equal(loaded.open_world_step(X_more, y_more).p_novel,
                                  clf.open_world_step(X_more, y_more).p_novel)


def test_skops_round_trip(blobs, rng):
    """Check persistence through skops.io with explicitly trusted types."""
    sio = pytest.importorskip("skops.io")
    X, y = blobs
    names = np.array(["a", "b", "c", "d"])[y]
    clf = CRPGaussianClassifier().fit(X, names)
    clf.partial_fit(X[:2], ["e", "e"])
    dumped = sio.dumps(clf)
    untrusted = sio.get_untrusted_types(data=dumped)
    assert all(t.startswith(("sklearn_flowr.", "builtins.", "numpy."))
               for t in untrusted)
    import io

    from sklearn_flowr import load

    loaded = load(io.BytesIO(dumped))  # the vetted types only
    queries = rng.normal(size=(3, 5))
    np.testing.assert_array_equal(loaded.predict(queries), clf.predict(queries))
    loaded.partial_fit(X[:1], ["f"])
    assert loaded.classes_.tolist() == ["a", "b", "c", "d", "e", "f"]


# --------------------------------------------------------------- large context
@pytest.mark.parametrize(
    "params, named",
    [
        (dict(sigma=0.5), "b='auto'"),
        (dict(b=1.0), "sigma='auto'"),
        (dict(b=1.0, sigma=0.5, known_count="observed"), "known_count='observed'"),
    ],
)
def test_fit_class_embeddings_needs_numeric_b_and_sigma(params, named):
    """Check that b, sigma and known_count cannot be estimated without samples."""
    clf = CRPGaussianClassifier(covariance="isotropic", **params)
    with pytest.raises(ValueError, match=f"numeric known_count, b and sigma.*{named}"):
        clf.fit_class_embeddings([0, 1], np.eye(2), [1, 1])
    assert not hasattr(clf, "n_features_in_")
