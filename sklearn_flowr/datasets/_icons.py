"""``icons``: freedesktop icon themes installed from Debian packages, a colour
data set with a change of style (class = icon name, instance = theme)."""

import functools
import hashlib
import os
import re
import shutil
import subprocess
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from numbers import Integral
from pathlib import Path

import numpy as np
from sklearn.utils import Bunch
from sklearn.utils._param_validation import Interval, validate_params

from ._cache import (
    CONSTRAINTS,
    check_cap,
    keep_by_hash,
    read_rendered,
    rendered_split,
    split_of,
)
from ._image_io import decode_image

__all__ = ["load_icon_themes"]

# The icon themes read by default: ten styles by different designers.
ICON_THEMES = ("Adwaita", "Faenza", "Moka", "Papirus", "Tango", "breeze",
               "elementary-xfce", "gnome", "mate", "oxygen")
# Faba is Moka's base set by the same designers (places, actions, mime
# types): one style, read from both folders.
_STYLE_FOLDERS = {"Moka": ("Moka", "Faba")}
_DEBIAN_PACKAGES = {
    "Adwaita": "adwaita-icon-theme", "Faba": "faba-icon-theme",
    "Faenza": "faenza-icon-theme", "Moka": "moka-icon-theme",
    "Papirus": "papirus-icon-theme", "Tango": "tango-icon-theme",
    "breeze": "breeze-icon-theme", "elementary-xfce": "elementary-xfce-icon-theme",
    "gnome": "gnome-icon-theme", "mate": "mate-icon-theme",
    "oxygen": "oxygen-icon-theme",
}
_RENDERER, _RENDERER_PACKAGE = "rsvg-convert", "librsvg2-bin"
# The file of a name is chosen at the size nearest this (vector drawings count
# as 256), never under _SMALLEST: the choice, and so the classes, do not
# depend on image_size.
_PREFERRED_SIZE, _SMALLEST = 64, 32
_SIZE_PART = re.compile(r"(\d+)(x\d+)?(@\d+x)?")
# SVG icons are a few kB; a larger file is not an icon.
_MAX_SVG_BYTES = 2**22


def _install_hint(folders) -> str:
    packages = sorted({_DEBIAN_PACKAGES[f] for f in folders if f in _DEBIAN_PACKAGES})
    return "apt-get install " + " ".join([*packages, _RENDERER_PACKAGE])


def _size_of(relative: str) -> int | None:
    """Pixel size a theme path is drawn for ("64x64/apps", "apps/48",
    "scalable"), or None."""
    size = None
    for part in relative.split(os.sep):
        if part == "scalable":
            return 256
        match = _SIZE_PART.fullmatch(part)
        if match:
            size = int(match.group(1))
    return size


def _preference(size: int, suffix: str) -> tuple:
    return (size < 48, abs(min(size, 256) - _PREFERRED_SIZE), suffix != ".png")


def _inside(real: str, boundary: str) -> bool:
    return os.path.commonpath([real, boundary]) == boundary


def _folder_icons(folder: str, entries: dict) -> None:
    """Add to ``entries`` ``{name: [(preference, path), ...]}`` the icon files
    of one theme folder, symbolic icons left out; links are not resolved yet."""
    for directory, subdirs, files in os.walk(folder, followlinks=False):
        relative = os.path.relpath(directory, folder)
        size = _size_of(relative)
        # Symbolic (one-colour) icons are one style for every theme; folders
        # of small sizes are skipped whole.
        subdirs[:] = [d for d in subdirs if "symbolic" not in d
                      and not d.startswith(".")
                      and (_size_of(d) or _SMALLEST) >= _SMALLEST]
        if size is None or size < _SMALLEST or "symbolic" in relative:
            continue
        for file in files:
            name, suffix = os.path.splitext(file)
            if suffix in (".png", ".svg") and not name.endswith("-symbolic"):
                entries.setdefault(name, []).append(
                    (_preference(size, suffix), os.path.join(directory, file)))


