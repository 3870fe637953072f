"""Tests of the open-world baselines: NCM, ProtoNet, PEELER, EVM and the
frozen-feature anchors (SimpleShot, Mahalanobis++, RanPAC, kNN, FeCAM)."""

import pickle
from functools import partial

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy import optimize, special, stats
from scipy.spatial.distance import cdist
from sklearn.exceptions import NotFittedError
from sklearn.metrics import roc_auc_score
from sklearn.utils.estimator_checks import parametrize_with_checks

from sklearn_flowr import CRPGaussianClassifier
from sklearn_flowr._core import _streaming
from sklearn_flowr.baselines import (
    DPMeansClassifier,
    EVMClassifier,
    FeCAMClassifier,
    KNNClassifier,
    MahalanobisPlusPlusClassifier,
    NCMClassifier,
    PEELERClassifier,
    ProtoNetClassifier,
    RanPACClassifier,
    SimpleShotClassifier,
)
from sklearn_flowr.baselines._weibull import fit_weibull, weibull_inclusion

# RanPAC narrow and seeded: two estimators draw the same projection, and a
# prediction's O(M^3) solve stays fast.
SMALL_RANPAC = partial(RanPACClassifier, n_components=64, random_state=0)
ANCHORS = [SimpleShotClassifier, MahalanobisPlusPlusClassifier, SMALL_RANPAC,
           KNNClassifier, FeCAMClassifier]
BASELINES = [NCMClassifier, ProtoNetClassifier, PEELERClassifier, EVMClassifier,
             *ANCHORS]
PROTOTYPE_BASELINES = [NCMClassifier, ProtoNetClassifier, PEELERClassifier]


def _names(classes):
    return [getattr(cls, "func", cls).__name__ for cls in classes]


@pytest.fixture
def open_world_blobs(rng):
    """Six separated Gaussian blobs in 16-d: classes 0-2 known, 3-5 novel.

    In 16-d random centres are also far apart in angle, which EVM's cosine
    distance needs.
    """
    centres = rng.normal(scale=4.0, size=(6, 16))
    y = np.repeat(np.arange(6), 12)
    X = centres[y] + rng.normal(scale=0.6, size=(72, 16))
    known = y < 3
    order = rng.permutation(int((~known).sum()))
    return X[known], y[known], X[~known][order], y[~known][order]


def _row_by_row(estimator, X, y):
    """Predict, score, then learn each row in turn."""
    y_pred, score = [], []
    for row in range(X.shape[0]):
        y_pred.append(estimator.predict(X[row : row + 1])[0])
        score.append(estimator.novelty_score(X[row : row + 1])[0])
        estimator.partial_fit(X[row : row + 1], y[row : row + 1])
    return np.array(y_pred), np.array(score)


# ------------------------------------------------------------ shared behaviour
@pytest.mark.parametrize("cls", BASELINES, ids=_names(BASELINES))
def test_known_classes_classified(cls, open_world_blobs):
    """Check that rows of well separated known classes get their class."""
    X_train, y_train, _, _ = open_world_blobs
    estimator = cls().fit(X_train, y_train)
    result = estimator.open_world_step(X_train, y_train)
    assert_array_equal(result.y_known, y_train)
    assert not result.is_novel.any()


@pytest.mark.parametrize(
    "cls",
    [NCMClassifier, PEELERClassifier, EVMClassifier],
    ids=_names([NCMClassifier, PEELERClassifier, EVMClassifier]),
)
def test_new_blob_scores_higher(cls, open_world_blobs):
    """Check that the first rows of new blobs score as more novel than the rest."""
    X_train, y_train, X_stream, y_stream = open_world_blobs
    result = cls().fit(X_train, y_train).open_world_step(X_stream, y_stream)
    assert result.is_novel.sum() == 3
    assert roc_auc_score(result.is_novel, result.p_novel) > 0.95
    seen = ~result.is_novel
    assert np.mean(result.y_known[seen] == y_stream[seen]) > 0.95


def test_protonet_scores_a_blob_between_classes_as_novel():
    """Check that ProtoNet flags rows equidistant from two prototypes.

    Far from every class, the softmax saturates on the nearest prototype, so
    ProtoNet only sees novelty between classes; there its score is ~0.5.
    """
    X = np.array([[-3.0, 0.0], [3.0, 0.0]])
    proto = ProtoNetClassifier().fit(X, [0, 1])
    score = proto.novelty_score([[0.0, 0.1], [0.0, -0.1], [-3.0, 0.1]])
    assert_allclose(score[:2], 0.5)
    assert score[2] < 1e-6
    assert_array_equal(proto.predict([[0.0, 0.1], [-3.0, 0.1]]), [-1, 0])


