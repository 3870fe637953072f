"""Estimators saved with ``skops.io`` (loaded trusting only named types) and
files written whole or not at all; torch and skops are imported on first call."""

from __future__ import annotations

import contextlib
import math
import os
import uuid
import warnings

__all__ = [
    "TRUSTED_TYPES",
    "UntrustedTypesError",
    "load",
    "save",
    "temporary_name",
    "write_atomically",
]

# Every type a saved estimator of this package holds beyond what skops trusts
# by itself, each rebuilt from data only. Not listed, on purpose: the skorch nets
# (their ``__setstate__`` unpickles bytes), functions and system modules.
TRUSTED_TYPES = (
    # The estimators.
    "sklearn_flowr.head._classifier.CRPGaussianClassifier",
    "sklearn_flowr.head._two_covariance.TwoCovarianceWhitener",
    "sklearn_flowr.head._whitened.WhitenedCRPClassifier",
    "sklearn_flowr._flowr.FLOWRClassifier",
    "sklearn_flowr.baselines._dpmeans.DPMeansClassifier",
    "sklearn_flowr.baselines._evm.EVMClassifier",
    "sklearn_flowr.baselines._fecam.FeCAMClassifier",
    "sklearn_flowr.baselines._knn.KNNClassifier",
    "sklearn_flowr.baselines._mahalanobis.MahalanobisPlusPlusClassifier",
    "sklearn_flowr.baselines._ncm.NCMClassifier",
    "sklearn_flowr.baselines._peeler.PEELERClassifier",
    "sklearn_flowr.baselines._protonet.ProtoNetClassifier",
    "sklearn_flowr.baselines._ranpac.RanPACClassifier",
    "sklearn_flowr.baselines._simpleshot.SimpleShotClassifier",
    "sklearn_flowr.calibration.NoveltyCalibratedClassifier",
    "sklearn_flowr.conformal.ConformalNoveltyClassifier",
    # Their fitted state and parts.
    "sklearn_flowr.conformal._Calibrator",
    "sklearn_flowr.base.LabelRegistry",
    "sklearn_flowr.head._state.ClassState",
    "sklearn_flowr.training._stages.MetaTraining",
    "sklearn_flowr.training._stages.SupE",
    "sklearn_flowr.training._stages.SupFC",
    "sklearn_flowr.training._modules.FLOWRMetaModule",
    "sklearn_flowr.training._persistence.TensorState",
    # The package's encoders (every named backbone) and their blocks.
    "sklearn_flowr.encoders._conv4.Conv4",
    "sklearn_flowr.encoders._conv4._HalvingMaxPool2d",
    "sklearn_flowr.encoders._efficientnet.EfficientNetLite0",
    "sklearn_flowr.encoders._efficientnet.EfficientNetLite0Encoder",
    "sklearn_flowr.encoders._efficientnet._MBConv",
    "sklearn_flowr.encoders._efficientnet._SameConv2d",
    "sklearn_flowr.encoders._mlp.MLPEncoder",
    "sklearn_flowr.encoders._pretrained.PretrainedEncoder",
    "sklearn_flowr.encoders._resnet.ResNet12",
    "sklearn_flowr.encoders._resnet.ResNet18",
    "sklearn_flowr.encoders._resnet._BasicBlock",
    "sklearn_flowr.encoders._resnet._ResNet12Block",
    # torch: the layers those encoders are built from.
    "torch.nn.modules.activation.LeakyReLU",
    "torch.nn.modules.activation.ReLU",
    "torch.nn.modules.batchnorm.BatchNorm2d",
    "torch.nn.modules.container.ModuleList",
    "torch.nn.modules.container.Sequential",
    "torch.nn.modules.conv.Conv2d",
    "torch.nn.modules.linear.Identity",
    "torch.nn.modules.linear.Linear",
    # skorch: the training history (a list of dicts).
    "skorch.history.History",
    # scikit-learn: calibration results, and the class-disjoint splitters
    # that ``cv`` / ``calibration`` accept.
    "sklearn.utils._bunch.Bunch",
    "sklearn.model_selection._split.GroupKFold",
    "sklearn.model_selection._split.GroupShuffleSplit",
    "sklearn.model_selection._split.LeaveOneGroupOut",
    "sklearn.model_selection._split.LeavePGroupsOut",
)


