"""MiniImageNet and TieredImageNet in the file layouts they are shared in."""

import csv
import os
import zipfile
from collections.abc import Mapping

import numpy as np
from sklearn.utils import Bunch
from sklearn.utils._param_validation import StrOptions, validate_params

from ._image_io import (
    as_bytes,
    check_directory,
    check_image_size,
    encode_labels,
    load_image_files,
    resize_images,
)
from ._pickle import load_pickle

_SPLITS = ("train", "val", "test")

_MINI_LAYOUTS = (
    "the Ravi-Larochelle layout (<root>/<split>.csv with header 'filename,label' "
    "and the images in <root>/images/<filename>) or the pickle cache "
    "<root>/mini-imagenet-cache-<split>.pkl"
)
_MINI_CACHE = (
    "a pickled dict with 'image_data' (uint8 array of shape (n, height, width, 3)) "
    "and 'class_dict' (class name -> list of row indices)"
)
_TIERED_LABELS = (
    "a pickled dict with 'label_specific' (int array, one entry per image) and "
    "optionally 'label_general', 'label_specific_str' and 'label_general_str'"
)


def _check_rgb_array(images, path, expected):
    images = np.asarray(images)
    if images.ndim != 4 or images.shape[3] != 3:
        raise ValueError(
            f"{path!r} holds images of shape {images.shape}; expected {expected}."
        )
    if images.dtype != np.uint8:
        integral = np.issubdtype(images.dtype, np.integer)
        if not integral or (images.size and (images.min() < 0 or images.max() > 255)):
            raise ValueError(
                f"{path!r} holds {images.dtype} images; expected uint8 values."
            )
        images = images.astype(np.uint8)
    return images


