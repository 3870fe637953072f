"""Tests of the label bookkeeping (``sklearn_flowr.base``, ``.validation``)."""

import pickle
import warnings

import numpy as np
import pytest

from sklearn_flowr import CRPGaussianClassifier
from sklearn_flowr.base import LabelRegistry
from sklearn_flowr.calibration import NoveltyCalibratedClassifier
from sklearn_flowr.head import TwoCovarianceWhitener
from sklearn_flowr.validation import (
    check_new_labels,
    label_result_dtype,
    resolve_novel_label,
)


def stream_by_hand(known, rows):
    """Index and is-new of each row, appending unseen labels one row at a time."""
    known = list(known)
    index, is_new = [], []
    for label in rows:
        is_new.append(label not in known)
        if is_new[-1]:
            known.append(label)
        index.append(known.index(label))
    return np.array(index), np.array(is_new), known


@pytest.mark.parametrize(
    "novel_label, labels, expected",
    [
        ("auto", np.array(["a", "b"]), "novel"),
        ("auto", np.array([0, 3]), -1),
        ("auto", np.array([-1, 1]), -2),
        ("auto", np.array([-5, 2]), -6),
        ("auto", np.array([0.5, 2.0]), -1.0),
        ("unknown", np.array([0, 1]), "unknown"),
        (99, np.array(["a"]), 99),
    ],
)
def test_resolve_novel_label(novel_label, labels, expected):
    """Check "auto" gives "novel" for strings and one below min(-1, labels) for
    numbers; any other value is kept."""
    assert resolve_novel_label(novel_label, labels) == expected


def test_auto_novel_label_of_unsigned_labels_is_signed():
    """Check uint8 labels get an int64 -1, not a wrapped 255."""
    novel = resolve_novel_label("auto", np.array([0, 1], dtype=np.uint8))
    assert novel == -1 and np.asarray(novel).dtype == np.int64


def test_check_new_labels_refuses_the_novel_label_and_mixed_kinds():
    """Check the novel label and numbers joining strings are refused."""
    check_new_labels(np.array([0, 1]), -1)
    with pytest.raises(ValueError, match="contains the novel label -1"):
        check_new_labels(np.array([-1, 1]), -1)
    # A NumPy novel label (the "auto" one) is shown as the plain value.
    with pytest.raises(ValueError, match=r"novel label -1, which .* set novel_label"):
        check_new_labels(np.array([-1, 1]), np.int64(-1))
    with pytest.raises(ValueError, match="cannot be mixed"):
        check_new_labels(np.array([3]), "novel", np.array(["a"], dtype=object))


def test_label_result_dtype():
    """Check the dtype holding known labels and the novel label."""
    assert label_result_dtype(np.array([1, 2]), np.int64(-1)) == np.int64
    assert label_result_dtype(np.array(["a"], dtype=object), "novel") == np.dtype("O")


def test_register_returns_indices_in_order_of_the_labels():
    """Check register gives known labels their index and appends new ones in
    the order given."""
    registry = LabelRegistry(np.int64)
    np.testing.assert_array_equal(registry.register(np.array([5, 2])), [0, 1])
    np.testing.assert_array_equal(registry.register(np.array([7, 5, 9])), [2, 0, 3])
    np.testing.assert_array_equal(registry.labels, [5, 2, 7, 9])
    assert len(registry) == 4


@pytest.mark.parametrize("n_rows", [1, 2, 40])
def test_register_stream_equals_a_row_loop(rng, n_rows):
    """Check indices and first sightings of a stream against a loop over rows."""
    registry = LabelRegistry(np.int64)
    registry.add(np.array([3, 1]))
    rows = rng.integers(0, 8, size=n_rows)
    labels, y_index = np.unique(rows, return_inverse=True)
    index, is_new = registry.register_stream(labels, y_index)
    expected_index, expected_new, known = stream_by_hand([3, 1], rows.tolist())
    np.testing.assert_array_equal(index, expected_index)
    np.testing.assert_array_equal(is_new, expected_new)
    np.testing.assert_array_equal(registry.labels, known)


def test_buffer_grows_and_widens():
    """Check many single additions keep every label, and string labels of any
    length are kept whole (stored as objects)."""
    registry = LabelRegistry.for_labels(np.array(["a"]))
    names = [f"label-{'x' * k}" for k in range(50)]
    for name in names:
        registry.add(np.array([name]))
    assert registry.labels.tolist() == names
    assert registry.labels.dtype == object
    numeric = LabelRegistry.for_labels(np.array([1], dtype=np.int8))
    numeric.add(np.array([1], dtype=np.int8))
    numeric.add(np.array([100_000]))
    assert numeric.labels.tolist() == [1, 100_000]


def test_labels_of_maps_minus_one_to_the_novel_label():
    """Check indices map to labels and -1 to the novel label."""
    registry = LabelRegistry(object)
    registry.add(np.array(["a", "b"]))
    assert registry.labels_of(np.array([1, 0]), "novel").tolist() == ["b", "a"]
    out = registry.labels_of(np.array([1, -1, 0]), "novel")
    assert out.tolist() == ["b", "novel", "a"]


