"""Tests that the command-line tools stop bad input at the door (issue 26,
items 5 and 8): every number checked by argparse, the device and the output
folder before any data or training, a full disk named in one line, and
``--data`` images read by the same dtype contract as ``FLOWRClassifier.fit``.

Each case asserts the exit status, a message fragment, and that nothing ran
(``no_training`` makes pre-training fail; data loading is refused where the
check must come before it)."""

import json
import os
import re

import numpy as np
import pytest
import torch

from sklearn_flowr import saving
from sklearn_flowr.cli import (
    _benchmark,
    _demo,
    benchmark_main,
    demo_main,
)


def _refuse(*args, **kwargs):
    raise AssertionError("the run went past its checks")


@pytest.fixture
def nothing_loads(monkeypatch, no_training):
    """No data may be loaded and no model trained."""
    monkeypatch.setattr(_benchmark, "load_benchmark_data", _refuse)
    monkeypatch.setattr(_demo, "run_demo", _refuse)
    return monkeypatch


def _one_line_error(err, prog):
    """The single error line of a usage error (argparse prints the usage
    before it); no traceback."""
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if line.startswith(f"{prog}: error:")]
    assert len(errors) == 1, err
    return errors[0]


@pytest.mark.parametrize(("argv", "message"), [
    (["--tpr", "1.5"], r"--tpr: must be a finite number in \(0, 1\]; got 1.5"),
    (["--tpr", "0"], r"--tpr: must be a finite number in \(0, 1\]; got 0"),
    (["--tpr", "nan"], r"--tpr: must be a finite number in \(0, 1\]"),
    (["--tpr", "high"], "--tpr: expected a number; got 'high'"),
    (["--n-tasks", "0"], "--n-tasks: must be an integer >= 1; got 0"),
    (["--n-tasks", "10000000"], "--n-tasks: must be at most 1000000"),
    (["--random-state", "-1"], r"--random-state: must be an integer in "
     r"0\.\.4294967295; got -1"),
])
def test_demo_numbers_are_checked_by_argparse(argv, message, nothing_loads,
                                               capsys):
    """Check every number of flowr-demo out of its range stops with exit
    status 2 and one line naming the option and the range, before the run."""
    with pytest.raises(SystemExit) as stop:
        demo_main(argv)
    assert stop.value.code == 2
    assert re.search(message, _one_line_error(capsys.readouterr().err,
                                              "flowr-demo"))


@pytest.mark.parametrize(("argv", "message"), [
    (["--tasks", "1000001"], "--tasks: must be at most 1000000 .every task"),
    (["--evm-tasks", str(10**30)], "--evm-tasks: must be at most 1000000"),
    (["--n-jobs", "1025"], "--n-jobs: must be at most 1024 .joblib starts"),
    (["--kanji-instances", "1001"], "--kanji-instances: must be at most 1000"),
    (["--kanji-classes", str(2**31)], "--kanji-classes: must be at most "
     "2147483647"),
    (["--max-fonts", str(2**31)], "--max-fonts: must be at most"),
    (["--max-per-class", str(2**31)], "--max-per-class: must be at most"),
    (["--lc-known-query-classes", str(2**31)],
     "--lc-known-query-classes: must be at most"),
    (["--verbose", str(2**31)], "--verbose: must be at most"),
    (["--meta-lr", "inf"], "--meta-lr: must be a finite number > 0"),
    (["--lambda-adapt", "-0.5"], "--lambda-adapt: must be a finite number >= 0"),
    (["--tasks", "0"], "--tasks: must be an integer >= 1; got 0"),
])
def test_benchmark_sizes_are_checked_by_argparse(argv, message, nothing_loads,
                                                 tmp_path, capsys):
    """Check an absurd size (which would run out of memory or time only after
    training) or an out-of-range number stops flowr-benchmark with exit
    status 2 and one line, before any data is loaded."""
    with pytest.raises(SystemExit) as stop:
        benchmark_main(["--dataset", "digits", *argv, "--out", str(tmp_path)])
    assert stop.value.code == 2
    assert re.search(message, _one_line_error(capsys.readouterr().err,
                                              "flowr-benchmark"))


@pytest.mark.parametrize(("device", "available", "count", "message"), [
    ("cuda", False, 0, "--device cuda: device='cuda' but this torch build has "
     "no usable CUDA device"),
    ("cuda:3", True, 1, r"--device cuda:3: this machine has 1 CUDA device\(s\)"),
    ("meta", False, 0, "--device meta: the meta device holds no data"),
])
def test_benchmark_device_is_checked_before_data(device, available, count,
                                                 message, nothing_loads,
                                                 tmp_path, capsys):
    """Check a --device this machine lacks stops the run with exit status 2
    and one line, before any data is loaded or model trained."""
    nothing_loads.setattr(torch.cuda, "is_available", lambda: available)
    nothing_loads.setattr(torch.cuda, "device_count", lambda: count)
    with pytest.raises(SystemExit) as stop:
        benchmark_main(["--dataset", "digits", "--device", device, "--out",
                        str(tmp_path)])
    assert stop.value.code == 2
    assert re.search(message, _one_line_error(capsys.readouterr().err,
                                              "flowr-benchmark"))


def test_benchmark_unavailable_mps_is_refused_before_data(nothing_loads,
                                                          tmp_path, capsys):
    """Check a device torch names but cannot use here (mps off a Mac) is
    refused before any data is loaded."""
    if torch.backends.mps.is_available():
        pytest.skip("this machine has an MPS device")
    with pytest.raises(SystemExit) as stop:
        benchmark_main(["--dataset", "digits", "--device", "mps", "--out",
                        str(tmp_path)])
    assert stop.value.code == 2
    assert "--device mps: cannot place a tensor there" in _one_line_error(
        capsys.readouterr().err, "flowr-benchmark")


