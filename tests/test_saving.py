"""Tests of ``sklearn_flowr.save`` / ``sklearn_flowr.load`` (skops.io, named trust).

Round trips of the estimators, and tampered files: a saved model into which a
type that runs code on load (a skorch net, whose ``__setstate__`` unpickles
bytes from the file), ``subprocess.Popen`` or ``os.system`` was planted. The
package's ``load`` refuses each before building anything; skops's
``trusted=get_untrusted_types(...)`` recipe, the control, runs the code.
"""

import copy
import importlib
import io
import json
import os
import pickle
import subprocess
import sys
import warnings
import zipfile

import numpy as np
import pytest

import sklearn_flowr
from sklearn_flowr import CRPGaussianClassifier
from sklearn_flowr.baselines import (
    EVMClassifier,
    FeCAMClassifier,
    KNNClassifier,
    MahalanobisPlusPlusClassifier,
    NCMClassifier,
    PEELERClassifier,
    ProtoNetClassifier,
    RanPACClassifier,
    SimpleShotClassifier,
)
from sklearn_flowr.calibration import NoveltyCalibratedClassifier
from sklearn_flowr.saving import TRUSTED_TYPES, UntrustedTypesError

sio = pytest.importorskip("skops.io")


@pytest.fixture(scope="module")
def digits():
    from sklearn.datasets import load_digits

    return load_digits(return_X_y=True)


