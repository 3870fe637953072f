"""Tests of answers that must not be silently wrong: shifted and huge inputs,
parameters changed after ``fit``, and the order new classes are created in."""

import copy

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.utils._param_validation import InvalidParameterError

from sklearn_flowr import CRPGaussianClassifier, FLOWRClassifier
from sklearn_flowr.training import MetaTraining, SupE
from sklearn_flowr.validation import MAX_ABS_INPUT


def _head_problem(rng, shift=0.0):
    means = rng.normal(scale=3.0, size=(4, 5))
    y = np.repeat(np.arange(4), 8)
    X = means[y] + rng.normal(scale=0.7, size=(32, 5))
    X_stream = np.r_[means[[0, 2]] + 0.1, rng.normal(scale=6.0, size=(6, 5))]
    y_stream = np.array([0, 2, 7, 7, 8, 9, 8, 1])
    return X + shift, y, X_stream + shift, y_stream


@pytest.mark.parametrize("covariance", ["isotropic", "full"])
def test_results_are_shift_invariant(rng, covariance):
    """Check that shifting the data by 1e9 leaves every probability unchanged
    (the state is centred on the prior mean, not the origin)."""
    outputs = []
    for shift in (0.0, 1e9):
        X, y, X_stream, y_stream = _head_problem(np.random.default_rng(0), shift)
        clf = CRPGaussianClassifier(covariance=covariance).fit(X, y)
        proba = clf.predict_proba(X_stream)
        out = clf.open_world_step(X_stream, y_stream)
        outputs.append((proba, out.p_novel, clf.class_mean_ - shift))
    for before, after in zip(*outputs, strict=True):
        np.testing.assert_allclose(after, before, rtol=1e-6, atol=1e-6)


def test_stream_equals_row_loop_far_from_the_origin(rng):
    """Check that open_world_step equals the row loop at |x| ~ 1e4."""
    X, y, X_stream, y_stream = _head_problem(rng, shift=1e4)
    clf = CRPGaussianClassifier().fit(X, y)
    loop = copy.deepcopy(clf)
    out = clf.open_world_step(X_stream, y_stream)
    p_loop = []
    for row, label in zip(X_stream, y_stream, strict=True):
        p_loop.append(loop.predict_proba(row[None])[0, -1])
        loop.partial_fit(row[None], [label])
    np.testing.assert_allclose(out.p_novel, p_loop, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("method", ["fit", "partial_fit", "open_world_step",
                                    "predict_proba", "fit_class_embeddings"])
def test_values_too_large_to_score_are_refused(rng, method):
    """Check that finite values beyond MAX_ABS_INPUT raise a clear error, never
    NaN, and leave a fitted head as it was."""
    X, y, _, _ = _head_problem(rng)
    clf = CRPGaussianClassifier(covariance="isotropic", b=1.0, sigma=0.5).fit(X, y)
    before = copy.deepcopy(clf)
    huge = np.full((2, 5), 1e200)
    with pytest.raises(ValueError, match="magnitude"):
        if method == "fit_class_embeddings":
            clf.fit_class_embeddings([0, 1], huge, [1.0, 1.0])
        elif method == "predict_proba":
            clf.predict_proba(huge)
        else:
            getattr(clf, method)(huge, [0, 1])
    np.testing.assert_array_equal(clf.predict_proba(X), before.predict_proba(X))
    # Just inside the range, the answer is finite.
    edge = np.full((1, 5), MAX_ABS_INPUT)
    assert np.isfinite(clf.predict_proba(edge)).all()


def test_infinite_concentration_is_refused(rng):
    """Check that b=inf is refused rather than giving NaN."""
    X, y, _, _ = _head_problem(rng)
    with pytest.raises(ValueError, match="finite"):
        CRPGaussianClassifier(b=np.inf).fit(X, y)


@pytest.mark.parametrize("params", [dict(a=1.5), dict(sigma=-1.0), dict(b=-0.7),
                                    dict(prior_var=-1.0), dict(known_count=0),
                                    dict(class_prior="x"), dict(covariance="x")])
@pytest.mark.parametrize("method", ["partial_fit", "open_world_step",
                                    "predict_proba"])
def test_invalid_params_after_fit_are_refused(rng, params, method):
    """Check that set_params with an invalid value after fit fails on the next
    call, before any state changes."""
    X, y, X_stream, y_stream = _head_problem(rng)
    clf = CRPGaussianClassifier().fit(X, y)
    reference = copy.deepcopy(clf)
    clf.set_params(**params)
    with pytest.raises((InvalidParameterError, ValueError)):
        if method == "predict_proba":
            clf.predict_proba(X_stream)
        else:
            getattr(clf, method)(X_stream, y_stream)
    np.testing.assert_array_equal(clf.class_count_, reference.class_count_)


def test_valid_params_after_fit_need_a_refit(rng):
    """Check that a valid new value the state cannot take says to refit, and
    that refitting (or setting it back) works."""
    X, y, X_stream, _ = _head_problem(rng)
    clf = CRPGaussianClassifier(a=0.5).fit(X, y)
    expected = clf.predict_proba(X_stream)
    clf.set_params(a=0.9)
    with pytest.raises(ValueError, match=r"a: 0.5 -> 0.9.*call fit again"):
        clf.predict_proba(X_stream)
    clf.set_params(a=0.5)  # set back: the fitted state applies again
    np.testing.assert_array_equal(clf.predict_proba(X_stream), expected)
    refit = clf.set_params(a=0.9).fit(X, y)
    assert refit.predict_proba(X_stream).shape == expected.shape


@pytest.mark.parametrize("method", ["partial_fit", "open_world_step"])
def test_a_batch_creates_classes_in_arrival_order(rng, method):
    """Check that one batch creates its new classes in the order its rows
    arrive, as the same rows one by one would."""
    X, y, _, _ = _head_problem(rng)
    X_new = rng.normal(size=(4, 5))
    y_new = np.array([13, 11, 13, 12])
    batch = CRPGaussianClassifier().fit(X, y)
    loop = copy.deepcopy(batch)
    getattr(batch, method)(X_new, y_new)
    for row, label in zip(X_new, y_new, strict=True):
        loop.partial_fit(row[None], [label])
    assert batch.classes_.tolist() == [0, 1, 2, 3, 13, 11, 12]
    np.testing.assert_array_equal(batch.classes_, loop.classes_)
    np.testing.assert_allclose(batch.predict_proba(X), loop.predict_proba(X),
                               rtol=1e-12)


@pytest.fixture(scope="module")
def flowr_model():
    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32)
    keep = y < 5
    model = FLOWRClassifier(backbone="mlp", setting="large", embedding_dim=8,
                            pretrain=SupE(epochs=1),
                            meta=MetaTraining(epochs=1, episodes_per_epoch=2,
                                              n_way=3, n_unknown=1),
                            random_state=0)
    return model.fit(X[keep], y[keep]), X, y