@pytest.mark.parametrize("cls", BASELINES, ids=_names(BASELINES))
@pytest.mark.parametrize("start", ["fit", "empty"])
def test_open_world_step_equals_row_loop(cls, start, open_world_blobs):
    """Check that open_world_step equals predict-then-partial_fit row by row."""
    X_train, y_train, X_stream, y_stream = open_world_blobs
    X_stream = np.vstack([X_train[::5], X_stream])
    y_stream = np.r_[y_train[::5], y_stream]
    streamed, looped = cls(), cls()
    if start == "fit":
        streamed.fit(X_train, y_train)
        looped.fit(X_train, y_train)
    else:  # the loop's first prediction needs a state: learn row 0 alike
        streamed.partial_fit(X_stream[:1], y_stream[:1])
        looped.partial_fit(X_stream[:1], y_stream[:1])
    result = streamed.open_world_step(X_stream, y_stream)
    y_pred, score = _row_by_row(looped, X_stream, y_stream)
    assert_array_equal(result.y_pred, y_pred)
    assert_allclose(result.p_novel, score, rtol=1e-9, atol=1e-12)
    assert_array_equal(streamed.classes_, looped.classes_)
    assert_allclose(streamed.novelty_score(X_train), looped.novelty_score(X_train),
                    rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("cls", BASELINES, ids=_names(BASELINES))
def test_open_world_step_from_scratch(cls, rng):
    """Check that a stream on an unfitted estimator starts empty: the first
    row is novel with the empty-state score, later rows of its class are known.
    """
    X = rng.normal(size=(5, 3)) + 5.0
    y = np.array(["a", "a", "b", "a", "b"])
    result = cls().open_world_step(X, y)
    assert_array_equal(result.is_novel, [True, False, True, False, False])
    assert result.y_known[0] == result.y_pred[0] == "novel"
    assert result.p_novel[0] == cls()._empty_score
    assert result.y_known[1] == "a"
    assert result.p_novel.dtype == np.float64
    assert result.is_novel.dtype == bool


@pytest.mark.parametrize("cls", BASELINES, ids=_names(BASELINES))
def test_classes_follow_order_of_arrival(cls, open_world_blobs):
    """Check that fit sorts classes_ and the stream appends new ones in order."""
    X_train, y_train, X_stream, y_stream = open_world_blobs
    estimator = cls().fit(X_train[::-1], y_train[::-1])
    assert_array_equal(estimator.classes_, [0, 1, 2])
    estimator.open_world_step(X_stream, y_stream)
    first = y_stream[np.sort(np.unique(y_stream, return_index=True)[1])]
    assert_array_equal(estimator.classes_, np.r_[[0, 1, 2], first])


@pytest.mark.parametrize("cls", BASELINES, ids=_names(BASELINES))
def test_partial_fit_creates_classes_in_order_of_arrival(cls, open_world_blobs):
    """Check a batch creates its new classes in the order its rows arrive, as
    the head does and as the same rows one by one would."""
    X_train, y_train, X_stream, y_stream = open_world_blobs
    batch = cls().fit(X_train, y_train).partial_fit(X_stream, y_stream)
    rows = cls().fit(X_train, y_train)
    for row in range(X_stream.shape[0]):
        rows.partial_fit(X_stream[row : row + 1], y_stream[row : row + 1])
    assert_array_equal(batch.classes_, rows.classes_)


@pytest.mark.parametrize("cls", PROTOTYPE_BASELINES, ids=_names(PROTOTYPE_BASELINES))
def test_chunked_stream_equals_whole(cls, open_world_blobs, monkeypatch):
    """Check that a stream cut into chunks of 4 rows gives the same results."""
    X_train, y_train, X_stream, y_stream = open_world_blobs
    whole = cls().fit(X_train, y_train).open_world_step(X_stream, y_stream)
    monkeypatch.setattr(_streaming, "_MAX_CHUNK_ROWS", 4)
    chunked = cls().fit(X_train, y_train).open_world_step(X_stream, y_stream)
    assert_array_equal(chunked.y_pred, whole.y_pred)
    assert_allclose(chunked.p_novel, whole.p_novel, rtol=1e-9)


@pytest.mark.parametrize("cls", BASELINES, ids=_names(BASELINES))
def test_fit_equals_partial_fit_on_union(cls, open_world_blobs):
    """Check that partial_fit in chunks learns the state fit learns at once."""
    X, y, X_more, y_more = open_world_blobs
    X, y = np.vstack([X, X_more]), np.r_[y, y_more]
    # PEELER's fit learns its precision: fix it to compare the means alone.
    params = {"precision": 2.0} if cls is PEELERClassifier else {}
    batch = cls(**params).fit(X, y)
    online = cls(**params)
    for rows in np.array_split(np.arange(X.shape[0]), 3):
        online.partial_fit(X[rows], y[rows])
    order = np.argsort(online.classes_)
    assert_array_equal(online.classes_[order], batch.classes_)
    if cls is EVMClassifier:
        assert_allclose(online.weibull_shape_, batch.weibull_shape_, rtol=1e-7)
        assert_allclose(online.weibull_scale_, batch.weibull_scale_, rtol=1e-7)
    elif hasattr(batch, "class_mean_"):
        assert_allclose(online.class_mean_[order], batch.class_mean_)
        assert_array_equal(online.class_count_[order], batch.class_count_)
    assert_allclose(online.novelty_score(X), batch.novelty_score(X), rtol=1e-7)
    assert_array_equal(online.predict(X), batch.predict(X))


@pytest.mark.parametrize("cls", BASELINES, ids=_names(BASELINES))
def test_pickle_round_trip(cls, open_world_blobs):
    """Check that a pickled estimator predicts and keeps learning identically."""
    X_train, y_train, X_stream, y_stream = open_world_blobs
    estimator = cls().fit(X_train, y_train)
    restored = pickle.loads(pickle.dumps(estimator))
    assert_array_equal(restored.predict(X_stream), estimator.predict(X_stream))
    a = estimator.open_world_step(X_stream, y_stream)
    b = restored.open_world_step(X_stream, y_stream)
    assert_array_equal(a.y_pred, b.y_pred)
    assert_array_equal(a.p_novel, b.p_novel)


@pytest.mark.parametrize("cls", BASELINES, ids=_names(BASELINES))
def test_partial_fit_classes_guard(cls, open_world_blobs):
    """Check that partial_fit's classes argument rejects labels outside it."""
    X, y, _, _ = open_world_blobs
    estimator = cls().partial_fit(X, y, classes=[0, 1, 2, 3])
    assert_array_equal(estimator.classes_, [0, 1, 2])
    with pytest.raises(ValueError, match="not in `classes`"):
        estimator.partial_fit(X[:1], [7], classes=[0, 1, 2])


# ---------------------------------------------------------------- bad input
BAD_INPUTS = [
    (np.r_[np.nan, np.zeros(15)][None], [0], "NaN"),
    (np.r_[np.inf, np.zeros(15)][None], [0], "infinity"),
    (np.zeros((1, 3)), [0], "3 features"),
    (np.zeros((0, 16)), np.array([], dtype=int), "0 sample"),
    (np.zeros((1, 16)), [-1], "novel label"),
    (np.zeros((1, 16)), ["a"], "cannot be mixed"),
    (np.zeros((2, 16)), [0], "inconsistent numbers"),
    # Finite but beyond float64's squared distances: once gave y_known equal
    # to the novel label and an infinite score, and learned the row.
    (np.full((1, 16), 1e200), [0], "magnitude"),
]


@pytest.mark.parametrize("cls", BASELINES, ids=_names(BASELINES))
@pytest.mark.parametrize("method", ["partial_fit", "open_world_step"])
@pytest.mark.parametrize("X_bad, y_bad, message", BAD_INPUTS)
def test_bad_input_leaves_state_unchanged(cls, method, X_bad, y_bad, message,
                                          open_world_blobs):
    """Check that bad rows raise a clear error and change nothing."""
    X, y, X_stream, _ = open_world_blobs
    estimator = cls().fit(X, y)
    before = pickle.dumps(estimator)
    with pytest.raises(ValueError, match=message):
        getattr(estimator, method)(X_bad, np.asarray(y_bad))
    assert pickle.dumps(estimator) == before
    assert_array_equal(estimator.classes_, [0, 1, 2])


@pytest.mark.parametrize("cls", BASELINES, ids=_names(BASELINES))
def test_huge_rows_are_refused_in_prediction_and_edge_rows_scored(
        cls, open_world_blobs):
    """Check rows beyond the documented range fail in prediction too, and rows
    at its edge get finite novelty scores."""
    from sklearn_flowr.validation import MAX_ABS_INPUT

    X, y, _, _ = open_world_blobs
    estimator = cls().fit(X, y)
    with pytest.raises(ValueError, match="magnitude"):
        estimator.predict(np.full((1, X.shape[1]), -1e200))
    edge = estimator.open_world_step(np.full((1, X.shape[1]), MAX_ABS_INPUT), [5])
    assert np.isfinite(edge["p_novel"]).all()


TINY_UNIT_ESTIMATORS = [*BASELINES, DPMeansClassifier,
                        partial(CRPGaussianClassifier, covariance="isotropic"),
                        partial(CRPGaussianClassifier, covariance="full")]


@pytest.mark.parametrize("cls", TINY_UNIT_ESTIMATORS,
                         ids=[*_names(BASELINES), "DPMeans", "CRPGaussian-isotropic",
                              "CRPGaussian-full"])
def test_features_of_tiny_units_are_refused_by_fit(cls, open_world_blobs):
    """Check that fit refuses features all below 1e-100 in magnitude (their
    squared distances underflow to 0: every row looked alike, silently), names
    the problem, and leaves a fitted estimator as it was."""
    X, y, _, _ = open_world_blobs
    estimator = cls().fit(X, y)
    before = pickle.dumps(estimator)
    with pytest.raises(ValueError, match=r"all at most 1\.\d+e-190 .*underflow"):
        estimator.fit(X / np.abs(X).max() * 1.5e-190, y)
    assert pickle.dumps(estimator) == before
    estimator.fit(X * 1e-90, y)  # within range: learned
    assert_array_equal(estimator.classes_, [0, 1, 2])


@pytest.mark.parametrize("cls", BASELINES, ids=_names(BASELINES))
def test_failed_first_call_leaves_estimator_unfitted(cls):
    """Check that a failed partial_fit on an unfitted estimator fits nothing."""
    estimator = cls(novel_label=-1)
    with pytest.raises(ValueError, match="novel label"):
        estimator.partial_fit(np.zeros((2, 3)), [0, -1])
    assert not hasattr(estimator, "n_features_in_")
    with pytest.raises(NotFittedError):
        estimator.predict(np.zeros((1, 3)))


@pytest.mark.parametrize(
    "estimator, message",
    [
        (NCMClassifier(threshold=-1.0), "threshold"),
        (ProtoNetClassifier(threshold=1.5), "threshold"),
        (PEELERClassifier(threshold="chi"), "threshold"),
        (PEELERClassifier(var_smoothing=-1.0), "var_smoothing"),
        (PEELERClassifier(precision=-1.0), "precision"),
        (PEELERClassifier(precision=[1.0, -1.0, 1.0]), "positive and finite"),
        (PEELERClassifier(precision=[1.0, 1.0]), "shape \\(3,\\)"),
        (EVMClassifier(tail_size=0), "tail_size"),
        (EVMClassifier(threshold=2.0), "threshold"),
        (SimpleShotClassifier(threshold=-1.0), "threshold"),
        (KNNClassifier(n_neighbors=0), "n_neighbors"),
        (MahalanobisPlusPlusClassifier(threshold="x"), "threshold"),
        (RanPACClassifier(n_components=0), "n_components"),
        (RanPACClassifier(alpha=0.0), "alpha"),
        (FeCAMClassifier(power=0.0), "power"),
        (FeCAMClassifier(shrinkage=-1.0), "shrinkage"),
    ],
)
@pytest.mark.parametrize("method", ["fit", "partial_fit", "open_world_step"])
def test_bad_hyper_parameters(estimator, message, method, rng):
    """Check that hyper-parameters out of range are rejected before fitting."""
    X, y = rng.normal(size=(4, 3)), np.array([0, 0, 1, 1])
    with pytest.raises(ValueError, match=message):
        getattr(estimator, method)(X, y)
    assert not hasattr(estimator, "n_features_in_")


@pytest.mark.parametrize("cls", BASELINES, ids=_names(BASELINES))
def test_unfitted_prediction_raises(cls):
    """Check that predicting before any learning raises NotFittedError."""
    with pytest.raises(NotFittedError):
        cls().novelty_score(np.zeros((1, 2)))


# ------------------------------------------------------------ hand examples
def test_ncm_distances_by_hand():
    """Check NCM's means, nearest class and distance score on a tiny example."""
    X = np.array([[0.0, 0.0], [2.0, 0.0], [0.0, 6.0]])
    ncm = NCMClassifier().fit(X, ["a", "a", "b"])
    assert_allclose(ncm.class_mean_, [[1.0, 0.0], [0.0, 6.0]])
    queries = np.array([[1.0, 3.0], [4.0, 4.0], [1.0, 0.0]])
    assert_allclose(ncm.novelty_score(queries),
                    cdist(queries, ncm.class_mean_).min(axis=1))
    assert_array_equal(ncm.predict(queries), ["a", "b", "a"])  # no threshold
    ncm.set_params(threshold=3.0)
    assert_array_equal(ncm.predict(queries), ["novel", "novel", "a"])


def test_protonet_softmax_by_hand(rng):
    """Check ProtoNet's score against 1 - max softmax(-squared distances)."""
    X, y = rng.normal(size=(9, 4)), np.repeat([0, 1, 2], 3)
    proto = ProtoNetClassifier(threshold=0.3).fit(X, y)
    queries = rng.normal(size=(6, 4))
    proba = special.softmax(-cdist(queries, proto.class_mean_, "sqeuclidean"),
                            axis=1)
    assert_allclose(proto.novelty_score(queries), 1.0 - proba.max(axis=1))
    expected = np.where(1.0 - proba.max(axis=1) >= 0.3, -1, proba.argmax(axis=1))
    assert_array_equal(proto.predict(queries), expected)


def test_peeler_distance_with_given_precision():
    """Check PEELER's normalised Mahalanobis distance with a given precision."""
    X = np.array([[0.0, 0.0, 0.0], [2.0, 2.0, 2.0]])
    peeler = PEELERClassifier(precision=[1.0, 4.0, 0.5]).fit(X, [0, 1])
    # To class 0: (1 * 1 + 4 * 4 + 0.5 * 0) / 3 = 17 / 3; to class 1:
    # (1 * 1 + 4 * 0 + 0.5 * 4) / 3 = 1.
    assert_allclose(peeler.novelty_score([[1.0, 2.0, 0.0]]), [1.0])
    assert_array_equal(peeler.predict([[1.0, 2.0, 0.0]]), [1])
    assert_allclose(peeler.threshold_, stats.chi2.ppf(0.95, 3) / 3)
    peeler.set_params(threshold=0.5)  # the rule follows the parameter
    assert_array_equal(peeler.predict([[1.0, 2.0, 0.0]]), [-1])


def test_peeler_learns_pooled_precision(rng):
    """Check that fit learns the inverse pooled within-class ML variance."""
    y = np.repeat([0, 1, 2], [5, 7, 9])
    X = rng.normal(size=(21, 3)) * [1.0, 3.0, 0.5] + 10.0 * y[:, None]
    peeler = PEELERClassifier(var_smoothing=0.0).fit(X, y)
    residuals = np.vstack([X[y == c] - X[y == c].mean(axis=0) for c in range(3)])
    assert_allclose(peeler.precision_, 1.0 / np.mean(residuals**2, axis=0))
    peeler.partial_fit(rng.normal(size=(3, 3)), [3, 3, 4])
    assert_allclose(peeler.precision_, 1.0 / np.mean(residuals**2, axis=0))


def test_peeler_unfitted_precision():
    """Check that PEELER without fit uses the given precision or the identity."""
    X = np.array([[0.0, 0.0], [1.0, 1.0]])
    assert_array_equal(PEELERClassifier().partial_fit(X, [0, 1]).precision_,
                       [1.0, 1.0])
    given = PEELERClassifier(precision=[2.0, 3.0]).partial_fit(X, [0, 1])
    assert_array_equal(given.precision_, [2.0, 3.0])


def test_peeler_default_threshold_is_calibrated(rng):
    """Check that ~5% of rows of a known Gaussian class are declared novel."""
    scale = np.array([0.5, 1.0, 2.0, 4.0])
    X = rng.normal(size=(20000, 4)) * scale
    peeler = PEELERClassifier().fit(X, np.zeros(20000, dtype=int))
    assert_allclose(peeler.precision_, 1.0 / scale**2, rtol=0.05)
    fresh = rng.normal(size=(20000, 4)) * scale
    assert abs(np.mean(peeler.predict(fresh) == -1) - 0.05) < 0.01


def test_evm_inclusion_by_hand():
    """Check EVM's Weibull fit and Psi for one point with known negatives.

    Features live on the unit circle, so the cosine distance is
    ``1 - cos(angle)``: class 0 has one point at angle 0, class 1 points at
    the angles below, so the margins of the class-0 point are
    ``(1 - cos(angle)) / 2``.
    """
    angles = np.array([0.0, 1.0, 1.3, 1.7, 2.2])
    X = np.c_[np.cos(angles), np.sin(angles)]
    evm = EVMClassifier(tail_size=3).fit(X, [0, 1, 1, 1, 1])
    margins = (1.0 - np.cos(angles[1:4])) / 2.0  # the 3 smallest
    shape, _, scale = stats.weibull_min.fit(margins, floc=0, optimizer=_tight)
    assert_allclose(evm.weibull_shape_[0], shape, rtol=1e-6)
    assert_allclose(evm.weibull_scale_[0], scale, rtol=1e-6)
    query = np.array([[np.cos(-0.4), np.sin(-0.4)]])
    psi = np.exp(-(((1.0 - np.cos(0.4)) / scale) ** shape))
    # Class-1 points (one negative each: steps at their margins) exclude -0.4.
    assert_allclose(evm.novelty_score(query), 1.0 - psi, rtol=1e-5)


def test_evm_step_with_one_negative():
    """Check the degenerate fit: one negative gives a step at the margin."""
    evm = EVMClassifier().fit(np.array([[1.0, 0.0], [0.0, 1.0]]), [0, 1])
    assert_array_equal(evm.weibull_shape_, [np.inf, np.inf])
    assert_allclose(evm.weibull_scale_, [0.5, 0.5])  # (1 - cos 90deg) / 2
    angles = np.array([np.pi / 4, np.pi / 3, np.pi])
    scores = evm.novelty_score(np.c_[np.cos(angles), np.sin(angles)])
    # 45deg: inside both steps; 60deg from class 0 is exactly on its step
    # (inside class 1's); 180deg: outside both.
    assert_allclose(scores, [0.0, 0.0, 1.0])
    assert_array_equal(evm.predict([[-1.0, -0.1]]), [-1])
    assert_array_equal(evm.open_world_step([[-1.0, -0.1]], [5]).y_known, [1])


def test_evm_single_class_includes_everything(rng):
    """Check that points without negatives include every row (no NaN)."""
    X = rng.normal(size=(4, 3))
    evm = EVMClassifier().fit(X, [0, 0, 0, 0])
    assert_array_equal(evm.weibull_scale_, np.inf)
    assert_array_equal(evm.novelty_score(-X), 0.0)


def test_evm_duplicates_give_finite_scores():
    """Check that identical and zero rows across classes give no NaN."""
    X = np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [0.0, 0.0], [2.0, 0.0]])
    evm = EVMClassifier().fit(X, [0, 0, 1, 1, 2])
    assert np.all(np.isfinite(evm.weibull_scale_))
    assert not np.isnan(evm.weibull_shape_).any()
    score = evm.novelty_score(np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]))
    assert np.all(np.isfinite(score)) and np.all((score >= 0) & (score <= 1))


