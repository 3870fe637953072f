"""Image data sets stored as folder trees: a generic class-per-folder tree and
Omniglot's alphabet/character tree."""

import os

import numpy as np
from sklearn.utils import Bunch
from sklearn.utils._param_validation import StrOptions, validate_params

from ._image_io import (
    check_directory,
    check_image_size,
    encode_labels,
    load_image_files,
)

IMAGE_EXTENSIONS = (
    ".bmp",
    ".gif",
    ".jpeg",
    ".jpg",
    ".pbm",
    ".pgm",
    ".png",
    ".ppm",
    ".tif",
    ".tiff",
    ".webp",
)



def _subfolders(path):
    """Sorted names of the non-hidden folders directly in ``path``."""
    with os.scandir(path) as entries:
        return sorted(
            e.name for e in entries if e.is_dir() and not e.name.startswith(".")
        )


class _Tree:
    """The real paths read under one folder: a link out of it or to a path read
    already raises a ValueError."""

    def __init__(self, root):
        self.root = os.path.realpath(root)
        self.seen = {self.root: root}

    def check(self, path):
        real = os.path.realpath(path)
        if os.path.commonpath([real, self.root]) != self.root:
            raise ValueError(
                f"{path!r} is a symbolic link to {real!r}, outside the folder "
                f"read ({self.root!r}); links are followed only inside it. Copy "
                "or move the files into the folder.")
        if real in self.seen:
            raise ValueError(
                f"{path!r} leads to {real!r}, already read as {self.seen[real]!r} "
                "(a symbolic-link loop or a second link to it); each image must "
                "appear once in the tree.")
        self.seen[real] = path


def _image_files(folder, extensions, recursive, tree):
    """Sorted paths of the files under ``folder`` whose suffix is in ``extensions``."""
    paths = []
    for directory, subdirs, files in os.walk(folder, followlinks=True):
        tree.check(directory)
        subdirs[:] = [d for d in subdirs if recursive and not d.startswith(".")]
        paths.extend(
            os.path.join(directory, name)
            for name in files
            if name.lower().endswith(extensions) and not name.startswith(".")
        )
    for path in paths:
        tree.check(path)
    return sorted(paths)


def _read_tree(folder, classes, extensions, recursive, split, mode, image_size):
    """The images under ``folder/<class>`` for each ``(class, relative path)``."""
    paths, labels, tree = [], [], _Tree(folder)
    for name, relative in classes:
        files = _image_files(os.path.join(folder, relative), extensions, recursive,
                             tree)
        if not files and recursive:
            raise ValueError(
                f"Class folder {os.path.join(folder, relative)!r} holds no file "
                f"ending in {list(extensions)}.")
        paths.extend(files)
        labels.extend([name] * len(files))
    if not paths:
        return None
    data = load_image_files(paths, mode=mode, image_size=image_size)
    target, target_names = encode_labels(labels)
    return Bunch(data=data, target=target, target_names=target_names, split=split,
                 filenames=np.asarray(paths))


@validate_params({"mode": [StrOptions({"L", "RGB"}), None]},
                 prefer_skip_nested_validation=True)
