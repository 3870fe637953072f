"""Multi-GPU and multi-node training of the FLOWR nets with Hugging Face accelerate:
skorch's :class:`skorch.hf.AccelerateMixin` in front of each net of :mod:`._nets`."""

import torch
from skorch.hf import AccelerateMixin

from ._nets import EpisodicMetaNet, SupENet, SupFCNet, epoch_source

__all__ = [
    "AcceleratedEpisodicMetaNet",
    "AcceleratedSupENet",
    "AcceleratedSupFCNet",
    "accelerated",
]


def _import_accelerate() -> None:
    """Import ``accelerate``, or raise an ImportError that names the extra."""
    try:
        import accelerate  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            "Multi-GPU and multi-node training needs Hugging Face accelerate; "
            'install it with: pip install "sklearn-flowr[accelerate]"') from exc


def _discard(text):
    """Print-log sink of the processes other than the main one."""


def _forget(accelerator, registry: str, keep) -> None:
    """Drop from an accelerator registry the objects ``keep`` rejects (a fit's
    modules and data are not pinned in memory for ``save_state``)."""
    objects = getattr(accelerator, registry, None)
    if isinstance(objects, list):
        objects[:] = [obj for obj in objects if keep(obj)]


class _AcceleratedNet:
    """What the FLOWR nets add to ``AccelerateMixin`` (before it in the bases)."""

    def initialize(self):
        if self.accelerator is None:
            _import_accelerate()
            raise ValueError(
                f"{type(self).__name__} needs accelerator=accelerate.Accelerator(...)."
            )
        return super().initialize()

    def _initialize_accelerator(self):
        # DDP refuses a module without trainable parameters (the FLOWR
        # criteria): such a criterion is only moved to the device.
        if self._wrapped_with_accelerator:
            return self
        criteria = self._criteria
        plain = []
        for name in criteria:
            criterion = getattr(self, name + "_")
            if isinstance(criterion, torch.nn.Module) and not any(
                    p.requires_grad for p in criterion.parameters()):
                plain.append(name)
                if self.accelerator.device_placement:
                    criterion.to(self.accelerator.device)
        self._criteria = [name for name in criteria if name not in plain]
        try:
            return super()._initialize_accelerator()
        finally:
            self._criteria = criteria

    def _initialize_callbacks(self):
        # PrintLog honours verbose=0 only with ``print``: print on the main
        # process, nowhere else.
        if self.callbacks__print_log__sink == "auto":
            self.callbacks__print_log__sink = (
                print if self.accelerator.is_main_process else _discard)
        return super()._initialize_callbacks()

    def get_iterator(self, dataset, training=False):
        """AccelerateMixin's prepared loader, not kept by the accelerator."""
        iterator = super().get_iterator(dataset, training=training)
        _forget(self.accelerator, "_dataloaders", lambda obj: obj is not iterator)
        return iterator

    def on_train_end(self, net, X=None, y=None, **kwargs):
        """Unwrap, then make the accelerator forget the net's modules."""
        super().on_train_end(net, X=X, y=y, **kwargs)
        if self.unwrap_after_train:
            accelerator = self.accelerator
            modules = {id(accelerator.unwrap_model(getattr(self, name + "_")))
                       for name in self._modules + self._criteria
                       if isinstance(getattr(self, name + "_"), torch.nn.Module)}
            optimizers = {id(getattr(self, name + "_")) for name in self._optimizers}
            _forget(accelerator, "_models",
                    lambda obj: id(accelerator.unwrap_model(obj)) not in modules)
            _forget(accelerator, "_optimizers",
                    lambda obj: id(obj) not in optimizers)
        return self

    def __setstate__(self, state):
        # skorch loads a device=None net onto the CPU and sets device="cpu",
        # which the accelerator's placement refuses: load onto its device.
        accelerator = state.get("accelerator")
        if state.get("device") is not None or not getattr(
                accelerator, "device_placement", False):
            return super().__setstate__(state)
        target = torch.device(accelerator.device)
        super().__setstate__({**state, "device": target})
        if torch.device(self.device) == target:
            self.device = None

    def run_single_epoch(self, iterator, training, prefix, step_fn, **fit_params):
        # The prepared loader gets the episodes' own epoch (accelerate would
        # set its pass count).
        if iterator is not None and hasattr(iterator, "set_epoch"):
            source = epoch_source(getattr(iterator, "dataset", None))
            epoch = getattr(source, "epoch", None)
            if epoch is not None:
                iterator.set_epoch(int(epoch))
        return super().run_single_epoch(iterator, training, prefix, step_fn,
                                        **fit_params)

    def get_loss(self, y_pred, y_true, X=None, training=False):
        """The net's own loss, on the module without DDP's wrapper (the losses
        read parameters off it; their gradients are still synchronised)."""
        wrapped = self.module_
        self.module_ = self.accelerator.unwrap_model(wrapped)
        try:
            return super().get_loss(y_pred, y_true, X=X, training=training)
        finally:
            self.module_ = wrapped

    def train_step_single(self, batch, **fit_params):
        """AccelerateMixin's step, under the net's own ``autocast`` if it has one."""
        dtype = getattr(self, "autocast", None)
        with torch.autocast(self.accelerator.device.type, dtype=dtype,
                            enabled=dtype is not None):
            return super().train_step_single(batch, **fit_params)


