"""``kanji``: Omniglot-like characters drawn with jitter from KanjiVG's strokes
(SVG paths to Bezier nodes to anti-aliased images), read from the user's
``kanjivg`` package (CC BY-SA 3.0, Ulrich Apel)."""

import functools
import importlib.metadata
import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from numbers import Integral, Real
from pathlib import Path

import numpy as np
from sklearn.utils import Bunch
from sklearn.utils._param_validation import Interval, validate_params

from ._cache import (
    CONSTRAINTS,
    keep_by_hash,
    read_rendered,
    rendered_split,
    split_of,
)
from ._glyphs import _characters

__all__ = ["kanji_characters", "kanji_strokes", "load_kanji", "render_kanji"]

_DISTRIBUTION = "kanjivg"
_EXTRA_HINT = ("pip install sklearn-flowr[kanji]  (or: pip install kanjivg); "
               "or pass data_dir, a folder of KanjiVG .svg files")


_VIEWBOX = 109.0  # KanjiVG draws every character in a 109 x 109 box.
_SVG_NS = "{http://www.w3.org/2000/svg}"
_SUPERSAMPLE = 4  # strokes of 1-2 pixels need the finer canvas to anti-alias
_POINTS_PER_CURVE = 8
# Path syntax: a command letter or a number (".5.5" is two numbers in SVG).
_TOKEN = re.compile(r"[MmLlHhVvCcSsZz]|[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_ARITY = {"M": 2, "L": 2, "H": 1, "V": 1, "C": 6, "S": 4, "Z": 0}


def _parse_path(d: str) -> list[np.ndarray]:
    """Cubic Bezier nodes of an SVG path (M, L, H, V, C, S, Z), one ``(3k + 1,
    2)`` array per subpath; lines become cubics with control points at thirds."""
    tokens = _TOKEN.findall(d)
    subpaths, nodes = [], []
    current = start = np.zeros(2)
    last_control = None  # second control point of the previous curve, for S
    command = None
    i = 0

    def close_subpath():
        if len(nodes) > 1:
            subpaths.append(np.asarray(nodes))

    while i < len(tokens):
        if tokens[i].isalpha():
            command, i = tokens[i], i + 1
        elif command is None:
            raise ValueError(f"SVG path {d!r} does not start with a command.")
        upper = command.upper()
        arity = _ARITY[upper]
        args = np.asarray(tokens[i:i + arity], dtype=np.float64)
        if args.shape[0] != arity:
            raise ValueError(f"SVG path {d!r}: {command} needs {arity} numbers.")
        i += arity
        offset = current if command.islower() else np.zeros(2)
        if upper == "M":
            close_subpath()
            current = start = args + offset
            nodes, last_control = [current], None
            command = "l" if command == "m" else "L"  # implicit lines follow
            continue
        if upper in "LHVZ":
            if upper == "Z":
                end = start
            elif upper == "H":
                end = np.array([args[0] + offset[0], current[1]])
            elif upper == "V":
                end = np.array([current[0], args[0] + offset[1]])
            else:
                end = args + offset
            step = (end - current) / 3
            first, second = current + step, current + 2 * step
        elif upper == "C":
            first, second, end = (args[:2] + offset, args[2:4] + offset,
                                  args[4:] + offset)
        else:  # S: the first control point mirrors the previous curve's second
            first = current if last_control is None else 2 * current - last_control
            second, end = args[:2] + offset, args[2:] + offset
        if not nodes:
            nodes = [current]
        nodes.extend([first, second, end])
        last_control = second if upper in "CS" else None
        current = end
        if upper == "Z":
            close_subpath()
            nodes = []
    close_subpath()
    return subpaths


@functools.lru_cache(maxsize=8192)
def _strokes_of_file(path: str) -> tuple[np.ndarray, ...]:
    root = ET.parse(path).getroot()
    strokes = []
    for element in root.iter(f"{_SVG_NS}path"):
        for nodes in _parse_path(element.get("d", "")):
            nodes.setflags(write=False)
            strokes.append(nodes)
    if not strokes:
        raise ValueError(f"KanjiVG file {path!r} holds no stroke.")
    return tuple(strokes)


# Cubic Bernstein basis at _POINTS_PER_CURVE values of t: (n_points, 4).
_T = np.linspace(0.0, 1.0, _POINTS_PER_CURVE)[:, None]
_BASIS = np.hstack([(1 - _T) ** 3, 3 * _T * (1 - _T) ** 2, 3 * _T**2 * (1 - _T), _T**3])


def _bezier_points(nodes: np.ndarray) -> np.ndarray:
    """Points along the cubic curves of ``nodes``, ``(n_points, 2)``."""
    n_curves = (nodes.shape[0] - 1) // 3
    # Curve k's four nodes are rows 3k .. 3k + 3: a strided window.
    index = 3 * np.arange(n_curves)[:, None] + np.arange(4)
    return np.einsum("pf,cfd->cpd", _BASIS, nodes[index]).reshape(-1, 2)


def _affine(rng: np.random.Generator, jitter: float) -> np.ndarray:
    """A small random affine of the box about its centre, ``(2, 3)``."""
    angle = np.deg2rad(rng.uniform(-6.0, 6.0) * jitter)
    scale = 1.0 + rng.uniform(-0.08, 0.08, size=2) * jitter
    shear = rng.uniform(-0.1, 0.1) * jitter
    rotation = np.array([[np.cos(angle), -np.sin(angle)],
                         [np.sin(angle), np.cos(angle)]])
    linear = rotation @ np.array([[1.0, shear], [0.0, 1.0]]) @ np.diag(scale)
    centre = np.full(2, _VIEWBOX / 2)
    shift = rng.uniform(-3.0, 3.0, size=2) * jitter
    return np.hstack([linear, (centre + shift - linear @ centre)[:, None]])


def _draw(strokes, rng, *, image_size: int, stroke_width: float,
          jitter: float) -> np.ndarray:
    """One instance: jittered strokes drawn on a supersampled canvas, shrunk."""
    from PIL import Image, ImageDraw

    canvas = image_size * _SUPERSAMPLE
    pixels_per_unit = canvas / _VIEWBOX
    image = Image.new("L", (canvas, canvas))
    draw = ImageDraw.Draw(image)
    affine = _affine(rng, jitter) if jitter > 0 else None
    # Instance-level width (a drawer's pen), varied a little per stroke.
    width = stroke_width * (rng.uniform(0.75, 1.3) if jitter > 0 else 1.0)
    for nodes in strokes:
        stroke_widths = width
        if jitter > 0:
            # Each node moves on its own (the curve's shape), the stroke as a
            # whole moves a little (where the drawer put it).
            nodes = (nodes + rng.normal(0.0, 1.2 * jitter, size=nodes.shape)
                     + rng.normal(0.0, 1.0 * jitter, size=2))
            nodes = nodes @ affine[:, :2].T + affine[:, 2]
            stroke_widths = width * rng.uniform(0.85, 1.15)
        points = _bezier_points(nodes) * pixels_per_unit
        radius = max(stroke_widths * pixels_per_unit / 2, 0.5)
        draw.line(points.ravel().tolist(), fill=255,
                  width=max(int(round(2 * radius)), 1))
        # Round caps (KanjiVG's style) and round joins where curves meet: a
        # sharp turn happens only there, inside a curve segments turn little.
        for x, y in points[::_POINTS_PER_CURVE].tolist() + [points[-1].tolist()]:
            draw.ellipse((x - radius, y - radius, x + radius, y + radius), fill=255)
    return np.asarray(image.resize((image_size, image_size), Image.Resampling.BOX))


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


@validate_params(
    {**CONSTRAINTS, "n_instances": [Interval(Integral, 1, None, closed="left")],
     "jitter": [Interval(Real, 0, None, closed="left")],
     "stroke_width": [Interval(Real, 0, None, closed="neither")]},
    prefer_skip_nested_validation=True)
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
    return rendered_split(
        cache_dir, "kanji", params, files, _read_kanji_cache,
        lambda: _build_kanji(folder, classes, image_size, n_instances, jitter,
                             stroke_width, random_state), split, return_X_y,
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
