"""Checkpoints of a FLOWR fit: which run they belong to, and how far it got
(the fingerprints and the files written whole: see docs/design.rst)."""

import contextlib
import inspect
import json
import os
import re
import warnings

import joblib
import numpy as np
import torch
from skorch.callbacks import Checkpoint
from skorch.history import History

from ..saving import temporary_name, write_atomically

__all__ = ["AtomicCheckpoint", "attach_checkpoint", "check_fingerprint",
           "check_stage_fingerprint", "checkpointed_epochs", "remove_stale_temporaries",
           "wrong_weights"]

FINGERPRINT_FILE = "fingerprint.json"
# skorch Checkpoint's default names; one of them in a sub-folder marks it.
CHECKPOINT_FILES = ("params.pt", "optimizer.pt", "criterion.pt", "history.json",
                    FINGERPRINT_FILE)
# ".<name>.<pid>.<32 hex>.tmp": only names saving.temporary_name makes.
_TEMPORARY = re.compile(r"^\..+\.[0-9]+\.[0-9a-f]{32}\.tmp$")
# skorch settings that do not change what an epoch computes.
_NET_RUN_SETTINGS = {"callbacks", "verbose", "device", "max_epochs",
                     "torch_load_kwargs", "accelerator", "random_state"}


def _describe(value, weights: bool = True) -> str:
    """A setting as text another process writes alike; a module also by the hash
    of its weights."""
    if isinstance(value, torch.nn.Module) and weights:
        state = {name: tensor.detach().cpu().numpy()
                 for name, tensor in value.state_dict().items()}
        return f"{value!r} weights {joblib.hash(state)}"
    if inspect.isroutine(value):  # its repr holds its memory address
        return f"<function {value.__module__}.{value.__qualname__}>"
    return repr(value)


def _sync(path: str) -> None:
    # Sync a file before its rename, or a folder after it (not on Windows).
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        if not os.path.isdir(path):
            raise


def _remove_quietly(paths) -> None:
    for path in paths:
        with contextlib.suppress(OSError):
            os.unlink(path)


def remove_stale_temporaries(directory) -> None:
    """Remove the temporary files a killed writer left in ``directory``."""
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        _remove_quietly([os.path.join(directory, name)
                         for name in os.listdir(directory) if _TEMPORARY.match(name)])


def _checkpoint_files(directory: str) -> list:
    """The checkpoint files in the sub-folders of ``directory``."""
    found = []
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        for stage in sorted(os.listdir(directory)):
            for name in CHECKPOINT_FILES:
                if os.path.isfile(os.path.join(directory, stage, name)):
                    found.append(os.path.join(stage, name))
    return found


def _read_fingerprint(path: str, directory: str, fields: set) -> dict:
    """The fingerprint stored at ``path``; a ValueError advising to start over
    when it is not one."""
    try:
        with open(path, encoding="utf-8") as file:
            old = json.load(file)
        if not isinstance(old, dict) or set(old) != fields or not all(
                isinstance(value, str) or isinstance(value, dict) and all(
                    isinstance(text, str) for text in value.values())
                for value in old.values()):
            raise ValueError(f"expected an object with the fields {sorted(fields)}, "
                             "each a string or an object of strings")
    except (OSError, ValueError) as exc:  # JSONDecodeError, UnicodeDecodeError
        detail = (str(exc) if type(exc) is ValueError
                  else f"{type(exc).__name__}: {exc}")
        raise ValueError(
            f"Cannot read the checkpoint fingerprint {path} ({detail}), so the "
            f"checkpoints in {directory} cannot be matched to this fit. Delete "
            f"{directory}, or give another checkpoint_dir, to start over."
        ) from exc
    return old


def _differences(old: dict, new: dict) -> list:
    names = sorted(set(old) | set(new))
    return [f"{name}: {old.get(name, '(unset)')} -> {new.get(name, '(unset)')}"
            for name in names if old.get(name) != new.get(name)]


def _another_fit(directory, differences) -> ValueError:
    return ValueError(
        f"checkpoint_dir {directory} holds the checkpoints of another fit "
        f"({'; '.join(differences)}). Give another checkpoint_dir, or delete "
        "this one to start over.")


