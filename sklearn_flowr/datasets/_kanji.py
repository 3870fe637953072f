"""``kanji``: Omniglot-like characters drawn with jitter from KanjiVG's strokes,
read from the user's ``kanjivg`` package (CC BY-SA 3.0, Ulrich Apel)."""

from __future__ import annotations

import functools
import importlib.metadata
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from sklearn.utils import Bunch

from ._cache import (
    cache_file,
    cached_arrays,
    check_arguments,
    keep_by_hash,
    read_rendered,
    select_split,
    split_of,
)
from ._glyphs import _characters
from ._kanji_drawing import _draw, _strokes_of_file

__all__ = ["kanji_characters", "kanji_strokes", "load_kanji", "render_kanji"]

_DISTRIBUTION = "kanjivg"
_EXTRA_HINT = ("pip install sklearn-flowr[kanji]  (or: pip install kanjivg); "
               "or pass data_dir, a folder of KanjiVG .svg files")


def _is_kanji_or_kana(code_point: int) -> bool:
    return (0x3041 <= code_point <= 0x30FF  # hiragana, katakana
            or 0x3400 <= code_point <= 0x4DBF  # CJK extension A
            or 0x4E00 <= code_point <= 0x9FFF  # CJK unified ideographs
            or 0x20000 <= code_point <= 0x2FFFF)  # CJK extensions B and later