# ----------------------------------------------------------- Weibull fitting
def _tight(func, x0, args=(), disp=0):
    """scipy's default optimizer for ``fit``, run to convergence."""
    return optimize.fmin(func, x0, args=args, xtol=1e-10, ftol=1e-13, disp=0,
                         maxiter=20_000, maxfun=40_000)


def test_weibull_fit_matches_scipy(rng):
    """Check the vectorised ML fit against scipy's weibull_min.fit(floc=0)."""
    true_shape = rng.uniform(0.5, 8.0, size=(20, 1))
    true_scale = rng.uniform(0.01, 3.0, size=(20, 1))
    samples = stats.weibull_min.rvs(true_shape, scale=true_scale, size=(20, 10),
                                    random_state=rng)
    shape, scale = fit_weibull(samples)
    for row, values in enumerate(samples):
        ref_shape, _, ref_scale = stats.weibull_min.fit(values, floc=0,
                                                        optimizer=_tight)
        assert_allclose(shape[row], ref_shape, rtol=1e-6)
        assert_allclose(scale[row], ref_scale, rtol=1e-6)
        # Never a worse likelihood than scipy's default (looser) fit.
        default = stats.weibull_min.fit(values, floc=0)
        ours = stats.weibull_min.logpdf(values, shape[row], scale=scale[row]).sum()
        assert ours >= stats.weibull_min.logpdf(values, *default).sum() - 1e-9


