"""Tests that a checkpoint_dir cannot be confused: checkpoints without a valid
fingerprint are refused, every file is replaced whole (a kill mid-write leaves
the previous one), and the temporary files a killed writer leaves are removed
when the folder is next used (issue 26, item 3)."""

import json
import os

import numpy as np
import pytest
import torch

from sklearn_flowr import FLOWRClassifier, saving
from sklearn_flowr.training import MetaTraining, SupE, _checkpoints
from sklearn_flowr.training._checkpoints import check_fingerprint

# A stale temporary file of a writer that no longer runs (the pid is above
# Linux's largest, so no live process has it).
STALE = ".{}.4194305.0123456789abcdef0123456789abcdef.tmp"


class Killed(BaseException):
    """Stands for kill -9: nothing catches it (skorch catches only
    KeyboardInterrupt), and the test also disables the clean-up a real kill
    would skip."""


@pytest.fixture(scope="module")
def features():
    """Digits 0-4 as 64 features in [0, 1], and their labels."""
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    return (X[y < 5] / 16.0).astype(np.float32), y[y < 5]


def cheapest(folder, pretrain_epochs=1):
    """The cheapest real fit that writes checkpoints to ``folder``."""
    return FLOWRClassifier(
        backbone="mlp", embedding_dim=4, pretrain=SupE(epochs=pretrain_epochs),
        meta=MetaTraining(epochs=1, episodes_per_epoch=2, n_way=3, n_unknown=1),
        calibration=None, verbose=0, random_state=0, reuse_encoder=False,
        checkpoint_dir=folder)


def history_length(folder, stage="pretrain"):
    return len(json.loads((folder / stage / "history.json").read_text()))


def temporaries(folder):
    return sorted(path.name for path in folder.rglob("*.tmp"))


def test_checkpoints_without_fingerprint_are_refused(features, tmp_path):
    """Check a folder holding checkpoint files but no fingerprint.json is
    refused before any training, with a message naming the fix, and leaves
    the checkpoints as they were."""
    X, y = features
    cheapest(tmp_path).fit(X, y)
    (tmp_path / "fingerprint.json").unlink()
    before = (tmp_path / "pretrain" / "params.pt").read_bytes()
    with pytest.raises(ValueError, match=r"holds checkpoints \(meta/params.pt"
                       r".*but no fingerprint.json.*Delete .* to start over"):
        cheapest(tmp_path, pretrain_epochs=2).fit(X, y)
    assert (tmp_path / "pretrain" / "params.pt").read_bytes() == before
    assert history_length(tmp_path) == 1
    assert not (tmp_path / "fingerprint.json").exists()


@pytest.mark.parametrize("content", [
    b"{not json", b"\xff\xfe\x00binary", b"[]", b'{"data": "abc"}',
    b'{"data": 1, "params": {}}', b'{"data": "abc", "params": {"a": 1}}',
    b'{"data": "abc", "params": {}, "extra": 0}', "folder"])
def test_unreadable_fingerprint_is_refused(features, tmp_path, content):
    """Check a fingerprint that is unreadable, not JSON or has the wrong
    fields is refused with a message naming the file and the fix."""
    X, y = features
    cheapest(tmp_path).fit(X, y)
    fingerprint = tmp_path / "fingerprint.json"
    fingerprint.unlink()
    if content == "folder":  # unreadable: open() fails
        fingerprint.mkdir()
    else:
        fingerprint.write_bytes(content)
    with pytest.raises(ValueError, match=r"Cannot read the checkpoint "
                       r"fingerprint .*fingerprint.json.*Delete .* to start over"):
        cheapest(tmp_path, pretrain_epochs=2).fit(X, y)
    assert history_length(tmp_path) == 1