def test_benchmark_unwritable_out_is_refused_before_data(nothing_loads,
                                                         tmp_path, capsys):
    """Check an --out that cannot be written stops the run before any data
    is loaded (one line, exit status 2)."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(SystemExit) as stop:
        benchmark_main(["--dataset", "digits", "--out", str(blocker / "out"),
                        "--cache-dir", ""])
    assert stop.value.code == 2
    assert "cannot be written" in _one_line_error(capsys.readouterr().err,
                                                  "flowr-benchmark")


@pytest.mark.filterwarnings("ignore:No artists with labels")
@pytest.mark.parametrize("full", ["results.json", "roc.png"])
def test_benchmark_full_disk_is_one_line_naming_the_file(full, no_training,
                                                         tmp_path, monkeypatch,
                                                         capsys):
    """Check a full disk while writing results.json or roc.png ends the run
    with exit status 1 and one line naming the file (no traceback), after
    the tables are printed, and leaves no partial file: the previous
    results stay whole."""
    if not os.path.exists("/dev/full"):
        pytest.skip("needs /dev/full (a device whose writes fail with ENOSPC)")
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.json").write_text('{"previous": true}')
    results = {"args": {}, "dataset": {"name": "fake"}, "seconds": 0.0,
               "settings": {"large": {"rows": []}}}
    monkeypatch.setattr(_benchmark, "run_benchmark", lambda args, log: results)
    monkeypatch.setattr(_benchmark, "format_table",
                        lambda result, setting: "THE TABLE")
    real_open = open

    def full_disk_open(path, mode="r", *args, **kwargs):
        # Every write of the file ``full`` (under its temporary name) goes to
        # /dev/full: a real ENOSPC.
        if ("w" in mode or "x" in mode) and full in os.fspath(path):
            return real_open("/dev/full", mode.replace("x", "w"), *args, **kwargs)
        return real_open(path, mode, *args, **kwargs)

    monkeypatch.setattr(saving, "open", full_disk_open, raising=False)
    status = benchmark_main(["--dataset", "digits", "--out", str(out),
                             "--cache-dir", "", "--verbose", "0"])
    captured = capsys.readouterr()
    assert status == 1
    assert "THE TABLE" in captured.out
    line = _one_line_error(captured.err, "flowr-benchmark")
    assert f"cannot write {str(out / full)!r}: No space left on device" in line
    names = sorted(path.name for path in out.iterdir())
    if full == "results.json":
        assert names == ["results.json"]
        assert json.loads((out / "results.json").read_text()) == {"previous": True}
    else:
        assert names == ["results.json"]  # no partial roc.png, no temporary
        assert json.loads((out / "results.json").read_text())["dataset"] == {
            "name": "fake"}


def _npz(path, X):
    y = np.arange(X.shape[0]) % 4
    np.savez(path, X_train=X, y_train=y, X_test=X, y_test=y + 4)
    return path


def test_boolean_images_are_refused_as_fit_refuses_them(nothing_loads,
                                                        tmp_path, capsys):
    """Check --data with boolean images is refused (exit status 2, a message
    with the fix) as FLOWRClassifier.fit refuses them: one contract for both
    entry points."""
    from sklearn_flowr import FLOWRClassifier
    from sklearn_flowr.cli import _benchmark_setup

    # Loading is what reads --data here: let it run, training may not.
    nothing_loads.setattr(_benchmark, "load_benchmark_data",
                          _benchmark_setup.load_benchmark_data)
    X = np.random.default_rng(0).random((48, 8, 8)) > 0.5
    path = _npz(tmp_path / "bool.npz", X)
    with pytest.raises(SystemExit) as stop:
        benchmark_main(["--data", str(path), "--out", str(tmp_path / "out"),
                        "--cache-dir", ""])
    assert stop.value.code == 2
    line = _one_line_error(capsys.readouterr().err, "flowr-benchmark")
    assert "X_train holds boolean images, which FLOWRClassifier.fit refuses" in line
    assert "X.astype(np.uint8) * 255" in line
    with pytest.raises(ValueError, match="got dtype bool"):
        FLOWRClassifier(backbone="conv4", verbose=0).fit(X, np.arange(48) % 4)


def test_data_images_are_scaled_as_fit_scales_them(nothing_loads, tmp_path,
                                                   capsys):
    """Check --data reads uint16 images as fit does (divided by 65535, not
    used raw) and refuses int64 images as fit does (exit status 2)."""
    from sklearn_flowr.cli import _benchmark_setup
    from sklearn_flowr.cli._benchmark_setup import load_user_data
    from sklearn_flowr.validation import as_model_input

    pixels = np.random.default_rng(0).integers(0, 65536, (48, 8, 8))
    path = _npz(tmp_path / "uint16.npz", pixels.astype(np.uint16))
    X_train = load_user_data(path)[0]
    np.testing.assert_array_equal(
        X_train, as_model_input(pixels.astype(np.uint16),
                                allow_features=False)[:, 0])
    nothing_loads.setattr(_benchmark, "load_benchmark_data",
                          _benchmark_setup.load_benchmark_data)
    path = _npz(tmp_path / "int64.npz", pixels)
    with pytest.raises(SystemExit) as stop:
        benchmark_main(["--data", str(path), "--out", str(tmp_path / "out"),
                        "--cache-dir", ""])
    assert stop.value.code == 2
    assert "X_train: X holds int64 images, whose scale is ambiguous" in (
        _one_line_error(capsys.readouterr().err, "flowr-benchmark"))