def test_weibull_fit_with_missing_values(rng):
    """Check that inf-padded rows fit like the rows' finite values alone."""
    samples = rng.weibull(2.0, size=(3, 6))
    padded = samples.copy()
    padded[1, 4:] = np.inf
    padded[2, 2:] = np.inf
    shape, scale = fit_weibull(padded)
    for row, n_values in enumerate([6, 4, 2]):
        ref_shape, ref_scale = fit_weibull(samples[row : row + 1, :n_values])
        assert_allclose([shape[row], scale[row]], [ref_shape[0], ref_scale[0]])


def test_weibull_fit_degenerate_rows():
    """Check rows with equal values (a step) and without values."""
    samples = np.array([[0.3, 0.3, 0.3], [0.7, np.inf, np.inf],
                        [np.inf, np.inf, np.inf]])
    shape, scale = fit_weibull(samples)
    assert_array_equal(shape, [np.inf, np.inf, 1.0])
    assert_array_equal(scale, [0.3, 0.7, np.inf])
    psi = weibull_inclusion(np.array([[0.2, 0.7, 5.0], [0.4, 0.8, 0.0]]),
                            shape, scale)
    assert_allclose(psi, [[1.0, np.exp(-1.0), 1.0], [0.0, 0.0, 1.0]])


def test_weibull_fit_is_scale_equivariant(rng):
    """Check that rescaling the samples rescales lambda and keeps kappa."""
    samples = rng.weibull(1.5, size=(5, 10))
    shape, scale = fit_weibull(samples)
    shape_big, scale_big = fit_weibull(1e6 * samples)
    assert_allclose(shape_big, shape, rtol=1e-10)
    assert_allclose(scale_big, 1e6 * scale, rtol=1e-10)


