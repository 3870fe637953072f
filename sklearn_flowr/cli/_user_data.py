"""``flowr-benchmark --data PATH``: a folder of class folders or an ``.npz`` of
four arrays, read without unpickling and checked before training."""

from __future__ import annotations

import re
import zipfile
from pathlib import Path

import numpy as np

from ..datasets import load_image_folder

__all__ = ["NPZ_KEYS", "UserDataError", "load_user_data", "split_classes"]

NPZ_KEYS = ("X_train", "y_train", "X_test", "y_test")
_SHAPES = ("images (n, H, W), (n, H, W, C) or (n, C, H, W), or feature vectors "
           "(n, n_features) with --backbone mlp")


class UserDataError(ValueError):
    """``--data`` names something the benchmark cannot run on."""


def split_classes(n_classes: int, random_state: int) -> np.ndarray:
    """A seeded choice of half (rounded down) of ``range(n_classes)``: the
    training classes.

    Examples
    --------
    >>> split_classes(5, 0).shape
    (2,)
    """
    rng = np.random.default_rng([random_state, 2])
    return np.sort(rng.permutation(n_classes)[: n_classes // 2])


def load_user_data(path, *, random_state: int = 0, image_size=None):
    """``(X_train, y_train, X_test, y_test)`` of ``--data PATH`` (a folder of class
    folders, half of them training classes, or an ``.npz``), X scaled as ``fit``
    scales it; ``image_size`` resizes a folder's images; problems raise
    :class:`UserDataError`.
    """
    path = Path(path)
    if path.is_dir():
        parts = _read_folder(path, random_state, image_size)
    elif path.is_file():
        parts = _read_npz(path)
    else:
        raise UserDataError(f"--data {str(path)!r}: no such file or folder.")
    _check_arrays(path, *parts)
    X_train, y_train, X_test, y_test = parts
    return (_scaled_as_fit(path, "train", X_train), y_train,
            _scaled_as_fit(path, "test", X_test), y_test)


def _scaled_as_fit(path: Path, name: str, X) -> np.ndarray:
    """``X`` as float32, scaled as ``FLOWRClassifier.fit`` scales it."""
    from ..validation import scale_by_dtype

    try:
        return scale_by_dtype(X, is_image=X.ndim > 2)
    except ValueError as exc:
        raise UserDataError(f"--data {str(path)!r}: X_{name}: {exc}") from None


def _read_folder(path: Path, random_state: int, image_size=None):
    try:
        tree = load_image_folder(path, image_size=image_size)
    except (ValueError, OSError) as exc:
        # The library's advice names its keyword; here it is an option.
        problem = re.sub(r"pass image_size=\S+", "pass --image-size HEIGHT WIDTH",
                         str(exc))
        raise UserDataError(
            f"--data {str(path)!r}: cannot read it as an image folder "
            f"(<folder>/<class>/<image files>): {problem}") from None
    n_classes = tree.target_names.shape[0]
    if n_classes < 4:
        raise UserDataError(
            f"--data {str(path)!r}: found {n_classes} class folder(s) "
            f"({', '.join(tree.target_names.tolist())}); it needs at least 4, "
            "split into 2 or more training and 2 or more test classes.")
    is_train = np.isin(tree.target, split_classes(n_classes, random_state))
    return (tree.data[is_train], tree.target[is_train], tree.data[~is_train],
            tree.target[~is_train])


def _read_npz(path: Path):
    try:
        archive = np.load(path, allow_pickle=False)
    except (ValueError, OSError, zipfile.BadZipFile, EOFError) as exc:
        raise UserDataError(
            f"--data {str(path)!r}: not an .npz file of the arrays "
            f"{', '.join(NPZ_KEYS)} ({type(exc).__name__}: {exc}); write one "
            "with numpy.savez(path, X_train=..., y_train=..., X_test=..., "
            "y_test=...), or pass a folder of class folders.") from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise UserDataError(
            f"--data {str(path)!r}: holds a single array (.npy), not an .npz "
            f"archive of {', '.join(NPZ_KEYS)}.")
    with archive:
        missing = [key for key in NPZ_KEYS if key not in archive.files]
        if missing:
            found = ", ".join(archive.files) or "no arrays"
            raise UserDataError(
                f"--data {str(path)!r}: lacks {', '.join(missing)}; it holds "
                f"{found}. The file needs {', '.join(NPZ_KEYS)}.")
        arrays = []
        for key in NPZ_KEYS:
            try:
                arrays.append(archive[key])
            except ValueError as exc:  # object arrays need pickle: refused
                raise UserDataError(
                    f"--data {str(path)!r}: {key} is an object array, which "
                    "is never unpickled; store numbers (X) and numbers or "
                    f"strings (y) ({exc}).") from None
    return tuple(arrays)


def _check_arrays(path: Path, X_train, y_train, X_test, y_test) -> None:
    where = f"--data {str(path)!r}"
    for name, X, y in (("train", X_train, y_train), ("test", X_test, y_test)):
        if X.dtype.kind == "b":
            # Refused as FLOWRClassifier.fit refuses them.
            raise UserDataError(
                f"{where}: X_{name} holds boolean images, which "
                "FLOWRClassifier.fit refuses too (their scale is not stated); "
                "store X.astype(np.uint8) * 255 (black and white pixels) or "
                "X.astype(np.float32).")
        if X.dtype.kind not in "uif":
            raise UserDataError(f"{where}: X_{name} has dtype {X.dtype}; "
                                "expected numbers (uint8 images or floats).")
        if X.ndim not in (2, 3, 4) or X.shape[0] == 0:
            raise UserDataError(f"{where}: X_{name} has shape {X.shape}; "
                                f"expected {_SHAPES}.")
        if X.dtype.kind == "f" and not np.isfinite(X).all():
            raise UserDataError(f"{where}: X_{name} holds NaN or infinite values.")
        if y.ndim != 1 or y.dtype.kind not in "iuUSb":
            raise UserDataError(f"{where}: y_{name} has shape {y.shape} and dtype "
                                f"{y.dtype}; expected a 1-d array of integer or "
                                "string labels.")
        if y.shape[0] != X.shape[0]:
            raise UserDataError(f"{where}: X_{name} has {X.shape[0]} rows but "
                                f"y_{name} {y.shape[0]} labels.")
        n_classes = np.unique(y).shape[0]
        if n_classes < 2:
            raise UserDataError(f"{where}: the {name} split has {n_classes} "
                                "class; it needs at least 2.")
    if X_train.shape[1:] != X_test.shape[1:]:
        raise UserDataError(f"{where}: X_train rows have shape {X_train.shape[1:]} "
                            f"but X_test rows {X_test.shape[1:]}.")
    if y_train.dtype.kind in "US" and y_test.dtype.kind not in "US" or (
            y_test.dtype.kind in "US" and y_train.dtype.kind not in "US"):
        raise UserDataError(f"{where}: y_train ({y_train.dtype}) and y_test "
                            f"({y_test.dtype}) must both be numbers or both "
                            "strings.")
    shared = np.intersect1d(y_train, y_test)
    if shared.size:
        listed = ", ".join(map(str, shared[:10].tolist()))
        raise UserDataError(
            f"{where}: the training and test classes must be disjoint (the "
            "test classes are the ones the encoder never saw); both hold "
            f"{listed}{' ...' if shared.size > 10 else ''}.")
