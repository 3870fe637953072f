"""Validation of what ``FLOWRClassifier`` accepts: images or feature vectors.

Images come as uint8 (scaled to [0, 1]) or float arrays of shape (n, H, W),
(n, H, W, C) or (n, C, H, W); feature vectors as (n, n_features), for the
``mlp`` backbone or a user module. Everything leaves as a float32 array in
the layout torch wants, (n, C, H, W) or (n, n_features).
"""

import numpy as np
import torch

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
    X = np.asarray(X)
    if X.dtype == object or X.dtype.kind not in "uif":
        raise ValueError(
            f"X must hold numbers (uint8 or float images, or float features); got "
            f"dtype {X.dtype}."
        )
    if X.ndim == 0 or X.shape[0] == 0:
        raise ValueError(f"X is empty (shape {X.shape}); at least 1 sample is "
                         "required.")
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
    if X.dtype == np.uint8:
        out = out.astype(np.float32) / 255.0
    else:
        out = out.astype(np.float32)
        if not np.isfinite(out).all():
            raise ValueError("Input X contains NaN or infinity.")
    if expected_shape is not None and out.shape[1:] != tuple(expected_shape):
        raise ValueError(
            f"X has samples of shape {out.shape[1:]} (after moving channels first) "
            f"but the model was fitted on {tuple(expected_shape)}."
        )
    return np.ascontiguousarray(out)