def _save_quietly(estimator, path):
    """``save``, failing on its warning: every type must be in TRUSTED_TYPES."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sklearn_flowr.save(estimator, path)


# ------------------------------------------------------------------ round trips
def test_head_round_trip_predicts_and_keeps_learning(digits, tmp_path):
    """Check a fitted CRPGaussianClassifier with str labels and online updates
    loads with equal predictions and P(novel), and learns on alike."""
    X, y = digits
    names = np.array(list("abcdefghij"))[y]
    clf = CRPGaussianClassifier().fit(X[y < 5], names[y < 5])
    clf.open_world_step(X[y == 7][:4], names[y == 7][:4])
    path = tmp_path / "head.skops"
    _save_quietly(clf, path)
    loaded = sklearn_flowr.load(path)
    assert type(loaded) is CRPGaussianClassifier
    assert loaded.classes_.tolist() == clf.classes_.tolist()
    np.testing.assert_array_equal(loaded.predict_proba(X[:50]),
                                  clf.predict_proba(X[:50]))
    rows = np.flatnonzero(y == 9)[:4]
    np.testing.assert_array_equal(loaded.open_world_step(X[rows], names[rows]).p_novel,
                                  clf.open_world_step(X[rows], names[rows]).p_novel)


@pytest.mark.parametrize("cls", [
    NCMClassifier, ProtoNetClassifier, PEELERClassifier, EVMClassifier,
    SimpleShotClassifier, MahalanobisPlusPlusClassifier, KNNClassifier,
    FeCAMClassifier, RanPACClassifier])
def test_baselines_round_trip(cls, digits, tmp_path):
    """Check each baseline saves without an untrusted type and loads with the
    same predictions and novelty scores."""
    X, y = digits
    clf = cls().fit(X[y < 5], y[y < 5])
    path = tmp_path / "baseline.skops"
    _save_quietly(clf, path)
    loaded = sklearn_flowr.load(path)
    np.testing.assert_array_equal(loaded.predict(X), clf.predict(X))
    np.testing.assert_array_equal(loaded.novelty_score(X), clf.novelty_score(X))


def test_calibrated_classifier_round_trip(digits, tmp_path):
    """Check NoveltyCalibratedClassifier with a class-disjoint splitter saves
    and loads with the same calibrated probabilities."""
    from sklearn.model_selection import GroupKFold

    X, y = digits
    clf = NoveltyCalibratedClassifier(CRPGaussianClassifier(), cv=GroupKFold(3))
    clf.fit(X[y < 6], y[y < 6])
    path = tmp_path / "calibrated.skops"
    _save_quietly(clf, path)
    loaded = sklearn_flowr.load(path)
    np.testing.assert_array_equal(loaded.predict_proba(X[:40]),
                                  clf.predict_proba(X[:40]))


def test_flowr_round_trip_through_a_file_object(tmp_path):
    """Check a fitted FLOWRClassifier saves (to a path and a file object) and
    loads with equal predictions, probabilities and embeddings."""
    from sklearn_flowr.training._examples import flowr_example

    clf, X, _ = flowr_example("large")
    path = tmp_path / "flowr.skops"
    _save_quietly(clf, path)
    buffer = io.BytesIO()
    sklearn_flowr.save(clf, buffer)
    for source in (path, str(path), io.BytesIO(buffer.getvalue())):
        loaded = sklearn_flowr.load(source)
        np.testing.assert_array_equal(loaded.predict(X), clf.predict(X))
        np.testing.assert_array_equal(loaded.predict_proba(X[:30]),
                                      clf.predict_proba(X[:30]))
        np.testing.assert_array_equal(loaded.transform(X[:30]), clf.transform(X[:30]))


def test_save_is_atomic_and_leaves_no_temporary(tmp_path, monkeypatch):
    """Check a failing write leaves the earlier file intact and no temporary
    file behind."""
    clf = NCMClassifier().fit(np.eye(4), [0, 1, 2, 3])
    path = tmp_path / "m.skops"
    sklearn_flowr.save(clf, path)
    before = path.read_bytes()

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken)
    with pytest.raises(OSError, match="disk full"):
        sklearn_flowr.save(NCMClassifier().fit(np.eye(4), [0, 0, 1, 1]), path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.skops"]


# ------------------------------------------------------------- the trust list
def _backbone_types():
    from sklearn_flowr.encoders import EfficientNetLite0Encoder, make_backbone

    modules = [make_backbone(name, in_channels=1, input_size=(28, 28),
                             embedding_dim=4)
               for name in ("conv4", "resnet12", "resnet18", "mlp")]
    modules.append(EfficientNetLite0Encoder(pretrained=False, embedding_dim=4))
    return {f"{type(m).__module__}.{type(m).__qualname__}"
            for module in modules for m in module.modules()}


def test_trusted_types_cover_every_package_backbone():
    """Check every layer class of every named backbone is trusted, so a
    FLOWRClassifier on any of them loads without ``trusted=``."""
    missing = _backbone_types() - set(TRUSTED_TYPES)
    assert not missing, missing


def test_trusted_types_are_vetted_classes():
    """Check every trusted name is an importable class (no function), none
    of the package's skorch nets, whose ``__setstate__`` unpickles, and no
    type from modules that reach the system."""
    for name in TRUSTED_TYPES:
        module, _, attribute = name.rpartition(".")
        obj = getattr(importlib.import_module(module), attribute)
        assert isinstance(obj, type), name
        assert name.startswith(("sklearn_flowr.", "torch.nn.modules.",
                                "skorch.history.", "sklearn.")), name
        assert not name.startswith("sklearn_flowr.training._nets"), name
        # Rebuilt by __dict__.update or a __setstate__ reviewed for this list
        # (the package's own; torch's Module and _ConvNd, scikit-learn's
        # BaseEstimator and Bunch: they update __dict__ and fill defaults),
        # never one that unpickles. A new owner needs a review here.
        owner = next((c for c in obj.__mro__ if "__setstate__" in vars(c)), object)
        reviewed = {"builtins.object", "torch.nn.modules.module.Module",
                    "torch.nn.modules.conv._ConvNd", "sklearn.base.BaseEstimator",
                    "sklearn.utils._bunch.Bunch"}
        assert (owner.__module__.startswith("sklearn_flowr.") or
                f"{owner.__module__}.{owner.__qualname__}" in reviewed), (name, owner)
    assert len(set(TRUSTED_TYPES)) == len(TRUSTED_TYPES)


def test_user_types_warn_on_save_and_need_trusted_on_load(tmp_path):
    """Check a model holding a type of the user's own (here a module of this
    test file) warns on save naming it, is refused on load naming it, and
    loads with it passed as ``trusted=`` (by name or as the type)."""
    clf = NCMClassifier().fit(np.eye(3), [0, 1, 2])
    clf.note_ = _Carrier()
    name = f"{_Carrier.__module__}.{_Carrier.__qualname__}"
    path = tmp_path / "user.skops"
    with pytest.warns(UserWarning, match=name.replace(".", r"\.")):
        sklearn_flowr.save(clf, path)
    with pytest.raises(UntrustedTypesError, match=name.replace(".", r"\.")):
        sklearn_flowr.load(path)
    for trusted in ([name], [_Carrier]):
        loaded = sklearn_flowr.load(path, trusted=trusted)
        assert isinstance(loaded.note_, _Carrier)
    with pytest.raises(TypeError, match="single str"):
        sklearn_flowr.load(path, trusted=name)
    with pytest.raises(TypeError, match="type names"):
        sklearn_flowr.load(path, trusted=[3])


def test_load_refuses_a_file_that_is_not_a_skops_file(tmp_path):
    """Check a pickle (or any non-skops file) is refused, naming the file,
    and never unpickled."""
    path = tmp_path / "model.pkl"
    path.write_bytes(pickle.dumps(NCMClassifier()))
    with pytest.raises(ValueError, match="Cannot read") as caught:
        sklearn_flowr.load(path)
    assert str(path) in str(caught.value)


def test_save_and_load_do_not_import_torch_or_skops():
    """Check ``sklearn_flowr.save`` and ``load`` are reachable after ``import
    sklearn_flowr`` without importing torch (or skops) before a call."""
    code = ("import sys, sklearn_flowr; sklearn_flowr.save; sklearn_flowr.load; "
            "assert 'torch' not in sys.modules, 'torch'; "
            "assert 'skops' not in sys.modules, 'skops'")
    subprocess.run([sys.executable, "-c", code], check=True)


# ------------------------------------------------------------ tampered files
class _Carrier:
    """A plain object whose node is renamed into another type in the file."""

    def __init__(self, **attributes):
        self.__dict__.update(attributes)


class _OpenOnUnpickle:
    """Unpickles as ``open(path, "w")``: the code a tampered file runs."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return open, (self.path, "w")


