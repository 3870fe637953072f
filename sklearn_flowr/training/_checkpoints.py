"""Checkpoints of a FLOWR fit: which run they belong to, and how far it got.

A ``checkpoint_dir`` holds one fit's skorch checkpoints (a sub-folder per
stage) and a fingerprint of the data and the settings that shape the model; a
fit resumes only from a folder whose fingerprint matches (epoch counts aside,
so a longer schedule resumes a shorter one). Files are written under a
temporary name, synced and renamed into place: a killed process leaves the
previous files whole, and its temporaries are removed at the next use.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import warnings

import joblib
import numpy as np
from skorch.callbacks import Checkpoint

from ..saving import temporary_name, write_atomically

__all__ = ["AtomicCheckpoint", "check_fingerprint", "checkpointed_epochs",
           "remove_stale_temporaries"]

FINGERPRINT_FILE = "fingerprint.json"
# The files skorch's Checkpoint writes (its default names, which the runner
# keeps); one of them in a sub-folder marks the folder as holding checkpoints.
CHECKPOINT_FILES = ("params.pt", "optimizer.pt", "criterion.pt", "history.json")
# ".<name>.<pid>.<32 hex>.tmp": only names this module makes are ever removed.
_TEMPORARY = re.compile(r"^\..+\.[0-9]+\.[0-9a-f]{32}\.tmp$")
# Parameters that do not change what the epochs already saved computed (a
# longer schedule resumes a shorter one).
_RUN_SETTINGS = {"pretrain__epochs", "meta__epochs", "meta__autocast", "verbose",
                 "device", "accelerator", "checkpoint_dir"}


def _shaping(params: dict) -> dict:
    return {name: value for name, value in sorted(params.items())
            if name not in _RUN_SETTINGS}


def _fingerprint(X, y, params) -> dict:
    shaping = {name: repr(value) for name, value in _shaping(params).items()}
    return {"data": joblib.hash((np.asarray(X), np.asarray(y))), "params": shaping}


def _sync(path: str) -> None:
    # Sync a file's data before its rename (or a power cut could leave a
    # whole-named empty file), or a folder after it (Windows cannot: skipped).
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        if os.path.isdir(path):
            return
        raise
    try:
        os.fsync(fd)
    except OSError:
        if not os.path.isdir(path):
            raise
    finally:
        os.close(fd)


def _remove_quietly(paths) -> None:
    for path in paths:
        with contextlib.suppress(OSError):
            os.unlink(path)


def remove_stale_temporaries(directory) -> list:
    """Remove the temporary files (``.<file>.<pid>.<hex>.tmp``) a killed writer left
    in ``directory``; the paths removed.

    Examples
    --------
    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> stale = os.path.join(folder, ".params.pt.99.%s.tmp" % ("0" * 32))
    >>> open(stale, "w").close()
    >>> [os.path.basename(path) for path in remove_stale_temporaries(folder)]
    ['.params.pt.99.00000000000000000000000000000000.tmp']
    >>> os.listdir(folder)
    []
    """
    directory = os.fspath(directory)
    try:
        names = os.listdir(directory)
    except (FileNotFoundError, NotADirectoryError):
        return []
    removed = []
    for name in sorted(names):
        path = os.path.join(directory, name)
        if _TEMPORARY.match(name) and os.path.isfile(path):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
                removed.append(path)
    return removed


def _checkpoint_files(directory: str) -> list:
    """The skorch checkpoint files in the sub-folders of ``directory``."""
    found = []
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        for stage in sorted(os.listdir(directory)):
            for name in CHECKPOINT_FILES:
                path = os.path.join(directory, stage, name)
                if os.path.isfile(path):
                    found.append(os.path.join(stage, name))
    return found


def _read_fingerprint(path: str) -> dict:
    """The fingerprint stored at ``path``; ValueError when it is not one."""
    try:
        with open(path, encoding="utf-8") as file:
            old = json.load(file)
    except (OSError, ValueError) as exc:  # JSONDecodeError, UnicodeDecodeError
        raise ValueError(f"{type(exc).__name__}: {exc}") from exc
    if not isinstance(old, dict) or set(old) != {"data", "params"}:
        raise ValueError("expected an object with the fields 'data' and "
                         "'params'")
    if not isinstance(old["data"], str) or not isinstance(old["params"], dict) \
            or not all(isinstance(value, str)
                       for value in old["params"].values()):
        raise ValueError("'data' must be a string and 'params' an object of "
                         "strings")
    return old


def _write_fingerprint(path: str, fingerprint: dict) -> None:
    write_atomically(path, lambda file: json.dump(fingerprint, file, indent=1),
                     text=True)
    _sync(os.path.dirname(path))


def _start_over(directory: str) -> None:
    """Delete the checkpoints and fingerprint this package wrote in ``directory``."""
    _remove_quietly([os.path.join(directory, name)
                     for name in _checkpoint_files(directory)]
                    + [os.path.join(directory, FINGERPRINT_FILE)])


def check_fingerprint(directory, X, y, params, *, restart=False) -> None:
    """Record this fit's fingerprint in ``directory``, or fail on another fit's.

    A folder without checkpoint files starts a fresh fit; one holding
    checkpoints with another fingerprint, or none readable, is refused (the
    message says what differs and how to start over).

    Parameters
    ----------
    directory : str or os.PathLike
    X, y : array-like
        The training data as the fit uses it.
    params : dict
        The settings that shape the model.
    restart : bool, default=False
        Delete what this package wrote in ``directory`` first.

    Raises
    ------
    ValueError
        The folder holds another fit's checkpoints, or ones without a valid
        fingerprint.
    OSError
        The fingerprint cannot be written (the message names the file).

    Examples
    --------
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> check_fingerprint(folder, [[0.0], [1.0]], [0, 1], {"a": 0.5})
    >>> check_fingerprint(folder, [[0.0], [1.0]], [0, 1], {"a": 0.7})
    Traceback (most recent call last):
    ...
    ValueError: checkpoint_dir ... of another fit (a: 0.5 -> 0.7)...
    """
    new = _fingerprint(X, y, params)
    directory = os.fspath(directory)
    path = os.path.join(directory, FINGERPRINT_FILE)
    remove_stale_temporaries(directory)
    if restart:
        _start_over(directory)
    if os.path.lexists(path):
        try:
            old = _read_fingerprint(path)
        except ValueError as exc:
            raise ValueError(
                f"Cannot read the checkpoint fingerprint {path} ({exc}), so "
                f"the checkpoints in {directory} cannot be matched to this "
                f"fit. Delete {directory}, or give another checkpoint_dir, to "
                "start over."
            ) from exc
        # Folders written before a parameter joined _RUN_SETTINGS hold it.
        old_params, old_data = _shaping(old["params"]), old["data"]
        differences = []
        if old_data != new["data"]:
            differences.append("the training data differ")
        names = sorted(set(old_params) | set(new["params"]))
        differences += [f"{name}: {old_params.get(name, '(unset)')} -> "
                        f"{new['params'].get(name, '(unset)')}"
                        for name in names
                        if old_params.get(name) != new["params"].get(name)]
        if differences:
            raise ValueError(
                f"checkpoint_dir {directory} holds the checkpoints of "
                f"another fit ({'; '.join(differences)}). Give another "
                "checkpoint_dir, or delete this one to start over."
            )
        return
    found = _checkpoint_files(directory)
    if found:
        shown = ", ".join(found[:4]) + (", ..." if len(found) > 4 else "")
        raise ValueError(
            f"checkpoint_dir {directory} holds checkpoints ({shown}) but no "
            f"{FINGERPRINT_FILE}, so they cannot be matched to this fit (they "
            f"may be another fit's). Delete {directory}, or give another "
            "checkpoint_dir, to start over."
        )
    try:
        os.makedirs(directory, exist_ok=True)
        _write_fingerprint(path, new)
    except OSError as exc:
        raise OSError(exc.errno, f"Cannot write the checkpoint fingerprint "
                                 f"{path} ({exc.strerror or exc})") from exc


def checkpointed_epochs(checkpoint) -> int:
    """Epochs a skorch ``Checkpoint`` already saved (0 when none), once every saved
    file reads (torch files ``weights_only``); stale temporaries are removed.

    Raises
    ------
    ValueError
        A saved file that cannot be read, or is missing beside the history.

    Examples
    --------
    >>> import tempfile
    >>> from skorch.callbacks import Checkpoint
    >>> checkpointed_epochs(Checkpoint(dirname=tempfile.mkdtemp()))
    0
    """
    from skorch.history import History

    remove_stale_temporaries(checkpoint.dirname)
    path = os.path.join(checkpoint.dirname, checkpoint.f_history)
    if not os.path.exists(path):
        return 0
    try:
        epochs = len(History.from_file(path))
    except (OSError, ValueError, TypeError) as exc:
        raise _unreadable(path, checkpoint, exc) from exc
    # skorch's LoadInitState would fail on a damaged file with torch's raw
    # error (no file name); read each one first.
    import torch

    for attribute in ("f_params", "f_optimizer", "f_criterion"):
        name = getattr(checkpoint, attribute, None)
        if not isinstance(name, str):
            continue
        path = os.path.join(checkpoint.dirname, name)
        if not os.path.exists(path):
            # skorch's LoadInitState skips a missing file quietly: the saved
            # epochs would resume from freshly initialised weights.
            raise _unreadable(path, checkpoint, FileNotFoundError(
                "missing beside the saved history"))
        try:
            torch.load(path, map_location="cpu", weights_only=True)
        except Exception as exc:  # torch raises many types for a bad file
            raise _unreadable(path, checkpoint, exc) from exc
    return epochs


def _unreadable(path, checkpoint, exc) -> ValueError:
    return ValueError(
        f"Cannot read the checkpoint file {path} ({type(exc).__name__}: "
        f"{str(exc).splitlines()[0] if str(exc) else ''}). Delete "
        f"{checkpoint.dirname} to restart that training stage."
    )


class AtomicCheckpoint(Checkpoint):
    """A skorch ``Checkpoint`` whose epoch is saved whole, or not at all.

    Every file is written under a temporary name and synced; only then are they
    renamed into place, the history last (it says how many epochs are saved). A
    file that cannot be written leaves the previous epoch and warns; training goes
    on. ``f_pickle`` is refused (a pickle runs code when loaded).

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np, torch
    >>> from skorch import NeuralNetClassifier
    >>> folder = tempfile.mkdtemp()
    >>> net = NeuralNetClassifier(
    ...     torch.nn.Linear(2, 2), max_epochs=1, train_split=None, verbose=0,
    ...     callbacks=[AtomicCheckpoint(monitor=None, dirname=folder)])
    >>> net = net.fit(np.zeros((4, 2), "f4"), np.array([0, 1, 0, 1]))
    >>> sorted(os.listdir(folder))
    ['criterion.pt', 'history.json', 'optimizer.pt', 'params.pt']
    """

    def initialize(self):
        """Refuse ``f_pickle`` and set up as skorch's ``Checkpoint``."""
        if self.f_pickle:
            raise ValueError("AtomicCheckpoint does not pickle the net "
                             "(f_pickle): a pickle runs code when loaded.")
        return super().initialize()

    def save_model(self, net):
        """Save the net's state files: all written, then all renamed into place."""
        files = self.get_formatted_files(net)
        targets = [(key, files[key]) for key in sorted(files)
                   if key not in ("f_history", "f_pickle")
                   and files[key] is not None]
        if self.f_history is not None:
            targets.append(("f_history", self.f_history_))
        written = []
        try:
            for key, path in targets:
                tmp = temporary_name(path)
                written.append(tmp)
                net.save_params(**{key: tmp,
                                   "use_safetensors": self.use_safetensors})
                _sync(tmp)
        except Exception as exc:  # torch and json raise many types
            _remove_quietly(written)
            warnings.warn(
                f"Cannot write the checkpoint file {path} ({type(exc).__name__}"
                f": {exc}); the checkpoint keeps the previous epoch and "
                "training goes on.", UserWarning, stacklevel=2)
            return
        except BaseException:  # KeyboardInterrupt: leave no temporary file
            _remove_quietly(written)
            raise
        # Renames in the order written: the history last.
        done = 0
        try:
            for tmp, (_, path) in zip(written, targets, strict=True):
                os.replace(tmp, path)
                done += 1
        except OSError as exc:
            _remove_quietly(written[done:])
            warnings.warn(
                f"Cannot replace the checkpoint file {path} ({exc}); the "
                "checkpoint's history keeps the previous epoch and training "
                "goes on.", UserWarning, stacklevel=2)
            return
        _sync(self.dirname)
