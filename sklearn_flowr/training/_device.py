"""Where modules and tensors live: the one owner of device placement.

Every torch module of a fitted :class:`~sklearn_flowr.FLOWRClassifier` is
placed through :func:`place_modules`, on the device :func:`resolve_device`
names, right before it runs. Inputs are sent to the device of the module that
consumes them (:func:`module_device`), never to a device named elsewhere, so
a module and its inputs cannot end up on different devices: after ``fit``,
after ``set_params(device=...)``, after unpickling (pickles hold CPU tensors)
or a deep copy.

Numerics on CUDA: TF32 convolutions and matrix products (cuDNN's default for
convolutions) round inputs to 10 mantissa bits, a relative error near 1e-3.
That is fine for training but not for measuring a scale or for predictions
that must match the CPU, so :func:`exact_float32` turns TF32 off for a block,
and :func:`deterministic_cuda` picks cuDNN's deterministic algorithms for a
training run. Both restore the previous global settings on exit.
"""

from __future__ import annotations

import contextlib

import numpy as np
import torch
from torch import nn

__all__ = [
    "deterministic_cuda",
    "exact_float32",
    "module_device",
    "place_modules",
    "resolve_device",
    "to_device",
    "to_device_if_fits",
]


def resolve_device(device) -> torch.device:
    """The torch device a ``device`` parameter names.

    Parameters
    ----------
    device : {"auto", "cpu", "cuda"}, str or torch.device
        ``"auto"`` is CUDA when available, else the CPU.

    Returns
    -------
    torch.device

    Raises
    ------
    ValueError
        When ``device`` names CUDA and this torch has no usable CUDA device,
        with the fix (``set_params(device="cpu")``).

    Examples
    --------
    >>> resolve_device("cpu")
    device(type='cpu')
    >>> resolve_device("auto").type in ("cpu", "cuda")
    True
    """
    if str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise ValueError(f"device={device!r} is not a torch device: {error}") from None
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"device={device!r} but this torch build has no usable CUDA device; "
            "use device='cpu' or 'auto' (e.g. set_params(device='cpu') on a "
            "model trained on a GPU and loaded here)."
        )
    return resolved


def module_device(module: nn.Module) -> torch.device:
    """Device of a module's first parameter or buffer (CPU when it has none).

    Examples
    --------
    >>> module_device(nn.Linear(2, 2))
    device(type='cpu')
    """
    for tensor in (*module.parameters(), *module.buffers()):
        return tensor.device
    return torch.device("cpu")


def place_modules(device: torch.device, *modules: nn.Module | None) -> None:
    """Move each module to ``device`` unless it is there already.

    A module that is already on ``device`` is left alone (no copy), so this is
    cheap to call before every use; modules shared between arguments move once.

    Examples
    --------
    >>> layer = nn.Linear(2, 2)
    >>> place_modules(torch.device("cpu"), layer, None)
    >>> module_device(layer)
    device(type='cpu')
    """
    for module in modules:
        if module is not None and _needs_move(module, device):
            module.to(device)


def _needs_move(module: nn.Module, device: torch.device) -> bool:
    for tensor in (*module.parameters(), *module.buffers()):
        here = tensor.device
        if here.type != device.type or (
            device.index is not None and here.index != device.index
        ):
            return True
    return False


@contextlib.contextmanager
def exact_float32():
    """Run a block with TF32 off (full float32 matrix products and convolutions).

    Examples
    --------
    >>> with exact_float32():
    ...     torch.backends.cuda.matmul.allow_tf32
    False
    """
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


@contextlib.contextmanager
def deterministic_cuda(enabled: bool = True):
    """Run a block with cuDNN's deterministic algorithms and no autotuning.

    Same seed, same model on one CUDA device: cuDNN's autotuner and its
    non-deterministic backward kernels otherwise change the result from run
    to run. Atomic additions outside cuDNN (e.g. in index reductions) may still
    differ in the last bits; the tests state the tolerance.

    Examples
    --------
    >>> with deterministic_cuda():
    ...     torch.backends.cudnn.deterministic
    True
    """
    if not enabled:
        yield
        return
    saved = (torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark)
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = True, False
    try:
        yield
    finally:
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = saved


def to_device_if_fits(X, device: torch.device, *, dtype=torch.float32,
                      max_share: float = 0.25):
    """``X`` as a tensor on a CUDA ``device`` when it takes a small share of it.

    Training data that lives on the GPU lets every batch or episode be gathered
    there with one index, instead of a host gather and a host-to-device copy
    per step. On the CPU, or when ``X`` would take more than ``max_share`` of
    the device's free memory, ``X`` is returned as it is.

    Parameters
    ----------
    X : ndarray or tensor
    device : torch.device
    dtype : torch.dtype, default=torch.float32
    max_share : float, default=0.25

    Returns
    -------
    ndarray or tensor

    Examples
    --------
    >>> import numpy as np
    >>> X = np.zeros((4, 3), dtype=np.float32)
    >>> to_device_if_fits(X, torch.device("cpu")) is X
    True
    """
    if device.type != "cuda":
        return X
    itemsize = torch.empty((), dtype=dtype).element_size()
    n_bytes = int(np.prod(X.shape)) * itemsize
    free, _ = torch.cuda.mem_get_info(device)
    if n_bytes > max_share * free:
        return X
    return torch.as_tensor(X).to(device=device, dtype=dtype)


def to_device(value, device) -> torch.Tensor:
    """``value`` as a tensor on ``device``, without stalling a CUDA stream.

    A copy from ordinary (pageable) host memory to a GPU waits for every
    kernel already queued on the stream, so the host cannot run ahead and
    the GPU idles while Python builds the next step. Small host tensors of a
    training step (row indices, labels) go through pinned memory instead,
    which copies asynchronously; torch's pinned-memory cache keeps the host
    buffer alive until the copy has run.

    Parameters
    ----------
    value : tensor or array-like
    device : torch.device or str

    Returns
    -------
    torch.Tensor

    Examples
    --------
    >>> import numpy as np
    >>> to_device(np.arange(3), "cpu")
    tensor([0, 1, 2])
    """
    device = torch.device(device)
    tensor = torch.as_tensor(value)
    if device.type != "cuda" or tensor.device.type != "cpu":
        return tensor.to(device)
    return tensor.pin_memory().to(device, non_blocking=True)