def _tampered(estimator, carrier, module, name):
    """``estimator`` saved with ``carrier`` as an attribute, whose node in the
    file then names ``module.name`` instead: what an attacker writes."""
    estimator = copy.copy(estimator)
    estimator.planted_ = carrier
    data = sio.dumps(estimator)
    source = zipfile.ZipFile(io.BytesIO(data))
    schema = json.loads(source.read("schema.json"))
    renamed = []

    def rename(node):
        if isinstance(node, dict):
            if node.get("__class__") in ("_Carrier", "_harmless") and \
                    node.get("__module__") == __name__:
                node["__module__"], node["__class__"] = module, name
                renamed.append(node)
            for value in node.values():
                rename(value)
        elif isinstance(node, list):
            for value in node:
                rename(value)

    rename(schema)
    assert renamed
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as target:
        for item in source.namelist():
            content = source.read(item)
            if item == "schema.json":
                content = json.dumps(schema).encode()
            target.writestr(item, content)
    return out.getvalue()


def _harmless():
    """Stands for a function in the file before it is renamed."""


@pytest.fixture
def fitted():
    return NCMClassifier().fit(np.eye(3), [0, 1, 2])


def test_planted_skorch_net_is_refused_and_its_code_does_not_run(fitted, tmp_path):
    """Check a saved model with a planted skorch net (one of the package's own
    classes, whose ``__setstate__`` unpickles bytes from the file) is refused
    by name, nothing runs, while skops's trust-what-the-file-lists recipe
    runs the planted code."""
    sentinel = tmp_path / "code-ran"
    evil = pickle.dumps({"opened": _OpenOnUnpickle(sentinel)})
    data = _tampered(fitted, _Carrier(device="cpu",
                                      __cuda_dependent_attributes__=evil),
                     "sklearn_flowr.training._nets", "SupENet")
    path = tmp_path / "model.skops"
    path.write_bytes(data)
    with pytest.raises(UntrustedTypesError) as caught:
        sklearn_flowr.load(path)
    message = str(caught.value)
    assert "sklearn_flowr.training._nets.SupENet" in message
    assert str(path) in message
    assert caught.value.types == ["sklearn_flowr.training._nets.SupENet"]
    assert not sentinel.exists()
    # The control: trusting what the file lists builds the net, which runs
    # the pickle planted in it.
    loaded = sio.loads(data, trusted=sio.get_untrusted_types(data=data))
    loaded.planted_.opened.close()
    assert sentinel.exists()


