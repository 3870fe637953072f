"""Tests of the head's numeric state (``sklearn_flowr.head._state``) against
the conjugate-Gaussian and Pitman-Yor formulas written out independently."""

import copy
import pickle

import numpy as np
import pytest
from scipy.stats import multivariate_normal
from sklearn.base import clone

import sklearn_flowr
from sklearn_flowr import CRPGaussianClassifier
from sklearn_flowr.head._state import (
    ClassState,
    check_class_embeddings,
    state_for_params,
)

A, B, SIGMA, MU0 = 0.3, 1.2, 0.6, 0.5


def textbook_joint(X, index, queries, *, prior_var, n_classes):
    """``log p(x, n)`` for the classes and the novel class (last column), from
    the posterior of each class mean and the Pitman-Yor prior, one row of
    counts per class (CRP count = number of rows)."""
    d = X.shape[1]
    s0 = np.broadcast_to(prior_var, (d,))
    counts = np.bincount(index, minlength=n_classes).astype(float)
    k = counts.sum()
    columns = []
    for n in range(n_classes):
        rows = X[index == n]
        post_var = 1.0 / (1.0 / s0 + rows.shape[0] / SIGMA)
        post_mean = post_var * (MU0 / s0 + rows.sum(axis=0) / SIGMA)
        density = multivariate_normal(post_mean, np.diag(post_var + SIGMA))
        columns.append(np.atleast_1d(density.logpdf(queries))
                       + np.log((counts[n] - A) / (k + B)))
    novel = multivariate_normal(np.full(d, MU0), np.diag(s0 + SIGMA))
    columns.append(np.atleast_1d(novel.logpdf(queries))
                   + np.log((B + A * n_classes) / (k + B)))
    return np.stack(columns, axis=1)


def make_state(prior_var, d):
    return ClassState(np.full(d, MU0), np.atleast_1d(prior_var), sigma=SIGMA,
                            a=A, b=B, class_prior="crp")


@pytest.mark.parametrize("prior_var", [np.array([2.0]), np.array([0.5, 1.0, 3.0])])
def test_learned_state_scores_the_textbook_joint(rng, prior_var):
    """Check learn + joint log-numerators + normaliser against the posterior
    predictive and the Pitman-Yor prior, isotropic and diagonal."""
    X = rng.normal(size=(40, 3))
    index = rng.integers(0, 4, size=40)
    state = make_state(prior_var, 3)
    state.learn(X[:15], index[:15], int(index[:15].max()) + 1)
    state.learn(X[15:], index[15:], 4)
    queries = rng.normal(scale=2.0, size=(6, 3))
    joint = state.joint_log_numerators(queries) + state.log_normaliser()
    expected = textbook_joint(X, index, queries, prior_var=prior_var, n_classes=4)
    np.testing.assert_allclose(joint, expected, rtol=1e-10)


def test_stream_equals_the_textbook_posterior_before_each_row(rng):
    """Check each row of a stream is scored with the rows before it only, new
    classes appearing as they arrive (chunked and whole alike)."""
    X = rng.normal(size=(60, 2)) * 2.0
    labels = rng.integers(0, 7, size=60)
    state = make_state(np.array([3.0]), 2)
    state.learn(X[:10], labels[:10] % 2, 2)  # classes 0 and 1 to start from
    index = labels[:10] % 2
    order = {0: 0, 1: 1}
    stream_index, is_new = [], []
    for label in labels[10:].tolist():
        is_new.append(label not in order)
        order.setdefault(label, len(order))
        stream_index.append(order[label])
    stream_index, is_new = np.array(stream_index), np.array(is_new)
    known, p_novel, pred_novel, log_odds = state.stream(X[10:], stream_index,
                                                        is_new)
    for t in range(50):
        seen_index = np.r_[index, stream_index[:t]]
        n_classes = int(seen_index.max()) + 1
        joint = textbook_joint(X[: 10 + t], seen_index, X[10 + t : 11 + t],
                               prior_var=np.array([3.0]), n_classes=n_classes)[0]
        posterior = np.exp(joint - np.logaddexp.reduce(joint))
        assert p_novel[t] == pytest.approx(posterior[-1], rel=1e-9, abs=1e-300)
        assert log_odds[t] == pytest.approx(
            joint[-1] - np.logaddexp.reduce(joint[:-1]), rel=1e-9, abs=1e-9)
        assert known[t] == np.argmax(joint[:-1])
        assert pred_novel[t] == (joint[-1] > joint[:-1].max())
    assert state.n_classes == len(order)


