"""What a torch model reads: images or feature vectors as float32, their scale
set by their dtype."""

import sys
import warnings

import numpy as np
from sklearn.utils import check_array

__all__ = ["as_model_input", "looks_unscaled", "scale_by_dtype"]

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
    if _is_tensor(X):
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


def _is_tensor(X):
    """``torch.is_tensor(X)`` without importing torch."""
    torch = sys.modules.get("torch")
    return torch is not None and torch.is_tensor(X)


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