@pytest.mark.parametrize("module, name, carrier", [
    ("subprocess", "Popen", _Carrier(args=["touch", "x"])),
    ("os", "system", _harmless),
    ("builtins", "exec", _harmless),
    ("functools", "partial", _Carrier(func=print, args=("x",))),
])
def test_planted_system_types_are_refused_by_name(fitted, tmp_path, module, name,
                                                  carrier, monkeypatch):
    """Check a saved model into which ``subprocess.Popen``, ``os.system``,
    ``builtins.exec`` or ``functools.partial`` was planted is refused, the
    message naming it and the file, before anything is built."""
    data = _tampered(fitted, carrier, module, name)
    path = tmp_path / "model.skops"
    path.write_bytes(data)
    built = []
    real_loads = sio.loads
    monkeypatch.setattr(sio, "loads",
                        lambda *a, **k: built.append(1) or real_loads(*a, **k))
    with pytest.raises(UntrustedTypesError) as caught:
        sklearn_flowr.load(path)
    assert f"{module}.{name}" in str(caught.value)
    assert str(path) in str(caught.value)
    assert built == []  # refused before skops was asked to build anything
    # skops itself lists the planted name as untrusted (the audit saw it).
    assert f"{module}.{name}" in sio.get_untrusted_types(data=data)


# --------------------------------------------------------------- hostile files
def _rezipped(data, edit_schema=None, entries=None, compression=zipfile.ZIP_STORED):
    """``data`` written again: the schema through ``edit_schema``, ``entries``
    (name -> bytes) replaced or added."""
    source = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=compression) as target:
        for name in source.namelist():
            content = source.read(name)
            if name == "schema.json" and edit_schema is not None:
                schema = json.loads(content)
                edit_schema(schema)
                content = json.dumps(schema).encode()
            target.writestr(name, (entries or {}).pop(name, content))
        for name, content in (entries or {}).items():
            target.writestr(name, content)
    return out.getvalue()


def _planted_node(schema):
    """The attribute dict holding ``planted_`` in a saved estimator's schema."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if "planted_" in node:
                return node
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    raise AssertionError("no planted_ attribute")


def _plant(fitted, value):
    estimator = copy.copy(fitted)
    estimator.planted_ = value
    return sio.dumps(estimator)


def _node_of(value):
    return json.loads(zipfile.ZipFile(io.BytesIO(sio.dumps(value))).read(
        "schema.json"))


@pytest.mark.parametrize("loader", ["ConstructorFromReduceNode", "NdArrayNode"])
def test_trusted_types_are_never_called_with_arguments_from_the_file(
        fitted, tmp_path, loader):
    """Check a file asking skops to call a trusted type with its own arguments
    (torch.nn.Linear(12000, 12000): 576 MB from a 5 KB file) is refused, naming
    the type, before anything is built; skops alone calls it (the control,
    with small arguments)."""
    def forged(args):
        def edit(schema):
            node = _planted_node(schema)["planted_"]
            if loader == "ConstructorFromReduceNode":
                node.clear()
                node["content"] = _node_of(args)
            node.update(__class__="Linear", __module__="torch.nn.modules.linear",
                        __loader__=loader)
        return _rezipped(_plant(fitted, np.array(args)), edit)

    path = tmp_path / "model.skops"
    path.write_bytes(forged((12000, 12000)))
    with pytest.raises(ValueError, match=f"Refused to load .*model.skops.*"
                       f"torch.nn.modules.linear.Linear with skops's {loader}"):
        sklearn_flowr.load(path)
    if loader == "ConstructorFromReduceNode":
        built = sio.loads(forged((30, 20)), trusted=TRUSTED_TYPES)
        assert tuple(built.planted_.weight.shape) == (20, 30)


def _npy_header(shape, dtype=np.uint8):
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buffer, {"descr": np.dtype(dtype).str, "fortran_order": False,
                 "shape": shape})
    return buffer.getvalue()


def _array_file(schema):
    return _planted_node(schema)["planted_"]["file"]


def test_zip_bomb_is_refused_by_its_declared_size(fitted, tmp_path):
    """Check a small file whose array unpacks to 80 MB (a zip bomb) is refused
    under the default bound, naming max_bytes, and loads when allowed."""
    data = _plant(fitted, np.zeros(3, np.uint8))
    name = _array_file(_node_of_file(data))
    bomb = _npy_header((80 * 2**20,)) + bytes(80 * 2**20)
    data = _rezipped(data, entries={name: bomb}, compression=zipfile.ZIP_DEFLATED)
    assert len(data) < 200_000
    path = tmp_path / "bomb.skops"
    path.write_bytes(data)
    with pytest.raises(ValueError, match=r"bomb.skops.*unpacks to [\d,]+ bytes,"
                       " more than max_bytes"):
        sklearn_flowr.load(path)
    with pytest.raises(ValueError, match="more than max_bytes=1,000"):
        sklearn_flowr.load(io.BytesIO(_plant(fitted, 1)), max_bytes=1000)


def _node_of_file(data):
    return json.loads(zipfile.ZipFile(io.BytesIO(data)).read("schema.json"))


def test_array_declaring_more_than_it_holds_is_refused(fitted, tmp_path):
    """Check an array whose header declares 8 TB but whose entry holds 80 bytes
    is refused before NumPy allocates the declared shape."""
    data = _plant(fitted, np.zeros(10))
    name = _array_file(_node_of_file(data))
    data = _rezipped(data, entries={name: _npy_header((10**12,), np.float64)
                                    + bytes(80)})
    with pytest.raises(ValueError, match=r"declares shape \(1000000000000,\) of "
                       "float64 .* but holds 80"):
        sklearn_flowr.load(io.BytesIO(data))


def _patch_headers(data, name, offset_local, offset_central, value, size):
    """Write ``value`` into ``name``'s local and central zip headers."""
    data = bytearray(data)
    for signature, offset in ((b"PK\x03\x04", offset_local),
                              (b"PK\x01\x02", offset_central)):
        start = 0
        while (start := data.find(signature, start)) >= 0:
            name_at = start + (30 if signature == b"PK\x03\x04" else 46)
            name_length = int.from_bytes(data[start + name_at - start - 4:
                                              name_at - 2], "little") \
                if signature == b"PK\x03\x04" else int.from_bytes(
                    data[start + 28:start + 30], "little")
            if bytes(data[name_at:name_at + name_length]) == name.encode():
                old = int.from_bytes(data[start + offset:start + offset + size],
                                     "little")
                data[start + offset:start + offset + size] = value(old).to_bytes(
                    size, "little")
            start += 4
    return bytes(data)