@pytest.mark.parametrize("folder", ["new", "empty", "unrelated files"])
def test_folder_without_checkpoints_starts_a_fresh_fit(features, tmp_path,
                                                      folder):
    """Check a new or empty folder, or one without checkpoint files, starts a
    fresh fit and records its fingerprint."""
    X, y = features
    path = tmp_path / "run"
    if folder != "new":
        path.mkdir()
    if folder == "unrelated files":
        (path / "notes.txt").write_text("mine")
        (path / "logs").mkdir()
        (path / "logs" / "run.log").write_text("mine")
    model = cheapest(path).fit(X, y)
    assert len(model.history_["pretrain"]) == 1
    assert set(json.loads((path / "fingerprint.json").read_text())) == {
        "data", "params"}
    assert history_length(path) == 1


def test_restart_deletes_the_checkpoints_and_starts_over(features, tmp_path):
    """Check check_fingerprint(restart=True) deletes the checkpoint files and
    the fingerprint this package wrote (nothing else) and a fit then trains
    from scratch."""
    X, y = features
    cheapest(tmp_path).fit(X, y)
    (tmp_path / "fingerprint.json").write_text("damaged")
    (tmp_path / "notes.txt").write_text("mine")
    check_fingerprint(tmp_path, [[0.0]], [0], {"a": 1}, restart=True)
    assert not list(tmp_path.rglob("*.pt"))
    assert not list(tmp_path.rglob("history.json"))
    assert (tmp_path / "notes.txt").read_text() == "mine"
    (tmp_path / "fingerprint.json").unlink()
    model = cheapest(tmp_path, pretrain_epochs=2).fit(X, y)
    assert len(model.history_["pretrain"]) == 2


def test_fingerprint_killed_mid_write_leaves_no_partial_file(features, tmp_path,
                                                             monkeypatch):
    """Check a process killed while writing the fingerprint leaves no partial
    fingerprint.json (only a temporary file), and the next fit removes that
    file and records a valid fingerprint."""
    X, y = features
    dump = json.dump

    def killed_mid_write(obj, file, **kwargs):
        file.write(json.dumps(obj)[:10])
        raise Killed

    monkeypatch.setattr(json, "dump", killed_mid_write)
    # A killed process cleans nothing up.
    monkeypatch.setattr(saving, "_discard", lambda tmp: None)
    with pytest.raises(Killed):
        cheapest(tmp_path).fit(X, y)
    monkeypatch.setattr(json, "dump", dump)
    assert not (tmp_path / "fingerprint.json").exists()
    assert len(temporaries(tmp_path)) == 1
    model = cheapest(tmp_path).fit(X, y)
    assert len(model.history_["pretrain"]) == 1
    assert temporaries(tmp_path) == []
    assert set(json.loads((tmp_path / "fingerprint.json").read_text())) == {
        "data", "params"}


def test_fingerprint_is_replaced_whole(tmp_path, monkeypatch):
    """Check the fingerprint is renamed into place from a synced temporary
    file in the same folder: when the rename fails, no fingerprint.json
    exists and no temporary file stays."""
    calls = []

    def fail(source, target):
        calls.append((os.path.dirname(source), os.path.basename(target)))
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(_checkpoints.os, "replace", fail)
    with pytest.raises(OSError, match="Cannot write the checkpoint fingerprint"
                       ".*fingerprint.json"):
        check_fingerprint(tmp_path, [[0.0]], [0], {"a": 1})
    assert calls == [(str(tmp_path), "fingerprint.json")]
    assert os.listdir(tmp_path) == []