def _write_fingerprint(path: str, fingerprint: dict) -> None:
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_atomically(path, lambda file: json.dump(fingerprint, file, indent=1),
                         text=True)
        _sync(os.path.dirname(path))
    except OSError as exc:
        raise OSError(exc.errno, f"Cannot write the checkpoint fingerprint "
                                 f"{path} ({exc.strerror or exc})") from exc


def check_fingerprint(directory, X, y, params, *, restart=False) -> None:
    """Record this fit's fingerprint (data, ``params`` but the epoch counts) in
    ``directory``, or fail on another fit's; ``restart`` deletes ours first."""
    # Epochs are checked against the saved histories (attach_checkpoint).
    new = {"data": joblib.hash((np.asarray(X), np.asarray(y))),
           "params": {name: _describe(value) for name, value in sorted(params.items())
                      if not name.endswith("epochs")}}
    directory = os.fspath(directory)
    path = os.path.join(directory, FINGERPRINT_FILE)
    remove_stale_temporaries(directory)
    if restart:
        _remove_quietly([os.path.join(directory, name)
                         for name in [*_checkpoint_files(directory), FINGERPRINT_FILE]])
    if os.path.lexists(path):
        old = _read_fingerprint(path, directory, {"data", "params"})
        differences = _differences({name: value for name, value
                                    in old["params"].items()
                                    if not name.endswith("epochs")}, new["params"])
        if old["data"] != new["data"]:
            differences.insert(0, "the training data differ")
        if differences:
            raise _another_fit(directory, differences)
        return
    found = _checkpoint_files(directory)
    if found:
        shown = ", ".join(found[:4]) + (", ..." if len(found) > 4 else "")
        raise ValueError(
            f"checkpoint_dir {directory} holds checkpoints ({shown}) but no "
            f"{FINGERPRINT_FILE}, so they cannot be matched to this fit (they "
            f"may be another fit's). Delete {directory}, or give another "
            "checkpoint_dir, to start over.")
    _write_fingerprint(path, new)


def check_stage_fingerprint(checkpoint, net, seed) -> None:
    """Record a stage's fingerprint (its net's ``get_params()`` but the run
    settings, and ``seed``, None for an unseeded fit) beside its checkpoints,
    or fail on another run's."""
    params = {name: _describe(value, weights=seed is not None) for name, value
              in sorted(net.get_params(deep=False).items())
              if name not in _NET_RUN_SETTINGS  # skorch's own "_" records too
              and not name.startswith(("callbacks__", "_"))}
    new = {"net": params, "seed": repr(seed)}
    path = os.path.join(checkpoint.dirname, FINGERPRINT_FILE)
    if not os.path.exists(os.path.join(checkpoint.dirname, checkpoint.f_history)):
        _write_fingerprint(path, new)
        return
    old = _read_fingerprint(path, checkpoint.dirname, {"net", "seed"})
    differences = _differences({"seed": old["seed"], **old["net"]},
                               {"seed": new["seed"], **new["net"]})
    if seed is None:  # random_state=None: a resumed fit draws another seed
        differences = [text for text in differences if not text.startswith("seed:")]
    if differences:
        raise _another_fit(checkpoint.dirname, differences)


def attach_checkpoint(net, directory, stage: str, epochs: int, seed, *,
                      start_over: bool = False):
    """Give ``net`` an :class:`AtomicCheckpoint` in ``directory/stage`` and the
    resumption from it; the checkpoint and the epochs it holds (refused when
    more than ``epochs``; ``start_over``: its files deleted first)."""
    from skorch.callbacks import LoadInitState

    checkpoint = AtomicCheckpoint(monitor=None,
                                  dirname=os.path.join(os.fspath(directory), stage))
    if start_over:
        _remove_quietly([os.path.join(checkpoint.dirname, name)
                         for name in CHECKPOINT_FILES])
    done = checkpointed_epochs(checkpoint)
    if done > epochs:
        raise ValueError(
            f"checkpoint_dir holds {done} {stage} epochs in {checkpoint.dirname} "
            f"and this fit asks for {epochs} ({stage}__epochs): its result "
            "would be the longer run's. Give another checkpoint_dir, or delete "
            "this one to start over.")
    check_stage_fingerprint(checkpoint, net, seed)
    # Loaded as weights only: no checkpoint file can run code.
    net.set_params(
        callbacks=[*(net.callbacks or []), ("checkpoint", checkpoint),
                   ("resume", LoadInitState(checkpoint))],
        torch_load_kwargs={**(net.torch_load_kwargs or {}), "weights_only": True})
    return checkpoint, done


