"""MNIST-family idx files (MNIST, Fashion-MNIST, KMNIST) and scikit-learn's digits."""

import gzip
import itertools
import math
import os
import zlib

import numpy as np
from sklearn.datasets import load_digits
from sklearn.utils import Bunch
from sklearn.utils._param_validation import StrOptions, validate_params

# idx dtype code -> big-endian numpy dtype
_IDX_DTYPES = {
    0x08: np.dtype(">u1"),
    0x09: np.dtype(">i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}

# The most bytes an idx file may declare (Fashion-MNIST's largest holds 47 MB).
MAX_IDX_BYTES = 2**31

_IDX_FORMAT = (
    "an idx file: bytes 0-1 zero, byte 2 a dtype code in "
    "{0x08, 0x09, 0x0B, 0x0C, 0x0D, 0x0E}, byte 3 the number of dimensions, "
    "then one big-endian int32 per dimension and the values (optionally gzipped)"
)

_CLASS_NAMES = {
    "fashion-mnist": (
        "T-shirt/top",
        "Trouser",
        "Pullover",
        "Dress",
        "Coat",
        "Sandal",
        "Shirt",
        "Sneaker",
        "Bag",
        "Ankle boot",
    ),
    "mnist": tuple("0123456789"),
    # Kuzushiji-MNIST: romanised hiragana, in label order.
    "kmnist": ("o", "ki", "su", "tsu", "na", "ha", "ma", "ya", "re", "wo"),
}

_SUBSETS = {"train": ("train",), "test": ("t10k",), "all": ("train", "t10k")}


def read_idx(path: str | os.PathLike) -> np.ndarray:
    """Read one idx file (LeCun et al.), plain or gzipped, into a native-endian
    array; a file that does not match its header raises a ValueError.

    Parameters
    ----------
    path : str or path-like
        E.g. ``train-images-idx3-ubyte.gz``.

    Returns
    -------
    array : ndarray
        The values, with the header's shape and dtype.

    Examples
    --------
    >>> import gzip, os, tempfile
    >>> import numpy as np
    >>> from sklearn_flowr.datasets import read_idx
    >>> path = os.path.join(tempfile.mkdtemp(), "labels-idx1-ubyte.gz")
    >>> header = bytes([0, 0, 0x08, 1]) + (3).to_bytes(4, "big")
    >>> with gzip.open(path, "wb") as f:
    ...     _ = f.write(header + bytes([7, 1, 4]))
    >>> read_idx(path)
    array([7, 1, 4], dtype=uint8)
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"idx file not found: {path!r}; expected {_IDX_FORMAT}."
        )
    with open(path, "rb") as f:
        gzipped = f.read(2) == b"\x1f\x8b"
    # Allocation is bounded by the header's declared size, not by what a
    # compressed stream expands to.
    try:
        with (gzip.open if gzipped else open)(path, "rb") as f:
            raw = f.read(4)
            if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_DTYPES:
                raise ValueError(
                    f"Bad idx magic number {raw[:4].hex() or '(empty file)'} in "
                    f"{path!r}; expected {_IDX_FORMAT}.")
            dtype, ndim = _IDX_DTYPES[raw[2]], raw[3]
            dims = f.read(4 * ndim)
            if ndim == 0 or len(dims) < 4 * ndim:
                raise ValueError(
                    f"Truncated or invalid idx header in {path!r} ({ndim} "
                    f"dimensions, {4 + len(dims)} bytes); expected {_IDX_FORMAT}.")
            shape = tuple(int(d) for d in np.frombuffer(dims, dtype=">i4"))
            if min(shape) < 0:
                raise ValueError(
                    f"idx file {path!r} has negative dimensions {shape} in its "
                    f"header; the file is corrupt. Expected {_IDX_FORMAT}.")
            # Python ints: a product of int32 sizes can overflow int64.
            expected = math.prod(shape) * dtype.itemsize
            if expected > MAX_IDX_BYTES:
                raise ValueError(
                    f"idx file {path!r} declares {shape} of {dtype.name}, "
                    f"{expected} bytes, over MAX_IDX_BYTES ({MAX_IDX_BYTES}); "
                    "raise sklearn_flowr.datasets._idx.MAX_IDX_BYTES for a file "
                    "you trust.")
            data = f.read(expected + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise ValueError(
            f"Corrupt gzip stream in {path!r} ({exc}); expected {_IDX_FORMAT}."
        ) from exc
    if len(data) != expected:
        raise ValueError(
            f"idx file {path!r} holds {'more than ' * (len(data) > expected)}"
            f"{min(len(data), expected)} data bytes but its header {shape} of "
            f"{dtype.name} asks for {expected}; the file is truncated or corrupt.")
    array = np.frombuffer(data, dtype=dtype).reshape(shape)
    return array.astype(dtype.newbyteorder("="))


def _find_idx_file(directory, prefix, content, idx):
    """Path of ``<prefix>-<content>-<idx>-ubyte[.gz]``, with ``-`` or ``.``
    before ``<idx>``."""
    for sep, gz in itertools.product(("-", "."), (".gz", "")):
        path = os.path.join(directory, f"{prefix}-{content}{sep}{idx}-ubyte{gz}")
        if os.path.isfile(path):
            return path
    raise FileNotFoundError(
        f"No {prefix}-{content}-{idx}-ubyte[.gz] in {directory!r}; expected the four "
        "MNIST-family idx files train-images-idx3-ubyte, train-labels-idx1-ubyte, "
        "t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte (plain or .gz)."
    )


def _read_idx_pair(directory, prefix):
    images_path = _find_idx_file(directory, prefix, "images", "idx3")
    labels_path = _find_idx_file(directory, prefix, "labels", "idx1")
    images, labels = read_idx(images_path), read_idx(labels_path)
    if images.ndim != 3 or images.dtype != np.uint8:
        raise ValueError(
            f"{images_path!r} holds a {images.ndim}-d {images.dtype} array; expected "
            "uint8 images of shape (n_images, height, width) (idx dtype 0x08, 3-d)."
        )
    if labels.ndim != 1:
        raise ValueError(
            f"{labels_path!r} holds a {labels.ndim}-d array; expected 1-d labels."
        )
    if labels.shape[0] != images.shape[0]:
        raise ValueError(
            f"{labels_path!r} has {labels.shape[0]} labels but {images_path!r} has "
            f"{images.shape[0]} images."
        )
    return images, labels.astype(np.int64)


@validate_params({"kind": [StrOptions(set(_CLASS_NAMES)), None],
                  "subset": [StrOptions(set(_SUBSETS))]},
                 prefer_skip_nested_validation=True)
def load_idx_dataset(
    path: str | os.PathLike | None = None,
    *,
    kind: str | None = "fashion-mnist",
    subset: str = "all",
) -> Bunch:
    """Load an MNIST-family data set from its idx files.

    Parameters
    ----------
    path : str or path-like, default=None
        Folder holding ``train-images-idx3-ubyte``, ``train-labels-idx1-ubyte``,
        ``t10k-images-idx3-ubyte`` and ``t10k-labels-idx1-ubyte`` (plain or
        ``.gz``); None: ``/usr/share/datasets/<kind>`` (Debian's packages).
    kind : {"fashion-mnist", "mnist", "kmnist"} or None, default="fashion-mnist"
        Names the classes; None names them by label value (``path`` needed).
    subset : {"all", "train", "test"}, default="all"
        The official training part, the test part, or both (training first).

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        As :func:`~sklearn_flowr.datasets.load_image_folder`'s (no
        ``filenames``); ``split`` is ``subset``.

    Examples
    --------
    >>> import os
    >>> from sklearn_flowr.datasets import load_idx_dataset
    >>> if os.path.isdir("/usr/share/datasets/fashion-mnist"):
    ...     test = load_idx_dataset(kind="fashion-mnist", subset="test")
    ...     print(test.data.shape, test.target_names[test.target[0]])
    ... else:
    ...     print("(10000, 28, 28) Ankle boot")
    (10000, 28, 28) Ankle boot
    """
    if path is None:
        if kind is None:
            raise ValueError("path is required when kind is None.")
        path = os.path.join("/usr/share/datasets", kind)
    path = os.fspath(path)
    if not os.path.isdir(path):
        raise FileNotFoundError(
            f"idx data folder not found: {path!r}; expected a folder with the "
            "MNIST-family files train-images-idx3-ubyte[.gz] etc."
        )
    images, labels = (np.concatenate(arrays) for arrays in zip(
        *(_read_idx_pair(path, prefix) for prefix in _SUBSETS[subset]), strict=True))
    if kind is None:
        values, target = np.unique(labels, return_inverse=True)
        target_names = values.astype(str)
    else:
        target_names = np.asarray(_CLASS_NAMES[kind])
        if labels.size and (labels.min() < 0 or labels.max() >= len(target_names)):
            raise ValueError(
                f"Labels in {path!r} range over [{labels.min()}, {labels.max()}]; "
                f"{kind} has classes 0..{len(target_names) - 1}."
            )
        target = labels
    return Bunch(
        data=images,
        target=target.astype(np.int64),
        target_names=target_names,
        split=subset,
    )


def load_fashion_mnist(
    path: str | os.PathLike = "/usr/share/datasets/fashion-mnist",
    *,
    subset: str = "all",
) -> Bunch:
    """Load Fashion-MNIST (Xiao et al., 2017) from its idx files.

    Parameters
    ----------
    path : str or path-like, default="/usr/share/datasets/fashion-mnist"
        Where Debian's ``dataset-fashion-mnist`` package installs the files.
    subset : {"all", "train", "test"}, default="all"
        60000 training images, 10000 test images, or all 70000.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        As :func:`load_idx_dataset`'s: (n_images, 28, 28) images, 10 classes.

    References
    ----------
    .. [1] H. Xiao, K. Rasul and R. Vollgraf, "Fashion-MNIST: a novel image
       dataset for benchmarking machine learning algorithms", arXiv:1708.07747.

    Examples
    --------
    >>> import os
    >>> from sklearn_flowr.datasets import load_fashion_mnist
    >>> if os.path.isdir("/usr/share/datasets/fashion-mnist"):
    ...     print(load_fashion_mnist(subset="train").data.shape)
    ... else:
    ...     print((60000, 28, 28))
    (60000, 28, 28)
    """
    return load_idx_dataset(path, kind="fashion-mnist", subset=subset)


def load_digits_images() -> Bunch:
    """Scikit-learn's 8x8 digits as uint8 images: counts 0..16 times 255 / 16.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        As :func:`load_idx_dataset`'s: ``data`` (1797, 8, 8), ``split`` "all".

    Examples
    --------
    >>> from sklearn_flowr.datasets import load_digits_images
    >>> digits = load_digits_images()
    >>> digits.data.shape, digits.data.dtype, int(digits.data.max())
    ((1797, 8, 8), dtype('uint8'), 255)
    """
    digits = load_digits()
    images = np.rint(digits.images * (255.0 / 16.0)).astype(np.uint8)
    return Bunch(
        data=images,
        target=digits.target.astype(np.int64),
        target_names=np.asarray(digits.target_names).astype(str),
        split="all",
    )
