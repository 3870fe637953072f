"""Drawing KanjiVG characters: SVG stroke paths to Bezier control points, and
control points to a jittered, anti-aliased image."""

from __future__ import annotations

import functools
import re
import xml.etree.ElementTree as ET

import numpy as np

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
