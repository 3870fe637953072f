"""Validation of what ``FLOWRClassifier`` accepts: images or feature vectors.

Images come as uint8 (scaled to [0, 1]) or float arrays of shape (n, H, W),
(n, H, W, C) or (n, C, H, W); feature vectors as (n, n_features), for the
``mlp`` backbone or a user module. Everything leaves as a float32 array in
the layout torch wants, (n, C, H, W) or (n, n_features).
"""

import numpy as np
import torch
from sklearn.utils import check_array

_CHANNELS = (1, 3, 4)


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
    """
    if torch.is_tensor(X):
        X = X.detach().cpu().numpy()
    # scikit-learn's checks (and messages) for sparse, complex, object, 1-d,
    # empty and non-finite input; uint8 stays uint8 to be scaled below.
    X = check_array(X, allow_nd=True, dtype="numeric", accept_sparse=False,
                    ensure_all_finite=True, input_name="X")
    if X.dtype.kind not in "uif":
        raise ValueError(
            f"X must hold numbers (uint8 or float images, or float features); got "
            f"dtype {X.dtype}."
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
    out = out.astype(np.float32) / 255.0 if X.dtype == np.uint8 else out.astype(
        np.float32)
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