def checkpointed_epochs(checkpoint) -> int:
    """Epochs a skorch ``Checkpoint`` saved (0 when none), once every saved file
    reads as weights only, finite and not all zero (else a ValueError)."""
    remove_stale_temporaries(checkpoint.dirname)
    path = os.path.join(checkpoint.dirname, checkpoint.f_history)
    if not os.path.exists(path):
        return 0
    try:
        epochs = len(History.from_file(path))
    except (OSError, ValueError, TypeError) as exc:
        raise _unreadable(path, checkpoint, exc) from exc
    # skorch's LoadInitState fails with torch's raw error (no file name), or
    # skips a missing file quietly: read each one first.
    for attribute in ("f_params", "f_optimizer", "f_criterion"):
        name = getattr(checkpoint, attribute, None)
        if not isinstance(name, str):
            continue
        path = os.path.join(checkpoint.dirname, name)
        if not os.path.exists(path):
            raise _unreadable(path, checkpoint, FileNotFoundError(
                "missing beside the saved history"))
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as exc:  # torch raises many types for a bad file
            raise _unreadable(path, checkpoint, exc) from exc
        if attribute == "f_params":
            _check_weights(state, path, checkpoint)
    return epochs


def _check_weights(state, path, checkpoint) -> None:
    tensors = {name: value for name, value in state.items()
               if torch.is_tensor(value) and value.is_floating_point()}
    if any(not torch.isfinite(value).all() for value in tensors.values()):
        raise _unreadable(path, checkpoint, ValueError("non-finite weights"))
    if tensors and not any(value.any() for value in tensors.values()):
        raise _unreadable(path, checkpoint, ValueError("all weights are zero"))


def wrong_weights(exc: RuntimeError, checkpoint) -> ValueError | None:
    """The error for torch's failure to load a checkpoint's weights into a
    model of other shapes (None for another RuntimeError)."""
    if "loading state_dict" not in str(exc):
        return None
    detail = " ".join(line.strip() for line in str(exc).splitlines()[1:3])
    return _unreadable(os.path.join(checkpoint.dirname, checkpoint.f_params),
                       checkpoint, ValueError(f"weights of another model: {detail}"))


def _unreadable(path, checkpoint, exc) -> ValueError:
    return ValueError(
        f"Cannot read the checkpoint file {path} ({type(exc).__name__}: "
        f"{str(exc).splitlines()[0] if str(exc) else ''}). Delete "
        f"{checkpoint.dirname} to restart that training stage.")


class AtomicCheckpoint(Checkpoint):
    """A skorch ``Checkpoint`` whose epoch is saved whole (all files written and
    synced, then renamed, the history last), or not at all, with a warning."""

    def initialize(self):
        if self.f_pickle:
            raise ValueError("AtomicCheckpoint does not pickle the net "
                             "(f_pickle): a pickle runs code when loaded.")
        return super().initialize()

    def save_model(self, net):
        files = self.get_formatted_files(net)
        targets = [(key, files[key]) for key in sorted(files)
                   if key not in ("f_history", "f_pickle") and files[key] is not None]
        if self.f_history is not None:
            targets.append(("f_history", self.f_history_))
        written = []
        try:  # a renamed temporary file is gone: removing it does nothing
            for key, path in targets:
                written.append(temporary_name(path))
                net.save_params(**{key: written[-1],
                                   "use_safetensors": self.use_safetensors})
                _sync(written[-1])
            for tmp, (_, path) in zip(written, targets, strict=True):
                os.replace(tmp, path)
        except Exception as exc:  # torch, json and the disk raise many types
            _remove_quietly(written)
            warnings.warn(
                f"Cannot write the checkpoint file {path} ({type(exc).__name__}"
                f": {exc}); the checkpoint's history keeps the previous epoch "
                "and training goes on.", UserWarning, stacklevel=2)
            return
        except BaseException:  # KeyboardInterrupt: leave no temporary file
            _remove_quietly(written)
            raise
        _sync(self.dirname)
