"""Checkpoints of a FLOWR fit: which run they belong to, and how far it got.

A ``checkpoint_dir`` holds one fit's skorch checkpoints (one sub-folder per
training stage) and a fingerprint of that fit: a hash of the training data and
the parameters that shape the model. A later ``fit`` resumes from the folder
only when its fingerprint matches, so a reused folder never silently resumes
another fit; epoch counts and run-time settings (device, verbosity) are left
out, so a longer schedule resumes the shorter one.
"""

from __future__ import annotations

import json
import os

import joblib
import numpy as np

__all__ = ["check_fingerprint", "checkpointed_epochs"]

FINGERPRINT_FILE = "fingerprint.json"
# Parameters that do not change what the epochs already saved computed: run
# settings, and those only the head built after training reads (so a refit
# with another noise_shrinkage resumes the trained encoder).
_RUN_SETTINGS = {"pretrain_epochs", "meta_epochs", "verbose", "device",
                 "accelerator", "checkpoint_dir", "autocast", "noise_shrinkage",
                 "prior_scale", "calibration_cv"}


def _shaping(params: dict) -> dict:
    return {name: value for name, value in sorted(params.items())
            if name not in _RUN_SETTINGS}


def _fingerprint(X, y, params) -> dict:
    shaping = {name: repr(value) for name, value in _shaping(params).items()}
    return {"data": joblib.hash((np.asarray(X), np.asarray(y))), "params": shaping}


def check_fingerprint(directory, X, y, params) -> None:
    """Record this fit's fingerprint in ``directory``, or fail on another's.

    Parameters
    ----------
    directory : str or os.PathLike
    X, y : array-like
        The training data as the fit uses it.
    params : dict
        The estimator's ``get_params(deep=False)``.

    Raises
    ------
    ValueError
        If ``directory`` holds the checkpoints of a fit on other data or with
        other parameters; the message says what differs.

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
    path = os.path.join(os.fspath(directory), FINGERPRINT_FILE)
    if os.path.exists(path):
        try:
            with open(path, encoding="utf-8") as file:
                old = json.load(file)
            # Folders written before a parameter joined _RUN_SETTINGS hold it.
            old_params, old_data = _shaping(dict(old["params"])), old["data"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ValueError(
                f"Cannot read the checkpoint fingerprint {path} ({exc}). Delete "
                f"{os.fspath(directory)} to start over."
            ) from exc
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
                f"checkpoint_dir {os.fspath(directory)} holds the checkpoints of "
                f"another fit ({'; '.join(differences)}). Give another "
                "checkpoint_dir, or delete this one to start over."
            )
        return
    os.makedirs(os.fspath(directory), exist_ok=True)
    with open(path, "w", encoding="utf-8") as file:
        json.dump(new, file, indent=1)


def checkpointed_epochs(checkpoint) -> int:
    """Epochs already saved by a skorch ``Checkpoint`` (0 when none).

    Parameters
    ----------
    checkpoint : skorch.callbacks.Checkpoint

    Returns
    -------
    int

    Raises
    ------
    ValueError
        If the saved history or one of the saved torch files (parameters,
        optimizer, criterion) cannot be read; the message names the file.

    Examples
    --------
    >>> import tempfile
    >>> from skorch.callbacks import Checkpoint
    >>> checkpointed_epochs(Checkpoint(dirname=tempfile.mkdtemp()))
    0
    """
    from skorch.history import History

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
            continue
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
