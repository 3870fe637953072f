"""Data loaders of the training nets: a mini-batch of arrays read with one index.

:func:`_batch_index_loader` is the ``iterator_train`` / ``iterator_valid`` of
:class:`~._nets.SupENet` and :class:`~._nets.SupFCNet`;
:func:`_accelerate_batch_loader` and :func:`_episode_loader` are the forms
that ``accelerator.prepare`` can shard (:mod:`._accelerate`).
"""

from __future__ import annotations

import numpy as np
import torch
from skorch.dataset import Dataset
from torch.utils.data import (
    BatchSampler,
    DataLoader,
    RandomSampler,
    SequentialSampler,
    Subset,
)

from ._device import to_device


class _ArrayBatches(torch.utils.data.Dataset):
    """Mini-batches ``(X[rows], y[rows])`` of a skorch ``Dataset`` over arrays.

    ``index`` maps positions (what the sampler draws) to rows of the arrays,
    through any ``Subset`` of skorch's internal validation split.
    """

    def __init__(self, X, y, index: np.ndarray):
        self.X, self.y, self.index = X, y, index

    def __len__(self) -> int:
        return self.index.shape[0]

    def __getitem__(self, positions):
        rows = self.index[positions]
        return tuple(
            a[to_device(rows, a.device)] if torch.is_tensor(a) else a[rows]
            for a in (self.X, self.y)
        )


def _batch_index_loader(dataset, batch_size=128, *, shuffle: bool = False,
                        drop_last: bool = False, generator=None,
                        **kwargs) -> DataLoader:
    """A ``DataLoader`` that reads each mini-batch of array data with one index.

    torch's ``DataLoader`` calls ``dataset[i]`` once per row and stacks the
    rows: some 10 us of Python a row, a large share of a training step of a
    small encoder on a GPU. When ``dataset`` is skorch's own ``Dataset`` over
    NumPy arrays or tensors (``dataset[i]`` is then just ``(X[i], y[i])``),
    the rows of a batch are taken with one fancy index instead, the batch
    indices coming from a ``BatchSampler`` (automatic batching off). The
    batches are those of ``DataLoader(dataset, batch_size, shuffle=shuffle)``,
    in the same order for the same torch seed. Any other dataset or data
    (a ``Dataset`` subclass, pandas, sparse, dicts, ``y=None``), or a custom
    ``sampler``, ``batch_sampler`` or ``collate_fn``, gets that ordinary
    ``DataLoader``.

    Parameters
    ----------
    dataset : torch.utils.data.Dataset
    batch_size : int or None, default=128
    shuffle, drop_last : bool, default=False
    generator : torch.Generator or None, default=None
        Random source of the shuffling.
    **kwargs
        Other ``DataLoader`` parameters (``num_workers``, ``pin_memory``, ...).

    Returns
    -------
    torch.utils.data.DataLoader
    """
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
    batches = _ArrayBatches(rows.X, rows.y, index)
    order = (RandomSampler(batches, generator=generator) if shuffle
             else SequentialSampler(batches))
    return DataLoader(batches, batch_size=None, generator=generator,
                      sampler=BatchSampler(order, batch_size, drop_last), **kwargs)


class _ArrayRows(_ArrayBatches):
    """``_ArrayBatches`` behind torch's batched fetch (``__getitems__``).

    With automatic batching, torch's ``DataLoader`` hands the whole list of
    a batch's indices to ``__getitems__`` when the dataset has one, so the
    batch is still read with one index, while the loader keeps an ordinary
    ``batch_sampler`` that accelerate knows how to shard. The batch is made
    of tensors, as torch's default collation would make it: accelerate moves
    tensors to its device, not NumPy arrays (and skorch, with ``device=None``,
    leaves them where they are).
    """

    def __getitems__(self, positions):
        return tuple(torch.as_tensor(a) for a in self[positions])


def _as_is(batch):
    """``collate_fn`` of :class:`_ArrayRows`: the batch is already stacked."""
    return batch


def _accelerate_batch_loader(dataset, batch_size=128, *, shuffle: bool = False,
                             drop_last: bool = False, generator=None,
                             **kwargs) -> DataLoader:
    """``_batch_index_loader`` in a form ``accelerator.prepare`` can shard.

    The batches are those of ``DataLoader(dataset, batch_size, shuffle=shuffle)``,
    in the same order for the same torch seed; data that ``_batch_index_loader``
    would not read by index gets the same ordinary ``DataLoader``.
    """
    loader = _batch_index_loader(dataset, batch_size, shuffle=shuffle,
                                 drop_last=drop_last, generator=generator, **kwargs)
    if not isinstance(loader.dataset, _ArrayBatches):
        return loader
    batches = loader.dataset
    return DataLoader(_ArrayRows(batches.X, batches.y, batches.index),
                      batch_size=batch_size, shuffle=shuffle, drop_last=drop_last,
                      generator=generator, collate_fn=_as_is, **kwargs)


def _single_episode(batch):
    """``collate_fn`` of a batch of one episode: that episode, not stacked."""
    (episode,) = batch
    return episode


def _episode_loader(dataset, batch_size=None, **kwargs) -> DataLoader:
    """One whole episode per step, as a batch of one that accelerate can shard.

    ``batch_size=None`` (the :class:`~._nets.EpisodicMetaNet` default) gives the
    episodes of ``DataLoader(dataset, batch_size=None)`` in the same order,
    but through a ``BatchSampler`` of size 1: accelerate shards that (process
    ``p`` of ``P`` takes episodes ``p, p + P, ...``), while it cannot shard a
    loader without one. Other settings get that plain ``DataLoader``.
    """
    if batch_size is None and not {"sampler", "batch_sampler",
                                    "collate_fn"} & kwargs.keys():
        return DataLoader(dataset, batch_size=1, collate_fn=_single_episode,
                          **kwargs)
    return DataLoader(dataset, batch_size=batch_size, **kwargs)