class AcceleratedSupENet(_AcceleratedNet, AccelerateMixin, SupENet):
    """Sup-E pre-training through accelerate (``accelerator``, device placement
    left to it); each process trains on its shard of every epoch's mini-batches.

    Examples
    --------
    >>> import numpy as np, pytest
    >>> Accelerator = pytest.importorskip("accelerate").Accelerator
    >>> from sklearn_flowr.encoders import MLPEncoder
    >>> X = np.random.default_rng(0).normal(size=(40, 8)).astype("float32")
    >>> y = np.repeat(np.arange(4), 10)
    >>> net = AcceleratedSupENet(
    ...     module__encoder=MLPEncoder(8, hidden=(16,), embedding_dim=4),
    ...     module__n_classes=4, max_epochs=2, verbose=0, random_state=0,
    ...     accelerator=Accelerator(cpu=True)).fit(X, y)
    >>> net.predict_proba(X).shape
    (40, 4)
    """


class AcceleratedSupFCNet(_AcceleratedNet, AccelerateMixin, SupFCNet):
    """Sup-FC pre-training through accelerate, as :class:`AcceleratedSupENet`.

    Examples
    --------
    >>> import pytest
    >>> _ = pytest.importorskip("accelerate")
    >>> from sklearn_flowr.training import SupFCNet, accelerated
    >>> accelerated(SupFCNet) is AcceleratedSupFCNet
    True
    """


class AcceleratedEpisodicMetaNet(_AcceleratedNet, AccelerateMixin, EpisodicMetaNet):
    """Meta-training through accelerate: process ``p`` of ``P`` trains on
    episodes ``p, p + P, ...`` of the epoch's draw, the same episodes as one process.

    Examples
    --------
    >>> import numpy as np, pytest
    >>> Accelerator = pytest.importorskip("accelerate").Accelerator
    >>> from sklearn_flowr.encoders import MLPEncoder
    >>> from sklearn_flowr.training import EpisodeDataset
    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat(np.arange(6), 20)
    >>> X = (rng.normal(size=(6, 8))[y] + rng.normal(size=(120, 8))).astype("f4")
    >>> episodes = EpisodeDataset(X, y, n_way=3, n_unknown=2, n_episodes=5)
    >>> net = AcceleratedEpisodicMetaNet(
    ...     module__encoder=MLPEncoder(8, hidden=(16,), embedding_dim=4),
    ...     max_epochs=2, verbose=0, random_state=0,
    ...     accelerator=Accelerator(cpu=True)).fit(episodes)
    >>> len(net.history), episodes.epoch  # the second epoch drew new episodes
    (2, 1)
    """


_ACCELERATED = {
    SupENet: AcceleratedSupENet,
    SupFCNet: AcceleratedSupFCNet,
    EpisodicMetaNet: AcceleratedEpisodicMetaNet,
}


def accelerated(net_class):
    """The accelerate-trained class of ``SupENet``, ``SupFCNet`` or
    ``EpisodicMetaNet`` (an accelerated class as it is); TypeError for another
    class, ImportError without accelerate.

    Examples
    --------
    >>> import pytest
    >>> _ = pytest.importorskip("accelerate")
    >>> from sklearn_flowr.training import SupENet
    >>> accelerated(SupENet).__name__
    'AcceleratedSupENet'
    >>> accelerated(dict)
    Traceback (most recent call last):
    ...
    TypeError: accelerated() takes SupENet, SupFCNet or EpisodicMetaNet; got dict.
    """
    if net_class in _ACCELERATED.values():
        result = net_class
    else:
        try:
            result = _ACCELERATED[net_class]
        except (KeyError, TypeError):
            name = getattr(net_class, "__name__", repr(net_class))
            raise TypeError(
                "accelerated() takes SupENet, SupFCNet or EpisodicMetaNet; got "
                f"{name}."
            ) from None
    _import_accelerate()
    return result
