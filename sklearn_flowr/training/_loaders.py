"""Data loaders of the training nets: a mini-batch of arrays read with one index
(:func:`_batch_index_loader`), and the forms ``accelerator.prepare`` can shard.
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

    For skorch's own ``Dataset`` over arrays the batches are those of
    ``DataLoader(dataset, batch_size, shuffle=shuffle)`` (same order for the same
    torch seed) without a Python call per row; any other dataset or loader option
    gets that ordinary ``DataLoader``.
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
    """``_ArrayBatches`` behind torch's batched fetch (``__getitems__``): a loader
    with an ordinary ``batch_sampler``, which accelerate can shard, reading a
    batch with one index (as tensors).
    """

    def __getitems__(self, positions):
        return tuple(torch.as_tensor(a) for a in self[positions])


def _as_is(batch):
    """``collate_fn`` of :class:`_ArrayRows`: the batch is already stacked."""
    return batch


def _accelerate_batch_loader(dataset, batch_size=128, *, shuffle: bool = False,
                             drop_last: bool = False, generator=None,
                             **kwargs) -> DataLoader:
    """``_batch_index_loader`` in a form ``accelerator.prepare`` can shard."""
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
    """One whole episode per step, as a batch of one that accelerate can shard
    (process ``p`` of ``P`` takes episodes ``p, p + P, ...``).
    """
    if batch_size is None and not {"sampler", "batch_sampler",
                                    "collate_fn"} & kwargs.keys():
        return DataLoader(dataset, batch_size=1, collate_fn=_single_episode,
                          **kwargs)
    return DataLoader(dataset, batch_size=batch_size, **kwargs)
