"""Checks of what users pass: inputs, labels and parameters changed after fit."""

import inspect
import sys
import warnings
from numbers import Number

import numpy as np
from sklearn.utils import assert_all_finite, check_array
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import column_or_1d, validate_data

__all__ = [
    "MAX_ABS_INPUT", "as_model_input", "check_labels", "check_magnitude",
    "caller_stacklevel", "check_missing_labels", "check_new_labels",
    "check_params_unchanged", "check_targets", "fill_new_params", "label_result_dtype",
    "looks_unscaled", "next_provisional_label", "novel_rows", "params_equal",
    "provisional_label", "resolve_novel_label", "same_label", "scale_by_dtype",
    "snapshot_params", "validate_rows"]

# Largest |x| the estimators score: squared distances stay finite in float64.
MAX_ABS_INPUT = 1e100


def check_magnitude(X, *, units=False):
    """Refuse finite values of a float array (as ``validate_data`` gives it)
    too large to score in float64 (they give NaN); ``units`` (the rows that
    set the features' units, ``fit``'s): refuse them all too small too (their
    squared distances underflow to 0, silently)."""
    largest = float(max(X.max(), -X.min())) if X.size else 0.0  # no |X| copy
    if largest > MAX_ABS_INPUT:
        raise ValueError(
            f"X holds values up to {largest:.3g} in magnitude; the "
            f"open-world estimators score values up to {MAX_ABS_INPUT:g} (squared "
            "distances overflow float64 beyond). Rescale the features, e.g. with "
            "StandardScaler.")
    if units and 0 < largest < 1 / MAX_ABS_INPUT:
        raise ValueError(
            f"X's values are all at most {largest:.3g} in magnitude; the "
            f"open-world estimators learn from features of magnitude "
            f"{1 / MAX_ABS_INPUT:g} or more (squared distances underflow float64 "
            "below). Rescale the features, e.g. with StandardScaler.")


def validate_rows(estimator, X, y=None, *, dtype=np.float64):
    """``validate_data(estimator, X, y, dtype=dtype, reset=False)`` and the
    magnitude check; done directly for ndarrays of a ``dtype`` (one, or a
    tuple of those kept) (same messages; validate_data costs hundreds of
    microseconds)."""
    check_missing_labels(y)
    kept = dtype if isinstance(dtype, tuple) else (dtype,)
    lean = (isinstance(X, np.ndarray) and X.dtype in kept
            and X.ndim == 2
            and (y is None or (isinstance(y, np.ndarray) and y.ndim == 1))
            and not hasattr(estimator, "feature_names_in_"))
    if not lean:
        if y is None:
            X = validate_data(estimator, X, dtype=dtype, reset=False)
        else:
            X, y = validate_data(estimator, X, y, dtype=dtype, reset=False)
        check_magnitude(X)
        return X, y
    if X.shape[0] == 0:
        raise ValueError(f"Found array with 0 sample(s) (shape={X.shape}) while "
                         "a minimum of 1 is required.")
    if X.shape[1] != estimator.n_features_in_:
        raise ValueError(
            f"X has {X.shape[1]} features, but {type(estimator).__name__} is "
            f"expecting {estimator.n_features_in_} features as input.")
    # NaN compares False, as does a value out of range: told apart only then.
    clean = float(np.vdot(X, X)) <= MAX_ABS_INPUT**2 or float(
        np.maximum.reduce(np.abs(X), axis=None)) <= MAX_ABS_INPUT
    if not clean and not np.isfinite(X).all():
        # scikit-learn's message, and refused under ``assume_finite`` too.
        assert_all_finite(X, estimator_name=type(estimator).__name__,
                          input_name="X")
        kind = "NaN" if np.isnan(X).any() else "infinity or a value too large"
        raise ValueError(f"Input X contains {kind}.")
    if y is not None and y.shape[0] != X.shape[0]:
        raise ValueError("Found input variables with inconsistent numbers of "
                         f"samples: [{X.shape[0]}, {y.shape[0]}]")
    if not clean:
        check_magnitude(X)
    return X, y


def caller_stacklevel():
    """``warnings.warn``'s stacklevel of the first frame outside this package,
    scikit-learn and joblib (decorators, searches): the user's call."""
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and frame.f_globals.get(
            "__name__", "").partition(".")[0] in ("sklearn_flowr", "sklearn", "joblib"):
        frame, level = frame.f_back, level + 1
    return level