class UntrustedTypesError(ValueError):
    """A saved file (``file``) names types (``types``) :func:`load` does not trust.
    """

    def __init__(self, file, types):
        self.file = file
        self.types = sorted(types)
        super().__init__(
            f"Refused to load {file}: it names types this package does not "
            f"trust: {self.types}. Nothing was built. A file this package saved "
            "names only its own estimators and the torch, skorch and "
            "scikit-learn types they hold, so it may have been tampered with. "
            "If you made the file yourself (e.g. with a backbone of your own), "
            "review each name and pass the ones you trust as "
            "sklearn_flowr.load(file, trusted=[...])."
        )


def _type_name(entry):
    if isinstance(entry, str):
        return entry
    if isinstance(entry, type):
        return f"{entry.__module__}.{entry.__qualname__}"
    raise TypeError(
        "trusted must be a list of type names ('module.Class') or types; got "
        f"an entry of type {type(entry).__name__}: {entry!r}."
    )


def save(estimator, file):
    """Save an estimator with ``skops.io``, for :func:`load` to read back.

    Parameters
    ----------
    estimator : object
        An estimator of this package, or any object ``skops.io`` can store.
    file : str, path-like or binary file object
        Where to write; a path is written with :func:`write_atomically`.

    Warns
    -----
    UserWarning
        Listing the types outside :data:`TRUSTED_TYPES` it holds (e.g. a
        ``backbone`` of your own), for :func:`load`'s ``trusted=``.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> import sklearn_flowr
    >>> X = np.repeat([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], 3, axis=0)
    >>> X += 0.1 * np.random.default_rng(0).normal(size=(6, 3))
    >>> clf = sklearn_flowr.CRPGaussianClassifier().fit(X, [0, 0, 0, 1, 1, 1])
    >>> path = os.path.join(tempfile.mkdtemp(), "model.skops")
    >>> sklearn_flowr.save(clf, path)
    >>> sklearn_flowr.load(path).predict(X).tolist()
    [0, 0, 0, 1, 1, 1]
    """
    import skops.io as sio

    data = sio.dumps(estimator)
    extra = sorted(set(sio.get_untrusted_types(data=data)) - set(TRUSTED_TYPES))
    if extra:
        warnings.warn(
            f"{type(estimator).__name__} holds types sklearn_flowr.load does not "
            f"trust by itself: {extra}. Load the file with "
            f"sklearn_flowr.load(file, trusted={extra!r}) after reviewing them.",
            UserWarning,
            stacklevel=2,
        )
    if not isinstance(file, str | os.PathLike):
        file.write(data)
        return
    write_atomically(os.path.abspath(os.fspath(file)), lambda out: out.write(data))


# The types skops calls to rebuild each kind of node ``save`` writes (None: it
# calls none); other kinds, e.g. ConstructorFromReduceNode (which calls a type
# with the file's arguments), are refused.
_NODE_CALLS = {
    "ObjectNode": None, "TypeNode": None, "JsonNode": None, "BytesNode": None,
    "BytearrayNode": None, "ListNode": {"builtins.list", "skorch.history.History"},
    "DictNode": {"builtins.dict", "collections.OrderedDict",
                 "sklearn.utils._bunch.Bunch"},
    "SetNode": {"builtins.set"}, "TupleNode": {"builtins.tuple"},
    "NdArrayNode": "numpy",  # an array or a NumPy scalar type
}
_MIB = 2**20


class _Refused(ValueError):
    pass


def _check_archive(archive, max_bytes):
    """Refuse what would make ``load`` allocate past ``max_bytes``: the entries'
    declared sizes, and arrays whose header asks more than their entry holds."""
    import numpy as np

    unpacked = sum(info.file_size for info in archive.infolist())
    if unpacked > max_bytes:
        raise _Refused(f"it unpacks to {unpacked:,} bytes, more than max_bytes="
                       f"{max_bytes:,}")
    for info in archive.infolist():
        if not info.filename.endswith(".npy"):
            continue
        with archive.open(info) as entry:
            version = np.lib.format.read_magic(entry)
            read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                           else np.lib.format.read_array_header_2_0)
            shape, _, dtype = read_header(entry)
            needed = math.prod(shape) * dtype.itemsize
            if needed > info.file_size - entry.tell():
                raise _Refused(f"its array {info.filename!r} declares shape {shape} "
                               f"of {dtype} ({needed:,} bytes) but holds "
                               f"{info.file_size - entry.tell():,}")


