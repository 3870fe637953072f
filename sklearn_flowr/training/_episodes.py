"""Episodes for FLOWR meta-training, as a torch ``Dataset`` skorch can iterate.

An episode is one "sample" of the dataset: ``(X_episode, y_episode)`` with

- ``X_episode = {"x": rows, "is_query": mask}``: the support rows first, then
  the query rows (shuffled), all in one tensor so that the encoder embeds the
  episode in one pass (batch-norm statistics then cover the whole episode);
- ``y_episode``: the column index of each row in the convention of
  :mod:`._losses` -- known-known classes ``0 .. n_known - 1``, support classes
  next, and one distinct value per unknown-unknown class after them (every such
  value means *novel*).

Every leaf has the same length (support plus query), which skorch's batch
bookkeeping requires; iterate with ``batch_size=None`` so the ``DataLoader``
does not stack episodes.
"""

from __future__ import annotations

from numbers import Integral

import numpy as np
import torch
from torch.utils.data import Dataset

__all__ = ["EpisodeDataset"]


class EpisodeDataset(Dataset):
    """Seeded sampler of small- or large-context open-world episodes.

    Parameters
    ----------
    X : array-like of shape (n_samples, ...)
        Images or feature vectors.
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
        known-class table (row ``i`` gets column ``i``); unknown-unknown
        classes are drawn from the other labels of ``y``. ``None`` takes all
        labels of ``y`` (then ``n_unknown`` must be 0).
    n_episodes : int, default=100
        Episodes per epoch (the dataset's length).
    random_state : int, default=0
        Seed. Episode ``i`` of epoch ``e`` depends on ``(random_state, e, i)``
        only, so runs, resumed runs and ``DataLoader`` workers all agree.
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
    """

    def __init__(self, X, y, *, setting: str = "small", n_way: int | None = 5,
                 shots: tuple[int, int] = (1, 10), n_query: int = 5,
                 n_unknown: int = 2, known_classes=None, n_episodes: int = 100,
                 random_state: int = 0, dtype: torch.dtype = torch.float32):
        y = np.asarray(y)
        if len(X) != y.shape[0]:
            raise ValueError(
                f"X and y have different lengths: {len(X)} and {y.shape[0]}."
            )
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
        labels = np.unique(y)
        self._rows = {label: np.flatnonzero(y == label) for label in labels.tolist()}
        if setting == "small":
            self.known_classes = None
            self._pool = labels
            self._unknown_pool = labels
            self.n_way = 5 if n_way is None else int(n_way)
            self._check_classes(labels, self.n_way + self.n_unknown,
                                "n_way + n_unknown")
            self._check_sizes(labels, high + self.n_query,
                              f"{high} shots + {self.n_query} queries")
        else:
            known = labels if known_classes is None else np.asarray(known_classes)
            missing = np.setdiff1d(known, labels)
            if missing.size:
                raise ValueError(f"known_classes {missing.tolist()} have no rows in y.")
            self.known_classes = known
            self._pool = np.arange(len(known))
            self._unknown_pool = np.setdiff1d(labels, known)
            self.n_way = len(known) if n_way is None else int(n_way)
            self._check_classes(known, self.n_way, "n_way known-known")
            self._check_classes(self._unknown_pool, self.n_unknown,
                                "n_unknown (labels outside known_classes)")
            self._check_sizes(labels, self.n_query, f"{self.n_query} queries")

    # ------------------------------------------------------------- validation
    @staticmethod
    def _check_classes(labels, needed, what):
        if len(labels) < needed:
            raise ValueError(
                f"An episode needs {needed} classes ({what}) but only "
                f"{len(labels)} are available."
            )

    def _check_sizes(self, labels, needed, what):
        sizes = {label: len(self._rows[label]) for label in labels.tolist()}
        small = {label: n for label, n in sizes.items() if n < needed}
        if small:
            raise ValueError(
                f"Every class needs at least {needed} examples ({what}); classes "
                f"with fewer (label: count): {small}."
            )

    # --------------------------------------------------------------- sampling
    def __len__(self) -> int:
        return self.n_episodes

    def set_epoch(self, epoch: int) -> None:
        """Draw the episodes of epoch ``epoch`` from now on."""
        self.epoch = int(epoch)

    def sample_indices(self, index: int):
        """Row indices and episode labels of episode ``index``, in NumPy.

        Returns
        -------
        rows : ndarray of shape (n_rows,)
            Indices into ``X``; support rows first.
        labels : ndarray of shape (n_rows,)
            Column indices as described in the module docstring.
        n_support : int
        """
        rng = np.random.default_rng([self.random_state, self.epoch, int(index)])
        support_rows, support_labels, query_rows, query_labels = [], [], [], []
        if self.setting == "small":
            chosen = rng.choice(self._pool, self.n_way + self.n_unknown, replace=False)
            known, unknown = chosen[: self.n_way], chosen[self.n_way:]
            low, high = self.shots
            for column, label in enumerate(known.tolist()):
                n_shots = int(rng.integers(low, high + 1))
                rows = rng.choice(self._rows[label], n_shots + self.n_query,
                                  replace=False)
                support_rows.append(rows[:n_shots])
                support_labels.append(np.full(n_shots, column))
                query_rows.append(rows[n_shots:])
                query_labels.append(np.full(self.n_query, column))
            first_novel = self.n_way
        else:
            columns = rng.choice(self._pool, self.n_way, replace=False)
            for column in np.sort(columns).tolist():
                label = self.known_classes[column].item()
                query_rows.append(rng.choice(self._rows[label], self.n_query,
                                             replace=False))
                query_labels.append(np.full(self.n_query, column))
            unknown = rng.choice(self._unknown_pool, self.n_unknown, replace=False)
            first_novel = len(self.known_classes)
        for offset, label in enumerate(unknown.tolist()):
            query_rows.append(rng.choice(self._rows[label], self.n_query,
                                         replace=False))
            query_labels.append(np.full(self.n_query, first_novel + offset))
        query_rows = np.concatenate(query_rows)
        order = rng.permutation(query_rows.shape[0])
        rows = np.concatenate([*support_rows, query_rows[order]]).astype(np.intp)
        labels = np.concatenate(
            [*support_labels, np.concatenate(query_labels)[order]]
        ).astype(np.int64)
        n_support = int(sum(len(r) for r in support_rows))
        return rows, labels, n_support

    def __getitem__(self, index: int):
        rows, labels, n_support = self.sample_indices(index)
        x = torch.as_tensor(np.asarray(self.X[rows]), dtype=self.dtype)
        is_query = torch.arange(rows.shape[0]) >= n_support
        return {"x": x, "is_query": is_query}, torch.as_tensor(labels)