def resolve_novel_label(novel_label, labels, *, warn=False):
    """``novel_label``, or for "auto": "novel" (string labels), else -1 or one
    below the smallest label (``warn``: say so when that is not -1)."""
    if not (isinstance(novel_label, str) and novel_label == "auto"):
        return novel_label
    if labels.dtype.kind not in "biuf":
        return "novel"
    value = min(-1, int(labels.min()) - 1) if labels.shape[0] else -1
    if warn and value != -1:
        warnings.warn(
            f"y has labels of -1 or below (the smallest is {labels.min()}), so "
            f"predict labels the novel class {value}, not -1. Pass novel_label= "
            "a value y does not use to choose it.", UserWarning,
            stacklevel=caller_stacklevel())
    if labels.dtype.kind in "bu":  # no negative value in that dtype
        return np.int64(value)
    return labels.dtype.type(value)


def check_new_labels(labels, novel, known_labels=None):
    """Refuse labels equal to ``novel`` or of another kind than the known ones."""
    if known_labels is not None and (
            (known_labels.dtype.kind in "biuf") != (labels.dtype.kind in "biuf")):
        raise ValueError(
            f"Labels of dtype {labels.dtype} cannot join the known classes of "
            f"dtype {known_labels.dtype}: numeric and string labels cannot be "
            "mixed.")
    if any(same_label(label, novel) for label in labels.tolist()):
        shown = novel.item() if isinstance(novel, np.generic) else novel
        raise ValueError(
            f"y contains the novel label {shown!r}, which is reserved for the "
            "novel class: relabel those rows, or set novel_label to a value y "
            "does not use.")


def label_result_dtype(labels, novel):
    """Dtype that holds ``labels`` and ``novel`` exactly (else object)."""
    first, second = np.asarray(labels).dtype, np.asarray(novel).dtype
    try:
        dtype = np.result_type(first, second)
    except TypeError:
        return np.dtype(object)
    if dtype.kind == "f" and first.kind in "biu" and second.kind in "biu":
        return np.dtype(object)
    return dtype


def same_label(label, novel):
    """``label == novel`` as a bool, False where they cannot be compared."""
    try:
        return bool(label == novel)
    except (TypeError, ValueError):
        return False


def next_provisional_label(k, numeric, is_taken):
    """Number ``j >= k`` and label of the first provisional label not taken."""
    j = k
    while is_taken(label := -(j + 1) if numeric else f"new-{j}"):
        j += 1
    return j, label


def provisional_label(k: int, existing_labels) -> str | int:
    """Label of the ``k``-th class a model opens: ``"new-k"``, or ``-(k + 1)``
    for numeric labels (the next one not taken)."""
    existing = list(existing_labels)
    numeric = bool(existing) and all(
        isinstance(label, Number) and not isinstance(label, str)
        for label in existing)
    taken = set(existing)
    return next_provisional_label(k, numeric, taken.__contains__)[1]


def novel_rows(y_true, known_classes, *, require_both=True):
    """Which rows of ``y_true`` are novel: their label is not a known class.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels.
    known_classes : array-like of shape (n_classes,)
        The classes the estimator knew.
    require_both : bool, default=True
        Refuse a fold without novel rows or without known rows (a ranking
        score cannot score it).

    Returns
    -------
    is_novel : ndarray of shape (n_samples,), dtype bool
        True where the label is not in ``known_classes``.

    Examples
    --------
    >>> from sklearn_flowr.validation import novel_rows
    >>> novel_rows([0, 3, 1, 3], known_classes=[0, 1])
    array([False,  True, False,  True])
    """
    y_true = column_or_1d(y_true)
    is_novel = ~np.isin(y_true, np.asarray(known_classes))
    if not require_both:
        return is_novel
    if not is_novel.any():
        raise ValueError(
            "Cannot score this fold: every row has a known label, so the fold "
            "has no row of a class the estimator did not train on. Use "
            "sklearn_flowr.model_selection.OpenWorldSplit, which holds whole "
            "classes out of the training fold, rather than a splitter such as "
            "KFold or StratifiedKFold.")
    if is_novel.all():
        raise ValueError(
            "Cannot score this fold: every row has a novel label, so the fold "
            "has no row of a class the estimator trained on. Use "
            "sklearn_flowr.model_selection.OpenWorldSplit with test_size > 0, "
            "which also puts rows of the training classes in the test fold.")
    return is_novel


