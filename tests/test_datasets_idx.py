"""Tests of the IDX readers (Fashion-MNIST files) and the digits images, on
miniature files."""

import gzip
import os

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from sklearn.datasets import load_digits

from sklearn_flowr.datasets import (
    load_digits_images,
    load_fashion_mnist,
    load_idx_dataset,
    read_idx,
)

FASHION_MNIST = "/usr/share/datasets/fashion-mnist"

# --------------------------------------------------------------------- helpers

_IDX_CODES = {"u1": 0x08, "i1": 0x09, "i2": 0x0B, "i4": 0x0C, "f4": 0x0D, "f8": 0x0E}


def _idx_bytes(array):
    array = np.asarray(array)
    code = _IDX_CODES[array.dtype.str[1:]]
    header = bytes([0, 0, code, array.ndim])
    header += b"".join(int(d).to_bytes(4, "big") for d in array.shape)
    return header + array.astype(array.dtype.newbyteorder(">")).tobytes()


def _write(path, payload, gz=False):
    opener = gzip.open if gz else open
    with opener(path, "wb") as f:
        f.write(payload)
    return path


def _write_idx_folder(folder, rng, n_train=5, n_test=3, gz=True):
    """Four idx files as the MNIST family ships them; returns the arrays."""
    os.makedirs(folder, exist_ok=True)
    arrays = {}
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        images = rng.integers(0, 256, size=(n, 4, 3), dtype=np.uint8)
        labels = rng.integers(0, 10, size=n).astype(np.uint8)
        suffix = ".gz" if gz else ""
        _write(
            os.path.join(folder, f"{prefix}-images-idx3-ubyte{suffix}"),
            _idx_bytes(images),
            gz,
        )
        _write(
            os.path.join(folder, f"{prefix}-labels-idx1-ubyte{suffix}"),
            _idx_bytes(labels),
            gz,
        )
        arrays[prefix] = (images, labels)
    return arrays


# ------------------------------------------------------------------- idx files


@pytest.mark.parametrize("dtype", ["u1", "i1", "i2", "i4", "f4", "f8"])
@pytest.mark.parametrize("gz", [False, True])
def test_read_idx_round_trip(tmp_path, rng, dtype, gz):
    """Check that read_idx returns the stored values, shape and native dtype."""
    array = (rng.normal(size=(3, 2, 4)) * 50).astype(dtype)
    path = _write(tmp_path / "x-idx3-ubyte", _idx_bytes(array), gz)
    result = read_idx(path)
    assert result.dtype == np.dtype(dtype)
    assert result.dtype.isnative
    assert_array_equal(result, array)


@pytest.mark.parametrize(
    "payload",
    [b"\x01\x00\x08\x01\x00\x00\x00\x00", b"\x00\x00\x07\x01\x00\x00\x00\x00", b""],
    ids=["nonzero-prefix", "unknown-dtype-code", "empty"],
)
def test_read_idx_rejects_bad_magic(tmp_path, payload):
    """Check that a bad magic number is a ValueError naming the path."""
    path = _write(tmp_path / "bad-idx1-ubyte", payload)
    with pytest.raises(ValueError, match=r"Bad idx magic number.*bad-idx1-ubyte"):
        read_idx(path)


def test_read_idx_rejects_truncated_header(tmp_path):
    """Check that a header shorter than its dimension count is a ValueError."""
    path = _write(tmp_path / "x-idx3-ubyte", bytes([0, 0, 8, 3, 0, 0, 0, 2]))
    with pytest.raises(ValueError, match="Truncated or invalid idx header"):
        read_idx(path)


def test_read_idx_rejects_truncated_data(tmp_path):
    """Check that missing data bytes are reported as a truncated file."""
    payload = _idx_bytes(np.zeros((4, 3, 3), dtype=np.uint8))[:-5]
    path = _write(tmp_path / "x-idx3-ubyte.gz", payload, gz=True)
    with pytest.raises(ValueError, match="truncated or corrupt"):
        read_idx(path)


