"""Where and how the training stages run their skorch nets (:class:`StageRunner`)."""

from __future__ import annotations

import dataclasses
import os

import torch
from sklearn.utils.validation import check_random_state

from ._accelerate import accelerated
from ._checkpoints import AtomicCheckpoint, checkpointed_epochs
from ._device import resolve_device

__all__ = ["StageRunner"]


@dataclasses.dataclass
class StageRunner:
    """The shared context of FLOWR's training stages.

    Parameters
    ----------
    device : torch.device
        Where training runs (the accelerator's device when there is one).
    seed : int
        The seed every stage and process shares.
    accelerator : accelerate.Accelerator or None, default=None
    checkpoint_dir : path-like or None, default=None
        One sub-folder per stage (``"pretrain"``, ``"meta"``).
    verbose : int, default=0
        Epoch tables and a tqdm bar per stage when positive.
    history : dict, default={}
        skorch histories, filled in per stage name.

    Examples
    --------
    >>> import numpy as np, torch
    >>> from sklearn_flowr.encoders import MLPEncoder
    >>> from sklearn_flowr.training import SupENet
    >>> runner = StageRunner(torch.device("cpu"), seed=0)
    >>> net = runner.net(SupENet, module__encoder=MLPEncoder(8, embedding_dim=4),
    ...                  module__n_classes=2, verbose=0)
    >>> X = np.random.default_rng(0).normal(size=(20, 8)).astype("f4")
    >>> net = runner.fit(net, "pretrain", 2, X, np.arange(20) % 2)
    >>> len(runner.history["pretrain"])
    2
    """

    device: torch.device
    seed: int
    accelerator: object = None
    checkpoint_dir: str | os.PathLike | None = None
    verbose: int = 0
    history: dict = dataclasses.field(default_factory=dict)

    @classmethod
    def for_fit(cls, *, device, random_state, accelerator=None,
                checkpoint_dir=None, verbose=0) -> StageRunner:
        """The runner of one ``fit``: the device resolved (the accelerator's when given)
        and the seed drawn from ``random_state`` (the main process's, shared).
        """
        seed = int(check_random_state(random_state).randint(2**31 - 1))
        if accelerator is None:
            return cls(resolve_device(device), seed, None, checkpoint_dir, verbose)
        if accelerator.num_processes > 1:
            from accelerate.utils import broadcast_object_list

            seed = broadcast_object_list([seed])[0]
        return cls(torch.device(accelerator.device), seed, accelerator,
                   checkpoint_dir, verbose)

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

    def fit(self, net, stage: str, epochs: int, X, y=None):
        """Fit ``net`` for ``epochs`` in all, resuming from ``checkpoint_dir``; a
        KeyboardInterrupt when training stopped early (skorch ends quietly on
        Ctrl-C).
        """
        done = 0
        if self.checkpoint_dir is not None:
            from skorch.callbacks import LoadInitState

            # Files replaced whole (a kill mid-write leaves the last epoch's),
            # and loaded as weights only: no checkpoint file can run code.
            checkpoint = AtomicCheckpoint(monitor=None, dirname=os.path.join(
                os.fspath(self.checkpoint_dir), stage))
            done = checkpointed_epochs(checkpoint)
            net.set_params(
                callbacks=[*(net.callbacks or []), ("checkpoint", checkpoint),
                           ("resume", LoadInitState(checkpoint))],
                torch_load_kwargs={**(net.torch_load_kwargs or {}),
                                   "weights_only": True})
            epochs = max(epochs - done, 0)
        if epochs == 0:
            net.initialize()
            if done:
                net.load_params(checkpoint=checkpoint)
        else:
            net.set_params(max_epochs=epochs)
            net.fit(X, y)
            # A half-trained stage must not pass for a finished one (the
            # checkpoint keeps the last epoch).
            finished = sum("train_loss" in row for row in net.history)
            expected = epochs + done
            if finished < expected:
                raise KeyboardInterrupt(
                    f"{stage} interrupted after {finished} of {expected} epochs"
                    + ("; fit again with the same checkpoint_dir to resume."
                       if self.checkpoint_dir is not None else "."))
        self.history[stage] = net.history
        return net
