"""Tests of sklearn_flowr.baselines._dpmeans: DP-means class discovery."""

import copy
import pickle

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy import stats
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.utils.estimator_checks import parametrize_with_checks

from sklearn_flowr.baselines import DPMeansClassifier, NCMClassifier
from sklearn_flowr.baselines._dpmeans import _auto_threshold
from sklearn_flowr.metrics import clustering_accuracy, discovery_report
from sklearn_flowr.validation import provisional_label


@pytest.fixture
def discovery_blobs(rng):
    """Six far-apart Gaussian blobs in 16-d: classes 0-2 known (fitted on 10
    rows each), a shuffled unlabelled stream of 8 more rows of each of 0-5."""
    centres = rng.normal(scale=5.0, size=(6, 16))
    y_train = np.repeat(np.arange(3), 10)
    X_train = centres[y_train] + rng.normal(scale=0.5, size=(30, 16))
    y_stream = rng.permutation(np.repeat(np.arange(6), 8))
    X_stream = centres[y_stream] + rng.normal(scale=0.5, size=(48, 16))
    return X_train, y_train, X_stream, y_stream


def _same_state(estimator, snapshot):
    """Whether two estimators hold the same parameters and state."""
    return pickle.dumps(estimator) == pickle.dumps(snapshot)


# ----------------------------------------------------------- the estimator
def test_default_parameters_and_clone():
    """Check the defaults, get_params and that clone keeps the parameters."""
    dp = DPMeansClassifier()
    assert dp.get_params() == {"threshold": "auto", "threshold_scale": 1.0,
                               "novel_label": "auto"}
    other = clone(DPMeansClassifier(threshold=2.5, threshold_scale=0.5,
                                    novel_label="?"))
    assert other.get_params() == {"threshold": 2.5, "threshold_scale": 0.5,
                                  "novel_label": "?"}


def test_threshold_scale_multiplies_the_threshold(discovery_blobs):
    """Check that threshold_scale times the auto threshold streams exactly as
    that float threshold does, changes after fitting (it is read at call
    time), and survives pickling."""
    X_train, y_train, X_stream, _ = discovery_blobs
    auto = DPMeansClassifier().fit(X_train, y_train).threshold_
    scaled = DPMeansClassifier(threshold_scale=0.3).fit(X_train, y_train)
    assert scaled.threshold_ == pytest.approx(0.3 * auto, rel=1e-15)
    by_value = DPMeansClassifier(threshold=0.3 * auto).fit(X_train, y_train)
    assert_array_equal(copy.deepcopy(scaled).open_world_step(X_stream).y_assigned,
                       by_value.open_world_step(X_stream).y_assigned)
    restored = pickle.loads(pickle.dumps(scaled))
    assert restored.threshold_ == scaled.threshold_
    assert DPMeansClassifier(threshold=2.0, threshold_scale=1.5).fit(
        X_train, y_train).threshold_ == 3.0
    scaled.set_params(threshold_scale=2.0)
    assert scaled.threshold_ == pytest.approx(2.0 * auto, rel=1e-15)


@pytest.mark.parametrize("bad", [0, -1.0, np.inf, np.nan, "2"])
def test_threshold_scale_is_validated_at_fit_and_after(discovery_blobs, bad):
    """Check that a threshold_scale outside (0, inf) fails at fit, and when
    set after fitting, at the next use of the threshold."""
    X_train, y_train, X_stream, _ = discovery_blobs
    with pytest.raises(ValueError, match="threshold_scale"):
        DPMeansClassifier(threshold_scale=bad).fit(X_train, y_train)
    dp = DPMeansClassifier().fit(X_train, y_train).set_params(threshold_scale=bad)
    with pytest.raises(ValueError, match="threshold_scale"):
        dp.open_world_step(X_stream)


def test_unlabelled_stream_discovers_new_blobs(discovery_blobs):
    """Check that with the default threshold the stream's new blobs become
    one provisional class each, and known rows keep their class."""
    X_train, y_train, X_stream, y_stream = discovery_blobs
    dp = DPMeansClassifier().fit(X_train, y_train)
    result = dp.open_world_step(X_stream)
    report = discovery_report(y_stream, result.y_assigned, known_classes=[0, 1, 2])
    assert report.n_discovered == report.n_true_new == 3
    assert report.accuracy_new == report.accuracy_all == 1.0
    assert report.known_accuracy == 1.0
    assert_array_equal(dp.classes_, [0, 1, 2, -2, -3, -4])
    assert_array_equal(dp.is_provisional_, [False] * 3 + [True] * 3)
    assert result.is_novel.sum() == 3
    assert_array_equal(result.y_pred[result.is_novel], -1)
    assert_array_equal(dp.class_count_, [18, 18, 18, 8, 8, 8])


