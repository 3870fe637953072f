"""``glyphs``: characters rendered from font files, the embedded default data
(class = character, instance = font)."""

import functools
import os
from collections.abc import Iterable, Sequence
from numbers import Integral
from pathlib import Path

import numpy as np
from sklearn.preprocessing import normalize
from sklearn.utils import Bunch, check_random_state
from sklearn.utils._param_validation import Interval, validate_params

from ._cache import (
    CONSTRAINTS,
    check_cap,
    read_rendered,
    rendered_split,
    split_of,
)

__all__ = ["glyph_fonts", "load_glyphs"]

# One folder or several: a str or path is one folder, never its characters.
FontDirs = str | os.PathLike | Iterable[str | os.PathLike] | None
_FONT_SUFFIXES = (".ttf", ".otf")
# Two renders correlating this much are the same glyph (up to anti-aliasing).
_SAME_GLYPH = 0.995
_PROBE_LETTERS = "ABCDEFGHIJKLMNabcdefghijklmn0123456789"
# Renders are drawn at this multiple of ``image_size`` then box-filtered down:
# anti-aliased edges and sub-pixel augmentation for free.
_SUPERSAMPLE = 2


def _default_characters() -> list[str]:
    """Latin, Latin-1, Latin Extended-A, Greek and Cyrillic letters and signs."""
    ranges = [
        (0x21, 0x7E),  # printable ASCII without space
        (0xC0, 0xFF),  # Latin-1 letters
        (0x100, 0x17F),  # Latin Extended-A
        (0x391, 0x3A9),  # Greek capitals
        (0x3B1, 0x3C9),  # Greek small
        (0x400, 0x45F),  # Cyrillic
    ]
    chars = [chr(c) for lo, hi in ranges for c in range(lo, hi + 1)]
    return [c for c in chars if c.isprintable() and c not in "\xd7\xf7"]


def glyph_fonts(font_dirs: FontDirs = None, *,
                include_default: bool = True) -> list[Path]:
    """The ``.ttf``/``.otf`` files of matplotlib (``include_default``) and of
    ``font_dirs`` (searched recursively), sorted by file name, one per name."""
    if isinstance(font_dirs, str | bytes | os.PathLike):
        # One folder, not an iterable of one-character folder names.
        font_dirs = [font_dirs]
    folders = []
    if include_default:
        import matplotlib

        folders.append(Path(matplotlib.get_data_path()) / "fonts" / "ttf")
    for folder in font_dirs or ():
        folder = Path(folder)
        if not folder.is_dir():
            raise FileNotFoundError(f"Font folder {str(folder)!r} does not exist; "
                                    "expected a folder of .ttf/.otf files.")
        folders.append(folder)
    by_name = {}
    for folder in folders:
        for path in sorted(folder.rglob("*")):
            if path.suffix.lower() in _FONT_SUFFIXES and path.is_file():
                by_name.setdefault(path.name.lower(), path)
    return [by_name[name] for name in sorted(by_name)]


def _charmap(path: Path) -> set[int] | None:
    from matplotlib.ft2font import FT2Font

    try:
        return set(FT2Font(os.fspath(path)).get_charmap())
    except (OSError, RuntimeError, ValueError):
        return None  # unreadable or unsupported font file: skip it


def _render(font, character: str, canvas: int) -> np.ndarray:
    """Draw ``character`` on a ``canvas`` square, baseline at 3/4 height (so
    "o" and "O" or "," and "'" keep their size and height)."""
    from PIL import Image, ImageDraw

    image = Image.new("L", (canvas, canvas))
    ImageDraw.Draw(image).text((canvas / 2, canvas * 0.75), character, fill=255,
                               font=font, anchor="ms")
    return np.asarray(image)


def _augment(image: np.ndarray, rng: np.random.Generator, size: int) -> np.ndarray:
    """Light random affine (rotation, scale, shift), then box-filter to ``size``."""
    from PIL import Image

    canvas = image.shape[0]
    angle = np.deg2rad(rng.uniform(-8.0, 8.0))
    scale = rng.uniform(0.9, 1.1)
    shift = rng.uniform(-1.5, 1.5, size=2) * _SUPERSAMPLE
    # PIL maps output to input pixels: inverse rotation-scale about the centre.
    cos, sin = np.cos(angle) / scale, np.sin(angle) / scale
    centre = canvas / 2
    coeffs = (cos, sin, centre - cos * (centre + shift[0]) - sin * (centre + shift[1]),
              -sin, cos, centre + sin * (centre + shift[0]) - cos * (centre + shift[1]))
    warped = Image.fromarray(image).transform(
        (canvas, canvas), Image.Transform.AFFINE, coeffs,
        resample=Image.Resampling.BILINEAR)
    return _shrink(np.asarray(warped), size)


