"""Files written whole or not at all: a temporary name, then a rename.

Every file the package writes for later reading (saved estimators, checkpoint
fingerprints, cached data sets, the benchmark's results) goes through
:func:`write_atomically`: the data is written under a temporary name in the
same folder, synced, and renamed into place, so a process killed or a disk
filled mid-write leaves the previous file (or none), never a truncated one.
"""

import contextlib
import os
import uuid

__all__ = ["temporary_name", "write_atomically"]


def temporary_name(path) -> str:
    """A unique hidden name beside ``path``: ``.<name>.<pid>.<hex>.tmp`` (in
    the same folder, so the rename into place is atomic)."""
    folder, name = os.path.split(os.fspath(path))
    return os.path.join(folder, f".{name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")


def write_atomically(path, write, *, text=False, sync=True) -> None:
    """Write ``path`` through ``write(file)``, all or nothing.

    Parameters
    ----------
    path : str or os.PathLike
        The file to create or replace.
    write : callable
        Called with the open temporary file (binary, or UTF-8 text when
        ``text``); it writes the whole content.
    text : bool, default=False
        Open the file in text mode.
    sync : bool, default=True
        ``fsync`` the data before the rename (durable across a power cut; a
        cache that is cheap to rebuild may skip it).

    Examples
    --------
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "out.txt")
    >>> write_atomically(path, lambda f: f.write("whole"), text=True)
    >>> open(path).read()
    'whole'
    """
    tmp = temporary_name(path)
    try:
        with (open(tmp, "x", encoding="utf-8") if text else open(tmp, "xb")) as file:
            write(file)
            file.flush()
            if sync:
                os.fsync(file.fileno())
        os.replace(tmp, path)
    except BaseException:
        _discard(tmp)
        raise


def _discard(tmp) -> None:
    # A killed process never gets here: its temporary file stays, and the
    # readers that know the name pattern clean it (see _checkpoints).
    with contextlib.suppress(OSError):
        os.unlink(tmp)