def _resolve(path: str, real_folders: dict) -> str | None:
    """``os.path.realpath(path)`` for a file, the folders' real paths cached
    (a theme holds tens of thousands of links); None for a loop."""
    for _ in range(40):
        folder, base = os.path.split(path)
        if folder not in real_folders:
            real_folders[folder] = os.path.realpath(folder)
        path = os.path.join(real_folders[folder], base)
        try:
            target = os.readlink(path)
        except OSError:  # not a link, or missing
            return path
        # The folder is resolved, so ".." in the target is lexical.
        path = os.path.normpath(os.path.join(real_folders[folder], target))
    return None


def _drawing(candidates: list, boundary: str, real_folders: dict) -> str | None:
    """The real path of a name's preferred own file inside ``boundary`` (not an
    alias: a link to another name's file), or None."""
    for _, path in sorted(candidates):
        real = _resolve(path, real_folders)
        if (real is not None and _inside(real, boundary) and os.path.isfile(real)
                and os.path.basename(real) == os.path.basename(path)):
            return real
    return None


def _theme_icons(root: str, style: str) -> dict[str, str]:
    """``{icon name: real path}`` of one style, its file nearest 64 pixels."""
    drawings = {}
    for folder in _STYLE_FOLDERS.get(style, (style,)):
        path = os.path.join(root, folder)
        if not os.path.isdir(path):
            continue
        entries: dict[str, list] = {}
        _folder_icons(path, entries)
        boundary, real_folders = os.path.realpath(path), {}
        for name, candidates in entries.items():
            best = min(candidates)[0]
            # The first folder of a style wins a tie.
            if name in drawings and drawings[name][0] <= best:
                continue
            real = _drawing(candidates, boundary, real_folders)
            if real is not None:
                drawings[name] = (best, real)
    return {name: real for name, (_, real) in sorted(drawings.items())}


