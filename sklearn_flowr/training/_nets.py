"""skorch nets for Sup-E / Sup-FC pre-training and FLOWR meta-training, changed
only through skorch's hooks (constructor defaults, ``initialize_module``,
``on_epoch_begin``, ``get_loss``), and their data loaders: mini-batches of arrays
read with one index, one episode per step (both shardable by accelerate)."""

import re
import sys
from collections.abc import Mapping

import numpy as np
import torch
from skorch import NeuralNet, NeuralNetClassifier
from skorch.callbacks import Callback, PrintLog
from skorch.dataset import Dataset
from skorch.utils import to_tensor
from torch.utils.data import DataLoader, Subset

from ._device import to_device
from ._losses import FLOWRMetaLoss, SupELoss, on_host
from ._modules import FLOWRMetaModule, SupEModule, SupFCModule

__all__ = ["EpisodicMetaNet", "StopOnNonFiniteLoss", "SupENet", "SupFCNet"]


class _ArrayRows(torch.utils.data.Dataset):
    """Rows of a skorch ``Dataset`` over arrays, a batch read with one index
    (torch's batched ``__getitems__``); ``index`` maps positions to rows."""

    def __init__(self, X, y, index: np.ndarray):
        self.X, self.y, self.index = X, y, index

    def __len__(self) -> int:
        return self.index.shape[0]

    def __getitems__(self, positions):
        rows = self.index[positions]
        return tuple(
            a[to_device(rows, a.device)] if torch.is_tensor(a)
            else torch.as_tensor(a[rows]) for a in (self.X, self.y)
        )


def _as_is(batch):
    """``collate_fn`` of :class:`_ArrayRows`: the batch is already stacked."""
    return batch


def _batch_index_loader(dataset, batch_size=128, *, shuffle: bool = False,
                        drop_last: bool = False, generator=None,
                        **kwargs) -> DataLoader:
    """``DataLoader``'s batches (same order for the same seed), a skorch
    ``Dataset`` over arrays read with one index per batch."""
    subsets, rows = [], dataset
    while isinstance(rows, Subset):  # skorch's internal validation split
        subsets.append(rows)
        rows = rows.dataset
    arrays = (np.ndarray, torch.Tensor)
    if (
        type(rows) is not Dataset  # a subclass may transform row by row
        or not isinstance(rows.X, arrays)
        or not isinstance(rows.y, arrays)
        or batch_size is None
        or {"sampler", "batch_sampler", "collate_fn"} & kwargs.keys()
    ):
        return DataLoader(dataset, batch_size=batch_size, shuffle=shuffle,
                          drop_last=drop_last, generator=generator, **kwargs)
    index = np.arange(len(dataset))
    for subset in subsets:
        index = np.asarray(subset.indices)[index]
    return DataLoader(_ArrayRows(rows.X, rows.y, index), batch_size=batch_size,
                      shuffle=shuffle, drop_last=drop_last, generator=generator,
                      collate_fn=_as_is, **kwargs)



def _single_episode(batch):
    """``collate_fn`` of a batch of one episode: that episode, not stacked."""
    (episode,) = batch
    return episode


def _episode_loader(dataset, batch_size=None, **kwargs) -> DataLoader:
    """One whole episode per step, as a batch of one that accelerate can shard
    (process ``p`` of ``P`` takes episodes ``p, p + P, ...``)."""
    if batch_size is None and not {"sampler", "batch_sampler",
                                    "collate_fn"} & kwargs.keys():
        return DataLoader(dataset, batch_size=1, collate_fn=_single_episode,
                          **kwargs)
    return DataLoader(dataset, batch_size=batch_size, **kwargs)


def epoch_source(dataset):
    """The dataset (or one it wraps) that has ``set_epoch``, or None."""
    while dataset is not None and not hasattr(dataset, "set_epoch"):
        dataset = getattr(dataset, "dataset", None)
    return dataset


def _softmax(logits: torch.Tensor) -> torch.Tensor:
    """Closed-world class probabilities from Sup-E logits (``predict_proba``)."""
    return torch.softmax(logits, dim=-1)


_ANSI_COLOUR = re.compile(r"\x1b\[[0-9;]*m")


class _PlainPrintLog(PrintLog):
    """skorch's epoch table, coloured only on a terminal."""

    def format_row(self, row, key, color):
        text = super().format_row(row, key, color)
        if isinstance(text, str) and not sys.stdout.isatty():
            text = _ANSI_COLOUR.sub("", text)
        return text