def fill_new_params(estimator) -> None:
    """Give parameters added since ``estimator`` was pickled their defaults."""
    signature = inspect.signature(type(estimator).__init__)
    for name, parameter in signature.parameters.items():
        if (name != "self" and parameter.default is not parameter.empty
                and name not in estimator.__dict__):
            setattr(estimator, name, parameter.default)


def snapshot_params(estimator, *, deep: bool = False) -> dict:
    """The parameters the fitted state uses; ``deep`` takes the parts' settings."""
    params = estimator.get_params(deep=deep)
    return {name: value for name, value in params.items()
            if not (deep and hasattr(value, "get_params"))}


def params_equal(old, new) -> bool:
    """Whether two parameter values are the same setting."""
    if old is new:
        return True
    if isinstance(old, str) or isinstance(new, str):
        return isinstance(old, str) and isinstance(new, str) and old == new
    if hasattr(old, "get_n_splits") and hasattr(new, "get_n_splits"):
        # Splitters: equal when their repr is (e.g. a copy restored by skops).
        return type(old) is type(new) and repr(old) == repr(new)
    try:
        return bool(np.array_equal(np.asarray(old), np.asarray(new)))
    except (TypeError, ValueError):
        return False


def check_params_unchanged(estimator, snapshot: dict | None, *, runtime=(),
                           deep: bool = False, part_of=None, part: str = ""):
    """Fail if a parameter not in ``runtime`` changed since ``snapshot``; the
    message names them ``<part>__<name>`` of ``part_of`` where given."""
    try:  # the common case, in one C call
        if snapshot is None or (not deep and snapshot.items()
                                <= estimator.__dict__.items()):
            return
    except ValueError:  # arrays compared element-wise: see below
        pass
    current = snapshot_params(estimator, deep=True) if deep else estimator.__dict__
    changed = [name for name, old in snapshot.items()
               if (new := current.get(name, old)) is not old
               and not params_equal(old, new)]
    if not changed:
        return
    estimator._validate_params()
    # The parts (head, training stages) validate their own settings.
    for value in estimator.get_params(deep=False).values() if deep else ():
        if hasattr(value, "get_params") and hasattr(value, "_validate_params"):
            value._validate_params()
    fixed = [name for name in changed if name not in runtime]
    if fixed:
        prefix = f"{part}__" if part else ""
        what = ", ".join(f"{prefix}{name}: {snapshot[name]!r} -> "
                         f"{current.get(name)!r}" for name in fixed)
        raise ValueError(
            f"{type(part_of or estimator).__name__}'s parameters changed after "
            f"fitting ({what}), but the fitted state was built from the old "
            "values: call fit again to use the new ones, or set them back.")


_CHANNELS = (1, 3, 4)
# Pixel dtypes and the divisor that maps their range onto [0, 1] (v as uint8
# and 257 v as uint16 give the very same float32).
_PIXEL_MAX = {np.dtype(np.uint8): np.float32(255),
              np.dtype(np.uint16): np.float32(65535)}
# Float images in [0, 255] above this look like unscaled 8-bit pixels.
_UNSCALED_FLOAT_MAX = 2.0
_FLOAT32_MAX = float(np.finfo(np.float32).max)