def _digest(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _distinct_renderings(index: dict, min_themes: int) -> dict[str, dict]:
    """``{name: {style: path}}`` of the names with ``min_themes`` distinct files
    (copies within a style count for neither name, across styles once)."""
    count = Counter(name for icons in index.values() for name in icons)
    candidates = sorted(name for name, n in count.items() if n >= min_themes)
    digests = {style: {name: _digest(icons[name]) for name in candidates
                       if name in icons} for style, icons in index.items()}
    classes = {}
    for name in candidates:
        renderings, seen = {}, set()
        for style, icons in index.items():
            digest = digests[style].get(name)
            if digest is None or digest in seen:
                continue
            seen.add(digest)
            renderings[style] = icons[name]
        classes[name] = renderings
    for style, by_name in digests.items():
        uses = Counter(by_name.values())
        for name, digest in by_name.items():
            if uses[digest] > 1:
                classes[name].pop(style, None)
    return {name: r for name, r in classes.items() if len(r) >= min_themes}


def _check_themes(root: str, themes) -> list[str]:
    """The styles to read: those given (each must be installed), or the
    installed ones of :data:`ICON_THEMES`."""
    if themes is None:
        return [t for t in ICON_THEMES
                if os.path.isdir(os.path.join(root, _STYLE_FOLDERS.get(t, (t,))[0]))]
    if isinstance(themes, str):
        themes = [themes]
    themes = list(themes)
    if (not themes or any(not isinstance(t, str) or not t or t.startswith(".")
                          or "/" in t or os.sep in t for t in themes)
            or len(set(themes)) != len(themes)):
        raise ValueError(f"themes must be None or a non-empty sequence of distinct "
                         f"theme folder names under root; got {themes!r}.")
    boundary = os.path.realpath(root)
    for theme in themes:
        folder = os.path.join(root, theme)
        if not os.path.isdir(folder):
            package = _DEBIAN_PACKAGES.get(theme)
            hint = (f"install it: apt-get install {package}" if package else
                    "give the name of a folder holding a freedesktop icon theme")
            raise FileNotFoundError(f"Icon theme {theme!r} is not installed: no "
                                    f"folder {folder!r}; {hint}.")
        if not _inside(os.path.realpath(folder), boundary):
            raise ValueError(f"Icon theme folder {folder!r} is a link leading "
                             f"outside {root!r}; it is not read.")
    return themes


def _render(path: str, image_size: int) -> np.ndarray:
    """One icon as an ``(image_size, image_size, 3)`` uint8 image: drawn
    (SVG) or shrunk (PNG) to fit, centred on white."""
    from PIL import Image

    if path.endswith(".svg"):
        if os.path.getsize(path) > _MAX_SVG_BYTES:
            raise ValueError(f"SVG icon {path!r} is over {_MAX_SVG_BYTES} bytes; "
                             "it is not drawn.")
        done = subprocess.run([_RENDERER, "-w", str(image_size), "-h",
                               str(image_size), "-a", path],
                              capture_output=True, timeout=60, check=False)
        if done.returncode != 0 or not done.stdout:
            raise ValueError(f"{_RENDERER} cannot draw {path!r}: "
                             f"{done.stderr.decode(errors='replace').strip()}")
        source = done.stdout
    else:
        source = path
    # On white before resizing, so transparent pixels never bleed into edges.
    image = Image.fromarray(decode_image(source, mode="RGB", where=repr(path)))
    scale = image_size / max(image.size)
    if scale != 1:
        image = image.resize((max(1, round(image.width * scale)),
                              max(1, round(image.height * scale))),
                             Image.Resampling.LANCZOS)
    canvas = Image.new("RGB", (image_size, image_size), (255, 255, 255))
    canvas.paste(image, ((image_size - image.width) // 2,
                         (image_size - image.height) // 2))
    return np.asarray(canvas, dtype=np.uint8)


@validate_params(
    {**CONSTRAINTS, "min_themes": [Interval(Integral, 1, None, closed="left")],
     "max_themes": [Interval(Integral, 1, None, closed="left"), None],
     "n_jobs": [Interval(Integral, 1, None, closed="left"), None]},
    prefer_skip_nested_validation=True)
def load_icon_themes(root: str | os.PathLike = "/usr/share/icons", *,
                     split: str = "train", image_size: int = 32,
                     themes: Sequence[str] | None = None, min_themes: int = 4,
                     max_themes: int | None = None, max_classes: int | None = None,
                     n_jobs: int | None = None,
                     cache_dir: str | os.PathLike | None = None,
                     return_X_y: bool = False):
    """Load the ``icons`` data set: colour icons of installed icon themes.

    A class is an icon name (``"edit-copy"``), an instance its drawing in one
    theme (the style); the user guide ("Input images and caches") says which
    Debian packages to install and which files are left out.

    Parameters
    ----------
    root : path-like, default="/usr/share/icons"
        The folder holding the theme folders.
    split : {"train", "val", "test", "all"}, default="train"
    image_size : int, default=32
        Side of the square RGB images.
    themes : sequence of str, default=None
        Theme folders under ``root``, in order; None reads the installed ones
        of Adwaita, Faenza, Moka (with its base set ``Faba``), Papirus, Tango,
        breeze, elementary-xfce, gnome, mate and oxygen.
    min_themes : int, default=4
        Fewest themes with a distinct drawing a name needs to be a class.
    max_themes : int or None, default=None
        Keep at most this many themes per class, by a fixed hash of the name
        and theme.
    max_classes : int or None, default=None
        Keep at most this many classes (before the split), by a fixed hash
        of the name: a larger cap keeps every class of a smaller one.
    n_jobs : int or None, default=None
        Drawing threads; None uses up to 8 cores.
    cache_dir, return_X_y
        As in :func:`load_glyphs`.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        ``data`` (n_samples, image_size, image_size, 3) uint8 (RGB on
        white, channels last as :func:`load_image_folder` gives it),
        ``target`` int64, ``target_names`` (the icon names), ``themes``
        (each row's theme: its style), ``filenames`` (each row's file),
        ``class_split`` and ``split``.

    Raises
    ------
    FileNotFoundError
        If ``root``, a theme given, or ``rsvg-convert`` is missing (the
        message names the Debian packages to install).

    Examples
    --------
    >>> import os, tempfile
    >>> from PIL import Image
    >>> from sklearn_flowr.datasets import load_icon_themes
    >>> root = tempfile.mkdtemp()
    >>> for i, theme in enumerate(["a", "b", "c", "d"]):
    ...     os.makedirs(os.path.join(root, theme, "64x64", "apps"))
    ...     Image.new("RGB", (64, 64), (60 * i, 0, 0)).save(
    ...         os.path.join(root, theme, "64x64", "apps", "cat.png"))
    >>> icons = load_icon_themes(root, themes=["a", "b", "c", "d"], split="all",
    ...                          image_size=16)
    >>> icons.data.shape, icons.target_names.tolist(), icons.themes.tolist()
    ((4, 16, 16, 3), ['cat'], ['a', 'b', 'c', 'd'])
    """
    check_cap("max_themes", max_themes, min_themes, "min_themes")
    root = os.fspath(root)
    if not os.path.isdir(root):
        raise FileNotFoundError(
            f"Icon-theme folder {root!r} does not exist; install the themes: "
            f"{_install_hint(ICON_THEMES)}.")
    styles = _check_themes(root, themes)
    if len(styles) < min_themes:
        missing = [t for t in ICON_THEMES if t not in styles]
        raise FileNotFoundError(
            f"{len(styles)} icon theme(s) installed under {root!r} "
            f"({', '.join(styles) or 'none'}); min_themes={min_themes} are "
            f"needed: {_install_hint(missing)}.")
    index = {style: _theme_icons(root, style) for style in styles}
    classes = _distinct_renderings(index, min_themes)
    names = keep_by_hash(sorted(classes), max_classes, "icons:")
    if not names:
        raise ValueError(f"No icon name has distinct drawings in min_themes="
                         f"{min_themes} of the themes {styles}; give more themes "
                         "or lower min_themes.")
    rows = [(i, style, classes[name][style]) for i, name in enumerate(names)
            for style in keep_by_hash(list(classes[name]), max_themes, f"{name}:")]
    if any(p.endswith(".svg") for _, _, p in rows) and not shutil.which(_RENDERER):
        raise FileNotFoundError(f"{_RENDERER} is needed to draw the SVG icons: "
                                f"apt-get install {_RENDERER_PACKAGE}.")
    params = (image_size, os.path.realpath(root),
              [(names[i], style) for i, style, _ in rows])
    return rendered_split(
        cache_dir, "icons", params, [path for _, _, path in rows], _read_icons_cache,
        lambda: _build_icons(names, rows, image_size, n_jobs), split, return_X_y,
        "among these icons; give more themes or classes")


def _build_icons(names, rows, image_size, n_jobs) -> Bunch:
    workers = n_jobs or min(8, os.cpu_count() or 1)
    with ThreadPoolExecutor(workers) as pool:
        images = list(pool.map(lambda row: _render(row[2], image_size), rows))
    return Bunch(
        data=np.stack(images),
        target=np.asarray([i for i, _, _ in rows], dtype=np.int64),
        target_names=np.asarray(names),
        themes=np.asarray([style for _, style, _ in rows]),
        filenames=np.asarray([path for _, _, path in rows]),
        class_split=np.asarray([split_of(name) for name in names]),
    )


_read_icons_cache = functools.partial(
    read_rendered, row_fields=("themes", "filenames"), pixel_shape=(3,))
