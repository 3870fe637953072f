"""What the rendered data sets (glyphs, kanji, icons) share: argument checks,
class-disjoint splits by a hash of the class, and cache files of plain arrays
(user guide, "Input images and caches")."""

import contextlib
import glob
import hashlib
import os
import stat
import time
import warnings
import zlib
from collections.abc import Callable, Iterable
from numbers import Integral
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.utils import Bunch
from sklearn.utils._param_validation import Interval, StrOptions

from ..saving import write_atomically

SPLITS = ("train", "val", "test")
# Buckets of crc32(class) % 10: 6 train, 2 val, 2 test (60/20/20).
_SPLIT_OF_BUCKET = ("train",) * 6 + ("val",) * 2 + ("test",) * 2


def split_of(name: str) -> str:
    """The split of a class: a hash of its name, so adding classes moves none."""
    return _SPLIT_OF_BUCKET[zlib.crc32(name.encode("utf-8")) % 10]


# The validate_params constraints the rendered loaders share.
CONSTRAINTS = {"split": [StrOptions({*SPLITS, "all"})],
               "image_size": [Interval(Integral, 8, None, closed="left")],
               "max_classes": [Interval(Integral, 1, None, closed="left"), None]}


def check_cap(name, value, low, low_name):
    """Refuse a cap ``value`` (None or int) below ``low``, the value of ``low_name``."""
    if value is not None and value < low:
        raise ValueError(f"{name} must be None or an integer >= {low_name}={low}; "
                         f"got {value!r}.")


def keep_by_hash(names: list, cap: int | None, salt: str) -> list:
    """At most ``cap`` of ``names``, in order, chosen by a fixed hash: a larger
    cap keeps every name of a smaller one."""
    if cap is None or len(names) <= cap:
        return names
    kept = set(sorted(names, key=lambda n: zlib.crc32(f"{salt}{n}".encode()))[:cap])
    return [n for n in names if n in kept]


def cache_file(cache_dir, prefix: str, params, files: Iterable = ()) -> Path | None:
    """``cache_dir/<prefix>-<key>.npz``, the key a hash of ``params`` and of each
    file's path, size and modification time; None without ``cache_dir``."""
    if cache_dir is None:
        return None
    digest = hashlib.sha256(repr(params).encode())
    for path in files:
        stats = os.stat(path)
        digest.update(f"{path}|{stats.st_size}|{stats.st_mtime_ns}".encode())
    return Path(cache_dir) / f"{prefix}-{digest.hexdigest()[:20]}.npz"


def read_rendered(path: Path, row_fields: tuple, pixel_shape: tuple = ()) -> Bunch:
    """The arrays of a rendered data set's cache file, checked to fit together."""
    fields = ("data", "target", "target_names", *row_fields, "class_split")
    with np.load(path, allow_pickle=False) as cached:
        full = Bunch(**{key: cached[key] for key in fields})
    n_rows, n_classes = full.data.shape[0], full.target_names.shape[0]
    if (full.data.ndim != 3 + len(pixel_shape) or full.data.shape[3:] != pixel_shape
            or full.data.dtype != np.uint8 or n_rows == 0
            or any(full[key].shape != (n_rows,) for key in ("target", *row_fields))
            or full.class_split.shape != (n_classes,)
            or full.target.min() < 0 or full.target.max() >= n_classes):
        raise ValueError("its arrays do not fit together")
    return full


def select_split(full: Bunch, split: str, return_X_y: bool, row_fields: tuple,
                 empty_hint: str):
    """One class-disjoint split of a rendered data set, classes re-indexed
    ``0..K-1`` as every loader returns them."""
    if split == "all":
        out = Bunch(**full, split="all")
    else:
        kept = np.flatnonzero(full.class_split == split)
        if kept.size == 0:
            raise ValueError(f"The {split!r} split has no class {empty_hint}.")
        rows = np.isin(full.target, kept)
        remap = np.full(full.target_names.shape[0], -1, dtype=np.int64)
        remap[kept] = np.arange(kept.size)
        out = Bunch(data=full.data[rows], target=remap[full.target[rows]],
                    target_names=full.target_names[kept],
                    **{name: full[name][rows] for name in row_fields},
                    class_split=full.class_split[kept], split=split)
    return (out.data, out.target) if return_X_y else out


def read_cache(path: str | os.PathLike, read: Callable[[Path], Any]) -> Any:
    """``read(path)``, or None when the file is missing, another user could have
    written it, or ``read`` raises (then with a warning naming the file)."""
    path = Path(path)
    if not path.is_file():
        return None
    unsafe = _unsafe(path)
    if unsafe:
        warnings.warn(
            f"Cache file {str(path)!r} is not used: {unsafe}, so it may have been "
            "replaced; it is rebuilt. Give a cache_dir that only you can write to.",
            UserWarning,
            stacklevel=3,
        )
        return None
    try:
        return read(path)
    # A cache can be broken in any way: all mean "compute it again".
    except Exception as exc:
        warnings.warn(
            f"Cache file {str(path)!r} is unreadable ({type(exc).__name__}: "
            f"{exc}); it is rebuilt (and rewritten). If this repeats, delete the "
            "file or its folder.",
            UserWarning,
            stacklevel=3,
        )
        return None


def _unsafe(path: Path) -> str | None:
    """Why another user could have written ``path``, or None (POSIX only)."""
    if not hasattr(os, "getuid"):
        return None
    file, folder = path.stat(), path.parent.stat()
    if file.st_uid != os.getuid() or folder.st_uid not in (os.getuid(), 0):
        return "it or its folder belongs to another user"
    if file.st_mode & stat.S_IWOTH or (folder.st_mode & stat.S_IWOTH
                                       and not folder.st_mode & stat.S_ISVTX):
        return "it or its folder is writable by every user"
    return None


def _remove_stale_temporaries(path: Path, age: float = 600.0) -> None:
    """Remove the ``.<name>.<pid>.<hex>.tmp`` files killed writers of ``path``
    left, untouched for ``age`` seconds (live writers' are newer)."""
    for tmp in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        with contextlib.suppress(OSError):
            if tmp.stat().st_mtime < time.time() - age:
                tmp.unlink()


def rendered_split(cache_dir, prefix: str, params, files: Iterable,
                   read: Callable[[Path], Any], build: Callable[[], dict], split: str,
                   return_X_y: bool, empty_hint: str):
    """One split of a rendered data set read from its cache file (``read``, a
    :func:`read_rendered`), or ``build()`` written there atomically (an
    ``OSError`` only warns); no cache without ``cache_dir``."""
    path = cache_file(cache_dir, prefix, params, files)
    if path is not None and path.parent.is_dir():
        _remove_stale_temporaries(path)
    full = None if path is None else read_cache(path, read)
    if full is None:
        full = build()
        try:
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
                write_atomically(path, lambda file: np.savez(file, **full), sync=False)
        except OSError as exc:
            warnings.warn(
                f"Cannot write cache file {str(path)!r} ({exc}); going on without "
                "caching it.",
                UserWarning,
                stacklevel=3,
            )
    return select_split(full, split, return_X_y, read.keywords["row_fields"],
                        empty_hint)
