"""Stages 1 and 2 of FLOWR's training: pre-training and scale matching."""

import warnings

import numpy as np
import torch

from ..encoders import last_linear_layer, make_backbone
from ._class_stats import class_statistics
from ._fine_tune import embed
from ._nets import SupENet, SupFCNet
from ._runner import StageRunner
from ._stages import BATCH_SIZE, SupE

__all__ = ["build_encoder", "embed_rows", "match_noise_scale", "pretrain_encoder"]


def build_encoder(backbone, embedding_dim: int, X) -> torch.nn.Module:
    """The untrained encoder ``backbone`` names, sized for ``X``."""
    return make_backbone(
        backbone, in_channels=X.shape[1] if X.ndim == 4 else 1,
        input_size=X.shape[2:] if X.ndim == 4 else None,
        n_features=X.shape[1] if X.ndim == 2 else None,
        embedding_dim=embedding_dim,
    )


def embed_rows(encoder, X, batch_size: int, desc: str | None = None,
               n_jobs=None) -> np.ndarray:
    """float64 embeddings of ``X``, in batches of ``4 * batch_size`` rows (a
    progress bar named ``desc`` when given)."""
    return embed(encoder, X, batch_size=4 * batch_size, desc=desc,
                 n_jobs=n_jobs).astype(np.float64)


def pretrain_encoder(encoder, X, y_index, n_classes: int, stage, runner: StageRunner, *,
             lr: float = 1e-3, learned_stats: bool = False,
             return_embedding: bool = False):
    """Pre-train ``encoder`` in place (``stage``: SupE, SupFC or None) and read the
    class table ``(encoder, means, variances)`` that starts meta-training (Sup-E's
    own with ``learned_stats``), plus its embedding with ``return_embedding``."""
    batch_size = getattr(stage, "batch_size", BATCH_SIZE)
    trainee, X = runner.trainable(encoder.to(runner.device), X, batch_size)
    if stage is None:
        return _class_table(encoder, trainee, X, y_index, n_classes, batch_size,
                            runner, return_embedding)
    sup_e = isinstance(stage, SupE)
    params = dict(module__encoder=trainee, module__n_classes=n_classes, lr=lr,
                  batch_size=batch_size, device=runner.device,
                  verbose=runner.verbose, random_state=runner.seed,
                  callbacks=runner.progress(), iterator_train__shuffle=True,
                  # A last batch of one row breaks batch norm in training
                  # mode ("expected more than 1 value per channel").
                  iterator_train__drop_last=X.shape[0] % batch_size == 1)
    if sup_e:
        params["criterion__beta"] = stage.beta
    net = runner.fit(runner.net(SupENet if sup_e else SupFCNet, **params),
                     "pretrain", stage.epochs, X, y_index)
    module = net.module_
    if learned_stats:
        means = module.class_means.detach().cpu().double().numpy()
        variances = np.exp(module.class_log_var.detach().cpu().double().numpy())
        learned = (encoder, means, variances.reshape(-1))
        return (*learned, None) if return_embedding else learned
    return _class_table(encoder, trainee, X, y_index, n_classes, batch_size,
                        runner, return_embedding)


def _class_table(encoder, trainee, X, y_index, n_classes, batch_size, runner,
                 return_embedding):
    """:func:`pretrain_encoder`'s result with the class table of the embedding
    (``trainee`` on ``X``: the encoder's, see :meth:`StageRunner.trainable`)."""
    Z = embed_rows(trainee, X, batch_size, n_jobs=runner.n_jobs,
                   desc="embedding the training rows for the class table"
                   if runner.verbose else None)
    table = (encoder, *class_statistics(Z, y_index, n_classes))
    return (*table, Z) if return_embedding else table


def _scale_last_layer(encoder, factor: float) -> None:
    layer = last_linear_layer(encoder)
    with torch.no_grad():
        for tensor in (layer.weight, layer.bias):
            if tensor is not None:
                tensor.mul_(factor)


def match_noise_scale(encoder, X, y_index, means, variances, *, noise: float,
                      batch_size: int, verbose: int = 0, embedding=None,
                      n_jobs=None):
    """Scale the last linear layer so the mean within-class variance is ``noise``;
    the class table rescaled alike and the factor (1.0, with a warning, for an
    encoder not linear in that layer; ``embedding``: the rows' when computed)."""
    Z = embedding
    if Z is None:
        Z = embed_rows(encoder, X, batch_size, n_jobs=n_jobs,
                       desc="embedding to match the noise scale" if verbose
                       else None)
    _, within = class_statistics(Z, y_index, means.shape[0])
    factor = float(np.sqrt(noise / max(within.mean(), 1e-12)))
    _scale_last_layer(encoder, factor)
    # Linearity probe on the same rows, batched alike; embed runs without
    # TF32, so on a GPU as on the CPU the two agree to float32 rounding
    # when the layer is the output.
    n_probe = min(X.shape[0], 4 * batch_size)
    probe = embed_rows(encoder, X[:n_probe], batch_size, n_jobs=n_jobs)
    expected = factor * Z[:n_probe]
    if np.linalg.norm(probe - expected) > 1e-4 * np.linalg.norm(expected):
        # A user module whose last linear layer is not the output (a norm
        # or activation follows): undo and keep the scale it has.
        _scale_last_layer(encoder, 1 / factor)
        warnings.warn(
            "match_episode_noise: the encoder's output is not linear in its "
            "last linear layer; the embedding was not rescaled (its "
            f"within-class variance is {within.mean():.3g}, episode_noise="
            f"{noise}). Pass match_episode_noise=False to silence this, or end "
            "the encoder in its linear layer.", UserWarning, stacklevel=4)
        return means, variances, 1.0
    return means * factor, variances * factor**2, factor