def as_model_input(X, *, allow_features, expected_shape=None, fitted_max=None):
    """Validate ``X`` and return float32 ``(n, C, H, W)`` or ``(n, n_features)``.

    Images come as (n, H, W), (n, H, W, C) or (n, C, H, W). The dtype sets the
    scale: ``uint8`` is divided by 255 and ``uint16`` by 65535; other integer
    images are refused (convert them, e.g. ``X.astype(np.uint8)``); integer
    features and floats are used as given, with a ``UserWarning`` for float
    images in [0, 255] that look like unscaled 8-bit pixels.

    Parameters
    ----------
    X : array-like or torch.Tensor
        Images or feature vectors.
    allow_features : bool
        Whether 2-d input (feature vectors) suits the backbone.
    expected_shape : tuple or None
        Per-sample shape seen in ``fit``; ``None`` in ``fit`` itself.
    fitted_max : float or None, default=None
        Largest value of the unscaled float images ``fit`` was given (it
        warned of them): such images up to twice it pass silently; larger
        ones, on another scale, warn.

    Returns
    -------
    X : ndarray of dtype float32

    Examples
    --------
    >>> import numpy as np
    >>> pixels = np.array([[[0, 51], [255, 102]]], dtype=np.uint8)
    >>> as_model_input(pixels, allow_features=False)[0, 0]
    array([[0. , 0.2],
           [1. , 0.4]], dtype=float32)
    >>> np.array_equal(as_model_input(pixels.astype(np.uint16) * 257,
    ...                               allow_features=False),
    ...                as_model_input(pixels, allow_features=False))
    True
    >>> as_model_input(pixels.astype(np.int64), allow_features=False)
    Traceback (most recent call last):
    ...
    ValueError: X holds int64 images, whose scale is ambiguous...
    """
    torch = sys.modules.get("torch")  # a tensor, without importing torch
    if torch is not None and torch.is_tensor(X):
        X = X.detach().cpu().numpy()
    _check_same_shapes(X)
    # scikit-learn's checks and messages; the dtype is kept: it sets the scale.
    X = check_array(X, allow_nd=True, dtype="numeric", accept_sparse=False,
                    ensure_all_finite=True, input_name="X")
    if X.dtype.kind not in "uif":
        raise ValueError(
            f"X must hold numbers (uint8, uint16 or float images, or numeric "
            f"features); got dtype {X.dtype}."
        )
    if X.ndim == 2:
        if not allow_features:
            raise ValueError(
                f"X has shape {X.shape}: 2-d feature vectors need backbone='mlp' (or "
                "your own module); image backbones take (n, H, W), (n, H, W, C) or "
                "(n, C, H, W)."
            )
        out = X
    elif X.ndim == 3:
        out = X[:, None]
    elif X.ndim == 4:
        if X.shape[1] in _CHANNELS and X.shape[-1] not in _CHANNELS:
            out = X
        elif X.shape[-1] in _CHANNELS:
            out = np.moveaxis(X, -1, 1)  # channels-last, as image libraries give
        else:
            raise ValueError(
                f"Cannot tell the channel axis of images of shape {X.shape}: expected "
                f"(n, C, H, W) or (n, H, W, C) with C in {_CHANNELS}."
            )
    else:
        raise ValueError(
            f"X must be 2-d features or 3-d/4-d images; got shape {X.shape}."
        )
    out = scale_by_dtype(out, is_image=X.ndim > 2, fitted_max=fitted_max)
    if expected_shape is None:
        return np.ascontiguousarray(out)
    if out.ndim == 2 and len(expected_shape) == 1 and out.shape[1:] != expected_shape:
        raise ValueError(
            f"X has {out.shape[1]} features, but FLOWRClassifier is expecting "
            f"{expected_shape[0]} features as input."
        )
    if out.shape[1:] != tuple(expected_shape):
        raise ValueError(
            f"X has samples of shape {out.shape[1:]} (after moving channels first) "
            f"but the model was fitted on {tuple(expected_shape)}."
        )
    return np.ascontiguousarray(out)


def _check_same_shapes(X):
    """A ValueError naming two sizes when a list holds images of different shapes."""
    if isinstance(X, list | tuple) and len(X) > 1:
        try:
            shapes = [np.shape(x) for x in X]
        except ValueError:  # ragged inside a sample: check_array says so
            return
        odd = next((i for i, shape in enumerate(shapes) if shape != shapes[0]), None)
        if odd is not None:
            raise ValueError(
                f"X holds samples of different shapes: X[0] has shape {shapes[0]} "
                f"and X[{odd}] has {shapes[odd]}. Resize the images to one "
                "(height, width) first, e.g. with a sklearn_flowr.datasets "
                "loader's image_size= (flowr-benchmark: --image-size HEIGHT WIDTH).")


def looks_unscaled(X):
    """Whether ``X`` holds float images (n, C, H, W) that look like unscaled
    pixels: none below 0, some above ``_UNSCALED_FLOAT_MAX``, none above 255."""
    return bool(X.ndim > 2 and X.dtype.kind == "f" and X.size and X.min() >= 0.0
                and _UNSCALED_FLOAT_MAX < X.max() <= 255.0)