class StopOnNonFiniteLoss(Callback):
    """Stop at the first step whose loss is not finite, naming the ``stage`` and
    the FLOWRClassifier parameter ``lr_param`` of the rate to lower."""

    def __init__(self, stage="training", lr_param=None):
        self.stage = stage
        self.lr_param = lr_param

    def on_batch_end(self, net, batch=None, training=None, **kwargs):
        key = "train_loss" if training else "valid_loss"
        value = net.history[-1]["batches"][-1].get(key)
        if value is None or np.isfinite(value):
            return
        where = f" (FLOWRClassifier: {self.lr_param})" if self.lr_param else ""
        raise FloatingPointError(
            f"{self.stage} stopped: the {key.replace('_', ' ')} became {value} at "
            f"epoch {len(net.history)}, step {len(net.history[-1]['batches'])}; "
            f"the optimisation diverged. Lower the learning rate lr={net.lr:g}"
            f"{where}, or rescale the inputs.")


class _FLOWRNet:
    """What the FLOWR nets add to skorch's: :class:`_PlainPrintLog`,
    :class:`StopOnNonFiniteLoss`, and torch seeded from ``random_state`` before
    the module is built and at each epoch (a resumed fit trains alike)."""

    _stage = ("training", None)
    _loader = None  # the default iterator_train and iterator_valid

    def __init__(self, *args, random_state: int | None = None,
                 optimizer=torch.optim.Adam, lr: float = 1e-3, train_split=None,
                 **kwargs):
        kwargs.setdefault("iterator_train", self._loader)
        kwargs.setdefault("iterator_valid", self._loader)
        super().__init__(*args, optimizer=optimizer, lr=lr, train_split=train_split,
                         **kwargs)
        self.random_state = random_state

    def get_default_callbacks(self):
        callbacks = [(name, _PlainPrintLog() if name == "print_log" else callback)
                     for name, callback in super().get_default_callbacks()]
        return [("finite_loss", StopOnNonFiniteLoss(*self._stage)), *callbacks]

    def initialize_module(self):
        if self.random_state is not None:
            torch.manual_seed(int(self.random_state))
        return super().initialize_module()

    def on_epoch_begin(self, net, dataset_train=None, dataset_valid=None,
                       **kwargs):
        super().on_epoch_begin(net, dataset_train=dataset_train,
                               dataset_valid=dataset_valid, **kwargs)
        if self.random_state is not None:
            epoch = len(self.history) - 1
            seed = np.random.SeedSequence([int(self.random_state), epoch])
            torch.manual_seed(int(seed.generate_state(1)[0]))


class _PretrainingNet(_FLOWRNet, NeuralNetClassifier):
    """The data loader :class:`SupENet` and :class:`SupFCNet` share, shuffled."""

    _loader = staticmethod(_batch_index_loader)

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("iterator_train__shuffle", True)
        super().__init__(*args, **kwargs)


class SupENet(_PretrainingNet):
    """Sup-E pre-training of an encoder on ``(X, y)`` mini-batches.

    A :class:`skorch.NeuralNetClassifier` whose module (default
    :class:`SupEModule`) needs ``module__encoder`` and ``module__n_classes``; ``y``
    holds class indices, ``criterion__beta`` and ``criterion__l2`` set
    :class:`SupELoss`, and ``random_state`` seeds the module's initialisation and
    each epoch. ``predict_proba`` is the closed-world softmax of the Sup-E logits.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_flowr.encoders import MLPEncoder
    >>> X = np.random.default_rng(0).normal(size=(40, 8)).astype("float32")
    >>> y = np.repeat(np.arange(4), 10)
    >>> net = SupENet(module__encoder=MLPEncoder(8, hidden=(16,), embedding_dim=4),
    ...               module__n_classes=4, max_epochs=2, verbose=0,
    ...               random_state=0).fit(X, y)
    >>> net.predict_proba(X).shape
    (40, 4)
    """

    _stage = ("Sup-E pre-training", "pretrain__lr")

    def __init__(self, module=SupEModule, *args, criterion=SupELoss,
                 predict_nonlinearity=_softmax, **kwargs):
        super().__init__(module, *args, criterion=criterion,
                         predict_nonlinearity=predict_nonlinearity, **kwargs)

    def get_loss(self, y_pred, y_true, X=None, training=False):
        """Sup-E loss: the penalty needs the module's class parameters."""
        y_true = to_tensor(y_true, device=self.device)
        return self.criterion_(y_pred, y_true, self.module_.class_means,
                               self.module_.class_log_var)