def test_unlabelled_stream_from_scratch(discovery_blobs):
    """Check that with a float threshold an unfitted model clusters a stream
    on its own, naming the classes "new-1", "new-2", ..."""
    _, _, X_stream, y_stream = discovery_blobs
    dp = DPMeansClassifier(threshold=8.0)
    result = dp.open_world_step(X_stream)
    assert clustering_accuracy(y_stream, result.y_assigned) == 1.0
    assert_array_equal(dp.classes_, [f"new-{k}" for k in range(1, 7)])
    assert result.y_known[0] == result.y_pred[0] == "novel"
    assert result.p_novel[0] == np.inf


def test_stream_in_pieces_equals_whole(discovery_blobs):
    """Check that an unlabelled stream cut into pieces (and row by row) gives
    the same assignments and state as one call."""
    X_train, y_train, X_stream, _ = discovery_blobs
    whole = DPMeansClassifier().fit(X_train, y_train)
    expected = whole.open_world_step(X_stream)
    pieces = DPMeansClassifier().fit(X_train, y_train)
    rows = [pieces.open_world_step(X_stream[i : i + 1]) for i in range(5)]
    rows.append(pieces.open_world_step(X_stream[5:]))
    for key in ("y_pred", "y_known", "p_novel", "is_novel", "y_assigned"):
        assert_array_equal(np.concatenate([r[key] for r in rows]), expected[key])
    assert_array_equal(pieces.classes_, whole.classes_)
    assert_allclose(pieces.class_mean_, whole.class_mean_)


def test_labelled_steps_equal_ncm(discovery_blobs):
    """Check that with labels the step is NCM's with the same threshold."""
    X_train, y_train, X_stream, y_stream = discovery_blobs
    dp = DPMeansClassifier(threshold=6.0).fit(X_train, y_train)
    ncm = NCMClassifier(threshold=6.0).fit(X_train, y_train)
    ours = dp.open_world_step(X_stream, y_stream)
    theirs = ncm.open_world_step(X_stream, y_stream)
    for key in ("y_pred", "y_known", "p_novel", "is_novel"):
        assert_array_equal(ours[key], theirs[key])
    assert_array_equal(ours.y_assigned, y_stream)
    assert_array_equal(dp.classes_, ncm.classes_)
    assert_array_equal(dp.class_mean_, ncm.class_mean_)
    assert_array_equal(dp.predict(X_stream), ncm.predict(X_stream))
    assert_array_equal(dp.novelty_score(X_stream), ncm.novelty_score(X_stream))


def test_label_equal_to_a_provisional_one_joins_it(discovery_blobs):
    """Check that a later label equal to a provisional label is that class."""
    X_train, y_train, X_stream, y_stream = discovery_blobs
    dp = DPMeansClassifier().fit(X_train, y_train)
    dp.open_world_step(X_stream)
    result = dp.open_world_step(X_stream[:1], [-2])
    assert not result.is_novel[0]
    assert dp.n_classes_ == 6


def test_pickle_round_trip(discovery_blobs):
    """Check that a pickled model discovers and names classes identically."""
    X_train, y_train, X_stream, _ = discovery_blobs
    dp = DPMeansClassifier().fit(X_train, y_train)
    dp.open_world_step(X_stream[:20])
    restored = pickle.loads(pickle.dumps(dp))
    a, b = dp.open_world_step(X_stream[20:]), restored.open_world_step(X_stream[20:])
    for key in a:
        assert_array_equal(a[key], b[key])
    assert_array_equal(restored.classes_, dp.classes_)
    assert_array_equal(restored.is_provisional_, dp.is_provisional_)


# ------------------------------------------------------------ the threshold
def test_auto_threshold_by_hand(rng):
    """Check "auto" against its formula: the 0.99 quantile over rows of
    sqrt(2 n / (n - 1)) times the distance to the class mean; one-row classes
    are left out."""
    X = rng.normal(size=(9, 3))
    y = np.array([0, 0, 0, 1, 1, 1, 1, 2, 0])
    dp = DPMeansClassifier().fit(X, y)
    values = []
    for label in (0, 1):
        rows = X[y == label]
        n = rows.shape[0]
        distances = np.linalg.norm(rows - rows.mean(axis=0), axis=1)
        values.extend(np.sqrt(2 * n / (n - 1)) * distances)
    assert_allclose(dp.threshold_, np.quantile(values, 0.99))
    assert_allclose(_auto_threshold(X, y), dp.threshold_)


