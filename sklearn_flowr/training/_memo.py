"""Trained encoders kept in this process (in memory only), keyed by a hash of
everything training reads, so a refit of the head retrains nothing."""

import copy
import threading
from collections import OrderedDict
from numbers import Integral

import joblib
import numpy as np

__all__ = ["ENCODER_MEMO", "EncoderMemo"]


class EncoderMemo:
    """A small in-process LRU store of training results, ``max_entries`` of them
    (a 3-fold grid with its refit needs 4)."""

    def __init__(self, max_entries: int = 6):
        self.max_entries = max_entries
        self._entries: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def key(X, y, config, *, random_state, device) -> str | None:
        """The hash of a training run (``config``: the settings it reads), or
        ``None`` for a ``RandomState`` seed (a stream of draws, never reused)."""
        if random_state is not None and not isinstance(random_state, Integral):
            return None
        return joblib.hash((np.asarray(X), np.asarray(y), sorted(
            (name, repr(value) if isinstance(value, str | int | float | bool)
             or value is None else value) for name, value in config.items()),
            random_state, str(device)))

    def get(self, key):
        """A deep copy of the result stored under ``key``, or ``None``."""
        if key is None:
            return None
        with self._lock:
            if key not in self._entries:
                return None
            self._entries.move_to_end(key)
            return copy.deepcopy(self._entries[key])

    def put(self, key, result) -> None:
        """Store a deep copy of ``result`` under ``key`` (``None``: nothing)."""
        if key is None or self.max_entries < 1:
            return
        stored = copy.deepcopy(result)
        with self._lock:
            self._entries[key] = stored
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        """Forget every stored result."""
        with self._lock:
            self._entries.clear()


# The process's memo, shared by every FLOWRClassifier(reuse_encoder=True).
ENCODER_MEMO = EncoderMemo()