# ------------------------------------------------------ scikit-learn checks
# No check conflicts with these baselines' open-world semantics at their
# default settings: predict returns a known class for training rows (NCM
# never thresholds by default; the others rarely reach their threshold on
# the checks' blobs), and there is no predict_proba with a novel column.
@parametrize_with_checks([cls() for cls in BASELINES])
def test_sklearn_compatible_estimator(estimator, check):
    """Check that the baseline passes scikit-learn's common checks."""
    check(estimator)


# ------------------------------------------------ frozen-feature anchors
# The statistic of each anchor that moves as rows arrive (SimpleShot's centre,
# Mahalanobis++'s shared covariance, RanPAC's ridge) or that its state holds.
ANCHOR_STATE = {"SimpleShotClassifier": ["centre_"],
                "MahalanobisPlusPlusClassifier": ["covariance_", "class_mean_"],
                "RanPACClassifier": ["alpha_", "coef_"], "KNNClassifier": [],
                "FeCAMClassifier": ["class_mean_", "class_count_"]}


@pytest.mark.parametrize("cls", ANCHORS, ids=_names(ANCHORS))
def test_anchor_partial_fit_equals_fit_as_statistics_move(cls, open_world_blobs):
    """Check that partial_fit in chunks, each bringing new classes and moving
    the centring/covariance/ridge statistic, learns fit's state to 1e-10."""
    X, y, X_more, y_more = open_world_blobs
    X, y = np.vstack([X, X_more]), np.r_[y, y_more]
    order = np.argsort(y, kind="stable")  # each chunk opens new classes
    X, y = X[order], y[order]
    batch = cls().fit(X, y)
    online = cls()
    chunks = np.array_split(np.arange(X.shape[0]), 4)
    online.partial_fit(X[chunks[0]], y[chunks[0]])
    names = ANCHOR_STATE[_names([cls])[0]]
    early = {name: np.copy(getattr(online, name)) for name in names}
    for rows in chunks[1:]:
        online.partial_fit(X[rows], y[rows])
    for name in names:
        final = getattr(batch, name)
        assert_allclose(getattr(online, name), final, rtol=1e-10, atol=1e-12)
        if name in ("centre_", "covariance_"):
            assert not np.allclose(early[name], final)  # it did move
    assert_array_equal(online.classes_, batch.classes_)
    assert_allclose(online.novelty_score(X_more), batch.novelty_score(X_more),
                    rtol=1e-10, atol=1e-12)
    assert_array_equal(online.predict(X_more), batch.predict(X_more))