def test_read_idx_rejects_corrupt_gzip(tmp_path):
    """Check that a broken gzip stream is a ValueError naming the path."""
    compressed = gzip.compress(_idx_bytes(np.zeros((50, 4), dtype=np.uint8)))
    path = _write(tmp_path / "x-idx2-ubyte.gz", compressed[: len(compressed) // 2])
    with pytest.raises(ValueError, match=r"Corrupt gzip stream in .*x-idx2-ubyte"):
        read_idx(path)


@pytest.mark.parametrize("shape", [(-2, -3), (-1, 0), (4, -2)])
def test_read_idx_rejects_negative_dimensions(tmp_path, shape):
    """Check that a header with a negative dimension is a ValueError naming the
    file, not numpy's reshape message."""
    header = bytes([0, 0, 0x08, len(shape)])
    header += b"".join(d.to_bytes(4, "big", signed=True) for d in shape)
    path = _write(tmp_path / "neg-idx2-ubyte", header + bytes(6))
    with pytest.raises(ValueError, match=r"neg-idx2-ubyte.*negative dimensions"):
        read_idx(path)


def test_read_idx_missing_file(tmp_path):
    """Check that a missing idx file is a FileNotFoundError naming the format."""
    with pytest.raises(FileNotFoundError, match="idx file not found.*big-endian"):
        read_idx(tmp_path / "nothing-idx1-ubyte")


@pytest.mark.parametrize("gz", [True, False])
def test_load_idx_dataset_subsets(tmp_path, rng, gz):
    """Check that train, test and all select and order the idx files' rows."""
    arrays = _write_idx_folder(tmp_path, rng, gz=gz)
    train = load_idx_dataset(tmp_path, subset="train")
    test = load_idx_dataset(tmp_path, subset="test")
    full = load_idx_dataset(tmp_path, subset="all")
    assert_array_equal(train.data, arrays["train"][0])
    assert_array_equal(test.target, arrays["t10k"][1])
    assert full.data.shape == (8, 4, 3) and full.data.dtype == np.uint8
    assert full.target.dtype == np.int64
    assert_array_equal(full.data, np.concatenate([train.data, test.data]))
    assert (train.split, test.split, full.split) == ("train", "test", "all")
    assert full.target_names[0] == "T-shirt/top" and len(full.target_names) == 10


def test_load_idx_dataset_accepts_dotted_names(tmp_path, rng):
    """Check that files spelled train-images.idx3-ubyte are found too."""
    _write_idx_folder(tmp_path, rng, gz=False)
    for name in os.listdir(tmp_path):
        os.rename(tmp_path / name, tmp_path / name.replace("-idx", ".idx"))
    assert load_idx_dataset(tmp_path, kind="mnist").data.shape == (8, 4, 3)


def test_load_idx_dataset_kind_none_names_labels(tmp_path):
    """Check that kind=None names each class by its label value."""
    _write(tmp_path / "train-images-idx3-ubyte", _idx_bytes(np.zeros((3, 2, 2), "u1")))
    _write(tmp_path / "train-labels-idx1-ubyte", _idx_bytes(np.array([7, 3, 7], "u1")))
    bunch = load_idx_dataset(tmp_path, kind=None, subset="train")
    assert_array_equal(bunch.target, [1, 0, 1])
    assert_array_equal(bunch.target_names[bunch.target], ["7", "3", "7"])


def test_load_idx_dataset_length_mismatch(tmp_path):
    """Check that images and labels of different lengths are a ValueError."""
    _write(tmp_path / "train-images-idx3-ubyte", _idx_bytes(np.zeros((3, 2, 2), "u1")))
    _write(tmp_path / "train-labels-idx1-ubyte", _idx_bytes(np.zeros(2, "u1")))
    with pytest.raises(ValueError, match="has 2 labels but .* has 3 images"):
        load_idx_dataset(tmp_path, subset="train")


def test_load_idx_dataset_rejects_non_uint8_images(tmp_path):
    """Check that an images file of another dtype is a ValueError."""
    _write(tmp_path / "train-images-idx3-ubyte", _idx_bytes(np.zeros((3, 2, 2), "i2")))
    _write(tmp_path / "train-labels-idx1-ubyte", _idx_bytes(np.zeros(3, "u1")))
    with pytest.raises(ValueError, match="expected uint8 images"):
        load_idx_dataset(tmp_path, subset="train")


def test_load_idx_dataset_rejects_labels_outside_kind(tmp_path):
    """Check that a label beyond the kind's classes is a ValueError."""
    _write(tmp_path / "train-images-idx3-ubyte", _idx_bytes(np.zeros((2, 2, 2), "u1")))
    _write(tmp_path / "train-labels-idx1-ubyte", _idx_bytes(np.array([0, 12], "u1")))
    with pytest.raises(ValueError, match="classes 0..9"):
        load_idx_dataset(tmp_path, kind="kmnist", subset="train")


def test_load_idx_dataset_missing_file(tmp_path, rng):
    """Check that a missing idx file is a FileNotFoundError naming it."""
    _write_idx_folder(tmp_path, rng)
    os.remove(tmp_path / "t10k-images-idx3-ubyte.gz")
    with pytest.raises(FileNotFoundError, match="No t10k-images-idx3-ubyte"):
        load_idx_dataset(tmp_path)


def test_load_idx_dataset_missing_folder(tmp_path):
    """Check that a missing folder is a FileNotFoundError naming it."""
    with pytest.raises(FileNotFoundError, match="idx data folder not found.*nope"):
        load_fashion_mnist(tmp_path / "nope")


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"subset": "validation"}, r"'subset' parameter .* str among \{.*'all'.*\}"),
        ({"kind": "emnist"}, r"'kind' parameter .* \{.*'fashion-mnist'.*\} or None"),
        ({"kind": None, "path": None}, "path is required"),
    ],
)
def test_load_idx_dataset_rejects_bad_arguments(tmp_path, kwargs, message):
    """Check that an unknown subset or kind, or no path for kind=None, raise."""
    kwargs = {"path": tmp_path, **kwargs}
    with pytest.raises(ValueError, match=message):
        load_idx_dataset(**kwargs)


