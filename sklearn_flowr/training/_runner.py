"""Where and how the training stages run their skorch nets.

A :class:`StageRunner` holds what every stage shares but none decides: the
device, the seed, an optional accelerate ``Accelerator``, the checkpoint
folder, verbosity, and the histories the stages leave. It builds a stage's net
(through the accelerator when there is one), adds the progress bar, and fits
it for a number of epochs, resuming from ``checkpoint_dir``.
"""

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
        """The runner of one ``fit``: resolve the device, draw the seed.

        Parameters
        ----------
        device : str or torch.device
            ``"auto"``, ``"cpu"``, ``"cuda"``, ... (ignored with an
            accelerator, whose device is used).
        random_state : int, RandomState instance or None
            Draws the seed; with an accelerator over several processes the
            main process's draw is shared, so that they train one model.
        accelerator, checkpoint_dir, verbose
            As the class parameters.

        Returns
        -------
        StageRunner
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
        """Fit ``net`` for ``epochs``, resuming from ``checkpoint_dir``.

        Parameters
        ----------
        net : skorch.NeuralNet
        stage : str
            Name of the stage: its history key and checkpoint sub-folder.
        epochs : int
            Epochs the stage trains in all (those already checkpointed are
            not trained again).
        X, y
            Training data, as ``net.fit`` takes them.

        Returns
        -------
        net : skorch.NeuralNet
            Fitted (or initialised, when no epoch is left to train).

        Raises
        ------
        KeyboardInterrupt
            When training stopped before its last epoch (skorch ends ``fit``
            quietly on Ctrl-C).
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