@pytest.mark.parametrize("cls", ANCHORS, ids=_names(ANCHORS))
def test_anchor_in_wrappers_protocol_and_search(cls, open_world_blobs):
    """Check the conformal and calibration wrappers, evaluate_online and
    GridSearchCV take each anchor, and clone keeps its parameters."""
    from sklearn.base import clone
    from sklearn.model_selection import GridSearchCV

    from sklearn_flowr.calibration import NoveltyCalibratedClassifier
    from sklearn_flowr.conformal import ConformalNoveltyClassifier
    from sklearn_flowr.protocol import SmallContextTasks, evaluate_online

    X, y, X_new, y_new = open_world_blobs
    assert clone(cls()).get_params() == cls().get_params()
    calibrated = NoveltyCalibratedClassifier(cls(), cv=3, random_state=0).fit(X, y)
    p_novel = calibrated.predict_novelty_proba(X_new)
    assert np.all((p_novel >= 0) & (p_novel <= 1))
    conformal = ConformalNoveltyClassifier(cls(), cv=3, random_state=0).fit(X, y)
    assert conformal.novelty_pvalues(X_new).shape == (X_new.shape[0],)
    X_all, y_all = np.vstack([X, X_new]), np.r_[y, y_new]
    tasks = SmallContextTasks(y_all, n_support_classes=3, shots=(1, 3),
                              n_novel_classes=2, n_query=2, n_tasks=2,
                              random_state=0)
    report = evaluate_online(cls(), X_all, y_all, tasks)
    assert np.isfinite(report.h_measure)
    search = GridSearchCV(cls(), {"threshold": [None, 1e9]}, cv=2).fit(X, y)
    assert search.best_score_ > 0.9


