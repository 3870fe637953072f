"""Tests of the online open-world base class (``sklearn_flowr.base``)
through a minimal subclass that counts the rows of each class."""

import pickle
from collections import Counter

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

from sklearn_flowr.base import OnlineOpenWorldClassifier
from sklearn_flowr.validation import MAX_ABS_INPUT


class RowCounter(OnlineOpenWorldClassifier):
    """Counts rows per class; predicts the class with the most rows so far."""

    _parameter_constraints: dict = {"fail_start": ["boolean"],
                                    "novel_label": "no_validation"}

    def __init__(self, *, fail_start=False, novel_label="auto"):
        self.fail_start = fail_start
        self.novel_label = novel_label

    def _start(self, X, y_index, labels, *, fitting):
        if self.fail_start:
            raise ValueError("start failed")
        self.counts_ = np.zeros(0)
        self.started_fitting_ = fitting
        self.fit_ended_ = False

    def _learn(self, X, index):
        self.counts_ = np.r_[self.counts_,
                             np.zeros(len(self._registry) - self.counts_.shape[0])]
        np.add.at(self.counts_, index, 1.0)

    def _end_fit(self, X, index):
        self.fit_ended_ = True

    def _stream(self, X, index, is_new):
        self.streamed_ = (index.copy(), is_new.copy())
        known = np.full(X.shape[0], -1)
        for row in range(X.shape[0]):
            if self.counts_.any():
                known[row] = np.argmax(self.counts_)
            self._learn(X[row : row + 1], index[row : row + 1])
        return known, (known < 0).astype(float), known < 0


def counts_by_label(estimator):
    return dict(zip(estimator.classes_.tolist(), estimator.counts_.tolist(),
                    strict=True))


def test_fit_sorts_classes_and_forgets_earlier_state(rng):
    """Check fit starts afresh (fitting=True) with sorted classes, and that
    partial_fit appends new classes in order of first appearance."""
    X = rng.normal(size=(12, 3))
    y = np.array([5, 2, 9, 2, 5, 5, 7, 9, 2, 2, 7, 5])
    model = RowCounter().partial_fit(X[:4], y[:4])
    assert model.classes_.tolist() == [5, 2, 9]
    assert not model.started_fitting_ and not model.fit_ended_
    model.partial_fit(X[4:], y[4:])
    assert model.classes_.tolist() == [5, 2, 9, 7]
    assert counts_by_label(model) == dict(Counter(y.tolist()))
    model.fit(X[4:], y[4:])
    assert model.started_fitting_ and model.fit_ended_
    assert model.classes_.tolist() == [2, 5, 7, 9]
    assert counts_by_label(model) == dict(Counter(y[4:].tolist()))


def test_failed_start_leaves_the_estimator_as_it_was(rng):
    """Check a hook that raises in the first call fits nothing, and a failed
    refit leaves the fitted state byte for byte."""
    X, y = rng.normal(size=(4, 2)), np.array([0, 1, 0, 1])
    model = RowCounter(fail_start=True)
    with pytest.raises(ValueError, match="start failed"):
        model.partial_fit(X, y)
    assert not hasattr(model, "n_features_in_")
    with pytest.raises(NotFittedError):
        model._validated_rows(X)
    model.set_params(fail_start=False).fit(X, y)
    before = pickle.dumps(model)
    with pytest.raises(ValueError, match="start failed"):
        model.set_params(fail_start=True).fit(rng.normal(size=(3, 5)), [4, 4, 3])
    model.set_params(fail_start=False)
    assert pickle.dumps(model) == before


@pytest.mark.parametrize(
    "y_bad, message",
    [([-1, 0], "novel label"), (["a", "b"], "cannot be mixed"),
     ([0.5, 1.0], "Unknown label type")],
)
def test_bad_labels_change_nothing(rng, y_bad, message):
    """Check labels are checked against the novel label and the known kind
    before any state changes."""
    model = RowCounter().fit(rng.normal(size=(4, 2)), [0, 1, 0, 1])
    before = pickle.dumps(model)
    with pytest.raises(ValueError, match=message):
        model.partial_fit(rng.normal(size=(2, 2)), np.asarray(y_bad))
    assert pickle.dumps(model) == before


def test_classes_guard(rng):
    """Check labels outside a given ``classes`` are refused and that declared
    classes are created only once they have rows."""
    X = rng.normal(size=(3, 2))
    model = RowCounter().partial_fit(X, [1, 2, 1], classes=[1, 2, 3])
    assert model.classes_.tolist() == [1, 2]
    with pytest.raises(ValueError, match=r"labels \[4\] that are not in `classes`"):
        model.partial_fit(X[:1], [4], classes=[1, 2, 3])