def test_auto_threshold_is_the_pair_distance_quantile(rng):
    """Check that for Gaussian classes "auto" estimates the 0.99 quantile of
    the distance between two rows of one class: sqrt(2 chi2_d(0.99))."""
    X = rng.normal(size=(20000, 4)) * 0.3
    dp = DPMeansClassifier().fit(X, np.repeat([0, 1], 10000))
    assert_allclose(dp.threshold_, 0.3 * np.sqrt(2 * stats.chi2.ppf(0.99, 4)),
                    rtol=0.02)


def test_auto_threshold_is_scale_free(discovery_blobs):
    """Check that rescaling and shifting the features changes no assignment."""
    X_train, y_train, X_stream, _ = discovery_blobs
    reference = DPMeansClassifier().fit(X_train, y_train)
    expected = reference.open_world_step(X_stream)
    for scale, shift in [(1e-4, 0.0), (1e5, 3e5)]:
        dp = DPMeansClassifier().fit(scale * X_train + shift, y_train)
        result = dp.open_world_step(scale * X_stream + shift)
        assert_array_equal(result.y_assigned, expected.y_assigned)
        assert_allclose(dp.threshold_, scale * reference.threshold_, rtol=1e-6)


def test_threshold_follows_the_parameter(discovery_blobs):
    """Check that set_params(threshold=...) after fit takes effect, and "auto"
    comes back to the learned value."""
    X_train, y_train, X_stream, _ = discovery_blobs
    dp = DPMeansClassifier().fit(X_train, y_train)
    learned = dp.threshold_
    dp.set_params(threshold=1e9)
    assert dp.threshold_ == 1e9
    assert not dp.open_world_step(X_stream[:5]).is_novel.any()
    dp.set_params(threshold="auto")
    assert dp.threshold_ == learned


def test_auto_threshold_needs_labelled_pairs(rng):
    """Check that "auto" refuses a start without a class of two rows, and an
    unlabelled stream on an unfitted model, before learning anything."""
    X = rng.normal(size=(3, 2))
    for call in (lambda dp: dp.fit(X, [0, 1, 2]),
                 lambda dp: dp.partial_fit(X, [0, 1, 2])):
        dp = DPMeansClassifier()
        with pytest.raises(ValueError, match="at least two rows"):
            call(dp)
        assert not hasattr(dp, "n_features_in_")
    for y in (None, [0, 0, 1]):
        dp = DPMeansClassifier()
        with pytest.raises(ValueError, match="float threshold"):
            dp.open_world_step(X, y)
        with pytest.raises(NotFittedError):
            dp.predict(X)


def test_bad_threshold_is_refused(rng):
    """Check that a negative threshold is rejected before anything is learned."""
    dp = DPMeansClassifier(threshold=-1.0)
    with pytest.raises(ValueError, match="threshold"):
        dp.open_world_step(rng.normal(size=(2, 2)))
    assert not hasattr(dp, "n_features_in_")


# ------------------------------------------------------- provisional labels
def test_provisional_label_forms():
    """Check the documented forms: "new-k" for strings, -(k + 1) for numbers,
    skipping any label already taken."""
    assert provisional_label(1, []) == "new-1"
    assert provisional_label(3, ["a", "novel"]) == "new-3"
    assert provisional_label(1, ["new-1", "new-2", "novel"]) == "new-3"
    assert provisional_label(1, [0, 5, -1]) == -2
    assert provisional_label(1, np.array([-3.0, -2.0, 4.0, -1.0])) == -4
    assert provisional_label(2, [np.int64(-3), np.int64(7), -1]) == -4


