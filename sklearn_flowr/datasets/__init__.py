"""Offline data-set loaders: nothing is downloaded at run time.

Each loader reads files already on disk or shipped with a package and returns
a :class:`~sklearn.utils.Bunch` with ``data`` (uint8 images), ``target`` (int64
class indices), ``target_names`` and ``split``.
"""

from ._folders import IMAGE_EXTENSIONS, load_image_folder, load_omniglot
from ._glyphs import load_glyphs
from ._icons import load_icon_themes
from ._idx import load_digits_images, load_fashion_mnist, load_idx_dataset, read_idx
from ._imagenet import load_mini_imagenet, load_tiered_imagenet
from ._kanji import kanji_characters, kanji_strokes, load_kanji, render_kanji

#: The most pixels an image file may hold (one 5792 x 5792 image, 32 MiB of
#: 8-bit gray): a larger one raises a ValueError before it is decoded, since a
#: small compressed file can unpack to gigabytes.
MAX_IMAGE_PIXELS = 2**25

__all__ = [
    "IMAGE_EXTENSIONS",
    "MAX_IMAGE_PIXELS",
    "load_digits_images",
    "load_fashion_mnist",
    "load_glyphs",
    "load_icon_themes",
    "load_idx_dataset",
    "load_image_folder",
    "kanji_characters",
    "kanji_strokes",
    "load_kanji",
    "render_kanji",
    "load_mini_imagenet",
    "load_omniglot",
    "load_tiered_imagenet",
    "read_idx",
]
