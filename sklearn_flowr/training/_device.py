"""Where modules and tensors live, torch's CPU threads, and CUDA's numerics for a
block (TF32 off, deterministic cuDNN), each context restoring the previous setting."""

import contextlib
import numbers

import numpy as np
import torch
from skorch.utils import to_device as skorch_to_device
from torch import nn

__all__ = ["deterministic_cuda", "exact_float32", "module_device", "place_modules",
           "resolve_device", "to_device", "to_device_if_fits", "torch_threads"]


def resolve_device(device) -> torch.device:
    """The torch device a ``device`` parameter names (``"auto"``: CUDA when
    available); a ValueError naming the fix when CUDA is named but missing."""
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
    """Device of a module's first parameter or buffer (CPU when it has none)."""
    for tensor in (*module.parameters(), *module.buffers()):
        return tensor.device
    return torch.device("cpu")


def place_modules(device: torch.device, *modules: nn.Module | None) -> None:
    """Move each module (``None`` skipped) to ``device`` with skorch's ``to_device``."""
    for module in modules:
        if module is not None:
            skorch_to_device(module, device)


@contextlib.contextmanager
def exact_float32():
    """Run a block with TF32 off (full float32 matrix products and convolutions)."""
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


@contextlib.contextmanager
def deterministic_cuda(enabled: bool = True):
    """Run a block with cuDNN's deterministic algorithms and no autotuning."""
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
    """``X`` as a tensor on a CUDA ``device`` when it takes at most
    ``max_share`` of its free memory, else ``X`` as it is."""
    if device.type != "cuda":
        return X
    n_bytes = int(np.prod(X.shape)) * torch.empty((), dtype=dtype).element_size()
    free, _ = torch.cuda.mem_get_info(device)
    if n_bytes > max_share * free:
        return X
    return torch.as_tensor(X).to(device=device, dtype=dtype)


def to_device(value, device) -> torch.Tensor:
    """``value`` as a tensor on ``device``; a host tensor goes to a GPU through
    pinned memory, without waiting for the queued kernels (skorch's would)."""
    device = torch.device(device)
    tensor = torch.as_tensor(value)
    if device.type != "cuda" or tensor.device.type != "cpu":
        return tensor.to(device)
    return tensor.pin_memory().to(device, non_blocking=True)


@contextlib.contextmanager
def torch_threads(n_jobs=None):
    """Run a block with torch using ``n_jobs`` CPU threads, read as scikit-learn
    reads ``n_jobs`` (None: 1, or the ``joblib.parallel_config`` block's; -1: all
    CPUs; 0 refused); torch's setting is restored on exit.

    Examples
    --------
    >>> with torch_threads(1):
    ...     torch.get_num_threads()
    1
    >>> with torch_threads(0):
    ...     pass
    Traceback (most recent call last):
    ...
    ValueError: n_jobs must be None or a non-zero int; got 0.
    """
    import joblib

    if n_jobs is not None and (not isinstance(n_jobs, numbers.Integral)
                               or n_jobs == 0):
        raise ValueError(f"n_jobs must be None or a non-zero int; got {n_jobs!r}.")
    wanted, saved = joblib.effective_n_jobs(n_jobs), torch.get_num_threads()
    if wanted != saved:
        torch.set_num_threads(wanted)
    try:
        yield
    finally:
        if wanted != saved:
            torch.set_num_threads(saved)
