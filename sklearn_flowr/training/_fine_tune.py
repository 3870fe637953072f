"""Test-time helpers: embed data, fine-tune an encoder's last layer on a support set."""

import copy

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from ..encoders import last_linear_layer
from ._device import (
    deterministic_cuda,
    exact_float32,
    module_device,
    place_modules,
    torch_threads,
)
from ._losses import meta_training_loss
from ._modules import FLOWRMetaModule

__all__ = ["embed", "fine_tune_last_layer", "layer_inputs"]


@torch.no_grad()
def embed(encoder: nn.Module, X, *, batch_size: int = 256, device=None,
          dtype: torch.dtype = torch.float32, desc: str | None = None,
          n_jobs=None) -> np.ndarray:
    """Embeddings ``phi(X)``, shape (n_samples, embedding_dim), as a NumPy array.

    In evaluation mode, in batches of ``batch_size`` cast to ``dtype``, on
    ``device`` (None: the encoder's), TF32 off and cuDNN deterministic (CPU and
    CUDA agree to float32 rounding); ``desc`` names a progress bar, ``n_jobs``
    sets torch's CPU threads (:func:`torch_threads`).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_flowr.encoders import MLPEncoder
    >>> embed(MLPEncoder(8, hidden=(16,), embedding_dim=4), np.zeros((3, 8))).shape
    (3, 4)
    """
    if device is not None:
        place_modules(torch.device(device), encoder)
    device = module_device(encoder)
    was_training = encoder.training
    encoder.eval()
    try:
        X = torch.as_tensor(np.asarray(X) if not torch.is_tensor(X) else X)
        with exact_float32(), deterministic_cuda(device.type == "cuda"), \
                torch_threads(n_jobs):
            starts = range(0, X.shape[0], batch_size)
            chunks = [
                encoder(X[start:start + batch_size].to(device=device, dtype=dtype))
                .cpu().numpy()
                for start in tqdm(starts, desc=desc, unit="batch",
                                  disable=desc is None, leave=False)
            ]
    finally:
        encoder.train(was_training)
    return np.concatenate(chunks) if chunks else np.zeros((0, 0), np.float32)


def _split_support(y_index: np.ndarray, n_classes: int, rng: np.random.Generator):
    """One pseudo-episode cut from a support set: a class with 2+ rows split
    at random into support and query; a single-row class is a novel query."""
    support_rows, support_labels, query_rows, query_labels = [], [], [], []
    n_way = 0
    singletons = []
    for label in range(n_classes):
        rows = rng.permutation(np.flatnonzero(y_index == label))
        if rows.shape[0] < 2:
            singletons.append(rows)
            continue
        n_shots = int(rng.integers(1, rows.shape[0]))
        support_rows.append(rows[:n_shots])
        support_labels.append(np.full(n_shots, n_way))
        query_rows.append(rows[n_shots:])
        query_labels.append(np.full(rows.shape[0] - n_shots, n_way))
        n_way += 1
    for offset, rows in enumerate(singletons):
        query_rows.append(rows)
        query_labels.append(np.full(rows.shape[0], n_way + offset))

    def cat(parts):
        return np.concatenate(parts).astype(np.int64) if parts else np.zeros(
            0, np.int64)

    return (cat(support_rows), cat(support_labels), cat(query_rows),
            cat(query_labels), n_way)


