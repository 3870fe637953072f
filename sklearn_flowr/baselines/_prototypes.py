"""Online class means (prototypes) and their streaming, shared by NCM, ProtoNet
and PEELER.

Each class keeps the sum and the count of its rows, so a mean is updated in
O(d) and learning commutes (``partial_fit`` in any chunking equals ``fit``).
The three methods differ only in the metric of the distance to the means and
in how the distances become a novelty score.
"""

import numpy as np

from ._base import OpenWorldBaseline

# Elements of the per-chunk temporaries in ``_stream`` (~32 MB of float64).
_CHUNK_ELEMENTS = 4_000_000
_MAX_CHUNK_ROWS = 512


class PrototypeBaseline(OpenWorldBaseline):
    """Base of the class-mean baselines (not for direct use).

    Subclasses define ``_from_distances(D)``, the best-class-independent map
    from the distances of rows to the existing means, shape
    (n_samples, n_classes), to novelty scores, and may override
    ``_metric_weights`` (per-feature weights of the squared distance).
    """

    def _start(self, X, y_index, n_labels, fitting):
        self._sums = np.zeros((0, X.shape[1]))
        self._counts = np.zeros(0)

    def _metric_weights(self):
        """Per-feature weights ``w`` of ``D = sum_j w_j (x_j - mu_j)^2``; None
        is Euclidean."""
        return None

    def _grow(self):
        missing = self.n_classes_ - self._counts.shape[0]
        if missing > 0:
            self._sums = np.vstack([self._sums, np.zeros((missing,
                                                          self._sums.shape[1]))])
            self._counts = np.concatenate([self._counts, np.zeros(missing)])

    def _learn(self, X, index):
        self._grow()
        if index.shape[0] == 1:
            self._sums[index[0]] += X[0]
            self._counts[index[0]] += 1.0
            return
        # Per-class sums through one sort and reduceat: no one-hot matrix.
        order = np.argsort(index, kind="stable")
        sorted_index = index[order]
        starts = np.flatnonzero(np.r_[True, sorted_index[1:] != sorted_index[:-1]])
        classes = sorted_index[starts]
        self._sums[classes] += np.add.reduceat(X[order], starts, axis=0)
        self._counts[classes] += np.diff(np.r_[starts, sorted_index.shape[0]])

    def _squared_distances(self, X, means):
        """``D[i, n] = sum_j w_j (X_ij - means_nj)^2``, shape (n_rows, n_means)."""
        weights = self._metric_weights()
        weighted = X if weights is None else X * weights
        weighted_means = means if weights is None else means * weights
        row_norms = np.einsum("ij,ij->i", weighted, X)
        mean_norms = np.einsum("ij,ij->i", weighted_means, means)
        distances = row_norms[:, None] - 2.0 * (weighted @ means.T)
        distances += mean_norms
        return np.maximum(distances, 0.0, out=distances)

    def _distances_to_means(self, X, sums, counts):
        """Distances to ``sums / counts``; ``inf`` for a class without rows."""
        present = counts > 0
        means = sums / np.where(present, counts, 1.0)[:, None]
        distances = self._squared_distances(X, means)
        distances[:, ~present] = np.inf
        return distances

    def _decide(self, distances):
        """Best class (-1 when no class has rows) and novelty score per row."""
        n_rows = distances.shape[0]
        known_index = np.full(n_rows, -1, dtype=np.intp)
        score = np.full(n_rows, self._empty_score)
        if distances.shape[1] == 0:
            return known_index, score
        best = np.argmin(distances, axis=1)
        has_class = np.isfinite(distances[np.arange(n_rows), best])
        known_index[has_class] = best[has_class]
        if has_class.any():
            score[has_class] = self._from_distances(distances[has_class])
        return known_index, score

    def _score(self, X):
        return self._decide(self._distances_to_means(X, self._sums, self._counts))

    def _stream(self, X, index):
        """Vectorised predict-then-learn.

        Classes a chunk does not touch are scored against their cached means.
        A touched class ``j`` goes through ``n_j + 1`` states in the chunk
        (after 0, 1, ..., ``n_j`` of its rows): the states of all touched
        classes form a table of prefix sums and counts, scored with one matrix
        product, and each row picks the state of class ``j`` that precedes it.
        """
        self._grow()
        n_rows = X.shape[0]
        known_index = np.empty(n_rows, dtype=np.intp)
        score = np.empty(n_rows)
        start = 0
        while start < n_rows:
            stop = self._chunk_stop(index, start, n_rows)
            rows = slice(start, stop)
            known_index[rows], score[rows] = self._decide(
                self._chunk_distances(X[rows], index[rows])
            )
            self._learn(X[rows], index[rows])
            start = stop
        return known_index, score

    def _chunk_stop(self, index, start, n_rows):
        stop = start + min(_MAX_CHUNK_ROWS,
                           max(1, _CHUNK_ELEMENTS // (self.n_classes_ + 1)))
        stop = min(stop, n_rows)
        # The state table costs rows * (rows + touched) * d.
        while stop - start > 1:
            touched = np.unique(index[start:stop]).shape[0]
            if (stop - start) * (stop - start + touched) * self._sums.shape[1] <= (
                _CHUNK_ELEMENTS
            ):
                break
            stop = start + (stop - start) // 2
        return stop

    def _chunk_distances(self, X, index):
        """Distance of each row to every class as it stands before that row."""
        distances = self._distances_to_means(X, self._sums, self._counts)
        touched, row_class = np.unique(index, return_inverse=True)
        n_touched = touched.shape[0]
        onehot = row_class[:, None] == np.arange(n_touched)
        # seen[t, j]: rows of touched class j before row t.
        seen = np.cumsum(onehot, axis=0) - onehot
        # Class j's block of states starts at offset[j]; entry k of the block
        # is the class after its first k rows of the chunk.
        changes = onehot.sum(axis=0)
        offset = np.r_[0, np.cumsum(changes + 1)[:-1]]
        order = np.argsort(row_class, kind="stable")
        group = row_class[order]
        group_first = (np.cumsum(changes) - changes)[group]
        rank = np.arange(order.shape[0]) - group_first
        cumulative = np.cumsum(X[order], axis=0)
        before = np.vstack([np.zeros((1, X.shape[1])), cumulative])[group_first]
        n_states = int(changes.sum()) + n_touched
        state_rows = offset[group] + rank + 1
        sums = np.zeros((n_states, X.shape[1]))
        sums[state_rows] = cumulative - before
        counts = np.zeros(n_states)
        counts[state_rows] = rank + 1.0
        owner = np.repeat(touched, changes + 1)
        table = self._distances_to_means(X, self._sums[owner] + sums,
                                         self._counts[owner] + counts)
        distances[:, touched] = np.take_along_axis(table, offset + seen, axis=1)
        return distances

    # -------------------------------------------------------------- attributes
    @property
    def class_count_(self):
        if not self.__sklearn_is_fitted__():
            raise AttributeError("class_count_ exists once the estimator is fitted.")
        return self._counts[: self.n_classes_].copy()

    @property
    def class_mean_(self):
        if not self.__sklearn_is_fitted__():
            raise AttributeError("class_mean_ exists once the estimator is fitted.")
        n = self.n_classes_
        # A class registered by a running stream but without rows has no mean.
        with np.errstate(invalid="ignore", divide="ignore"):
            return self._sums[:n] / self._counts[:n, None]