def _read_ravi_csv(root, csv_path, image_size):
    with open(csv_path, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    header = [field.strip() for field in rows[0]] if rows else []
    if header != ["filename", "label"]:
        raise ValueError(
            f"{csv_path!r} starts with {header}; expected the header 'filename,label'."
        )
    rows = [row for row in rows[1:] if row]
    bad = next((i for i, row in enumerate(rows) if len(row) != 2), None)
    if bad is not None:
        raise ValueError(
            f"Line {bad + 2} of {csv_path!r} has {len(rows[bad])} fields; expected "
            "two: filename,label."
        )
    if not rows:
        raise ValueError(f"{csv_path!r} lists no image.")
    filenames = [os.path.join(root, "images", row[0].strip()) for row in rows]
    data = load_image_files(filenames, mode="RGB", image_size=image_size)
    target, target_names = encode_labels([row[1].strip() for row in rows])
    return Bunch(data=data, target=target, target_names=target_names,
                 filenames=np.asarray(filenames))


def _read_mini_cache(path, image_size):
    cache = load_pickle(path, _MINI_CACHE)
    if not isinstance(cache, Mapping) or not {"image_data", "class_dict"} <= set(cache):
        raise ValueError(f"{path!r} does not hold {_MINI_CACHE}.")
    images = _check_rgb_array(cache["image_data"], path, _MINI_CACHE)
    class_dict = cache["class_dict"]
    if not isinstance(class_dict, Mapping) or not class_dict:
        raise ValueError(f"'class_dict' in {path!r} is empty or not a dict.")
    n_images = images.shape[0]
    target = np.full(n_images, -1, dtype=np.int64)
    target_names = np.asarray(sorted(class_dict))
    for index, name in enumerate(target_names):
        rows = np.asarray(class_dict[name], dtype=np.int64).reshape(-1)
        if rows.size and (rows.min() < 0 or rows.max() >= n_images):
            raise ValueError(
                f"'class_dict[{name!r}]' in {path!r} has rows outside "
                f"0..{n_images - 1}."
            )
        if np.any(target[rows] >= 0):
            raise ValueError(f"Rows of class {name!r} in {path!r} overlap another's.")
        target[rows] = index
    if np.any(target < 0):
        raise ValueError(
            f"{int(np.sum(target < 0))} rows of 'image_data' in {path!r} belong to "
            "no class in 'class_dict'."
        )
    return Bunch(data=resize_images(images, image_size), target=target,
                 target_names=target_names)


@validate_params({"split": [StrOptions(set(_SPLITS))]},
                 prefer_skip_nested_validation=True)
def load_mini_imagenet(
    root: str | os.PathLike,
    *,
    split: str = "train",
    image_size: int | tuple[int, int] | None = None,
) -> Bunch:
    """Load one split of MiniImageNet (Vinyals et al., split of Ravi & Larochelle).

    Reads ``root/<split>.csv`` (header ``filename,label``, images in
    ``root/images/``), else the pickle ``root/mini-imagenet-cache-<split>.pkl``
    (``image_data`` and ``class_dict``), which is read without running code.

    Parameters
    ----------
    root : str or path-like
    split : {"train", "val", "test"}, default="train"
        64, 16 or 20 classes, disjoint across splits.
    image_size : int or (height, width), default=None
        As in :func:`~sklearn_flowr.datasets.load_image_folder`.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        As :func:`~sklearn_flowr.datasets.load_image_folder`'s, with RGB
        images and WordNet ids as ``target_names``; ``filenames`` in the
        Ravi-Larochelle layout only.

    References
    ----------
    .. [1] S. Ravi and H. Larochelle, "Optimization as a model for few-shot
       learning", ICLR 2017.

    Examples
    --------
    >>> import os, pickle, tempfile
    >>> import numpy as np
    >>> from sklearn_flowr.datasets import load_mini_imagenet
    >>> root = tempfile.mkdtemp()
    >>> cache = {"image_data": np.zeros((3, 84, 84, 3), dtype=np.uint8),
    ...          "class_dict": {"n02": [2], "n01": [0, 1]}}
    >>> with open(os.path.join(root, "mini-imagenet-cache-val.pkl"), "wb") as f:
    ...     pickle.dump(cache, f)
    >>> mini = load_mini_imagenet(root, split="val", image_size=32)
    >>> mini.data.shape, mini.target.tolist(), mini.target_names.tolist()
    ((3, 32, 32, 3), [0, 0, 1], ['n01', 'n02'])
    """
    image_size = check_image_size(image_size)
    root = check_directory(root, _MINI_LAYOUTS)
    csv_path = os.path.join(root, f"{split}.csv")
    cache_path = os.path.join(root, f"mini-imagenet-cache-{split}.pkl")
    if os.path.isfile(csv_path):
        return Bunch(**_read_ravi_csv(root, csv_path, image_size), split=split)
    if os.path.isfile(cache_path):
        return Bunch(**_read_mini_cache(cache_path, image_size), split=split)
    raise FileNotFoundError(
        f"Neither {csv_path!r} nor {cache_path!r} exists; expected {_MINI_LAYOUTS}."
    )


def _read_tiered_npz(path, bgr):
    expected = "an .npz archive with key 'images' (uint8, shape (n, h, w, 3))"
    try:
        with np.load(path, allow_pickle=False) as archive:
            images = archive["images"]
    except KeyError:
        raise ValueError(
            f"{path!r} has no 'images' array; expected {expected}."
        ) from None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise ValueError(f"Cannot read {path!r} ({exc}); expected {expected}.") from exc
    images = _check_rgb_array(images, path, expected)
    if bgr:
        # Swap B and R in place, a block at a time, to avoid a second full copy.
        for start in range(0, images.shape[0], 4096):
            block = images[start : start + 4096]
            block[..., [0, 2]] = block[..., [2, 0]]
    return images


def _read_tiered_png_pickle(path, image_size):
    expected = "a pickled list or array of PNG-encoded images (byte strings)"
    encoded = load_pickle(path, expected)
    if isinstance(encoded, np.ndarray) and encoded.dtype != object:
        encoded = list(encoded)
    if not isinstance(encoded, list | tuple | np.ndarray) or len(encoded) == 0:
        raise ValueError(f"{path!r} does not hold {expected}.")
    wheres = [f"{index} of {path!r}" for index in range(len(encoded))]
    raw = [as_bytes(item, where) for item, where in zip(encoded, wheres, strict=True)]
    return load_image_files(raw, mode="RGB", image_size=image_size, wheres=wheres)


def _tiered_target(labels, path, n_images, label_level):
    if not isinstance(labels, Mapping):
        raise ValueError(f"{path!r} does not hold {_TIERED_LABELS}.")
    key = f"label_{label_level}"
    if key not in labels and label_level == "specific" and "labels" in labels:
        key = "labels"  # the variant that stores only the fine labels
    if key not in labels:
        raise ValueError(f"{path!r} has no {key!r}; expected {_TIERED_LABELS}.")
    values = np.asarray(labels[key]).reshape(-1)
    if not np.issubdtype(values.dtype, np.integer):
        raise ValueError(f"{key!r} in {path!r} is not an integer array.")
    if values.shape[0] == 0:
        raise ValueError(f"{path!r} holds no label.")
    if values.shape[0] != n_images:
        raise ValueError(
            f"{path!r} has {values.shape[0]} labels for {n_images} images."
        )
    classes, target = np.unique(values, return_inverse=True)
    names = labels.get(f"{key}_str")
    if names is not None and len(names) > classes.max():
        target_names = np.asarray(names).astype(str)[classes]
    else:
        target_names = classes.astype(str)
    return target.astype(np.int64).reshape(-1), target_names


@validate_params({"split": [StrOptions(set(_SPLITS))],
                  "label_level": [StrOptions({"specific", "general"})],
                  "npz_channel_order": [StrOptions({"bgr", "rgb"})]},
                 prefer_skip_nested_validation=True)
def load_tiered_imagenet(
    root: str | os.PathLike,
    *,
    split: str = "train",
    image_size: int | tuple[int, int] | None = None,
    label_level: str = "specific",
    npz_channel_order: str = "bgr",
) -> Bunch:
    """Load one split of TieredImageNet (Ren et al., 2018).

    Reads ``root/<split>_labels.pkl`` and ``root/<split>_images.npz`` (key
    ``images``), else the slow ``root/<split>_images_png.pkl`` (PNG byte
    strings); pickles are read as :func:`load_mini_imagenet` reads its cache.

    Parameters
    ----------
    root : str or path-like
    split : {"train", "val", "test"}, default="train"
        351, 97 or 160 classes, disjoint across splits (and across their 20, 6
        and 8 high-level categories).
    image_size : int or (height, width), default=None
        Resize every image (bilinear) to this size.
    label_level : {"specific", "general"}, default="specific"
        Classify by ImageNet class (``label_specific``) or by high-level
        category (``label_general``).
    npz_channel_order : {"bgr", "rgb"}, default="bgr"
        Channel order of the ``.npz`` file (the common ones are BGR); the
        result is RGB.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        As :func:`load_mini_imagenet`'s, without ``filenames``;
        ``target_names`` come from ``label_<level>_str`` when stored, else
        they are the label values.

    References
    ----------
    .. [1] M. Ren, E. Triantafillou, S. Ravi, J. Snell, K. Swersky,
       J. B. Tenenbaum, H. Larochelle and R. S. Zemel, "Meta-learning for
       semi-supervised few-shot classification", ICLR 2018.

    Examples
    --------
    >>> import os, pickle, tempfile
    >>> import numpy as np
    >>> from sklearn_flowr.datasets import load_tiered_imagenet
    >>> root = tempfile.mkdtemp()
    >>> np.savez(os.path.join(root, "test_images.npz"),
    ...          images=np.zeros((2, 84, 84, 3), dtype=np.uint8))
    >>> labels = {"label_specific": np.array([1, 0]),
    ...           "label_specific_str": ["n01", "n02"]}
    >>> with open(os.path.join(root, "test_labels.pkl"), "wb") as f:
    ...     pickle.dump(labels, f)
    >>> tiered = load_tiered_imagenet(root, split="test")
    >>> tiered.data.shape, tiered.target_names[tiered.target].tolist()
    ((2, 84, 84, 3), ['n02', 'n01'])
    """
    image_size = check_image_size(image_size)
    root = check_directory(
        root, "the TieredImageNet files <split>_labels.pkl and <split>_images*"
    )
    labels_path = os.path.join(root, f"{split}_labels.pkl")
    npz_path = os.path.join(root, f"{split}_images.npz")
    png_path = os.path.join(root, f"{split}_images_png.pkl")
    if os.path.isfile(npz_path):
        images = _read_tiered_npz(npz_path, bgr=npz_channel_order == "bgr")
        images = resize_images(images, image_size)
    elif os.path.isfile(png_path):
        images = _read_tiered_png_pickle(png_path, image_size)
    else:
        raise FileNotFoundError(
            f"Neither {npz_path!r} nor {png_path!r} exists; expected the "
            "TieredImageNet images as <split>_images.npz (key 'images') or "
            "<split>_images_png.pkl (pickled PNG byte strings)."
        )
    labels = load_pickle(labels_path, _TIERED_LABELS)
    target, target_names = _tiered_target(
        labels, labels_path, images.shape[0], label_level
    )
    return Bunch(data=images, target=target, target_names=target_names, split=split)