def test_simpleshot_by_hand(rng):
    """Check SimpleShot's centred, normalised prototypes and distances."""
    X, y = rng.normal(size=(9, 4)) + 3.0, np.repeat([0, 1, 2], 3)
    shot = SimpleShotClassifier().fit(X, y)
    centre = X.mean(axis=0)
    units = (X - centre) / np.linalg.norm(X - centre, axis=1, keepdims=True)
    prototypes = np.array([units[y == c].mean(axis=0) for c in range(3)])
    queries = rng.normal(size=(5, 4)) + 3.0
    q = (queries - centre) / np.linalg.norm(queries - centre, axis=1, keepdims=True)
    distances = cdist(q, prototypes)
    assert_allclose(shot.novelty_score(queries), distances.min(axis=1))
    assert_array_equal(shot.predict(queries), distances.argmin(axis=1))


def test_knn_kth_neighbour_by_hand(rng):
    """Check kNN's class (nearest row) and score (k-th nearest distance)."""
    X, y = rng.normal(size=(12, 5)), np.repeat([0, 1, 2], 4)
    knn = KNNClassifier(n_neighbors=3).fit(X, y)
    queries = rng.normal(size=(6, 5))
    unit = lambda A: A / np.linalg.norm(A, axis=1, keepdims=True)  # noqa: E731
    distances = cdist(unit(queries), unit(X))
    assert_allclose(knn.novelty_score(queries), np.sort(distances, axis=1)[:, 2])
    assert_array_equal(knn.predict(queries), y[distances.argmin(axis=1)])
    many = KNNClassifier(n_neighbors=50).fit(X, y)  # k beyond the rows: all
    assert_allclose(many.novelty_score(queries), distances.max(axis=1))


