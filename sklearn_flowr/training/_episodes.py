"""Episodes for FLOWR meta-training, as a torch ``Dataset`` skorch can iterate,
drawn by :mod:`sklearn_flowr.protocol.sampling` as the test tasks are."""

from numbers import Integral

import numpy as np
import torch
from sklearn.utils import check_consistent_length
from torch.utils.data import Dataset

from ..protocol.sampling import (
    check_class_sizes,
    check_n_classes,
    draw_large_context,
    draw_small_context,
    rows_by_class,
)
from ._device import to_device

__all__ = ["EpisodeDataset"]


class EpisodeDataset(Dataset):
    """Seeded sampler of small- or large-context open-world episodes.

    An episode is one sample, ``({"x": rows, "is_query": mask}, labels)``: the
    support rows first, labels the loss's columns (iterate with
    ``batch_size=None``).

    Parameters
    ----------
    X : array-like or tensor of shape (n_samples, ...)
        Images or feature vectors. A tensor stays where it is (e.g. on the
        GPU) and each episode's rows are gathered there.
    y : array-like of shape (n_samples,)
        Class labels.
    setting : {"small", "large"}, default="small"
        ``"small"``: ``n_way`` support classes with a random number of shots
        each, and a query over them plus ``n_unknown`` unknown-unknown classes.
        ``"large"``: no support; a query over ``n_way`` classes drawn from
        ``known_classes`` (``None``: all of them) plus ``n_unknown`` classes
        drawn from the other labels of ``y``.
    n_way : int or None, default=5
        Support classes (small) or known-known classes queried (large).
    shots : tuple of (int, int), default=(1, 10)
        Inclusive range of the uniform number of shots per support class.
    n_query : int, default=5
        Query rows per class (support and unknown-unknown alike).
    n_unknown : int, default=2
        Unknown-unknown classes per episode.
    known_classes : array-like, default=None
        Large context: the known-known labels, in the order of the head's
        known-class table (row ``i`` gets column ``i``). ``None``: all labels
        of ``y`` (then ``n_unknown`` must be 0).
    n_episodes : int, default=100
        Episodes per epoch (the dataset's length).
    random_state : int, default=0
        Seed; episode ``i`` of epoch ``e`` depends on ``(random_state, e, i)``
        only (runs, resumed runs and ``DataLoader`` workers agree).
    dtype : torch.dtype, default=torch.float32

    Examples
    --------
    >>> import numpy as np
    >>> X = np.arange(300, dtype=float).reshape(100, 3)
    >>> y = np.repeat(np.arange(5), 20)
    >>> episodes = EpisodeDataset(X, y, n_way=3, n_unknown=2, n_episodes=4)
    >>> X_ep, y_ep = episodes[0]
    >>> X_ep["x"].shape[0] == X_ep["is_query"].shape[0] == y_ep.shape[0]
    True
    >>> int(y_ep[X_ep["is_query"]].max()) >= 3  # unknown-unknowns are novel
    True
    >>> rows, labels, n_support = episodes.sample_indices(0)
    >>> rows.shape[0] - n_support  # 5 query rows of each of 3 + 2 classes
    25
    >>> episodes.set_epoch(1)  # skorch's nets call it at each epoch
    """

    def __init__(self, X, y, *, setting: str = "small", n_way: int | None = 5,
                 shots: tuple[int, int] = (1, 10), n_query: int = 5,
                 n_unknown: int = 2, known_classes=None, n_episodes: int = 100,
                 random_state: int = 0, dtype: torch.dtype = torch.float32):
        y = np.asarray(y)
        check_consistent_length(X, y)
        if setting not in ("small", "large"):
            raise ValueError(f"setting must be 'small' or 'large'; got {setting!r}.")
        low, high = (int(s) for s in shots)
        if not 1 <= low <= high:
            raise ValueError(f"shots must be (low, high) with 1 <= low <= high; "
                             f"got {shots!r}.")
        for name, value, minimum in [("n_query", n_query, 1),
                                     ("n_unknown", n_unknown, 0),
                                     ("n_episodes", n_episodes, 1)]:
            if not isinstance(value, Integral) or value < minimum:
                raise ValueError(f"{name} must be an int >= {minimum}; got {value!r}.")
        # Fancy indexing picks an episode's rows from arrays and tensors alike.
        self.X = X if isinstance(X, (np.ndarray, torch.Tensor)) else np.asarray(X)
        self.y = y
        self.setting = setting
        self.shots = (low, high)
        self.n_query = int(n_query)
        self.n_unknown = int(n_unknown)
        self.n_episodes = int(n_episodes)
        self.random_state = int(random_state)
        self.dtype = dtype
        self.epoch = 0
        labels, class_rows = rows_by_class(y)
        self._class_rows = class_rows
        if setting == "small":
            self.known_classes = None
            self.n_way = 5 if n_way is None else int(n_way)
            check_n_classes(len(labels), self.n_way + self.n_unknown,
                            "n_way + n_unknown", "An episode")
            check_class_sizes(labels, class_rows, high + self.n_query,
                              f"{high} shots + {self.n_query} queries")
        else:
            known = labels if known_classes is None else np.asarray(known_classes)
            missing = np.setdiff1d(known, labels)
            if missing.size:
                raise ValueError(f"known_classes {missing.tolist()} have no rows in y.")
            self.known_classes = known
            position = {label: i for i, label in enumerate(labels.tolist())}
            self._known_rows = [class_rows[position[label]]
                                for label in known.tolist()]
            unknown = np.flatnonzero(~np.isin(labels, known))
            self._unknown_rows = [class_rows[i] for i in unknown.tolist()]
            self.n_way = len(known) if n_way is None else int(n_way)
            check_n_classes(len(known), self.n_way, "n_way known-known",
                            "An episode")
            check_n_classes(len(unknown), self.n_unknown,
                            "n_unknown (labels outside known_classes)",
                            "An episode")
            check_class_sizes(labels, class_rows, self.n_query,
                              f"{self.n_query} queries")

    def __len__(self) -> int:
        return self.n_episodes

    def set_epoch(self, epoch: int) -> None:
        """Draw the episodes of epoch ``epoch`` from now on."""
        self.epoch = int(epoch)

    def sample_indices(self, index: int):
        """Row indices into ``X`` (support first), column labels and the number
        of support rows of episode ``index`` of the current epoch."""
        rng = np.random.default_rng([self.random_state, self.epoch, int(index)])
        if self.setting == "small":
            _, support_rows, query_rows, order = draw_small_context(
                rng, self._class_rows, self.n_way, self.shots, self.n_unknown,
                self.n_query)
            # Support classes are columns 0 .. n_way - 1, unknowns after them.
            query_columns = np.arange(self.n_way + self.n_unknown)
        else:
            known, _, query_rows, order = draw_large_context(
                rng, self._known_rows, self._unknown_rows, self.n_way,
                self.n_unknown, self.n_query)
            support_rows = []
            # Known-known classes keep their table column; unknowns come after.
            query_columns = np.r_[known, len(self.known_classes)
                                  + np.arange(self.n_unknown)]
        support_labels = [np.full(len(rows), column)
                          for column, rows in enumerate(support_rows)]
        query_labels = np.repeat(query_columns, self.n_query)
        query_rows = np.concatenate(query_rows)
        rows = np.concatenate([*support_rows, query_rows[order]]).astype(np.intp)
        labels = np.concatenate([*support_labels, query_labels[order]]).astype(
            np.int64)
        n_support = int(sum(len(r) for r in support_rows))
        return rows, labels, n_support

    def __getitem__(self, index: int):
        rows, labels, n_support = self.sample_indices(index)
        if torch.is_tensor(self.X):
            # A tensor (e.g. resident on the GPU) is indexed where it lives:
            # one small index copy, no image data through the host.
            x = self.X[to_device(rows, self.X.device)].to(self.dtype)
        else:
            x = torch.as_tensor(np.asarray(self.X[rows]), dtype=self.dtype)
        # Masks and labels stay on the host: the loss does its label
        # bookkeeping there without synchronising with the GPU.
        is_query = torch.arange(rows.shape[0]) >= n_support
        return {"x": x, "is_query": is_query}, torch.as_tensor(labels)
