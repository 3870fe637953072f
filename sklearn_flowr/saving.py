"""Files the package writes and reads back: estimators saved with ``skops.io``
(loaded trusting only named types) and files written whole or not at all.

Nothing here imports torch or skops until :func:`save` or :func:`load` is
called, so ``import sklearn_flowr`` stays light.
"""

from __future__ import annotations

import contextlib
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

# Every type a saved estimator of this package holds, beyond what skops trusts
# by itself (builtins, NumPy arrays and scalars, scikit-learn's estimators).
# Each is rebuilt from data only (``__dict__.update`` or a ``__setstate__``
# that rebuilds arrays). Not listed, on purpose: the skorch nets
# (``training._nets.*``), whose ``__setstate__`` unpickles bytes from the file,
# and every function, ``functools.partial`` and system module.
TRUSTED_TYPES = (
    # The estimators.
    "sklearn_flowr.head._classifier.CRPGaussianClassifier",
    "sklearn_flowr._flowr.FLOWRClassifier",
    "sklearn_flowr.baselines._dpmeans.DPMeansClassifier",
    "sklearn_flowr.baselines._evm.EVMClassifier",
    "sklearn_flowr.baselines._ncm.NCMClassifier",
    "sklearn_flowr.baselines._peeler.PEELERClassifier",
    "sklearn_flowr.baselines._protonet.ProtoNetClassifier",
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
    """A saved file names types that :func:`load` was not told to trust.

    Attributes
    ----------
    file : str
        How the file was given (its path, or ``"<file object>"``).
    types : list of str
        The untrusted ``module.name`` of each refused type, sorted.
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


def _where(file):
    if isinstance(file, str | os.PathLike):
        return repr(os.fspath(file))
    return "<file object>"


def save(estimator, file):
    """Save an estimator with ``skops.io``, for :func:`load` to read back.

    Parameters
    ----------
    estimator : object
        A fitted or unfitted estimator of this package (or any object
        ``skops.io`` can store). The live object is not changed.
    file : str, path-like or binary file object
        Where to write (``.skops`` is customary). A path is written with
        :func:`write_atomically`.

    Warns
    -----
    UserWarning
        If the estimator holds types outside :data:`TRUSTED_TYPES` (e.g. a
        ``backbone`` module of your own): the message lists them; pass them
        to :func:`load` as ``trusted=`` once reviewed.

    See Also
    --------
    load : Read the file back, trusting only named types.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> import sklearn_flowr
    >>> X = np.r_[np.zeros((3, 2)), np.ones((3, 2))]
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


def load(file, *, trusted=None):
    """Load an estimator saved by :func:`save`, trusting only named types.

    Every type the file names must be one ``skops.io`` trusts by itself, one
    of :data:`TRUSTED_TYPES` or one of ``trusted``; the file is audited before
    anything is built.

    Parameters
    ----------
    file : str, path-like or binary file object
        A file written by :func:`save` (or ``skops.io.dump``). It is read
        once, so the bytes audited are the bytes loaded.
    trusted : list of str or type, default=None
        Further types to trust, as ``"module.Class"`` names or the types
        themselves, e.g. the classes of a ``backbone`` module of your own
        that :func:`save` listed in its warning. Add only names you have
        reviewed; never pass ``skops.io.get_untrusted_types``'s answer
        unread, which trusts whatever the file lists.

    Returns
    -------
    estimator : object
        The rebuilt estimator; torch modules are on the CPU and move where
        the estimator's ``device`` says on first use.

    Raises
    ------
    UntrustedTypesError
        A ``ValueError`` naming the file and every type it names outside
        the trusted ones; no object is built.
    ValueError
        If the file is not a skops file (the message names it).
    TypeError
        If ``trusted`` holds something that is neither a str nor a type.

    See Also
    --------
    save : Write an estimator for this function to read.

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
    import zipfile

    import skops.io as sio

    if isinstance(trusted, str | bytes):
        raise TypeError(
            "trusted must be a list of type names; got a single str. Wrap it "
            "in a list: trusted=['module.Class']."
        )
    extra = [] if trusted is None else [_type_name(t) for t in trusted]
    where = _where(file)
    if isinstance(file, str | os.PathLike):
        with open(file, "rb") as f:
            data = f.read()
    else:
        data = file.read()
    try:
        untrusted = sio.get_untrusted_types(data=data)
    except (zipfile.BadZipFile, KeyError, ValueError, TypeError, AttributeError,
            EOFError) as exc:
        raise ValueError(
            f"Cannot read {where} as a saved estimator ({type(exc).__name__}: "
            f"{exc}); expected a file written by sklearn_flowr.save or "
            "skops.io.dump."
        ) from exc
    allowed = set(TRUSTED_TYPES) | set(extra)
    refused = [name for name in untrusted if name not in allowed]
    if refused:
        raise UntrustedTypesError(where, refused)
    # Trust exactly the vetted names the file holds; skops audits the whole
    # tree again before it builds anything.
    return sio.loads(bytes(data), trusted=[n for n in untrusted if n in allowed])


def temporary_name(path) -> str:
    """A unique hidden name beside ``path``: ``.<name>.<pid>.<hex>.tmp``."""
    folder, name = os.path.split(os.fspath(path))
    return os.path.join(folder, f".{name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")


def write_atomically(path, write, *, text=False, sync=True) -> None:
    """Write ``path`` through ``write(file)``, all or nothing.

    The data goes to a temporary file in the same folder, renamed into place
    once complete: a process killed or a disk filled mid-write leaves the
    previous file (or none), never a truncated one.

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
    # A killed process never gets here: the readers that know the name
    # pattern clean its temporary file (see training's checkpoints).
    with contextlib.suppress(OSError):
        os.unlink(tmp)