def _shrink(image: np.ndarray, size: int) -> np.ndarray:
    """Box-filter a supersampled render down to ``size``."""
    from PIL import Image

    return np.asarray(Image.fromarray(image).resize((size, size),
                                                    Image.Resampling.BOX))


def _unit_rows(images: np.ndarray) -> np.ndarray:
    """Each image centred and scaled to unit norm: dot products are correlations."""
    flat = images.reshape(images.shape[0], -1).astype(np.float64)
    return normalize(flat - flat.mean(axis=1, keepdims=True))


def _draws_placeholders(font, charmap, canvas) -> bool:
    """Whether a font draws one shape for many letters (a last-resort font of
    boxes), probed on fixed letters."""
    probe = [c for c in _PROBE_LETTERS if ord(c) in charmap]
    if len(probe) < 10:
        return False
    distinct = {_render(font, c, canvas).tobytes() for c in probe}
    return len(distinct) < 0.5 * len(probe)


def _render_class_table(fonts, characters, size, min_similarity):
    """``({character: (images, font_indices)}, same_shape)``: each covered pair
    rendered once; ``same_shape[i, j]``, the share of fonts drawing i, j alike."""
    from PIL import ImageFont

    canvas = size * _SUPERSAMPLE
    position = {character: i for i, character in enumerate(characters)}
    pair_sum = np.zeros((len(characters), len(characters)))
    pair_count = np.zeros_like(pair_sum)
    covered = {}
    for font_index, path in enumerate(fonts):
        charmap = _charmap(path)
        if not charmap:
            continue
        try:
            font = ImageFont.truetype(os.fspath(path), int(round(canvas * 0.68)))
        except OSError:
            continue
        if _draws_placeholders(font, charmap, canvas):
            continue
        renders = {}
        for character in characters:
            if ord(character) in charmap:
                image = _render(font, character, canvas)
                if image.any():
                    renders[character] = image
        if not renders:
            continue
        index = np.array([position[c] for c in renders])
        unit = _unit_rows(np.stack(list(renders.values())))
        pair_sum[np.ix_(index, index)] += unit @ unit.T >= _SAME_GLYPH
        pair_count[np.ix_(index, index)] += 1
        for character, image in renders.items():
            covered.setdefault(character, []).append((font_index, image))

    table = {}
    for character, pairs in covered.items():
        images = np.stack([image for _, image in pairs])
        unit = _unit_rows(images)
        centroid = unit.mean(axis=0)
        centroid /= max(np.linalg.norm(centroid), 1e-12)
        keep = unit @ centroid >= min_similarity
        table[character] = (images[keep], np.array([i for i, _ in pairs])[keep])
    with np.errstate(invalid="ignore", divide="ignore"):
        same_shape = pair_sum / pair_count
    return table, same_shape


def _drop_homoglyphs(table, characters, same_shape, threshold):
    """Keep the first of each group of look-alikes (Latin "A", Greek "Alpha",
    Cyrillic "A"): characters a ``threshold`` share of fonts draw alike."""
    # Correlation alone would merge accented letters too ("E" and "E-acute"
    # correlate at 0.96), but an accent is never the same glyph.
    kept = []
    for i, character in enumerate(characters):
        if character not in table:
            continue
        if kept and np.nanmax(np.append(same_shape[i, kept], -1.0)) >= threshold:
            continue
        kept.append(i)
    return [characters[i] for i in kept]


@validate_params(
    {**CONSTRAINTS, "n_augment": [Interval(Integral, 0, None, closed="left")],
     "min_fonts": [Interval(Integral, 1, None, closed="left")],
     "max_fonts": [Interval(Integral, 1, None, closed="left"), None]},
    prefer_skip_nested_validation=True)
