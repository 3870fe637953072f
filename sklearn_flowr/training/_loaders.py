"""Data loaders of the training nets: mini-batches of arrays read with one index
(:func:`_batch_index_loader`), and one episode per step; both can be sharded by
``accelerator.prepare``."""

from __future__ import annotations

import numpy as np
import torch
from skorch.dataset import Dataset
from torch.utils.data import DataLoader, Subset

from ._device import to_device


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
    """``DataLoader(dataset, batch_size, shuffle=shuffle)``'s batches (same order
    for the same torch seed), for skorch's ``Dataset`` over arrays read without a
    Python call per row."""
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


# The loader accelerate shards is the same one.
_accelerate_batch_loader = _batch_index_loader


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