def _corrupt_deflate(data):
    data = _rezipped(data, compression=zipfile.ZIP_DEFLATED)
    info = zipfile.ZipFile(io.BytesIO(data)).getinfo("schema.json")
    start = info.header_offset + 30 + len(info.filename) + 2 * len(info.extra)
    damaged = bytearray(data)
    damaged[start:start + 8] = b"\xff" * 8
    return bytes(damaged)


def _deep_nodes(data, depth):
    """``planted_`` as ``depth`` nested list nodes."""
    schema = _node_of_file(data)
    _planted_node(schema)["planted_"] = "MARK"
    nested = ('{"__class__": "list", "__module__": "builtins", "__loader__": '
              '"ListNode", "content": [') * depth + "]}" * depth
    text = json.dumps(schema).replace('"MARK"', nested)
    return _rezipped(data, entries={"schema.json": text.encode()})


@pytest.mark.parametrize("damage", [
    _corrupt_deflate,
    lambda data: _patch_headers(data, "schema.json", 6, 8, lambda f: f | 1, 2),
    lambda data: _patch_headers(data, "schema.json", 8, 10, lambda m: 99, 2),
    lambda data: _rezipped(data, entries={
        "schema.json": b"[" * 100_000 + b"]" * 100_000}),
    lambda data: _deep_nodes(data, 5000),
], ids=["corrupt-deflate", "encrypted", "method-99", "deep-json", "deep-nodes"])
def test_damaged_files_raise_one_clear_value_error(fitted, damage):
    """Check corrupted deflate data, the encrypted flag, compression method 99
    and deep nesting (of the JSON, or of its nodes) raise a ValueError naming
    the file, the underlying error chained, not zlib.error, RuntimeError,
    NotImplementedError or RecursionError."""
    data = damage(_plant(fitted, 0))
    with pytest.raises(ValueError, match="<file object>") as caught:
        sklearn_flowr.load(io.BytesIO(data))
    assert caught.value.__cause__ is not None or "Refused" in str(caught.value)
