"""Tests of the CRP-Gaussian head, ``CRPGaussianClassifier``: the posterior,
learning, streaming and the large context's class embeddings (input checks,
labels and persistence: ``test_head_inputs.py``; ``sigma="auto"``:
``test_head_sigma.py``)."""

import copy
import subprocess
import sys

import numpy as np
import pytest
from scipy.special import logsumexp
from scipy.stats import multivariate_normal
from sklearn.exceptions import NotFittedError

import sklearn_flowr._core._streaming as streaming
from sklearn_flowr import CRPGaussianClassifier

# A prior and class noise given in full: the head can start from any batch.
GIVEN_PRIOR = dict(prior_mean=0.0, prior_var=4.0, b=1.3, sigma=0.5)


def textbook_proba(X_train, y_train, X, *, a, b, sigma, mu0, s0, counts):
    """Posterior class probabilities computed from the conjugate-Gaussian
    textbook formulas and the Pitman-Yor prior, independently of the package."""
    labels = np.unique(y_train)
    d = X_train.shape[1]
    k = counts.sum()
    log_joint = []
    for label, c in zip(labels, counts, strict=True):
        rows = X_train[y_train == label]
        post_var = 1.0 / (1.0 / s0 + rows.shape[0] / sigma)
        post_mean = post_var * (mu0 / s0 + rows.sum(0) / sigma)
        pred = multivariate_normal(post_mean, (post_var + sigma) * np.eye(d))
        log_joint.append(pred.logpdf(X) + np.log((c - a) / (k + b)))
    novel = multivariate_normal(np.full(d, mu0), (s0 + sigma) * np.eye(d))
    log_joint.append(novel.logpdf(X) + np.log((b + a * len(labels)) / (k + b)))
    log_joint = np.stack(log_joint, axis=1)
    return np.exp(log_joint - logsumexp(log_joint, axis=1, keepdims=True))


def row_by_row(clf, X, y):
    """The paper's online loop written naively: predict, then learn."""
    y_known, p_novel, y_pred, is_novel = [], [], [], []
    for t in range(X.shape[0]):
        is_novel.append(y[t] not in clf.classes_.tolist())
        proba = clf.predict_proba(X[t : t + 1])[0]
        p_novel.append(proba[-1])
        y_known.append(clf.classes_[np.argmax(proba[:-1])])
        y_pred.append(clf.predict(X[t : t + 1])[0])
        clf.partial_fit(X[t : t + 1], y[t : t + 1])
    return np.array(y_known), np.array(p_novel), np.array(y_pred), np.array(is_novel)


@pytest.mark.parametrize("known_count", ["observed", 1.0])
def test_predict_proba_matches_textbook_posterior(blobs, rng, known_count):
    """Check predict_proba against an independent conjugate-posterior computation."""
    X, y = blobs
    clf = CRPGaussianClassifier(covariance="isotropic", a=0.4, known_count=known_count,
                                **{**GIVEN_PRIOR, "sigma": 0.8}).fit(X, y)
    counts = np.bincount(y).astype(float) if known_count == "observed" else np.ones(4)
    queries = rng.normal(scale=4, size=(7, 5))
    expected = textbook_proba(X, y, queries, a=0.4, b=1.3, sigma=0.8, mu0=0.0,
                              s0=4.0, counts=counts)
    np.testing.assert_allclose(clf.predict_proba(queries), expected, rtol=1e-9)


def test_predict_log_proba_and_joint_are_consistent(blobs, rng):
    """Check log-proba = log(proba) and joint normalises to log p(x)."""
    X, y = blobs
    clf = CRPGaussianClassifier().fit(X, y)
    queries = rng.normal(size=(5, 5))
    proba = clf.predict_proba(queries)
    np.testing.assert_allclose(np.exp(clf.predict_log_proba(queries)), proba)
    joint = clf.predict_joint_log_proba(queries)
    np.testing.assert_allclose(joint - logsumexp(joint, 1, keepdims=True),
                               np.log(proba), atol=1e-12)
    assert proba.shape == (5, len(clf.classes_) + 1)


