"""Validation of what ``FLOWRClassifier`` accepts: images or feature vectors.

Images come as arrays of shape (n, H, W), (n, H, W, C) or (n, C, H, W);
feature vectors as (n, n_features), for the ``mlp`` backbone or a user module.
Everything leaves as a float32 array in the layout torch wants, (n, C, H, W)
or (n, n_features).

The dtype says how values are scaled (the image contract):

- ``uint8``: 8-bit pixels, divided by 255 into [0, 1];
- ``uint16``: 16-bit pixels (16-bit PNG, TIFF), divided by 65535 into [0, 1];
- other integer dtypes (``int64``, ``int32``, ``int16``, ``int8``,
  ``uint32``, ``uint64``): rejected as images, since their scale is
  ambiguous (``np.array`` of a list of 0..255 pixels gives ``int64``);
  convert them, e.g. ``X.astype(np.uint8)``. As 2-d feature vectors they
  are used as they are;
- floating point: used as they are, whatever the range. Float images whose
  values all lie in [0, 255] with a maximum above 2 look like unscaled 8-bit
  pixels: they are used as they are, with a ``UserWarning``.

So a ``uint8`` array ``X``, ``X.astype(np.uint16) * 257`` and
``X / np.float32(255)`` are the same input.
"""

import sys
import warnings

import numpy as np
from sklearn.utils import assert_all_finite, check_array
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import column_or_1d

_CHANNELS = (1, 3, 4)
# Pixel dtypes and the divisor that maps their full range onto [0, 1]. A
# float32 division is correctly rounded, so v (uint8) and 257 v (uint16) give
# the very same float.
_PIXEL_MAX = {np.dtype(np.uint8): np.float32(255),
              np.dtype(np.uint16): np.float32(65535)}
# Float images in [0, 255] whose maximum exceeds this look like 8-bit pixels
# that were never scaled (resampling can push [0, 1] images a little above 1).
_UNSCALED_FLOAT_MAX = 2.0
_FLOAT32_MAX = float(np.finfo(np.float32).max)


def as_model_input(X, *, allow_features, expected_shape=None):
    """Validate ``X`` and return float32 ``(n, C, H, W)`` or ``(n, n_features)``.

    Parameters
    ----------
    X : array-like or torch.Tensor
        Images or feature vectors.
    allow_features : bool
        Whether 2-d input (feature vectors) suits the backbone.
    expected_shape : tuple or None
        Per-sample shape seen in ``fit``; ``None`` in ``fit`` itself.

    Returns
    -------
    X : ndarray of dtype float32
        ``uint8`` input divided by 255 and ``uint16`` input by 65535; other
        integer images rejected; floats as given (see the module docstring).

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
    if _is_tensor(X):
        X = X.detach().cpu().numpy()
    # scikit-learn's checks (and messages) for sparse, complex, object, 1-d,
    # empty and non-finite input; the dtype is kept, it sets the scale below.
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
    out = scale_by_dtype(out, is_image=X.ndim > 2)
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


def _is_tensor(X):
    """``torch.is_tensor(X)`` without importing torch: a tensor cannot exist
    before torch is imported (the CLI scales user data through this module
    and the head never needs torch)."""
    torch = sys.modules.get("torch")
    return torch is not None and torch.is_tensor(X)


def scale_by_dtype(X, *, is_image):
    """``X`` as float32 under the dtype contract of the module docstring."""
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
    if is_image and X.dtype.kind == "f":
        low, high = float(X.min()), float(X.max())
        if low >= 0.0 and _UNSCALED_FLOAT_MAX < high <= 255.0:
            warnings.warn(
                f"X holds {X.dtype} images with values in [{low:g}, {high:g}], "
                "which look like 8-bit pixels that were not scaled: float images "
                "are used as given. Pass uint8 images (scaled by 1/255) or divide "
                "by 255 if the model should see [0, 1].",
                UserWarning,
                stacklevel=3,
            )
    if X.dtype.itemsize > 4 and X.size:
        largest = float(np.abs(X).max())
        if largest > _FLOAT32_MAX:
            raise ValueError(
                f"X holds values up to {largest:.3g} in magnitude, beyond the "
                f"float32 range ({_FLOAT32_MAX:.3g}) the encoder computes in. "
                "Rescale X: images to [0, 1], features e.g. with StandardScaler.")
    return X.astype(np.float32)


def check_labels(y, n_samples):
    """Class labels as a 1-d array of ``n_samples`` finite classification targets."""
    y = column_or_1d(y, warn=True)
    if y.dtype.kind == "f":
        assert_all_finite(y, input_name="y")
    if y.shape[0] != n_samples:
        raise ValueError("Found input variables with inconsistent numbers of "
                         f"samples: [{n_samples}, {y.shape[0]}]")
    check_classification_targets(y)
    return y