def load_glyphs(font_dirs: FontDirs = None, *,
                split: str = "train", image_size: int = 28, n_augment: int = 2,
                characters: Sequence[str] | None = None, min_fonts: int = 5,
                max_fonts: int | None = None, include_default_fonts: bool = True,
                min_similarity: float = 0.3, homoglyph_share: float = 0.5,
                random_state: int = 0, cache_dir: str | os.PathLike | None = None,
                return_X_y: bool = False):
    """Load the ``glyphs`` few-shot dataset: characters rendered from fonts.

    A class is a character, an instance a font's rendering of it; a character's
    split comes from its hash (60% train, 20% val, 20% test). The user guide
    ("Input images and caches") says how renders are chosen.

    Parameters
    ----------
    font_dirs : path-like or iterable of path-like, default=None
        Extra font folders (searched recursively for .ttf/.otf), e.g.
        ``"/usr/share/fonts"``; a single str or path is one folder.
    split : {"train", "val", "test", "all"}, default="train"
    image_size : int, default=28
        Side of the square uint8 images.
    n_augment : int, default=2
        Augmented copies per (character, font); 0 gives one clean render.
    characters : sequence of str, default=None
        Candidate characters; None: Latin, Latin-1, Latin Extended-A, Greek
        and Cyrillic.
    min_fonts : int, default=5
        Fewest fonts a character needs to become a class.
    max_fonts : int or None, default=None
        Cap on fonts per class (a seeded choice).
    include_default_fonts : bool, default=True
        Include matplotlib's fonts.
    min_similarity : float, default=0.3
        Renders correlating less with their class's mean render are dropped.
    homoglyph_share : float, default=0.5
        Of two characters this share of fonts draws alike, the later is
        dropped as a look-alike.
    random_state : int, default=0
        Seed of the augmentation and of the ``max_fonts`` choice.
    cache_dir : path-like, default=None
        Folder caching the rendered arrays while fonts and parameters are
        unchanged; a cache that is unreadable, or unsafe, is rebuilt.
    return_X_y : bool, default=False
        Return ``(data, target)`` instead of a Bunch.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        ``data`` (n_samples, image_size, image_size) uint8, ``target`` int64,
        ``target_names`` (the characters), ``fonts`` (each row's font file),
        ``class_split`` (each class's split) and ``split``.

    Examples
    --------
    >>> from sklearn_flowr.datasets import load_glyphs
    >>> glyphs = load_glyphs(characters="ABCDEFGHIJ", split="all", n_augment=0)
    >>> glyphs.data.dtype, glyphs.data.shape[1:]
    (dtype('uint8'), (28, 28))
    >>> sorted(set(glyphs.class_split)) <= ["test", "train", "val"]
    True
    """
    check_cap("max_fonts", max_fonts, min_fonts, "min_fonts")
    candidates = _characters(_default_characters() if characters is None
                             else characters)
    fonts = glyph_fonts(font_dirs, include_default=include_default_fonts)
    if not fonts:
        raise ValueError("No .ttf/.otf font files found in the font folders given.")

    params = (tuple(candidates), image_size, n_augment, min_fonts, max_fonts,
              min_similarity, homoglyph_share, random_state)
    return rendered_split(
        cache_dir, "glyphs", params, fonts, _read_glyphs_cache,
        lambda: _build_glyphs(fonts, candidates, image_size, n_augment, min_fonts,
                              max_fonts, min_similarity, homoglyph_share,
                              random_state), split, return_X_y,
        "with these fonts and characters; give more characters or fonts")


def _characters(characters):
    """``characters`` without repeats; a ValueError unless single characters."""
    candidates = list(characters)
    if not candidates or any(not isinstance(c, str) or len(c) != 1
                             for c in candidates):
        raise ValueError("characters must be a non-empty sequence of single "
                         "characters.")
    return list(dict.fromkeys(candidates))


_read_glyphs_cache = functools.partial(read_rendered, row_fields=("fonts",))


def _build_glyphs(fonts, candidates, image_size, n_augment, min_fonts, max_fonts,
                  min_similarity, homoglyph_share, random_state):
    table, same_shape = _render_class_table(fonts, candidates, image_size,
                                            min_similarity)
    table = {c: v for c, v in table.items() if v[0].shape[0] >= min_fonts}
    classes = _drop_homoglyphs(table, candidates, same_shape, homoglyph_share)
    if not classes:
        raise ValueError(f"No character is covered by at least min_fonts={min_fonts} "
                         "fonts; give more font folders or lower min_fonts.")
    rng = check_random_state(random_state)
    aug_rng = np.random.default_rng(rng.randint(2**31 - 1))
    data, target, font_of_row = [], [], []
    for class_index, character in enumerate(classes):
        images, font_index = table[character]
        if max_fonts is not None and images.shape[0] > max_fonts:
            chosen = np.sort(rng.choice(images.shape[0], max_fonts, replace=False))
            images, font_index = images[chosen], font_index[chosen]
        for image, index in zip(images, font_index, strict=True):
            if n_augment == 0:
                copies = [_shrink(image, image_size)]
            else:
                copies = [_augment(image, aug_rng, image_size)
                          for _ in range(n_augment)]
            data.extend(copies)
            target.extend([class_index] * len(copies))
            font_of_row.extend([fonts[index].name] * len(copies))
    return Bunch(
        data=np.stack(data).astype(np.uint8),
        target=np.asarray(target, dtype=np.int64),
        target_names=np.asarray(classes),
        fonts=np.asarray(font_of_row),
        class_split=np.asarray([split_of(c) for c in classes]),
    )