def test_fit_learns_empirical_bayes_prior(blobs):
    """Check that "auto" sets mu0 to the mean of the class means."""
    X, y = blobs
    clf = CRPGaussianClassifier(covariance="isotropic").fit(X, y)
    means = np.stack([X[y == k].mean(0) for k in range(4)])
    np.testing.assert_allclose(clf.prior_mean_, means.mean(0))
    assert clf.prior_var_.shape == (1,)
    assert clf.b_ > -clf.a


def test_chunked_partial_fit_equals_fit(blobs, rng):
    """Check that partial_fit in any chunking equals fit on the union."""
    X, y = blobs
    params = dict(known_count="observed", **GIVEN_PRIOR)
    whole = CRPGaussianClassifier(covariance="isotropic", **params).fit(X, y)
    order = rng.permutation(len(y))
    chunked = CRPGaussianClassifier(covariance="isotropic", **params)
    for part in np.array_split(order, [1, 7, 30]):
        chunked.partial_fit(X[part], y[part])
    sort = np.argsort(chunked.classes_)
    np.testing.assert_array_equal(chunked.classes_[sort], whole.classes_)
    np.testing.assert_allclose(chunked.class_mean_[sort], whole.class_mean_)
    np.testing.assert_allclose(chunked.class_var_[sort], whole.class_var_)
    queries = rng.normal(size=(4, 5))
    np.testing.assert_allclose(chunked.predict_proba(queries)[:, np.r_[sort, 4]],
                               whole.predict_proba(queries), rtol=1e-10)


def test_partial_fit_after_fit_adds_one_count_per_row(blobs):
    """Check known_count pseudo-counts in fit and +1 per row online."""
    X, y = blobs
    clf = CRPGaussianClassifier(known_count=1.0).fit(X, y)
    np.testing.assert_array_equal(clf.crp_count_, np.ones(4))
    np.testing.assert_array_equal(clf.class_count_, np.full(4, 15.0))
    clf.partial_fit(X[:3], [1, 1, 7])
    np.testing.assert_array_equal(clf.crp_count_, [1, 3, 1, 1, 1])
    assert clf.classes_.tolist() == [0, 1, 2, 3, 7]


def test_new_class_from_one_sample(blobs):
    """Check that one labelled sample of a new class makes it predictable."""
    X, y = blobs
    clf = CRPGaussianClassifier().fit(X, y)
    far = np.full((1, 5), 40.0)
    assert clf.predict(far)[0] == -1
    clf.partial_fit(far, [9])
    assert clf.predict(far + 0.1)[0] == 9