def test_checkpoint_killed_mid_write_keeps_the_previous_epoch(
        features, tmp_path, monkeypatch):
    """Check a process killed while writing params.pt leaves the previous
    epoch's file whole (not a truncated one the next fit would load), and the
    next fit removes the temporary file and resumes from the previous
    epoch."""
    X, y = features
    cheapest(tmp_path).fit(X, y)
    before = (tmp_path / "pretrain" / "params.pt").read_bytes()
    save = torch.save

    def killed_mid_write(obj, f, *args, **kwargs):
        if "params.pt" in os.fspath(f):
            with open(f, "wb") as file:
                file.write(before[: len(before) // 2])
            raise Killed
        return save(obj, f, *args, **kwargs)

    monkeypatch.setattr(torch, "save", killed_mid_write)
    monkeypatch.setattr(_checkpoints, "_remove_quietly", lambda paths: None,
                        raising=False)
    with pytest.raises(Killed):
        cheapest(tmp_path, pretrain_epochs=2).fit(X, y)
    monkeypatch.undo()
    assert (tmp_path / "pretrain" / "params.pt").read_bytes() == before
    assert history_length(tmp_path) == 1
    assert any(name.startswith(".params.pt.")
               for name in temporaries(tmp_path / "pretrain"))
    model = cheapest(tmp_path, pretrain_epochs=2).fit(X, y)
    assert len(model.history_["pretrain"]) == 2
    assert temporaries(tmp_path) == []
    assert history_length(tmp_path) == 2


def test_checkpoint_write_error_warns_and_keeps_the_previous_epoch(
        features, tmp_path, monkeypatch):
    """Check a full disk while writing a checkpoint gives a warning naming
    the file, keeps the previous epoch's files whole and consistent (the
    history is not advanced) and leaves no temporary file."""
    X, y = features
    cheapest(tmp_path).fit(X, y)
    before = {name: (tmp_path / "pretrain" / name).read_bytes()
              for name in ("params.pt", "optimizer.pt", "history.json")}
    save = torch.save

    def disk_full(obj, f, *args, **kwargs):
        if "optimizer.pt" in os.fspath(f):
            with open(f, "wb") as file:
                file.write(b"PK\x03\x04 partial")
            raise OSError(28, "No space left on device")
        return save(obj, f, *args, **kwargs)

    monkeypatch.setattr(torch, "save", disk_full)
    with pytest.warns(UserWarning, match=r"Cannot write the checkpoint file "
                      r".*optimizer.pt.*No space left"):
        cheapest(tmp_path, pretrain_epochs=2).fit(X, y)
    after = {name: (tmp_path / "pretrain" / name).read_bytes()
             for name in before}
    assert after == before
    assert temporaries(tmp_path) == []


def test_stale_temporary_files_are_removed(features, tmp_path):
    """Check the temporary files a killed writer left are removed when the
    folder is next used, and a user's own .tmp file is kept."""
    X, y = features
    cheapest(tmp_path).fit(X, y)
    planted = [tmp_path / STALE.format("fingerprint.json"),
               tmp_path / "pretrain" / STALE.format("params.pt"),
               tmp_path / "meta" / STALE.format("history.json")]
    for path in planted:
        path.write_bytes(b"partial")
    (tmp_path / "mine.tmp").write_text("mine")
    cheapest(tmp_path, pretrain_epochs=2).fit(X, y)
    assert temporaries(tmp_path) == ["mine.tmp"]


def test_weights_missing_beside_the_history_are_refused(features, tmp_path):
    """Check a checkpoint whose history is there but whose params.pt is gone
    is refused naming the file (skorch would resume the saved epochs from
    fresh weights)."""
    X, y = features
    cheapest(tmp_path).fit(X, y)
    (tmp_path / "pretrain" / "params.pt").unlink()
    with pytest.raises(ValueError, match=r"params.pt.*missing.*Delete"):
        cheapest(tmp_path, pretrain_epochs=2).fit(X, y)


class _Planted:
    """Pickled into a checkpoint file: loading it would create the marker."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_checkpoint_weights_are_loaded_weights_only(features, tmp_path):
    """Check a checkpoint file holding a pickled object that would run code
    on loading is refused naming the file, and the code does not run (torch
    weights are read with weights_only=True)."""
    X, y = features
    cheapest(tmp_path).fit(X, y)
    marker = tmp_path / "ran"
    torch.save({"weight": _Planted(str(marker))},
               tmp_path / "pretrain" / "params.pt")
    with pytest.raises(ValueError, match="params.pt"):
        cheapest(tmp_path, pretrain_epochs=2).fit(X, y)
    assert not marker.exists()


def test_shorter_schedule_than_saved_is_refused(features, tmp_path):
    """Check a fit asking for fewer epochs than a checkpoint_dir holds is
    refused (it would return the longer run's model), naming both counts."""
    X, y = features
    cheapest(tmp_path, pretrain_epochs=3).fit(X, y)
    with pytest.raises(ValueError, match=r"holds 3 pretrain epochs.*asks for 1 "
                       r"\(pretrain__epochs\).*delete"):
        cheapest(tmp_path, pretrain_epochs=1).fit(X, y)


def test_longer_pretraining_retrains_the_later_stage(features, tmp_path):
    """Check that resuming pre-training for more epochs meta-trains again from
    its new result: the model equals a fit without checkpoints."""
    X, y = features
    cheapest(tmp_path, pretrain_epochs=1).fit(X, y)
    resumed = cheapest(tmp_path, pretrain_epochs=2).fit(X, y)
    fresh = cheapest(None, pretrain_epochs=2).fit(X, y)
    np.testing.assert_array_equal(resumed.transform(X[:10]), fresh.transform(X[:10]))


@pytest.mark.parametrize("change", ["random_state", "backbone weights", "batch_size"])
def test_every_training_setting_is_fingerprinted(features, tmp_path, change):
    """Check a checkpoint_dir is refused for another seed, another backbone
    module's weights, or another stage setting, naming what differs."""
    from sklearn_flowr.encoders import MLPEncoder

    X, y = features
    torch.manual_seed(0)
    model = cheapest(tmp_path).set_params(backbone=MLPEncoder(64, embedding_dim=4))
    model.fit(X, y)
    if change == "random_state":
        model.set_params(random_state=1)
    elif change == "backbone weights":
        torch.manual_seed(1)
        model.set_params(backbone=MLPEncoder(64, embedding_dim=4))
    else:
        model.set_params(pretrain__batch_size=32)
    with pytest.raises(ValueError, match=r"another fit \((seed|backbone|pretrain__b)"):
        model.fit(X, y)


@pytest.mark.parametrize("damage", ["zero", "nan", "shape"])
def test_damaged_weights_are_refused_naming_the_folder(features, tmp_path, damage):
    """Check zeroed, NaN or wrongly shaped weights in a checkpoint are refused
    before training, naming the file and advising to delete the folder (not
    a learning-rate hint or torch's raw RuntimeError)."""
    X, y = features
    cheapest(tmp_path).fit(X, y)
    path = tmp_path / "pretrain" / "params.pt"
    state = torch.load(path, weights_only=True)
    if damage == "shape":
        state["class_means"] = torch.randn(7, 4)
    else:
        state = {name: torch.zeros_like(value) if damage == "zero"
                 else torch.full_like(value, float("nan"))
                 for name, value in state.items()}
    torch.save(state, path)
    with pytest.raises(ValueError, match=r"params.pt .*(zero|non-finite|class_means)"
                       r".*Delete .*pretrain"):
        cheapest(tmp_path, pretrain_epochs=2).fit(X, y)


def test_stage_fingerprint_matches_in_a_new_process(tmp_path):
    """Check a stage fingerprint written by one process matches the same net in
    another: functions among the net's settings (its loaders, Sup-E's softmax)
    are named, not described by their memory address, so a killed fit resumes."""
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from skorch.callbacks import Checkpoint\n"
        "from sklearn_flowr.training import SupENet\n"
        "from sklearn_flowr.training._checkpoints import check_stage_fingerprint\n"
        "checkpoint = Checkpoint(dirname=sys.argv[1])\n"
        "check_stage_fingerprint(checkpoint, SupENet(module__n_classes=3), None)\n"
    )
    for _ in range(2):
        run = subprocess.run([sys.executable, "-c", script, str(tmp_path)],
                             capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        (tmp_path / "history.json").write_text("[]")
