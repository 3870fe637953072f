"""Torch modules in a form pickle and skops.io both store safely: each tensor a
:class:`TensorState` (see docs/design.rst, "Persistence and devices")."""

import copy

import numpy as np
import torch

__all__ = ["TensorState", "modules_from_state", "modules_to_state",
           "restore_modules", "store_modules"]


class TensorState:
    """A tensor as a CPU NumPy array, and whether it was a parameter, needed
    gradients, was bfloat16 or channels-last."""

    # Whether the tensor was 4-d and channels-last (NHWC strides): the
    # layout, not stored by the array, which a module may compute faster in
    # (``Conv4``). States saved without it were contiguous.
    channels_last = False

    def __init__(self, tensor: torch.Tensor):
        self.parameter = isinstance(tensor, torch.nn.Parameter)
        self.requires_grad = bool(tensor.requires_grad)
        tensor = tensor.detach()
        row_major = torch.empty(tensor.shape, device="meta").stride()
        self.channels_last = (tensor.dim() == 4 and tensor.stride()
                              == _channels_last_strides(tensor.shape) != row_major)
        # NumPy has no bfloat16: stored as float32, which holds it exactly.
        self.dtype = "bfloat16" if tensor.dtype == torch.bfloat16 else None
        if self.dtype is not None:
            tensor = tensor.float()
        self.array = tensor.cpu().numpy().copy()

    def to_tensor(self) -> torch.Tensor:
        """The CPU tensor (a ``Parameter`` when it was one)."""
        tensor = torch.from_numpy(np.array(self.array, copy=True))
        if self.dtype == "bfloat16":
            tensor = tensor.to(torch.bfloat16)
        if self.channels_last:
            # (exact strides: a size-1 side leaves contiguous() ambiguous)
            tensor = torch.empty_strided(
                tensor.shape, _channels_last_strides(tensor.shape),
                dtype=tensor.dtype).copy_(tensor)
        if self.parameter:
            return torch.nn.Parameter(tensor, requires_grad=self.requires_grad)
        return tensor.requires_grad_(self.requires_grad)


def _channels_last_strides(shape):
    """Strides of an (N, C, H, W) tensor stored as (N, H, W, C)."""
    n, c, h, w = shape
    return (h * w * c, 1, w * c, c)


def _convert_value(value, convert, kind):
    """``value`` with each ``kind`` object in it (or in its list, tuple or dict)
    replaced by ``convert(object)``."""
    if isinstance(value, kind):
        return convert(value)
    if isinstance(value, (list, tuple)) and any(isinstance(v, kind) for v in value):
        return type(value)(convert(v) if isinstance(v, kind) else v for v in value)
    if isinstance(value, dict) and any(isinstance(v, kind) for v in value.values()):
        return type(value)((k, convert(v) if isinstance(v, kind) else v)
                           for k, v in value.items())
    return value


def modules_to_state(modules: tuple) -> tuple:
    """Copies of ``modules`` (``None`` allowed) holding :class:`TensorState`
    objects for tensors; one deep copy, so shared modules stay shared."""
    # Deep-copying CUDA tensors would allocate on the GPU: copy structure only,
    # with the tensors swapped for their states on the way.
    # The tensor stores (_parameters, _buffers) are dicts among the module's
    # attributes, so one pass over the attributes finds every tensor.
    memo = {}

    def remember(tensor):
        if id(tensor) not in memo:
            memo[id(tensor)] = TensorState(tensor)

    for root in modules:
        for module in () if root is None else root.modules():
            for value in module.__dict__.values():
                _convert_value(value, remember, torch.Tensor)
    return copy.deepcopy(modules, memo)


def modules_from_state(modules: tuple) -> tuple:
    """Turn the :class:`TensorState` objects of :func:`modules_to_state`'s
    copies back into CPU tensors, in place; returns ``modules``."""
    rebuilt = {}

    def to_tensor(state):
        # One tensor per state: tied weights stay tied.
        if id(state) not in rebuilt:
            rebuilt[id(state)] = state.to_tensor()
        return rebuilt[id(state)]

    for root in modules:
        for module in () if root is None else root.modules():
            # _parameters and _buffers are dicts among these attributes.
            for name, value in list(module.__dict__.items()):
                module.__dict__[name] = _convert_value(value, to_tensor, TensorState)
    return modules


# Attributes (and the one parameter) of an estimator that may hold torch modules.
_MODULE_ATTRIBUTES = ("meta_module_", "encoder_", "pretrained_encoder_", "backbone")
# The key of the stored modules' places in a pickled state.
_STORED = "_stored_modules"


def _module_slots(state):
    """``(dict, key)`` of every torch module in a pickled state: the module
    attributes, and a module ``backbone`` in the fitted-parameter snapshot."""
    slots = [(state, name) for name in _MODULE_ATTRIBUTES
             if isinstance(state.get(name), torch.nn.Module)]
    snapshot = state.get("_fitted_params")
    if isinstance(snapshot, dict):
        slots += [(snapshot, name) for name, value in snapshot.items()
                  if isinstance(value, torch.nn.Module)]
    return slots


def store_modules(state: dict) -> dict:
    """An estimator's pickled ``state`` (not changed) with its modules -- fitted
    attributes, and a module ``backbone`` in ``_fitted_params`` -- as stored copies."""
    state = dict(state)
    if isinstance(state.get("_fitted_params"), dict):
        state["_fitted_params"] = dict(state["_fitted_params"])
    slots = _module_slots(state)
    if slots:
        stored = modules_to_state(tuple(place[name] for place, name in slots))
        for (place, name), module in zip(slots, stored, strict=True):
            place[name] = module
        state[_STORED] = [(place is not state, name) for place, name in slots]
    return state


def restore_modules(state: dict) -> dict:
    """Inverse of :func:`store_modules`: CPU modules back in their places."""
    state = dict(state)
    slots = state.pop(_STORED, [])
    modules_from_state(tuple(
        (state["_fitted_params"] if in_snapshot else state)[name]
        for in_snapshot, name in slots))
    return state
