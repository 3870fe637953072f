"""The data of ``flowr-benchmark``: a data set, or ``--data`` (a folder of class
folders or an ``.npz`` of four arrays, read without unpickling and checked
before training), as class-disjoint training and test images, split per
context."""

import hashlib
import re
import zipfile
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np

from ..datasets import (
    load_digits_images,
    load_fashion_mnist,
    load_glyphs,
    load_image_folder,
    load_kanji,
)
from ..validation import scale_by_dtype

__all__ = ["DATASETS", "BenchmarkData", "UserDataError", "load_benchmark_data",
           "load_user_data", "setting_data", "split_classes",
           "split_fit_and_held_out"]

DATASETS = ("glyphs", "kanji", "fashion-mnist", "digits")
# kanji: this many KanjiVG characters drawn this many times each.
KANJI_CLASSES = 1000
KANJI_INSTANCES = 20
# Ten-class datasets: the first five classes train the encoder, the last five
# are the test split.
_TEN_CLASS_TRAIN = np.arange(5)
NPZ_KEYS = ("X_train", "y_train", "X_test", "y_test")
_SHAPES = ("images (n, H, W), (n, H, W, C) or (n, C, H, W), or feature vectors "
           "(n, n_features) with --backbone mlp")


@dataclass
class BenchmarkData:
    """Class-disjoint train and test images of one dataset."""

    name: str
    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray

    def fingerprint(self) -> str:
        """A short hash of the name and the four arrays."""
        digest = hashlib.sha256(self.name.encode())
        for array in (self.X_train, self.y_train, self.X_test, self.y_test):
            digest.update(str(array.shape).encode())
            digest.update(np.ascontiguousarray(array).tobytes())
        return digest.hexdigest()[:16]


def load_benchmark_data(name: str, *, data_path=None, font_dirs=(),
                        max_fonts: int | None = None,
                        max_per_class: int | None = None,
                        kanji_classes: int = KANJI_CLASSES,
                        kanji_instances: int = KANJI_INSTANCES, cache_dir=None,
                        random_state: int = 0, user_data=None,
                        image_size=None) -> BenchmarkData:
    """Train/test images of a data set (or of ``user_data``, the ``--data``
    path) as float32, test labels offset past the training ones;
    ``max_per_class`` keeps a seeded choice of rows per class."""
    if user_data is not None:
        X_train, y_train, X_test, y_test = load_user_data(
            user_data, random_state=random_state, image_size=image_size)
        train_labels, y_train = np.unique(y_train, return_inverse=True)
        y_test = np.unique(y_test, return_inverse=True)[1] + train_labels.shape[0]
        parts = (X_train, y_train, X_test, y_test)
    elif name in ("glyphs", "kanji"):
        load = (partial(load_glyphs, font_dirs or None, max_fonts=max_fonts)
                if name == "glyphs" else partial(load_kanji, max_classes=kanji_classes,
                                                 n_instances=kanji_instances))
        train, test = (load(split=split, cache_dir=cache_dir)
                       for split in ("train", "test"))
        parts = (train.data, train.target, test.data, test.target)
    elif name in ("fashion-mnist", "digits"):
        if name == "digits":
            full = load_digits_images()
        else:
            full = (load_fashion_mnist() if data_path is None
                    else load_fashion_mnist(data_path))
        is_train = np.isin(full.target, _TEN_CLASS_TRAIN)
        parts = (full.data[is_train], full.target[is_train],
                 full.data[~is_train], full.target[~is_train])
    else:
        raise ValueError(f"Unknown dataset {name!r}; choose one of {DATASETS}.")
    X_train, y_train, X_test, y_test = parts
    if max_per_class is not None:
        rng = np.random.default_rng(random_state)
        X_train, y_train = _cap_per_class(X_train, y_train, max_per_class, rng)
        X_test, y_test = _cap_per_class(X_test, y_test, max_per_class, rng)
    # Test labels are offset so a test class never shares a label with a
    # training class (the large context mixes both).
    offset = 0 if user_data is not None else int(y_train.max()) + 1
    return BenchmarkData(name, _as_unit_float(X_train), y_train.astype(np.int64),
                         _as_unit_float(X_test), y_test.astype(np.int64) + offset)


def _cap_per_class(X, y, cap, rng):
    keep = np.concatenate([
        np.sort(rng.permutation(np.flatnonzero(y == label))[:cap])
        for label in np.unique(y)
    ])
    keep.sort()
    return X[keep], y[keep]


def _as_unit_float(images):
    return (images.astype(np.float32) / 255.0 if images.dtype == np.uint8
            else images.astype(np.float32))


def split_fit_and_held_out(y, random_state):
    """A seeded half of every class's rows (fit) and the other half."""
    rng = np.random.default_rng([random_state, 1])
    is_fit = np.zeros(y.shape[0], dtype=bool)
    for label in np.unique(y):
        rows = rng.permutation(np.flatnonzero(y == label))
        is_fit[rows[: rows.shape[0] // 2]] = True
    return np.flatnonzero(is_fit), np.flatnonzero(~is_fit)


def setting_data(setting: str, data, seed):
    """``(X_fit, y_fit, X_eval, y_eval)``: small context, the training classes
    fit and the test classes are evaluated; large, a seeded half of every
    training class fits, the other half is evaluated with the test classes."""
    if setting == "small":
        return data.X_train, data.y_train, data.X_test, data.y_test
    fit_rows, held_rows = split_fit_and_held_out(data.y_train, seed)
    return (data.X_train[fit_rows], data.y_train[fit_rows],
            np.concatenate([data.X_train[held_rows], data.X_test]),
            np.concatenate([data.y_train[held_rows], data.y_test]))


class UserDataError(ValueError):
    """``--data`` names something the benchmark cannot run on."""


def split_classes(n_classes: int, random_state: int) -> np.ndarray:
    """A seeded half (rounded down) of ``range(n_classes)``: the training
    classes."""
    rng = np.random.default_rng([random_state, 2])
    return np.sort(rng.permutation(n_classes)[: n_classes // 2])


def load_user_data(path, *, random_state: int = 0, image_size=None):
    """``(X_train, y_train, X_test, y_test)`` of ``--data PATH``, X scaled as
    ``fit`` scales it; problems raise :class:`UserDataError`."""
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
    if (y_train.dtype.kind in "US") != (y_test.dtype.kind in "US"):
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
