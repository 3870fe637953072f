"""Cache files of the rendered data sets: read back, or rebuilt with a warning
(never fatal); written atomically."""

from __future__ import annotations

import contextlib
import glob
import os
import stat
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import numpy as np

from ..saving import write_atomically


def read_cache(path: str | os.PathLike, read: Callable[[Path], Any]) -> Any:
    """``read(path)``, or None when the file is missing or ``read`` raises (then
    with a warning naming the file).

    Examples
    --------
    >>> import tempfile, warnings
    >>> from pathlib import Path
    >>> path = Path(tempfile.mkdtemp()) / "answer.txt"
    >>> read_cache(path, Path.read_text) is None  # missing: compute it
    True
    >>> write_cache(path, lambda f: f.write(b"42"))
    >>> read_cache(path, Path.read_text)
    '42'
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     read_cache(path, lambda p: int("not a number")) is None
    True
    >>> "is unreadable" in str(caught[0].message)
    True
    """
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
    """Remove what killed writers of ``path`` left: ``.<name>.<pid>.<hex>.tmp``
    files not touched for ``age`` seconds (live writers' are newer)."""
    for tmp in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        with contextlib.suppress(OSError):
            if tmp.stat().st_mtime < time.time() - age:
                tmp.unlink()


def write_cache(path: str | os.PathLike, write: Callable[[IO[bytes]], Any]) -> None:
    """Write a cache file atomically with ``write(binary_file)``; an ``OSError``
    only warns (the caller goes on without the cache)."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, write, sync=False)
    except OSError as exc:
        warnings.warn(
            f"Cannot write cache file {str(path)!r} ({exc}); going on without "
            "caching it.",
            UserWarning,
            stacklevel=3,
        )


def cached_arrays(path: Path | None, read: Callable[[Path], Any],
                  build: Callable[[], dict]) -> Any:
    """``read(path)``, or ``build()`` written to ``path`` as ``.npz`` arrays (no
    cache when ``path`` is None)."""
    if path is not None and path.parent.is_dir():
        _remove_stale_temporaries(path)
    content = None if path is None else read_cache(path, read)
    if content is None:
        content = build()
        if path is not None:
            write_cache(path, lambda file: np.savez(file, **content))
    return content
