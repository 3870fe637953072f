"""Decoding image files and byte strings into one stacked uint8 array, and the
argument checks the image loaders share."""

import io
import os
from numbers import Integral

import numpy as np
from PIL import Image

# Pillow modes that carry no colour: they are read as 8-bit grayscale.
_GRAY_MODES = frozenset({"1", "L", "LA", "La", "I", "I;16", "I;16B", "I;16L", "F"})


def check_image_size(image_size):
    """``image_size`` as a ``(height, width)`` tuple of positive ints, or None."""
    if image_size is None:
        return None
    pair = (image_size,) * 2 if isinstance(image_size, Integral) else image_size
    try:
        size = tuple(pair)
    except TypeError:
        size = ()
    if len(size) != 2 or not all(isinstance(s, Integral) and not isinstance(s, bool)
                                 for s in size):
        raise ValueError(
            "image_size must be None, an int or a (height, width) pair of ints; "
            f"got {image_size!r}."
        )
    if min(size) < 1:
        raise ValueError(f"image_size must be positive; got {image_size!r}.")
    return int(size[0]), int(size[1])


def check_directory(path, expected):
    """``path`` as a str; FileNotFoundError naming ``expected`` if no folder."""
    path = os.fspath(path)
    if not os.path.isdir(path):
        raise FileNotFoundError(
            f"Data folder not found: {path!r}; expected {expected}."
        )
    return path


def as_bytes(encoded, where):
    """An encoded image stored as bytes, a latin-1 ``str`` or a uint8 array."""
    if isinstance(encoded, bytes | bytearray | memoryview):
        return bytes(encoded)
    if isinstance(encoded, str):
        return encoded.encode("latin1")
    if isinstance(encoded, np.ndarray) and encoded.dtype == np.uint8:
        return encoded.tobytes()
    raise ValueError(f"Item {where}: an encoded image must be bytes; got "
                     f"{type(encoded).__name__}.")


def _wide_to_8bit(image, where):
    """Grayscale images of more than 8 bits rescaled (not clipped, as Pillow's
    ``convert("L")`` does) to mode L; values out of range raise."""
    # I;16* (16-bit PNG, TIFF) and I (Pillow's 16-bit PGM) span 0..65535;
    # F (float TIFF) must already lie in 0..255.
    if image.mode.startswith("I;16"):
        # rint(v * 255 / 65535) in integers (no ties: 65535 is odd).
        values = np.asarray(image).astype(np.uint32)
        values *= 510
        values += 65535
        values //= 131070
        return Image.fromarray(values.astype(np.uint8))
    if image.mode not in ("I", "F"):
        return image
    full_scale = 65535.0 if image.mode == "I" else 255.0
    values = np.asarray(image, dtype=np.float64)
    low, high = (float(values.min()), float(values.max())) if values.size else (0, 0)
    if not (np.isfinite(low) and np.isfinite(high)) or low < 0 or high > full_scale:
        raise ValueError(
            f"Image {where} (Pillow mode {image.mode}) holds values in [{low:g}, "
            f"{high:g}]; expected 0..{full_scale:g}, which is mapped onto 0..255. "
            "Convert it to an 8- or 16-bit image first."
        )
    pixels = np.rint(values * (255.0 / full_scale)).astype(np.uint8)
    return Image.fromarray(pixels)  # 2-d uint8: mode L


def _as_pil_mode(image, mode):
    """Convert to ``mode``; None keeps gray images gray and makes others RGB."""
    if mode is None:
        mode = "L" if image.mode in _GRAY_MODES else "RGB"
    if mode == "RGB" and (image.mode in ("RGBA", "LA", "PA", "P")
                          or "transparency" in image.info):
        # Composite on white, so transparent pixels do not turn black.
        rgba = image.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    return image if image.mode == mode else image.convert(mode)


def resize_images(images, image_size):
    """Resize a ``(n, height, width[, 3])`` uint8 array to ``image_size``
    (bilinear; None keeps it)."""
    if image_size is None or images.shape[1:3] == image_size:
        return images
    resized = [Image.fromarray(image).resize(image_size[::-1],  # (width, height)
                                             resample=Image.Resampling.BILINEAR)
               for image in images]
    return np.stack([np.asarray(image, dtype=np.uint8) for image in resized])


class _TooLarge(ValueError):
    pass


def decode_image(source, *, mode=None, image_size=None, where=None):
    """One image from a path or encoded bytes as a uint8 array, in ``mode`` (None
    keeps gray gray) and resized to ``image_size``; ``where`` names it in errors."""
    where = where if where is not None else repr(source)
    stream = io.BytesIO(source) if isinstance(source, bytes) else source
    from . import MAX_IMAGE_PIXELS  # the package's, which a user may raise

    try:
        with Image.open(stream) as image:
            if image.width * image.height > MAX_IMAGE_PIXELS:
                raise _TooLarge(
                    f"Image {where} is {image.width} x {image.height} pixels, more "
                    "than sklearn_flowr.datasets.MAX_IMAGE_PIXELS "
                    f"({MAX_IMAGE_PIXELS:,}); it is not decoded. Raise that bound "
                    "if you trust the file.")
            image.load()
            image = _as_pil_mode(_wide_to_8bit(image, where), mode)
            if image_size is not None and image.size != image_size[::-1]:
                image = image.resize(
                    image_size[::-1], resample=Image.Resampling.BILINEAR
                )
            return np.asarray(image, dtype=np.uint8)
    except FileNotFoundError:
        raise FileNotFoundError(f"Image file not found: {where}.") from None
    except _TooLarge:
        raise
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as exc:
        raise ValueError(
            f"Cannot decode image {where} ({exc}); expected an image file that "
            "Pillow can read (PNG, JPEG, ...)."
        ) from exc


def load_image_files(sources, *, mode=None, image_size=None, wheres=None):
    """Decode every path or encoded image (bytes, named by ``wheres`` in
    errors) into one ``(n_images, ...)`` uint8 array; a colour image turns
    the whole array RGB, other shape differences raise."""
    data = first = None
    for index, source in enumerate(sources):
        where = repr(source) if wheres is None else wheres[index]
        image = decode_image(source, mode=mode, image_size=image_size, where=where)
        if data is None:
            data, first = np.empty((len(sources), *image.shape), np.uint8), where
        elif image.ndim == 2 and data.ndim == 4 and data.shape[3] == 3:
            image = np.repeat(image[:, :, None], 3, axis=2)
        elif image.ndim == 3 and image.shape[2] == 3 and data.ndim == 3:
            data = np.repeat(data[..., None], 3, axis=3)
        if image.shape != data.shape[1:]:
            raise ValueError(
                f"Image {where} has shape {image.shape} but {first} has shape "
                f"{data.shape[1:]}; pass image_size=(height, width) "
                "(flowr-benchmark: --image-size HEIGHT WIDTH) to resize every "
                "image to one size."
            )
        data[index] = image
    return data


def encode_labels(labels):
    """Class indices ``0 .. K - 1`` and the sorted class names they index."""
    target_names, target = np.unique(np.asarray(labels), return_inverse=True)
    return target.astype(np.int64).reshape(-1), target_names