def test_mahalanobis_plus_plus_by_hand(rng):
    """Check the shared covariance is OAS of the normalised rows' within-class
    residuals and the score the smallest squared Mahalanobis distance."""
    from sklearn.covariance import OAS

    X, y = rng.normal(size=(30, 4)) + rng.normal(size=(3, 4))[np.arange(30) % 3], \
        np.arange(30) % 3
    maha = MahalanobisPlusPlusClassifier().fit(X, y)
    units = X / np.linalg.norm(X, axis=1, keepdims=True)
    means = np.array([units[y == c].mean(axis=0) for c in range(3)])
    expected = OAS(assume_centered=True).fit(units - means[y]).covariance_
    assert_allclose(maha.covariance_, expected + 1e-9 * np.eye(4), atol=1e-12)
    queries = rng.normal(size=(5, 4))
    q = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    distances = cdist(q, means, "mahalanobis", VI=np.linalg.inv(maha.covariance_))
    assert_allclose(maha.novelty_score(queries), distances.min(axis=1) ** 2)
    assert_array_equal(maha.predict(queries), distances.argmin(axis=1))


def test_fecam_by_hand(rng):
    """Check FeCAM's Tukey features and shrunk, normalised class covariance."""
    X, y = np.abs(rng.normal(size=(10, 3))), np.repeat([0, 1], 5)
    fecam = FeCAMClassifier().fit(X, y)
    units = np.sqrt(X) / np.linalg.norm(np.sqrt(X), axis=1, keepdims=True)
    query = np.abs(rng.normal(size=(1, 3)))
    q = np.sqrt(query) / np.linalg.norm(np.sqrt(query))
    distances = []
    for c in range(2):
        cov = np.cov(units[y == c], rowvar=False)
        off = cov - np.diag(np.diag(cov))
        cov = (cov + np.mean(np.diag(cov)) * np.eye(3) + 1e-9 * np.eye(3)
               + max(off[off != 0].mean(), 0.0) * (1 - np.eye(3)))
        corr = cov / np.sqrt(np.outer(np.diag(cov), np.diag(cov)))
        diff = q - units[y == c].mean(axis=0)
        distances.append((diff @ np.linalg.pinv(corr) @ diff.T).item())
    assert_allclose(fecam.novelty_score(query), min(distances), rtol=1e-8)
    assert_array_equal(fecam.predict(query), [int(np.argmin(distances))])


def test_fecam_refuses_classes_beyond_its_memory_bound(open_world_blobs,
                                                       monkeypatch):
    """Check FeCAM refuses a class whose covariance passes the memory bound,
    with a clear message and its state unchanged."""
    from sklearn_flowr.baselines import _fecam

    X, y, X_new, y_new = open_world_blobs
    fecam = FeCAMClassifier().fit(X, y)
    monkeypatch.setattr(_fecam, "MAX_COVARIANCE_BYTES", 3 * 16 * 16 * 8)
    before = pickle.dumps(fecam)
    for method in ("partial_fit", "open_world_step"):
        with pytest.raises(ValueError, match="matrix per class: 6 classes take more"):
            getattr(fecam, method)(X_new, y_new)
        assert pickle.dumps(fecam) == before


def test_ranpac_ridge_and_held_out_alpha_by_hand(open_world_blobs):
    """Check RanPAC's weights are ridge on the ReLU projection and alpha (over
    trace(G) / M) the grid value of least held-out squared error (rows 2, 7,
    ... of a class)."""
    from sklearn.linear_model import Ridge

    X, y, _, _ = open_world_blobs
    ranpac = SMALL_RANPAC().fit(X, y)
    H = np.maximum(X @ ranpac.projection_, 0.0)
    Y = (y[:, None] == np.arange(3)).astype(float)
    scale = np.trace(H.T @ H) / H.shape[1]  # alpha is relative to it
    ridge = Ridge(alpha=ranpac.alpha_ * scale, fit_intercept=False,
                  solver="cholesky")
    assert_allclose(ranpac.coef_, ridge.fit(H, Y).coef_.T, rtol=1e-6, atol=1e-9)
    rank = np.array([np.sum(y[:i] == y[i]) for i in range(y.shape[0])])
    held = rank % 5 == 1
    errors = [np.sum((Ridge(alpha=a * scale, fit_intercept=False,
                            solver="cholesky").fit(H[~held], Y[~held])
                      .predict(H[held]) - Y[held]) ** 2)
              for a in 10.0 ** np.arange(-8, 9)]
    assert ranpac.alpha_ == 10.0 ** np.arange(-8, 9)[np.argmin(errors)]
    outputs = H @ ranpac.coef_
    assert_allclose(ranpac.novelty_score(X), 1.0 - outputs.max(axis=1))


@pytest.mark.parametrize("cls", ANCHORS, ids=_names(ANCHORS))
def test_anchor_learns_rows_at_the_input_bound(cls, open_world_blobs):
    """Check rows at the documented input bound are learned, and every row
    is then scored finitely (RanPAC's ridge once overflowed there)."""
    from sklearn_flowr.validation import MAX_ABS_INPUT

    X, y, _, _ = open_world_blobs
    estimator = cls().fit(X, y)
    estimator.partial_fit(np.full((2, X.shape[1]), MAX_ABS_INPUT), [7, 7])
    assert np.isfinite(estimator.novelty_score(np.vstack([X, -X]))).all()