@pytest.mark.skipif(not os.path.isdir(FASHION_MNIST), reason="no Debian fashion-mnist")
def test_load_fashion_mnist_real_files():
    """Check that Debian's Fashion-MNIST loads as 70000 28x28 images, 10 classes."""
    bunch = load_fashion_mnist(subset="all")
    assert bunch.data.shape == (70000, 28, 28) and bunch.data.dtype == np.uint8
    assert_array_equal(np.bincount(bunch.target), np.full(10, 7000))
    assert len(bunch.target_names) == 10


def test_load_digits_images_scales_to_uint8():
    """Check that the digits are 8x8 uint8 images with 0..16 mapped to 0..255."""
    bunch = load_digits_images()
    digits = load_digits()
    assert bunch.data.shape == (1797, 8, 8) and bunch.data.dtype == np.uint8
    assert_array_equal(bunch.data, np.rint(digits.images * 255 / 16))
    assert_array_equal(bunch.target_names[bunch.target], digits.target.astype(str))


def _gz_idx(path, shape, payload):
    header = bytes([0, 0, 0x08, len(shape)]) + b"".join(
        int(n).to_bytes(4, "big") for n in shape)
    with gzip.open(path, "wb") as f:
        f.write(header + payload)


def test_read_idx_memory_is_bounded_by_the_header(tmp_path):
    """Check a small gzip file that expands to 64 MiB behind a 10-byte header
    is refused without decompressing it all (a gzip bomb)."""
    import tracemalloc

    path = tmp_path / "bomb-idx1-ubyte.gz"
    _gz_idx(path, (10,), bytes(64 * 2**20))
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match="more than 10 data bytes"):
            read_idx(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 * 2**20


def test_read_idx_refuses_a_declared_size_over_the_bound(tmp_path, monkeypatch):
    """Check a header declaring more than MAX_IDX_BYTES is refused by name."""
    from sklearn_flowr.datasets import _idx

    monkeypatch.setattr(_idx, "MAX_IDX_BYTES", 1000)
    path = tmp_path / "big-idx2-ubyte.gz"
    _gz_idx(path, (100, 100), bytes(10_000))
    with pytest.raises(ValueError, match="MAX_IDX_BYTES"):
        read_idx(path)