def load_image_folder(
    root: str | os.PathLike,
    *,
    split: str | None = None,
    extensions: tuple[str, ...] = IMAGE_EXTENSIONS,
    image_size: int | tuple[int, int] | None = None,
    mode: str | None = None,
) -> Bunch:
    """Load an image-folder tree ``root/<class>/<image files>``.

    The layout of torchvision's ``ImageFolder``; hidden files and folders are
    skipped, and symbolic links are followed only inside ``root`` (user guide,
    "Input images and caches").

    Parameters
    ----------
    root : str or path-like
        The tree's top folder.
    split : str, default=None
        If given, read ``root/<split>`` instead (``root/train/<class>/...``).
    extensions : tuple of str, default=IMAGE_EXTENSIONS
        File-name endings (case-insensitive) that mark an image.
    image_size : int or (height, width), default=None
        Resize every image (bilinear) to this size; without it, images of
        different sizes raise a ValueError. Images over
        :data:`MAX_IMAGE_PIXELS` pixels raise a ValueError before decoding.
    mode : {None, "L", "RGB"}, default=None
        Colour mode of the result; None: grayscale when every image is.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        Dictionary-like object with attributes

        data : ndarray of uint8 of shape (n_images, height, width[, 3])
            The images, sorted by class folder then path.
        target : ndarray of int64 of shape (n_images,)
            Class index of each image, in ``0 .. n_classes - 1``.
        target_names : ndarray of str of shape (n_classes,)
            The sorted class-folder names.
        split : str or None
            The ``split`` argument.
        filenames : ndarray of str of shape (n_images,)
            Path of each image.

    Examples
    --------
    >>> import os, tempfile
    >>> from PIL import Image
    >>> from sklearn_flowr.datasets import load_image_folder
    >>> root = tempfile.mkdtemp()
    >>> for name in ["cat", "dog"]:
    ...     os.makedirs(os.path.join(root, name))
    ...     Image.new("L", (6, 4)).save(os.path.join(root, name, "a.png"))
    >>> tree = load_image_folder(root)
    >>> tree.data.shape, tree.target_names.tolist()
    ((2, 4, 6), ['cat', 'dog'])
    """
    if isinstance(extensions, str):
        extensions = (extensions,)
    extensions = tuple(e.lower() for e in extensions)
    if not extensions:
        raise ValueError("extensions must name at least one file-name ending.")
    image_size = check_image_size(image_size)
    expected = "an image-folder tree <root>/<class>/<image files>"
    root = check_directory(root, expected)
    folder = (
        root
        if split is None
        else check_directory(
            os.path.join(root, split), f"split folder {split!r} holding {expected}"
        )
    )
    classes = _subfolders(folder)
    if not classes:
        raise ValueError(f"{folder!r} has no class folder; expected {expected}.")
    return _read_tree(folder, [(name, name) for name in classes], extensions, True,
                      split, mode, image_size)


@validate_params({"split": [StrOptions({"background", "evaluation"}), None]},
                 prefer_skip_nested_validation=True)
def load_omniglot(
    root: str | os.PathLike,
    *,
    split: str | None = None,
    image_size: int | tuple[int, int] | None = None,
) -> Bunch:
    """Load Omniglot (Lake et al., 2015) from ``root/<alphabet>/<character>/*.png``
    (the unzipped archives' layout); a class is ``"<alphabet>/<character>"``.

    Parameters
    ----------
    root : str or path-like
        The folder holding the alphabet folders, or with ``split`` their parent.
    split : {"background", "evaluation"}, default=None
        If given, read ``root/images_<split>``: 964 or 659 characters.
    image_size : int or (height, width), default=None
        Resize every image (bilinear) to this size; Omniglot's are 105 x 105.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        As :func:`load_image_folder`'s, grayscale (255 background, 0 strokes).

    References
    ----------
    .. [1] B. M. Lake, R. Salakhutdinov and J. B. Tenenbaum, "Human-level
       concept learning through probabilistic program induction", Science 350,
       2015.

    Examples
    --------
    >>> import os, tempfile
    >>> from PIL import Image
    >>> from sklearn_flowr.datasets import load_omniglot
    >>> root = tempfile.mkdtemp()
    >>> folder = os.path.join(root, "images_background", "Latin", "character01")
    >>> os.makedirs(folder)
    >>> Image.new("1", (105, 105), 1).save(os.path.join(folder, "0001_01.png"))
    >>> omniglot = load_omniglot(root, split="background", image_size=28)
    >>> omniglot.data.shape, omniglot.target_names.tolist()
    ((1, 28, 28), ['Latin/character01'])
    """
    image_size = check_image_size(image_size)
    expected = "Omniglot folders <root>/<alphabet>/<character>/*.png"
    root = check_directory(root, expected)
    folder = (
        root
        if split is None
        else check_directory(os.path.join(root, f"images_{split}"), expected)
    )
    characters = [(f"{alphabet}/{character}", os.path.join(alphabet, character))
                  for alphabet in _subfolders(folder)
                  for character in _subfolders(os.path.join(folder, alphabet))]
    omniglot = _read_tree(folder, characters, (".png",), False, split, "L",
                          image_size)
    if omniglot is None:
        raise ValueError(f"{folder!r} holds no PNG file; expected {expected}.")
    return omniglot