def scale_by_dtype(X, *, is_image, fitted_max=None):
    """``X`` as float32 under :func:`as_model_input`'s dtype contract."""
    pixel_max = _PIXEL_MAX.get(X.dtype)
    if pixel_max is not None:
        return X.astype(np.float32) / pixel_max
    if X.dtype.kind in "iu" and is_image:
        raise ValueError(
            f"X holds {X.dtype} images, whose scale is ambiguous: pass uint8 "
            "(0..255) or uint16 (0..65535) images, which are scaled to [0, 1], or "
            "float images in the range the model should see. For 8-bit pixel "
            "values use X.astype(np.uint8); for 16-bit ones X.astype(np.uint16)."
        )
    if is_image and looks_unscaled(X) and (fitted_max is None
                                           or X.max() > 2 * fitted_max):
        warnings.warn(
            f"X holds {X.dtype} images with values in [{float(X.min()):g}, "
            f"{float(X.max()):g}], which look like pixel values that were not "
            "scaled: float images are used as given. If the model should see "
            "[0, 1], divide by the pixels' full scale (255 for 8-bit pixels, or "
            "pass them as uint8; 16 for load_digits).", UserWarning, stacklevel=3)
    if X.dtype.itemsize > 4 and X.size:
        largest = float(np.abs(X).max())
        if largest > _FLOAT32_MAX:
            raise ValueError(
                f"X holds values up to {largest:.3g} in magnitude, beyond the "
                f"float32 range ({_FLOAT32_MAX:.3g}) the encoder computes in. "
                "Rescale X: images to [0, 1], features e.g. with StandardScaler.")
    return X.astype(np.float32)


def check_missing_labels(y):
    """Refuse labels that are missing: None, NaN or pandas' NA in object
    labels (scikit-learn's own checks fail on pandas' NA with a TypeError)."""
    if y is None or (isinstance(y, np.ndarray) and y.dtype.kind != "O"):
        return
    try:
        values = np.asarray(y)
    except (TypeError, ValueError):
        return  # not array-like: scikit-learn's checks name the problem
    if values.dtype.kind != "O":
        return
    pandas = sys.modules.get("pandas")  # pandas' NA exists only once imported
    flat = values.reshape(-1)
    if pandas is not None:
        missing = np.asarray(pandas.isna(flat), dtype=bool)
    else:
        missing = np.array([v is None or (isinstance(v, float) and v != v)
                            for v in flat.tolist()], dtype=bool)
    if missing.any():
        rows = np.flatnonzero(missing)
        raise ValueError(
            f"y has {rows.shape[0]} missing label(s) (None, NaN or NA), at "
            f"rows {rows[:5].tolist()}: every row needs a class label. Drop "
            "those rows or label them.")


def check_one_kind(y):
    """Refuse object labels of kinds that cannot be sorted together."""
    if y.dtype.kind == "O":
        try:
            np.unique(y)
        except TypeError as exc:
            kinds = sorted({type(label).__name__ for label in y.tolist()})
            if len(kinds) > 1:
                raise ValueError(
                    f"y mixes labels of types {kinds} that cannot be sorted "
                    "together: give labels of one kind (all strings or all "
                    "numbers).") from exc


def check_labels(y, n_samples):
    """Class labels as a 1-d array of ``n_samples`` finite classification targets."""
    check_missing_labels(y)
    y = column_or_1d(y, warn=True)
    if y.shape[0] != n_samples:
        raise ValueError("Found input variables with inconsistent numbers of "
                         f"samples: [{n_samples}, {y.shape[0]}]")
    return check_targets(y)


def check_targets(y):
    """``y``, refused unless finite classification targets of one kind."""
    check_missing_labels(y)
    if y.dtype.kind == "f":
        assert_all_finite(y, input_name="y")
    if y.dtype.kind not in "biuU":  # type_of_target costs ~1 ms
        check_one_kind(y)
        # check_classification_targets's refusal, without its warning of
        # more classes than half the rows: few-shot data, not a regression
        kind = type_of_target(y, input_name="y")
        if kind not in ("binary", "multiclass", "multiclass-multioutput",
                        "multilabel-indicator", "multilabel-sequences"):
            raise ValueError(f"Unknown label type: {kind}. A classifier needs "
                             "discrete classes, not continuous values.")
    return y