def test_open_world_step_hands_the_stream_its_indices(rng):
    """Check the stream gets each row's class index and first sightings as a
    row loop gives them, and the result maps -1 to the novel label."""
    model = RowCounter().fit(rng.normal(size=(3, 2)), ["b", "a", "b"])
    y = np.array(["c", "a", "c", "d", "b", "d"])
    out = model.open_world_step(rng.normal(size=(6, 2)), y)
    index, is_new = model.streamed_
    np.testing.assert_array_equal(index, [2, 0, 2, 3, 1, 3])
    np.testing.assert_array_equal(is_new, [True, False, False, True, False, False])
    np.testing.assert_array_equal(out.is_novel, is_new)
    assert model.classes_.tolist() == ["a", "b", "c", "d"]
    counts, y_known = Counter({"b": 2, "a": 1}), []
    for label in y.tolist():  # the most frequent label so far (ties: first)
        y_known.append(max(sorted(counts), key=lambda k: (counts[k], -ord(k))))
        counts[label] += 1
    assert out.y_known.tolist() == y_known
    unfitted = RowCounter().open_world_step(rng.normal(size=(2, 2)), [3, 3])
    assert unfitted.y_pred.tolist() == [-1, 3]
    assert unfitted.y_known.tolist() == [-1, 3]


def make_bad(X):
    nan, inf = X.copy(), X.copy()
    nan[0, 0], inf[1, 1] = np.nan, np.inf
    return [(nan, None), (inf, None), (X[:, :2], None), (X[:0], None),
            (X, np.zeros(X.shape[0] - 1, dtype=int))]


@pytest.mark.parametrize("case", range(5))
def test_hot_path_raises_scikit_learns_messages(rng, case):
    """Check the shortcut for float64 arrays raises the message validate_data
    gives for the same rows in float32 (validate_data may add advice)."""
    model = RowCounter().fit(rng.normal(size=(4, 3)), [0, 1, 0, 1])
    X, y = make_bad(rng.normal(size=(4, 3)))[case]
    y = np.zeros(X.shape[0], dtype=int) if y is None else y
    messages = []
    for rows in (X, X.astype(np.float32)):
        with pytest.raises(ValueError) as error:
            model.partial_fit(rows, y)
        messages.append(str(error.value))
    assert messages[1].startswith(messages[0].rstrip("."))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("method", ["partial_fit", "open_world_step"])
def test_non_finite_rows_get_one_message_from_arrays_and_lists(rng, bad, method):
    """Check a float64 array with NaN or inf (the shortcut) raises exactly the
    message scikit-learn gives for the same rows as lists."""
    model = RowCounter().fit(rng.normal(size=(4, 3)), [0, 1, 0, 1])
    X = rng.normal(size=(2, 3))
    X[1, 2] = bad
    messages = []
    for rows, y in ((X, np.array([0, 1])), (X.tolist(), [0, 1])):
        with pytest.raises(ValueError) as error:
            getattr(model, method)(rows, y)
        messages.append(str(error.value))
    assert messages[0] == messages[1]
    assert ("RowCounter does not accept" if np.isnan(bad)
            else "for dtype('float64')") in messages[0]


def test_non_finite_rows_are_refused_under_assume_finite(rng):
    """Check the float64 array shortcut still refuses NaN where scikit-learn's
    finiteness check is switched off (``assume_finite=True``), as it did
    before it borrowed scikit-learn's message."""
    from sklearn import config_context

    model = RowCounter().fit(rng.normal(size=(4, 3)), [0, 1, 0, 1])
    X = rng.normal(size=(1, 3))
    X[0, 0] = np.nan
    with config_context(assume_finite=True), pytest.raises(
            ValueError, match="Input X contains NaN"):
        model.partial_fit(X, np.array([0]))
    assert counts_by_label(model) == {0: 2.0, 1: 2.0}


def test_values_beyond_the_input_range_are_refused(rng):
    """Check |x| > MAX_ABS_INPUT is refused in learning and prediction, and
    the edge value itself is accepted."""
    model = RowCounter().fit(np.full((2, 2), MAX_ABS_INPUT), [0, 1])
    with pytest.raises(ValueError, match="magnitude"):
        model.partial_fit(np.full((1, 2), -2 * MAX_ABS_INPUT), [0])
    with pytest.raises(ValueError, match="magnitude"):
        model._validated_rows(np.full((1, 2), 2 * MAX_ABS_INPUT))


def test_single_row_labels_take_the_shortcut_alike():
    """Check the one-row shortcut of _check_labels equals the general path and
    arrival order keeps first appearances."""
    model = RowCounter()
    labels, y_index = model._check_labels(np.array([7]))
    assert labels.tolist() == [7] and y_index.tolist() == [0]
    labels, y_index = model._check_labels(np.array([7, 3, 7, 1]), arrival_order=True)
    assert labels.tolist() == [7, 3, 1] and y_index.tolist() == [0, 1, 0, 2]
    labels, y_index = model._check_labels(np.array([7, 3, 7, 1]))
    assert labels.tolist() == [1, 3, 7] and y_index.tolist() == [2, 1, 2, 0]


@pytest.mark.parametrize("old_attribute", ["_state", "_labels"])
def test_fitted_state_of_an_older_version_is_refused_by_name(rng, old_attribute):
    """A pickle of the layout before the shared base must not load as an
    unfitted estimator that ``partial_fit`` would silently restart."""
    from sklearn_flowr import CRPGaussianClassifier

    head = CRPGaussianClassifier().fit(rng.normal(size=(6, 2)), [0, 0, 1, 1, 2, 2])
    state = dict(head.__getstate__())  # a copy: the live dict otherwise
    del state["_registry"]
    state[old_attribute] = object()
    with pytest.raises(ValueError, match="older version of sklearn_flowr"):
        CRPGaussianClassifier().__setstate__(state)
    restored = pickle.loads(pickle.dumps(head))
    assert restored.__sklearn_is_fitted__()