@pytest.mark.parametrize(
    "y, novel_label",
    [(np.array([-3, -2, 0, 0]), "auto"),  # novel -4: provisional skip to -5
     (np.array([0, 0, 1, 1]), -2),
     (np.array(["new-1", "new-1", "new-2", "x"]), "auto"),
     (np.array(["a", "a", "b", "b"]), "new-1")],
)
def test_provisional_labels_never_clash(rng, y, novel_label):
    """Check that provisional labels differ from every user label and the
    novel label, with int and string labels."""
    X = np.repeat(np.arange(4.0)[:, None], 2, axis=1)
    dp = DPMeansClassifier(threshold=0.5, novel_label=novel_label).fit(X, y)
    dp.open_world_step(10.0 + 3.0 * np.arange(6.0)[:, None].repeat(2, axis=1))
    provisional = dp.classes_[dp.is_provisional_]
    assert len(provisional) == 6
    assert len(set(dp.classes_.tolist())) == dp.n_classes_
    assert dp.novel_label_ not in provisional.tolist()
    assert not set(provisional.tolist()) & set(y.tolist())
    assert (dp.classes_.dtype.kind in "iu") == (y.dtype.kind in "iu")


# --------------------------------------------------------------- all or nothing
BAD_ROWS = [
    (np.r_[np.nan, np.zeros(15)][None], "NaN"),
    (np.zeros((1, 3)), "3 features"),
    (np.zeros((0, 16)), "0 sample"),
    (np.full((2, 16), 1e200), "magnitude"),
]


@pytest.mark.parametrize("X_bad, message", BAD_ROWS)
def test_bad_rows_leave_state_unchanged(discovery_blobs, X_bad, message):
    """Check that bad unlabelled rows raise a clear error and change nothing."""
    X_train, y_train, X_stream, _ = discovery_blobs
    dp = DPMeansClassifier().fit(X_train, y_train)
    dp.open_world_step(X_stream[:10])
    snapshot = copy.deepcopy(dp)
    with pytest.raises(ValueError, match=message):
        dp.open_world_step(X_bad)
    assert _same_state(dp, snapshot)


@pytest.mark.parametrize(
    "y_bad, message",
    [([-1], "novel label"), (["a"], "cannot be mixed"), ([0, 0], "inconsistent")],
)
def test_bad_labels_leave_state_unchanged(discovery_blobs, y_bad, message):
    """Check that a labelled step with bad labels fails and changes nothing."""
    X_train, y_train, X_stream, _ = discovery_blobs
    dp = DPMeansClassifier().fit(X_train, y_train)
    dp.open_world_step(X_stream[:10])
    snapshot = copy.deepcopy(dp)
    with pytest.raises(ValueError, match=message):
        dp.open_world_step(X_stream[:1], np.asarray(y_bad))
    assert _same_state(dp, snapshot)


def _count_calls(monkeypatch, function, call):
    """How many times ``call()`` calls ``np.<function>``."""
    original, calls = getattr(np, function), []

    def counting(*args, **kwargs):
        calls.append(None)
        return original(*args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(np, function, counting)
        call()
    return len(calls)


@pytest.mark.parametrize("function", ["argmin", "append"])
@pytest.mark.parametrize("when", ["first", "middle", "last"])
@pytest.mark.parametrize("interrupt", [RuntimeError, KeyboardInterrupt])
def test_failure_mid_stream_leaves_state_unchanged(discovery_blobs, monkeypatch,
                                                   function, when, interrupt):
    """Check that an exception at a call of a numpy function inside the stream
    (np.argmin scores a row, np.append records an opened class) leaves the
    model as it was, and the same call then succeeds as if nothing happened."""
    X_train, y_train, X_stream, _ = discovery_blobs
    dp = DPMeansClassifier().fit(X_train, y_train)
    dp.open_world_step(X_stream[:2])
    snapshot = copy.deepcopy(dp)
    n_calls = _count_calls(monkeypatch, function,
                           lambda: copy.deepcopy(dp).open_world_step(X_stream[2:]))
    assert n_calls >= 2
    k = {"first": 1, "middle": (n_calls + 1) // 2, "last": n_calls}[when]
    original, calls = getattr(np, function), []

    def failing(*args, **kwargs):
        calls.append(None)
        if len(calls) == k:
            raise interrupt("injected")
        return original(*args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(np, function, failing)
        with pytest.raises(interrupt, match="injected"):
            dp.open_world_step(X_stream[2:])
    assert _same_state(dp, snapshot)
    result = dp.open_world_step(X_stream[2:])
    expected = snapshot.open_world_step(X_stream[2:])
    assert_array_equal(result.y_assigned, expected.y_assigned)
    assert _same_state(dp, snapshot)


# ------------------------------------------------------ scikit-learn checks
@parametrize_with_checks([DPMeansClassifier()])
def test_sklearn_compatible_estimator(estimator, check):
    """Check that DP-means passes scikit-learn's common checks."""
    check(estimator)