def test_frozen_classes_stay_fixed(rng):
    """Check classes given as natural parameters and frozen do not learn, in a
    batch update as in a stream, while the others do."""
    means = rng.normal(size=(2, 3))
    state = make_state(np.array([1.0]), 3)
    state.add_classes(2, nat_mean=means / 0.5, precision=np.full((2, 1), 2.0),
                      crp_count=1.0, frozen=True)
    np.testing.assert_allclose(state.class_mean(), means, atol=1e-14)
    X = rng.normal(size=(8, 3))
    state.learn(X, np.array([0, 1, 2, 2, 0, 1, 2, 0]), 3)
    state.stream(X, np.array([0, 2, 3, 1, 3, 0, 2, 2]),
                 np.array([False, False, True] + [False] * 5))
    np.testing.assert_allclose(state.class_mean()[:2], means, atol=1e-14)
    np.testing.assert_array_equal(state.crp_count[:4], [1.0, 1.0, 6.0, 2.0])
    post_var = 1.0 / (1.0 / 1.0 + 2 / SIGMA)  # class 3: stream rows 2 and 4
    np.testing.assert_allclose(state.class_mean()[3],
                               post_var * (MU0 / 1.0 + X[[2, 4]].sum(0) / SIGMA))


def test_pickle_compacts_and_keeps_learning(rng):
    """Check a pickled state scores alike, holds only used rows and grows."""
    state = make_state(np.array([1.0]), 2)
    state.learn(rng.normal(size=(5, 2)), np.array([0, 1, 2, 0, 1]), 3)
    restored = pickle.loads(pickle.dumps(state))
    assert restored.nat_mean.shape == (3, 2)
    queries = rng.normal(size=(3, 2))
    np.testing.assert_array_equal(restored.joint_log_numerators(queries),
                                  state.joint_log_numerators(queries))
    restored.learn(queries, np.array([3, 4, 5]), 6)
    assert restored.n_classes == 6


@pytest.mark.parametrize("prior_var", [np.array([2.0]), np.array([0.5, 1.0, 3.0])])
def test_pickle_holds_one_per_class_matrix(rng, prior_var):
    """Check a pickled state holds one (N, d) array, not the variance table's
    factors: an isotropic one its class sums (the scores' coefficients follow),
    a diagonal one the coefficients (the sums follow); its loaded copy scores
    and learns alike."""
    state = make_state(prior_var, 3)
    state.learn(rng.normal(size=(9, 3)), np.array([0, 1, 2, 0, 1, 0, 3, 3, 0]), 4)
    state.step(rng.normal(size=3), 4, True)  # one-row steps: new and known
    state.step(rng.normal(size=3), 1, False)
    saved = state.__getstate__()
    assert "quad" not in saved
    if state.isotropic:
        assert "joint_coef" not in saved
        assert saved["nat_mean"].shape == (5, 3)  # no spare capacity either
    else:
        assert saved["nat_mean"].shape == (5, 0)
        assert saved["joint_coef"].shape == (6, 4)
    restored = pickle.loads(pickle.dumps(state))
    queries = rng.normal(size=(4, 3))
    np.testing.assert_allclose(restored.joint_log_numerators(queries),
                               state.joint_log_numerators(queries), rtol=1e-13)
    for twin in (state, restored):
        twin.step(queries[0], 5, True)
    np.testing.assert_array_equal(restored.nat_mean[:6], state.nat_mean[:6])
    if not state.isotropic:  # saved as they are: equal to the bit
        np.testing.assert_array_equal(restored.joint_coef[:7], state.joint_coef[:7])
    np.testing.assert_allclose(restored.joint_log_numerators(queries),
                               state.joint_log_numerators(queries), rtol=1e-13)


@pytest.mark.parametrize("prior_var", [np.array([2.0]), np.array([0.5, 1.0, 3.0])])
def test_state_saved_with_the_class_sums_loads(rng, prior_var):
    """Check a state saved with the class sums ``nat_mean`` and without the
    coefficients (an earlier release's save) loads, scores alike and keeps
    one (N, d) array."""
    state = make_state(prior_var, 3)
    state.learn(rng.normal(size=(9, 3)), np.array([0, 1, 2, 0, 1, 0, 3, 3, 0]), 4)
    saved = state.__getstate__()
    saved["nat_mean"] = state.nat_means(slice(0, 4))
    saved.pop("joint_coef", None)
    restored = object.__new__(ClassState)
    restored.__setstate__(saved)
    queries = rng.normal(size=(4, 3))
    np.testing.assert_allclose(restored.joint_log_numerators(queries),
                               state.joint_log_numerators(queries), rtol=1e-13)
    assert restored.nat_mean.shape == state.nat_mean[:4].shape


@pytest.mark.parametrize("params", [
    {}, {"covariance": "full"},
    {"covariance": "isotropic", "prior_var": np.linspace(5.0, 9.0, 8)}])
