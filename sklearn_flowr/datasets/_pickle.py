"""Reading pickled data sets without running code: the unpickler answers only
plain containers, and parses NumPy arrays itself instead of calling NumPy's
pickle hooks."""

import math
import operator
import pickle

import numpy as np

# Python 2 pickles name the builtins module "__builtin__".
_BUILTINS = ("builtins", "__builtin__")
_CONTAINERS = frozenset({"dict", "list", "tuple", "set", "frozenset", "str", "bytes",
                         "bytearray", "int", "float", "complex", "bool"})
# NumPy 1 and 2 spell the array constructors' module differently.
_CORES = ("numpy.core", "numpy._core")
# Booleans, numbers, bytes and str; object arrays only from a list of values.
_PLAIN_KINDS = "biufcSUO"


class UnsafePickleError(pickle.UnpicklingError):
    """A pickle holds something other than plain containers and arrays."""


def _raw_bytes(raw):
    raw = raw.encode("latin1") if isinstance(raw, str) else raw  # Python 2's
    if not isinstance(raw, bytes | bytearray):
        raise UnsafePickleError(f"array data of type {type(raw).__name__}")
    return raw


class _Dtype:
    """A pickled ``numpy.dtype(spec)``; only its spec, byte order and size are
    read (a forged state cannot flag it as holding references)."""

    def __init__(self, spec, *_flags):
        if not isinstance(spec, str):
            raise UnsafePickleError(f"a dtype spelled by a {type(spec).__name__}")
        self.spec, self.state = spec, ()

    def __setstate__(self, state):
        self.state = tuple(state)

    def resolve(self):
        if not isinstance(self, _Dtype):
            raise UnsafePickleError(f"a dtype given as {type(self).__name__}")
        dtype = np.dtype(self.spec)
        if dtype.kind not in _PLAIN_KINDS or dtype.fields or self.state[2:5] != (
                None,) * len(self.state[2:5]):
            raise UnsafePickleError(f"the dtype {self.spec!r} (structured, void or "
                                    "time values)")
        if len(self.state) > 5 and dtype.kind in "SU" and self.state[5] > 0:
            width = self.state[5] // (4 if dtype.kind == "U" else 1)
            dtype = np.dtype(f"{dtype.kind}{width}")
        if len(self.state) > 1 and self.state[1] in "<>":
            dtype = dtype.newbyteorder(self.state[1])
        return dtype


def _build_array(shape, dtype, fortran, raw):
    """An array from a pickle's ``(shape, dtype, is_fortran, data)``."""
    dtype = _Dtype.resolve(dtype)
    shape = tuple(operator.index(n) for n in shape)
    if min(shape, default=0) < 0:
        raise ValueError(f"negative array shape {shape}")
    if dtype.kind == "O":
        # NumPy would read raw bytes as object pointers: the forged-pickle crash.
        if not isinstance(raw, list) or len(raw) != math.prod(shape):
            raise UnsafePickleError("an object array stored as raw bytes (NumPy "
                                    "would read them as memory addresses)")
        return np.fromiter(raw, dtype=object, count=len(raw)).reshape(shape)
    data = np.frombuffer(_raw_bytes(raw), dtype)
    return data.reshape(shape, order="F" if fortran else "C").copy()


_NDARRAY = object()  # what ``numpy.ndarray`` stands for: a name, never called


class _Array:
    """``numpy.core.multiarray._reconstruct(ndarray, ...)``: the array is parsed
    from the state its ``__setstate__`` receives."""

    def __init__(self, cls, *_args):
        if cls is not _NDARRAY:
            raise UnsafePickleError("an array of a class other than numpy.ndarray")
        self.array = None

    def __setstate__(self, state):
        self.array = _build_array(*tuple(state)[-4:])


def _frombuffer(raw, dtype, shape, order):
    return _build_array(shape, dtype, order == "F", raw)


def _scalar(dtype, raw):
    dtype, raw = _Dtype.resolve(dtype), _raw_bytes(raw)
    if dtype.kind == "O" or len(raw) != dtype.itemsize:
        raise UnsafePickleError(f"a {dtype} scalar of {len(raw)} bytes")
    return np.frombuffer(raw, dtype)[0]