def _check_nodes(schema):
    """Refuse a node whose rebuilding would call a type with the file's data."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
        if not isinstance(node, dict):
            continue
        stack.extend(node.values())
        if "__loader__" not in node:
            continue
        loader, module = node["__loader__"], node.get("__module__")
        calls = _NODE_CALLS.get(loader, ())
        name = f"{module}.{node.get('__class__')}"
        if calls is not None and name not in calls and calls != module:
            raise _Refused(f"it rebuilds {name} with skops's {loader}, which files "
                           "written by sklearn_flowr.save never hold")


def load(file, *, trusted=None, max_bytes=None):
    """Load an estimator saved by :func:`save`, trusting only named types.

    The file is audited before anything is built (user guide, "Saving a
    fitted model").

    Parameters
    ----------
    file : str, path-like or binary file object
        A file written by :func:`save`.
    trusted : list of str or type, default=None
        Further types to trust (``"module.Class"`` or the type), e.g. those
        :func:`save`'s warning listed. Pass only names you have reviewed.
    max_bytes : int, default=None
        The most bytes the file's entries may unpack to; None: 8 times the
        file's size plus 64 MiB.

    Returns
    -------
    estimator : object
        The rebuilt estimator, its torch modules on the CPU.

    Raises
    ------
    UntrustedTypesError
        A ValueError naming the file and each untrusted type it names.
    ValueError
        If the file cannot be read or rebuilt, or breaks the bounds above.

    Examples
    --------
    >>> import io
    >>> import numpy as np
    >>> import sklearn_flowr
    >>> from sklearn_flowr.baselines import NCMClassifier
    >>> X = np.r_[np.zeros((3, 2)), np.ones((3, 2))]
    >>> buffer = io.BytesIO()
    >>> sklearn_flowr.save(NCMClassifier().fit(X, [0, 0, 0, 1, 1, 1]), buffer)
    >>> _ = buffer.seek(0)
    >>> sklearn_flowr.load(buffer).predict(X).tolist()
    [0, 0, 0, 1, 1, 1]
    """
    import io
    import json
    import zipfile

    import skops.io as sio

    if isinstance(trusted, str | bytes):
        raise TypeError(
            "trusted must be a list of type names; got a single str. Wrap it "
            "in a list: trusted=['module.Class']."
        )
    extra = [] if trusted is None else [_type_name(t) for t in trusted]
    if isinstance(file, str | os.PathLike):
        where = repr(os.fspath(file))
        with open(file, "rb") as f:
            data = f.read()
    else:
        where, data = "<file object>", file.read()
    max_bytes = 8 * len(data) + 64 * _MIB if max_bytes is None else max_bytes
    allowed = set(TRUSTED_TYPES) | set(extra)
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            _check_archive(archive, max_bytes)
            schema = json.loads(archive.read("schema.json"))
        untrusted = sio.get_untrusted_types(data=data)
        refused = [name for name in untrusted if name not in allowed]
        if refused:
            raise UntrustedTypesError(where, refused)
        _check_nodes(schema)
        # Trust exactly the vetted names the file holds; skops audits the
        # whole tree again before it builds anything.
        return sio.loads(bytes(data), trusted=[n for n in untrusted if n in allowed])
    except UntrustedTypesError:
        raise
    except _Refused as exc:
        raise ValueError(f"Refused to load {where}: {exc}. Nothing was built."
                         ) from None
    except Exception as exc:  # a hostile file can fail in any way
        raise ValueError(
            f"Cannot read {where} as a saved estimator ({type(exc).__name__}: "
            f"{exc}); expected a file written by sklearn_flowr.save or "
            "skops.io.dump."
        ) from exc


def temporary_name(path) -> str:
    """A unique hidden name beside ``path``: ``.<name>.<pid>.<hex>.tmp``."""
    folder, name = os.path.split(os.fspath(path))
    return os.path.join(folder, f".{name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")


def write_atomically(path, write, *, text=False, sync=True) -> None:
    """Write ``path`` through ``write(file)`` all or nothing: a complete
    temporary file beside it is renamed into place.

    Parameters
    ----------
    path : str or os.PathLike
    write : callable
        Called with the open temporary file; it writes the whole content.
    text : bool, default=False
        Open the file as UTF-8 text instead of binary.
    sync : bool, default=True
        ``fsync`` the data before the rename (a cheap cache may skip it).

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
    # A killed process never gets here: the readers that know the name
    # pattern clean its temporary file.
    with contextlib.suppress(OSError):
        os.unlink(tmp)