def test_diagonal_state_holds_one_per_class_matrix(rng, params):
    """Check a fitted head of diagonal classes holds one (N, d) array, the
    scores' coefficients: the class sums follow from them."""
    y = np.repeat(np.arange(40), 3)
    X = rng.normal(scale=3.0, size=(40, 8))[y] + rng.normal(size=(120, 8))
    state = CRPGaussianClassifier(**params).fit(X, y)._state
    per_class = [name for name, value in vars(state).items()
                 if isinstance(value, np.ndarray) and value.ndim == 2
                 and value.shape[0] >= 40 and value.shape[1] >= 8]
    assert per_class == ["joint_coef"]


def test_steps_of_known_and_new_classes_equal_batch_through_save(rng, tmp_path):
    """Check many one-row steps of known and new classes of the default head,
    through a skops save and load, a failed step and a merge, give the state
    of one fit on the same whitened rows."""
    y = np.repeat(np.arange(60), 3)
    X = rng.normal(scale=2.0, size=(60, 10))[y] + rng.normal(size=(180, 10))
    stream = rng.permutation(np.arange(30, 180))  # rows of classes 10..59
    fitted = CRPGaussianClassifier().fit(X[:30], y[:30])
    head = copy.deepcopy(fitted)
    for step, t in enumerate(stream):
        head.open_world_step(X[t : t + 1], y[t : t + 1])
        if step == 70:
            with pytest.raises(ValueError):
                head.open_world_step(np.full((1, 10), np.inf), [1000])
            sklearn_flowr.save(head, tmp_path / "head.skops")
            head = sklearn_flowr.load(tmp_path / "head.skops")
    whitener = head.whitener_
    batch = CRPGaussianClassifier(
        covariance="isotropic", sigma=1.0, prior_mean=np.zeros(10),
        prior_var=whitener.prior_var_, b=head.b_, known_count="observed",
    ).fit(whitener.transform(X), y)
    order = np.argsort(head.classes_)  # (stream order: new classes last)
    np.testing.assert_array_equal(head.classes_[order], batch.classes_)
    # fit's classes come from their whitened means, the batch's from whitened
    # rows: equal to rounding (a coordinate that is zero differs at 1e-17).
    np.testing.assert_allclose(head.class_mean_[order], batch.class_mean_,
                               rtol=1e-10,
                               atol=1e-12 * np.abs(batch.class_mean_).max())
    np.testing.assert_allclose(head.predict_joint_log_proba(X)[:, np.r_[order, -1]],
                               batch.predict_joint_log_proba(whitener.transform(X)),
                               rtol=1e-10)
    # Two heads from the fitted one's prior, each given half the rows, merge
    # into the head that learned them all.
    prior = clone(fitted).set_params(prior_mean=fitted.prior_mean_,
                                     prior_var=fitted.prior_var_, b=fitted.b_,
                                     sigma=fitted.sigma_)
    prior.whitener_ = fitted.whitener_
    left, right = copy.deepcopy(prior), copy.deepcopy(prior)
    for t in stream:
        (left if y[t] < 35 else right).open_world_step(X[t : t + 1], y[t : t + 1])
    both = copy.deepcopy(prior).partial_fit(X[stream], y[stream])
    merged = left.merge(right)
    columns = [np.r_[np.argsort(model.classes_), -1] for model in (merged, both)]
    np.testing.assert_allclose(merged.predict_proba(X)[:, columns[0]],
                               both.predict_proba(X)[:, columns[1]],
                               rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize(
    "params, message",
    [
        (dict(b=-0.5), "greater than -a"),
        (dict(known_count=0.2), "must exceed a"),
    ],
)
def test_new_state_checks_b_and_known_count_against_a(params, message):
    """Check b > -a and known_count > a are required."""
    X, y_index = np.eye(2), np.array([0, 1])
    kwargs = dict(a=0.3, b=1.0, sigma=1.0, prior_mean=0.0, prior_var=1.0,
                  covariance="isotropic", class_prior="crp", known_count=1.0,
                  noise_shrinkage=0.0, prior_scale=1.0)
    with pytest.raises(ValueError, match=message):
        state_for_params(X, y_index, 2, {**kwargs, **params})


@pytest.mark.parametrize(
    "classes, variances, given, message",
    [
        ([0, 0], [1, 1], {}, "distinct labels"),
        ([0, 1, 2], [1, 1], {}, "one row per class"),
        ([0, 1], [1, -1], {}, "positive and finite"),
        ([0, 1], [1, 1], dict(b="auto"), "b='auto'"),
    ],
)
def test_check_class_embeddings(classes, variances, given, message):
    """Check malformed class embeddings and sample-free "auto" values fail."""
    with pytest.raises(ValueError, match=message):
        check_class_embeddings(classes, np.eye(2), variances,
                               covariance="isotropic", **given)