def _latin1_encode(text, encoding="latin1"):
    """``_codecs.encode(text, "latin1")``, how pickles of protocol 0 to 2 store
    bytes; any other codec is refused."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise UnsafePickleError(
            f"'_codecs.encode' with {type(text).__name__} and codec {encoding!r} "
            "(only the latin1 encoding of a str is allowed)"
        )
    return text.encode("latin1")


_NUMPY_NAMES = {
    ("numpy", "ndarray"): _NDARRAY, ("numpy", "dtype"): _Dtype,
    **{(f"{core}.multiarray", name): value for core in _CORES for name, value in (
        ("ndarray", _NDARRAY), ("dtype", _Dtype), ("_reconstruct", _Array),
        ("scalar", _scalar))},
    **{(f"{core}.numeric", "_frombuffer"): _frombuffer for core in _CORES},
    ("_codecs", "encode"): _latin1_encode,
}


def _from_data(cls):
    """``cls(*args)`` unless the first argument is a size (``bytes(10**10)``
    would allocate what the file does not hold)."""

    def build(*args):
        if args and isinstance(args[0], int):
            raise UnsafePickleError(f"'builtins.{cls.__name__}' of a size")
        return cls(*args)

    return build


_SIZED = {"bytes": _from_data(bytes), "bytearray": _from_data(bytearray)}


class _PlainUnpickler(pickle.Unpickler):
    """An unpickler whose ``find_class`` (a pickle's one way to a callable)
    answers only plain containers and the array parsers above."""

    def find_class(self, module, name):
        if module in _BUILTINS and name in _CONTAINERS:
            return _SIZED.get(name) or super().find_class("builtins", name)
        if (module, name) in _NUMPY_NAMES:
            return _NUMPY_NAMES[module, name]
        raise UnsafePickleError(
            f"it references '{'builtins' if module in _BUILTINS else module}.{name}'"
            ", which is not a NumPy array or a plain container (dict, list, tuple, "
            "set, str, bytes, number)")

    def persistent_load(self, pid):
        raise UnsafePickleError(f"a persistent id ({type(pid).__name__})")


def _resolved(obj, done):
    """``obj`` with every parsed array and dtype in place of its placeholder;
    ``done`` maps ids already seen (shared or recursive parts stay shared)."""
    if id(obj) in done:
        return done[id(obj)]
    if isinstance(obj, _Array | _Dtype):
        out = obj.array if isinstance(obj, _Array) else obj.resolve()
        if out is None:
            raise UnsafePickleError("an array without its data")
        if isinstance(out, np.ndarray) and out.dtype == object:
            out[...] = np.fromiter((_resolved(x, done) for x in out.flat), object,
                                   count=out.size).reshape(out.shape)
    elif isinstance(obj, dict):
        out = done[id(obj)] = {}
        out.update((_resolved(k, done), _resolved(v, done)) for k, v in obj.items())
    elif isinstance(obj, list):
        out = done[id(obj)] = []
        out.extend(_resolved(x, done) for x in obj)
    elif isinstance(obj, tuple | set | frozenset):
        out = type(obj)(_resolved(x, done) for x in obj)
    else:
        out = obj
    done[id(obj)] = out
    return out


def load_pickle(path, expected):
    """Unpickle a data file that may hold only NumPy arrays and plain containers
    (a ValueError names anything else); ``expected`` words the errors.
    """
    try:
        with open(path, "rb") as f:
            # latin1: Python 2 pickles' bytes arrive as str (see _image_io.as_bytes).
            return _resolved(_PlainUnpickler(f, encoding="latin1").load(), {})
    except FileNotFoundError:
        raise FileNotFoundError(
            f"Pickle file not found: {path!r}; expected {expected}."
        ) from None
    except UnsafePickleError as exc:
        raise ValueError(
            f"Refused to unpickle {path!r}: {exc}. Loading it could run code "
            f"stored in the file; expected {expected}. Convert the file to arrays "
            "and lists where it was made (e.g. numpy.savez) if you trust it."
        ) from None
    except Exception as exc:  # unpickling can fail in almost any way
        raise ValueError(
            f"Cannot unpickle {path!r} ({type(exc).__name__}: {exc}); "
            f"expected {expected}."
        ) from exc
