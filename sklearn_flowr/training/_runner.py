"""Where and how the training stages run their skorch nets (:class:`StageRunner`)."""

from __future__ import annotations

import dataclasses
import os

import torch
from sklearn.utils.validation import check_random_state

from ..encoders import last_linear_layer
from ._accelerate import accelerated
from ._checkpoints import attach_checkpoint, wrong_weights
from ._device import resolve_device, torch_threads
from ._fine_tune import layer_inputs

__all__ = ["StageRunner", "frozen_last_layer"]


def frozen_last_layer(encoder: torch.nn.Module):
    """The last linear layer of an encoder that trains only that layer (every
    other parameter frozen, every other layer in evaluation mode in training),
    else None."""
    try:
        layer = last_linear_layer(encoder)
    except (TypeError, ValueError):
        return None
    own = {id(module) for module in layer.modules()}
    others = [module for module in encoder.modules() if id(module) not in own]
    mode = encoder.training
    encoder.train()
    try:
        frozen = not any(parameter.requires_grad for module in others
                         for parameter in module.parameters(recurse=False)) and \
            not any(module.training for module in others
                    if not list(module.children()))
    finally:
        encoder.train(mode)
    return layer if frozen else None


@dataclasses.dataclass
class StageRunner:
    """What FLOWR's training stages share: device, seed (``seeded``: from the
    user's ``random_state``), accelerator, checkpoints, threads and histories."""

    device: torch.device
    seed: int
    accelerator: object = None
    checkpoint_dir: str | os.PathLike | None = None
    verbose: int = 0
    history: dict = dataclasses.field(default_factory=dict)
    seeded: bool = True
    n_jobs: int | None = None
    # Set once a stage trained epochs in this fit: later stages start over.
    trained: bool = False
    # (X, layer, the layer's inputs for X) of StageRunner.trainable.
    _features: tuple = dataclasses.field(default=(None, None, None), init=False,
                                         repr=False)

    @classmethod
    def for_fit(cls, *, device, random_state, accelerator=None,
                checkpoint_dir=None, verbose=0, n_jobs=None) -> StageRunner:
        """The runner of one ``fit``: the device resolved (the accelerator's when
        given), the seed drawn from ``random_state`` (the main process's, shared)."""
        seed = int(check_random_state(random_state).randint(2**31 - 1))
        settings = dict(checkpoint_dir=checkpoint_dir, verbose=verbose,
                        seeded=random_state is not None, n_jobs=n_jobs)
        if accelerator is None:
            return cls(resolve_device(device), seed, **settings)
        if accelerator.num_processes > 1:
            from accelerate.utils import broadcast_object_list

            seed = broadcast_object_list([seed])[0]
        return cls(torch.device(accelerator.device), seed, accelerator, **settings)

    def net(self, net_class, **params):
        """A training net of ``net_class``, through the accelerator if any."""
        if self.accelerator is None:
            return net_class(**params)
        # The accelerator places modules and shards the (host) data.
        return accelerated(net_class)(**{**params, "device": None},
                                      accelerator=self.accelerator)

    def progress(self, batches_per_epoch="auto") -> list:
        """skorch callbacks of a training stage: a tqdm bar when verbose."""
        if not self.verbose or not getattr(self.accelerator, "is_main_process",
                                           True):
            return []
        from skorch.callbacks import ProgressBar

        return [("progress", ProgressBar(batches_per_epoch=batches_per_epoch))]

    def trainable(self, encoder, X, batch_size: int):
        """``(encoder, X)`` as a stage trains them: for a frozen backbone, its last
        linear layer and that layer's inputs (computed once, kept for the fit)."""
        layer = frozen_last_layer(encoder)
        if layer is None:
            return encoder, X
        cached_X, cached_layer, features = self._features
        if cached_X is not X or cached_layer is not layer:
            with torch_threads(self.n_jobs):
                features = layer_inputs(encoder, layer, X, 4 * batch_size)
            self._features = (X, layer, features)
        return (encoder, X) if features is None else (layer, features)

    def fit(self, net, stage: str, epochs: int, X, y=None):
        """Fit ``net`` for ``epochs`` in all, resuming from ``checkpoint_dir``; a
        KeyboardInterrupt when training stopped early (skorch ends quietly)."""
        done = 0
        if self.checkpoint_dir is not None:
            # An earlier stage that trained on makes this one's files stale.
            checkpoint, done = attach_checkpoint(
                net, self.checkpoint_dir, stage, epochs,
                self.seed if self.seeded else None, start_over=self.trained)
            epochs = max(epochs - done, 0)
        with torch_threads(self.n_jobs):
            try:
                if epochs == 0:
                    net.initialize()
                    if done:
                        net.load_params(checkpoint=checkpoint)
                else:
                    net.set_params(max_epochs=epochs)
                    net.fit(X, y)
                    self.trained = True
            except RuntimeError as exc:  # weights of other shapes
                error = done and wrong_weights(exc, checkpoint)
                if error:
                    raise error from exc
                raise
        # A half-trained stage must not pass for a finished one (the
        # checkpoint keeps the last epoch).
        finished = sum("train_loss" in row for row in net.history)
        if epochs and finished < epochs + done:
            raise KeyboardInterrupt(
                f"{stage} interrupted after {finished} of {epochs + done} epochs"
                + ("; fit again with the same checkpoint_dir to resume."
                   if self.checkpoint_dir is not None else "."))
        self.history[stage] = net.history
        return net