@pytest.mark.parametrize("class_prior", ["crp", "uniform"])
@pytest.mark.parametrize("prior_var", ["auto", np.linspace(0.5, 3.0, 5)])
def test_open_world_step_equals_row_loop(blobs, rng, class_prior, prior_var):
    """Check the vectorised stream against predict-then-partial_fit per row."""
    X, y = blobs
    clf = CRPGaussianClassifier(class_prior=class_prior, prior_var=prior_var)
    clf.fit(X, y)
    reference = copy.deepcopy(clf)
    X_stream = rng.normal(scale=4, size=(80, 5))
    y_stream = rng.integers(0, 9, size=80)
    out = clf.open_world_step(X_stream, y_stream)
    y_known, p_novel, y_pred, is_novel = row_by_row(reference, X_stream, y_stream)
    np.testing.assert_allclose(out.p_novel, p_novel, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(out.y_known, y_known)
    np.testing.assert_array_equal(out.y_pred, y_pred)
    np.testing.assert_array_equal(out.is_novel, is_novel)
    np.testing.assert_array_equal(clf.classes_, reference.classes_)
    np.testing.assert_allclose(clf.class_mean_, reference.class_mean_)


def test_open_world_step_chunks_give_the_same_result(blobs, rng, monkeypatch):
    """Check that memory-bounding chunks do not change the stream's output."""
    X, y = blobs
    clf = CRPGaussianClassifier().fit(X, y)
    chunked = copy.deepcopy(clf)
    X_stream = rng.normal(scale=4, size=(120, 5))
    y_stream = rng.integers(0, 30, size=120)
    whole = clf.open_world_step(X_stream, y_stream)
    monkeypatch.setattr(streaming, "_MAX_CHUNK_ROWS", 7)
    monkeypatch.setattr(streaming, "_CHUNK_ELEMENTS", 500)
    parts = chunked.open_world_step(X_stream, y_stream)
    np.testing.assert_allclose(parts.p_novel, whole.p_novel, rtol=1e-10)
    np.testing.assert_array_equal(parts.y_pred, whole.y_pred)


def test_open_world_step_from_scratch_with_given_prior(rng):
    """Check a stream on an unfitted head (given prior): first row is novel."""
    X = rng.normal(size=(20, 3))
    y = rng.integers(0, 3, size=20)
    clf = CRPGaussianClassifier(covariance="isotropic", **GIVEN_PRIOR)
    reference = CRPGaussianClassifier(covariance="isotropic", **GIVEN_PRIOR)
    out = clf.open_world_step(X, y)
    assert out.is_novel[0] and out.p_novel[0] == 1.0 and out.y_known[0] == -1
    reference.partial_fit(X[:1], y[:1])
    _, p_novel, _, _ = row_by_row(reference, X[1:], y[1:])
    np.testing.assert_allclose(out.p_novel[1:], p_novel, rtol=1e-10)


@pytest.mark.parametrize("params", [{}, dict(GIVEN_PRIOR, sigma="auto")])
def test_open_world_step_unfitted_auto_prior_raises(rng, params):
    """Check that a stream cannot start without a prior and sigma to predict with."""
    with pytest.raises(NotFittedError, match="needs the prior"):
        CRPGaussianClassifier(**params).open_world_step(rng.normal(size=(3, 2)),
                                                        [0, 1, 0])


def test_stream_state_equals_partial_fit(blobs, rng):
    """Check that open_world_step leaves the same state as partial_fit."""
    X, y = blobs
    a = CRPGaussianClassifier().fit(X, y)
    b = copy.deepcopy(a)
    X_new, y_new = rng.normal(size=(25, 5)), rng.integers(0, 6, size=25)
    a.open_world_step(X_new, y_new)
    b.partial_fit(X_new, y_new)
    sort_a, sort_b = np.argsort(a.classes_), np.argsort(b.classes_)
    np.testing.assert_allclose(a.class_mean_[sort_a], b.class_mean_[sort_b])
    np.testing.assert_array_equal(a.crp_count_[sort_a], b.crp_count_[sort_b])


# --------------------------------------------------------------- precision
def test_float64_state_is_exact_over_a_million_updates():
    """Check 10^6 online updates lose no precision in the float64 state."""
    rng = np.random.default_rng(1)
    clf = CRPGaussianClassifier(covariance="isotropic", prior_mean=0.0, prior_var=1.0,
                                b=1.0, sigma=0.5)
    total = np.zeros((3, 4), dtype=np.int64)
    n = np.zeros(3, dtype=np.int64)
    for _ in range(100):
        # Small integers and sigma = 1/2: every partial sum is exact in float64,
        # so any rounding in the state would show as an inequality.
        Z = rng.integers(-1000, 1000, size=(10_000, 4))
        labels = rng.integers(0, 3, size=10_000)
        clf.partial_fit(Z.astype(float), labels)
        np.add.at(total, labels, Z)
        n += np.bincount(labels, minlength=3)
    order = np.argsort(clf.classes_)
    assert n.sum() == 1_000_000
    np.testing.assert_array_equal(clf.class_count_[order], n)
    expected_mean = (2.0 * total) / (1.0 + 2.0 * n)[:, None]
    np.testing.assert_array_equal(clf.class_mean_[order], expected_mean)


# --------------------------------------------------------------- large context
def test_fit_class_embeddings_sets_natural_parameters(rng):
    """Check q_n = mu_n / s_n, lam_n = 1 / s_n and the known_count prior."""
    means = rng.normal(size=(3, 4))
    variances = np.array([0.5, 1.0, 2.0])
    clf = CRPGaussianClassifier(covariance="isotropic", b=1.0, sigma=0.5,
                                known_count=2.0)
    clf.fit_class_embeddings(["c", "a", "b"], means, variances)
    assert clf.classes_.tolist() == ["a", "b", "c"]
    np.testing.assert_allclose(clf.class_mean_, means[[1, 2, 0]])
    np.testing.assert_allclose(clf.class_var_[:, 0], variances[[1, 2, 0]])
    np.testing.assert_array_equal(clf.crp_count_, [2.0, 2.0, 2.0])
    # predictive of class "a": N(mu, (s + sigma) I) with prior mass (2 - a)/(6 + b)
    z = rng.normal(size=(1, 4))
    joint = clf.predict_joint_log_proba(z)[0, 0]
    expected = multivariate_normal(means[1], 1.5 * np.eye(4)).logpdf(z[0]) + np.log(
        1.5 / 7.0
    )
    assert joint == pytest.approx(expected)


def test_frozen_known_classes_do_not_move_online(rng):
    """Check that known-known classes stay fixed while new classes learn."""
    means = rng.normal(scale=3, size=(3, 4))
    clf = CRPGaussianClassifier(covariance="isotropic", b=1.0, sigma=0.5)
    clf = clf.fit_class_embeddings(
        [0, 1, 2], means, np.ones(3)
    )
    reference = copy.deepcopy(clf)
    X = rng.normal(size=(30, 4))
    y = rng.integers(0, 6, size=30)
    out = clf.open_world_step(X, y)
    # Stored centred on the prior mean: equal to ``means`` to rounding, and
    # exactly what they were before the stream.
    np.testing.assert_allclose(clf.class_mean_[:3], means, rtol=0, atol=1e-14)
    np.testing.assert_array_equal(clf.class_mean_[:3], reference.class_mean_)
    np.testing.assert_array_equal(clf.crp_count_[:3], 1.0)
    y_known, p_novel, _, _ = row_by_row(reference, X, y)
    np.testing.assert_allclose(out.p_novel, p_novel, rtol=1e-10)
    np.testing.assert_array_equal(out.y_known, y_known)


def test_using_the_head_does_not_import_torch():
    """Check that importing the package, fitting the head and predicting
    (probabilities, log-probabilities, a streaming step) never loads torch."""
    code = (
        "import sys\n"
        "import numpy as np\n"
        "from sklearn_flowr import CRPGaussianClassifier\n"
        "rng = np.random.default_rng(0)\n"
        "clf = CRPGaussianClassifier().fit(rng.random((20, 3)), np.arange(20) % 2)\n"
        "clf.predict_proba(rng.random((2, 3)))\n"
        "clf.predict_log_proba(rng.random((2, 3)))\n"
        "clf.open_world_step(rng.random((2, 3)), [0, 5])\n"
        "print('torch' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True,
                            text=True, check=True)
    assert result.stdout.strip() == "False", result.stderr


def test_freeze_classes_keeps_known_classes_fixed_until_released():
    """Check freeze_classes: labels of frozen classes leave their embedding
    and counts unchanged, new classes still learn, and freeze_classes(False)
    lets labels update the known classes again."""
    X = np.array([[0.0, 0.0], [0.2, 0.1], [4.0, 4.0], [4.2, 3.9]])
    clf = CRPGaussianClassifier(covariance="isotropic").fit(X, [0, 0, 1, 1])
    clf.freeze_classes()
    before = clf.class_mean_.copy()
    clf.partial_fit([[1.0, 1.0], [9.0, 9.0]], [0, 2])
    np.testing.assert_array_equal(clf.class_mean_[:2], before)
    assert clf.frozen_classes_.tolist() == [True, True, False]
    assert clf.class_count_.tolist() == [2, 2, 1]
    clf.freeze_classes(False).partial_fit([[1.0, 1.0]], [0])
    assert not np.allclose(clf.class_mean_[0], before[0])
    assert clf.class_count_.tolist() == [3, 2, 1]
