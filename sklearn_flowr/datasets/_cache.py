"""Cache files: what can be recomputed is read back, or rebuilt -- never fatal.

A cache file can be truncated by a killed process, damaged on disk or written
by an older version of the package. Reading one therefore never raises: an
unreadable file gives a warning naming it and the caller recomputes (and
rewrites) what it held. Writes go through a temporary file in the same folder
and an atomic rename, so a reader never sees half a file; a write that fails
(read-only folder, full disk) warns and the run goes on without the cache.

Shared by the rendered ``glyphs`` and ``kanji`` data sets (``cache_dir=``,
``flowr-benchmark --cache-dir``), whose files are plain arrays read back with
``allow_pickle=False``. Trained models and features are not cached.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from ..saving import write_atomically


def read_cache(path: str | os.PathLike, read: Callable[[Path], Any]) -> Any:
    """``read(path)``, or None when the file is missing or unreadable.

    ``read`` should raise on content it does not accept (a missing key, a
    wrong shape), so that such a file is rebuilt too.

    Parameters
    ----------
    path : path-like
        The cache file.
    read : callable
        Reads and checks the file, given its path.

    Returns
    -------
    content : object or None
        What ``read`` returned; None (after a warning naming the file, for an
        existing one) when there is nothing usable to read.

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
    try:
        return read(path)
    # A cache can be broken in any way (BadZipFile, EOFError, UnpicklingError,
    # a class renamed since it was pickled, ...); all mean "compute it again".
    except Exception as exc:
        warnings.warn(
            f"Cache file {str(path)!r} is unreadable ({type(exc).__name__}: "
            f"{exc}); it is rebuilt (and rewritten). If this repeats, delete the "
            "file or its folder.",
            UserWarning,
            stacklevel=3,
        )
        return None


def write_cache(path: str | os.PathLike, write: Callable[[IO[bytes]], Any]) -> None:
    """Write a cache file atomically with ``write(binary_file)``.

    The content goes to a temporary file next to ``path`` that replaces
    ``path`` only once complete, so an interrupted write leaves no partial
    file (and concurrent writers do not mix their bytes). An ``OSError`` --
    a read-only folder, a full disk -- gives a warning naming the file; the
    caller goes on with what it computed.

    Parameters
    ----------
    path : path-like
        The cache file; its folder is created if needed.
    write : callable
        Writes the content to the binary file object it is given.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # A unique name per writer; open() (not mkstemp) keeps the umask's
        # permissions, so a shared cache stays readable by its group.
        write_atomically(path, write, sync=False)
    except OSError as exc:
        warnings.warn(
            f"Cannot write cache file {str(path)!r} ({exc}); going on without "
            "caching it.",
            UserWarning,
            stacklevel=3,
        )