@pytest.mark.parametrize("bad", [
    dict(fine_tune_steps=-2),
    dict(head__a=1.5),
    dict(head__sigma=-1.0),
    dict(meta__n_way=0),
    dict(pretrain__batch_size=0),
])
def test_flowr_invalid_params_after_fit_fail(flowr_model, bad):
    """Check FLOWRClassifier: an invalid new value, of its own parameters or
    of its parts' (head__*, meta__*, pretrain__*), fails with scikit-learn's
    parameter error when the fitted model next runs."""
    model, X, _ = flowr_model
    with pytest.raises(InvalidParameterError):
        copy.deepcopy(model).set_params(**bad).predict(X[:5])


def test_flowr_params_changed_after_fit(flowr_model):
    """Check FLOWRClassifier: values the fitted model was built from (the
    head's and the training stages') need a refit, and values read at run
    time just apply."""
    model, X, y = flowr_model
    model = copy.deepcopy(model)
    expected = model.predict_proba(X[:5])
    for name in ("head__known_count", "meta__episode_known_count"):
        with pytest.raises(ValueError, match=rf"\({name}: ('auto'|1.0) -> 3.0\)"):
            copy.deepcopy(model).set_params(**{name: 3.0}).partial_fit(X[:2], y[:2])
    with pytest.raises(ValueError, match=r"\(embedding_dim: 8 -> 9\)"):
        copy.deepcopy(model).set_params(embedding_dim=9).predict(X[:2])
    runtime = copy.deepcopy(model).set_params(device="cpu", verbose=0,
                                              pretrain__batch_size=7,
                                              fine_tune_steps=3)
    np.testing.assert_allclose(runtime.predict_proba(X[:5]), expected, rtol=1e-5,
                               atol=1e-7)


def test_flowr_partial_fit_keeps_arrival_order(flowr_model):
    """Check that FLOWRClassifier.partial_fit adds new classes in arrival order."""
    model, X, y = flowr_model
    model = copy.deepcopy(model)
    rows = np.r_[np.flatnonzero(y == 9)[:2], np.flatnonzero(y == 7)[:2]]
    model.partial_fit(X[rows], y[rows])
    assert model.classes_.tolist() == [0, 1, 2, 3, 4, 9, 7]