class SupFCNet(_PretrainingNet):
    """Sup-FC pre-training (encoder + linear layer, cross-entropy); as
    :class:`SupENet` with :class:`SupFCModule` and ``torch.nn.CrossEntropyLoss``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_flowr.encoders import MLPEncoder
    >>> X, y = np.eye(8, dtype="float32"), np.arange(8) % 2
    >>> net = SupFCNet(module__encoder=MLPEncoder(8, embedding_dim=4),
    ...                module__n_classes=2, max_epochs=1, verbose=0).fit(X, y)
    >>> net.predict(X).shape
    (8,)
    """

    _stage = ("Sup-FC pre-training", "pretrain__lr")

    def __init__(self, module=SupFCModule, *args,
                 criterion=torch.nn.CrossEntropyLoss, **kwargs):
        super().__init__(module, *args, criterion=criterion, **kwargs)


class EpisodicMetaNet(_FLOWRNet, NeuralNet):
    """FLOWR meta-training over episodes, small or large context.

    A :class:`skorch.NeuralNet` whose ``fit`` takes an :class:`EpisodeDataset`
    (one episode per step); the module (default :class:`FLOWRMetaModule`) learns
    the encoder, the prior and, in the large context, the known-known table.
    ``criterion__lambda_adapt`` weighs the adaptation loss, ``random_state``
    seeds the module and each epoch, ``autocast`` runs the encoder under
    ``torch.autocast`` with that dtype (the loss stays float32). Embed arrays
    with :func:`embed` on ``net.module_.encoder``.

    Examples
    --------
    >>> import numpy as np, torch
    >>> from sklearn_flowr.encoders import MLPEncoder
    >>> from sklearn_flowr.training import EpisodeDataset
    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat(np.arange(6), 20)
    >>> X = (rng.normal(size=(6, 8))[y] + rng.normal(size=(120, 8))).astype("f4")
    >>> episodes = EpisodeDataset(X, y, n_way=3, n_unknown=2, n_episodes=5)
    >>> net = EpisodicMetaNet(
    ...     module__encoder=MLPEncoder(8, hidden=(16,), embedding_dim=4),
    ...     max_epochs=2, verbose=0, random_state=0).fit(episodes)
    >>> len(net.history)
    2
    >>> episode, labels = episodes[0]
    >>> net.infer(episode).shape == (len(labels), 4)  # one embedding a row
    True
    >>> step = net.set_params(autocast=torch.bfloat16).train_step_single(episodes[0])
    >>> step["loss"].dtype  # the loss stays float32
    torch.float32
    """

    _stage = ("Meta-training", "meta__encoder_lr")
    _loader = staticmethod(_episode_loader)

    def __init__(self, module=FLOWRMetaModule, *args, criterion=FLOWRMetaLoss,
                 batch_size=None, autocast: torch.dtype | None = None, **kwargs):
        super().__init__(module, criterion, *args, batch_size=batch_size, **kwargs)
        self.autocast = autocast

    def train_step_single(self, batch, **fit_params):
        """One episode; the encoder runs under ``autocast`` when it is set."""
        # skorch's device=None leaves the module where it is: the CPU here.
        with torch.autocast(torch.device(self.device or "cpu").type,
                            dtype=self.autocast,
                            enabled=self.autocast is not None):
            return super().train_step_single(batch, **fit_params)

    def infer(self, x, **fit_params):
        """Embed the episode's rows; its ``is_query`` mask stays on the host."""
        if isinstance(x, Mapping):
            x = {"x": x["x"]}
        return super().infer(x, **fit_params)

    def get_loss(self, y_pred, y_true, X=None, training=False):
        """The episode's FLOWR loss, in float32; labels stay on the host."""
        y_true = on_host(y_true)
        is_query = on_host(X["is_query"], torch.bool)
        module = self.module_
        n_known = module.n_known
        y_support = y_true[~is_query]
        # Support classes are numbered contiguously after the known classes.
        n_way = int(y_support.max()) + 1 - n_known if y_support.numel() else 0
        device = y_pred.device
        support = to_device(torch.nonzero(~is_query).reshape(-1), device)
        query = to_device(torch.nonzero(is_query).reshape(-1), device)
        with torch.autocast(device.type, enabled=False):
            z = y_pred.float()
            return self.criterion_(z[support], y_support, z[query],
                                   y_true[is_query], n_way, **module.episode_params())

    def on_epoch_begin(self, net, dataset_train=None, dataset_valid=None,
                       **kwargs):
        """Start a new history row and draw this epoch's training episodes."""
        super().on_epoch_begin(net, dataset_train=dataset_train,
                               dataset_valid=dataset_valid, **kwargs)
        # Keyed on the history length, so a run resumed from a checkpoint
        # (LoadInitState restores the history) draws the episodes it would
        # have drawn without the interruption.
        dataset = epoch_source(dataset_train)
        if dataset is not None:
            dataset.set_epoch(len(self.history) - 1)