def _kanjivg_dir(data_dir: str | os.PathLike | None = None) -> Path:
    """The folder of KanjiVG's SVG files: ``data_dir`` or the installed package's."""
    if data_dir is not None:
        folder = Path(data_dir)
        if not folder.is_dir():
            raise FileNotFoundError(f"KanjiVG folder {str(folder)!r} does not exist.")
        return folder
    try:
        distribution = importlib.metadata.distribution(_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError as exc:
        raise ImportError(f"The kanji data set needs the KanjiVG data: {_EXTRA_HINT}."
                          ) from exc
    # The wheel installs its SVG files as a top-level ``kanji`` folder.
    folder = Path(distribution.locate_file("kanji"))
    if not folder.is_dir():
        raise ImportError(f"The installed {_DISTRIBUTION!r} package has no 'kanji' "
                          f"folder of SVG files at {str(folder)!r}; reinstall it: "
                          f"{_EXTRA_HINT}.")
    return folder


def kanji_characters(data_dir: str | os.PathLike | None = None) -> list[str]:
    """Kanji and kana that KanjiVG draws (main drawings only), in code-point order.

    Parameters
    ----------
    data_dir : path-like, default=None
        A folder of KanjiVG ``.svg`` files (e.g. ``06c34.svg``); None uses the
        installed ``kanjivg`` package.

    Returns
    -------
    characters : list of str

    Examples
    --------
    >>> from sklearn_flowr.datasets import kanji_characters
    >>> characters = kanji_characters()
    >>> len(characters) > 6000, "水" in characters
    (True, True)
    """
    folder = _kanjivg_dir(data_dir)
    code_points = []
    for path in folder.glob("*.svg"):
        try:
            code_points.append(int(path.stem, 16))
        except ValueError:
            continue  # a variant drawing ("04e14-Kaisho") or another file
    return [chr(c) for c in sorted(code_points) if _is_kanji_or_kana(c)]


def kanji_strokes(character: str, *,
                  data_dir: str | os.PathLike | None = None) -> list[np.ndarray]:
    """The strokes of a character, in KanjiVG's stroke order.

    Parameters
    ----------
    character : str
        One character that KanjiVG draws.
    data_dir : path-like, default=None
        A folder of KanjiVG ``.svg`` files; None uses the installed package.

    Returns
    -------
    strokes : list of ndarray of shape (3 * n_curves + 1, 2)
        Cubic Bezier nodes of each stroke (start, control, control, end, ...)
        as ``(x, y)`` in KanjiVG's 109 x 109 box, y pointing down.

    Examples
    --------
    >>> from sklearn_flowr.datasets import kanji_strokes
    >>> len(kanji_strokes("水"))
    4
    """
    if not isinstance(character, str) or len(character) != 1:
        raise ValueError(f"character must be a single character; got {character!r}.")
    path = _kanjivg_dir(data_dir) / f"{ord(character):05x}.svg"
    if not path.is_file():
        raise ValueError(f"KanjiVG has no drawing of {character!r} "
                         f"(U+{ord(character):04X}).")
    return [nodes.copy() for nodes in _strokes_of_file(os.fspath(path))]


def render_kanji(character: str, *, image_size: int = 28, stroke_width: float = 7.0,
                 jitter: float = 0.0, random_state=None,
                 data_dir: str | os.PathLike | None = None) -> np.ndarray:
    """Draw one character; ``jitter=0`` gives the clean drawing.

    Parameters
    ----------
    character : str
    image_size : int, default=28
    stroke_width : float, default=7.0
        Pen width in KanjiVG's 109-unit box (7 is about 1.8 pixels at 28).
    jitter : float, default=0.0
        Scale of the random deformations (see :func:`load_kanji`).
    random_state : int, array-like or numpy.random.Generator, default=None
    data_dir : path-like, default=None

    Returns
    -------
    image : ndarray of shape (image_size, image_size), dtype uint8
        White (255) strokes on black (0).

    Examples
    --------
    >>> from sklearn_flowr.datasets import render_kanji
    >>> clean = render_kanji("水")
    >>> clean.shape, clean.dtype.name, bool(clean.max() == 255)
    ((28, 28), 'uint8', True)
    >>> drawn = render_kanji("水", jitter=1.0, random_state=0)
    >>> bool((drawn != clean).any())
    True
    """
    rng = np.random.default_rng(random_state)
    return _draw(kanji_strokes(character, data_dir=data_dir), rng,
                 image_size=image_size, stroke_width=stroke_width, jitter=jitter)


def load_kanji(*, split: str = "train", image_size: int = 28, n_instances: int = 20,
               characters: Sequence[str] | None = None,
               max_classes: int | None = None, jitter: float = 1.0,
               stroke_width: float = 7.0, random_state: int = 0,
               data_dir: str | os.PathLike | None = None,
               cache_dir: str | os.PathLike | None = None,
               return_X_y: bool = False):
    """Load the ``kanji`` few-shot data set: KanjiVG strokes drawn with jitter.

    A class is a kanji or kana, an instance a drawing of its strokes with
    random deformations (user guide, "Input images and caches"), as Omniglot's
    drawers; class ``c``'s drawings come from the seed ``(random_state,
    ord(c))``, its split from a hash of ``c`` as in :func:`load_glyphs`.

    Parameters
    ----------
    split : {"train", "val", "test", "all"}, default="train"
    image_size : int, default=28
        Side of the square uint8 images.
    n_instances : int, default=20
        Drawings per character.
    characters : sequence of str, default=None
        Characters to draw; None uses every kanji and kana of KanjiVG
        (:func:`kanji_characters`, about 6,600).
    max_classes : int or None, default=None
        Keep at most this many characters (before the split), by a fixed hash:
        a larger cap keeps every class of a smaller one.
    jitter : float, default=1.0
        Scale of all deformations; 0 draws every instance clean.
    stroke_width : float, default=7.0
        Pen width in the 109-unit box (about 1.8 pixels at 28).
    random_state : int, default=0
        Seed of the deformations.
    data_dir : path-like, default=None
        A folder of KanjiVG ``.svg`` files; None uses the installed ``kanjivg``
        package (``pip install sklearn-flowr[kanji]``).
    cache_dir, return_X_y
        As in :func:`load_glyphs`.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        As :func:`load_glyphs`'s (white strokes on black), with ``instance``
        (index of each drawing within its class) in place of ``fonts``.

    Raises
    ------
    ImportError
        If ``data_dir`` is None and ``kanjivg`` is not installed.

    Examples
    --------
    >>> from sklearn_flowr.datasets import load_kanji
    >>> kanji = load_kanji(characters="一二三水火", split="all", n_instances=3)
    >>> kanji.data.shape, [str(c) for c in kanji.target_names]
    ((15, 28, 28), ['一', '三', '二', '水', '火'])
    """
    check_arguments(split, optional=("max_classes",),
                    image_size=(image_size, 8),
                    n_instances=(n_instances, 1), max_classes=(max_classes, 1))
    for name, value in (("jitter", jitter), ("stroke_width", stroke_width)):
        if not np.isfinite(value) or value < 0 or (name == "stroke_width"
                                                   and value == 0):
            raise ValueError(f"{name} must be a finite number "
                             f"{'>= 0' if name == 'jitter' else '> 0'}; "
                             f"got {value!r}.")
    folder = _kanjivg_dir(data_dir)
    if characters is None:
        candidates = kanji_characters(folder)
    else:
        candidates = _characters(characters)
        missing = [c for c in candidates
                   if not (folder / f"{ord(c):05x}.svg").is_file()]
        if missing:
            raise ValueError(f"KanjiVG has no drawing of {missing[:10]}"
                             f"{' ...' if len(missing) > 10 else ''}.")
    classes = sorted(keep_by_hash(sorted(candidates), max_classes, "kanji:"))
    params = (tuple(classes), image_size, n_instances, float(jitter),
              float(stroke_width), int(random_state))
    if data_dir is None:  # the installed package: its version names the data
        params += (f"kanjivg {importlib.metadata.version(_DISTRIBUTION)}",)
        files = ()
    else:
        params += (os.fspath(folder.resolve()),)
        files = [folder / f"{ord(c):05x}.svg" for c in classes]
    full = cached_arrays(
        cache_file(cache_dir, "kanji", params, files), _read_kanji_cache,
        lambda: _build_kanji(folder, classes, image_size, n_instances, jitter,
                             stroke_width, random_state))
    return select_split(full, split, return_X_y, ("instance",),
                        "among these characters; give more characters")


def _build_kanji(folder, classes, image_size, n_instances, jitter, stroke_width,
                 random_state) -> Bunch:
    data = np.empty((len(classes) * n_instances, image_size, image_size), np.uint8)
    row = 0
    for character in classes:
        strokes = _strokes_of_file(os.fspath(folder / f"{ord(character):05x}.svg"))
        rng = np.random.default_rng([int(random_state), ord(character)])
        for _ in range(n_instances):
            data[row] = _draw(strokes, rng, image_size=image_size,
                              stroke_width=stroke_width, jitter=jitter)
            row += 1
    return Bunch(
        data=data,
        target=np.repeat(np.arange(len(classes), dtype=np.int64), n_instances),
        target_names=np.asarray(classes),
        instance=np.tile(np.arange(n_instances, dtype=np.int64), len(classes)),
        class_split=np.asarray([split_of(c) for c in classes]),
    )


_read_kanji_cache = functools.partial(read_rendered, row_fields=("instance",))