def test_pickle_keeps_labels_and_rebuilds_the_index():
    """Check a pickled registry holds the used labels only and indexes them."""
    registry = LabelRegistry(np.int64)
    registry.add(np.array([4, 8, 6]))
    restored = pickle.loads(pickle.dumps(registry))
    assert restored._labels.shape == (3,)
    np.testing.assert_array_equal(restored.register(np.array([6, 4, 1])), [2, 0, 3])


def test_labels_mixing_strings_and_numbers_are_refused_by_name():
    """Check an object array of labels mixing strings and numbers gets an error
    naming the kinds (not scikit-learn's 'Unknown label type'), before fit
    changes anything, for the head and for FLOWRClassifier's checks."""
    import numpy as np
    import pytest

    from sklearn_flowr import CRPGaussianClassifier
    from sklearn_flowr.validation import check_labels

    X = np.random.default_rng(0).normal(size=(8, 3))
    y = np.array([0, 1, "a", "b", 0, 1, "a", "b"], dtype=object)
    head = CRPGaussianClassifier()
    with pytest.raises(ValueError, match=r"mixes labels of types \['int', 'str'\]"):
        head.fit(X, y)
    assert not hasattr(head, "classes_")
    with pytest.raises(ValueError, match="mixes labels of types"):
        check_labels(y, 8)


@pytest.mark.filterwarnings("ignore:fit.s 12 rows")
@pytest.mark.parametrize("kind", ["None", "pandas NA", "pandas string", "NaN object"])
def test_missing_labels_are_refused_by_name(kind):
    """Check missing labels (None, pandas' NA, NaN among object labels) get an
    error naming the rows, not scikit-learn's TypeError on pandas' NA, from
    fit, from partial_fit after fit (the head left as it was), from the
    whitener and from FLOWRClassifier's label check."""
    pd = pytest.importorskip("pandas")
    from sklearn_flowr import CRPGaussianClassifier
    from sklearn_flowr.baselines import NCMClassifier
    from sklearn_flowr.head import TwoCovarianceWhitener
    from sklearn_flowr.validation import check_labels

    rng = np.random.default_rng(0)
    X = rng.normal(size=(12, 3))
    labels = ["a", "b", "c"] * 3 + ["a", "b", None]
    y = {"None": np.array(labels, dtype=object),
         "pandas NA": pd.Series(labels[:-1] + [pd.NA], dtype=object),
         "pandas string": pd.Series(labels, dtype="string"),
         "NaN object": np.array(labels[:-1] + [float("nan")], dtype=object)}[kind]
    message = r"1 missing label\(s\) \(None, NaN or NA\), at rows \[11\]"
    for estimator in (CRPGaussianClassifier(), NCMClassifier(),
                      TwoCovarianceWhitener()):
        with pytest.raises(ValueError, match=message):
            estimator.fit(X, y)
        assert not hasattr(estimator, "n_features_in_")
    head = CRPGaussianClassifier().fit(X, np.array(labels[:-1] + ["c"]))
    before = pickle.dumps(head)
    with pytest.raises(ValueError, match=message):
        head.partial_fit(X, y)
    assert pickle.dumps(head) == before
    with pytest.raises(ValueError, match=message):
        check_labels(y, 12)


def _one_row_classes(rng, n_classes=60):
    """60 classes of one row and one of two (a whitener needs one): more
    classes than half the rows, as one-shot data has."""
    y = np.r_[np.arange(n_classes), 0]
    return rng.normal(size=(y.shape[0], 5)), y


def _dask_chunks(X, y):
    """``X`` and ``y`` as dask arrays of chunks of 30 rows (``fit`` then reads
    them chunk by chunk, on dask's threads)."""
    da = pytest.importorskip("dask.array")
    return da.from_array(X, chunks=(30, X.shape[1])), da.from_array(y, chunks=30)


@pytest.mark.parametrize("fit", [
    lambda X, y: TwoCovarianceWhitener().fit(X, y),
    lambda X, y: CRPGaussianClassifier(novelty_alpha=None).fit(X, y.astype(float)),
    lambda X, y: CRPGaussianClassifier(covariance="isotropic").fit(
        *_dask_chunks(X, y.astype(float))),
    lambda X, y: NoveltyCalibratedClassifier(random_state=0).fit(
        np.repeat(X, 3, axis=0) + np.random.default_rng(1).normal(size=(3 * len(X), 5)),
        np.repeat(y, 3)).open_world_step(X, y + 100),
], ids=["whitener", "head-float-labels", "head-dask-chunks", "wrapper-stream"])
def test_one_shot_labels_do_not_warn_of_a_regression_target(fit):
    """Check that labels with more classes than half the rows (one-shot data)
    pass without scikit-learn's "could represent a regression problem"
    warning, which is about continuous targets, not few-shot classes."""
    X, y = _one_row_classes(np.random.default_rng(0))
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="The number of unique classes")
        fit(X, y)


def test_continuous_labels_are_still_refused():
    X, y = _one_row_classes(np.random.default_rng(0))
    with pytest.raises(ValueError, match="Unknown label type"):
        TwoCovarianceWhitener().fit(X, y + 0.5 * np.arange(y.shape[0]) / y.shape[0])