def fine_tune_last_layer(encoder: nn.Module, meta_module: FLOWRMetaModule,
                         X_support, y_support, *, steps: int = 20,
                         lr: float = 1e-3, random_state: int | None = 0,
                         device=None, verbose: int = 0, n_jobs=None) -> nn.Module:
    """A copy of ``encoder`` whose last linear layer is fine-tuned on a support set.

    ``steps`` Adam steps (rate ``lr``) on the meta-training loss without the
    adaptation loss, each on a pseudo-episode cut from the support set (seeded
    by ``random_state``), the prior of ``meta_module`` fixed; the copy runs in
    evaluation mode on ``device`` (None: the encoder's). ``verbose`` shows a
    progress bar, ``n_jobs`` sets torch's CPU threads.

    References
    ----------
    .. [1] J. Willes et al., "Bayesian Embeddings for Few-Shot Open World
       Recognition", IEEE TPAMI, 2022, sec. 4.

    Examples
    --------
    >>> import numpy as np, torch
    >>> from sklearn_flowr.encoders import MLPEncoder
    >>> module = FLOWRMetaModule(MLPEncoder(8, hidden=(16,), embedding_dim=4))
    >>> X = np.random.default_rng(0).normal(size=(9, 8))
    >>> tuned = fine_tune_last_layer(module.encoder, module, X,
    ...                              [0, 0, 0, 1, 1, 1, 2, 2, 3], steps=3)
    >>> bool(torch.equal(tuned.layers[0].weight, module.encoder.layers[0].weight))
    True
    """
    device = module_device(encoder) if device is None else torch.device(device)
    tuned = copy.deepcopy(encoder).to(device)
    tuned.eval()
    layer = last_linear_layer(tuned)
    flags = {name: p.requires_grad for name, p in tuned.named_parameters()}
    tuned.requires_grad_(False)
    layer.requires_grad_(True)
    dtype = layer.weight.dtype
    X = torch.as_tensor(np.asarray(X_support) if not torch.is_tensor(X_support)
                        else X_support).to(device=device, dtype=dtype)
    _, y_index = np.unique(np.asarray(y_support), return_inverse=True)
    n_classes = int(y_index.max()) + 1 if y_index.size else 0
    head = {
        key: value.detach().to(device=device, dtype=dtype)
        if torch.is_tensor(value) else value
        for key, value in meta_module.episode_params(include_known=False).items()
    }
    with torch_threads(n_jobs):
        # The layer's input is fixed when the layer is the output: computed once.
        inputs = layer_inputs(tuned, layer, X, max(len(X), 1))
        run_layer = (lambda: tuned(X)) if inputs is None else (lambda: layer(inputs))
        optimizer = torch.optim.Adam(layer.parameters(), lr=lr)
        rng = np.random.default_rng(random_state)
        try:
            for _ in tqdm(range(steps), desc="fine-tuning", unit="step",
                          disable=not verbose, leave=False):
                s_rows, s_labels, q_rows, q_labels, n_way = _split_support(
                    y_index, n_classes, rng)
                if q_rows.size == 0:
                    break
                z = run_layer()
                to = {"device": device}
                loss = meta_training_loss(
                    z[torch.as_tensor(s_rows, **to)], torch.as_tensor(s_labels, **to),
                    z[torch.as_tensor(q_rows, **to)], torch.as_tensor(q_labels, **to),
                    n_way, lambda_adapt=0.0, **head)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        finally:
            for name, parameter in tuned.named_parameters():
                parameter.requires_grad_(flags[name])
        return tuned


@torch.no_grad()
def layer_inputs(encoder: nn.Module, layer: nn.Linear, X, batch_size: int):
    """The inputs of ``layer`` for the rows of ``X`` (batches of ``batch_size``,
    evaluation mode, TF32 off; a tensor for a tensor ``X``), or None when
    ``layer`` is not the encoder's output."""
    captured = []
    handle = layer.register_forward_hook(
        lambda module, inputs, output: captured.append((inputs[0], output)))
    device = layer.weight.device
    mode = encoder.training
    encoder.eval()
    try:
        features = []
        with exact_float32():
            for start in range(0, X.shape[0], batch_size):
                rows = torch.as_tensor(X[start:start + batch_size])
                output = encoder(rows.to(device=device, dtype=layer.weight.dtype))
                if len(captured) != 1 or output is not captured[0][1]:
                    return None
                features.append(captured.pop()[0])
    finally:
        handle.remove()
        encoder.train(mode)
    if not features:
        return None
    features = torch.cat(features)
    return features if torch.is_tensor(X) else features.cpu().numpy()
