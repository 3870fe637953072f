"""Online class means (sums and counts of rows) and their streaming, shared by
NCM, ProtoNet, PEELER and DP-means."""

import numpy as np

from .._core import chunk_slices, group_sums, prefix_states
from ._base import OpenWorldBaseline


class PrototypeBaseline(OpenWorldBaseline):
    """Base of the class-mean baselines: subclasses map distances to scores
    (``_from_distances``) and may weight the metric (``_metric_weights``) or
    map the rows first (``_features``)."""

    def _start(self, X, y_index, labels, *, fitting):
        self._sums = np.zeros((0, X.shape[1]))
        self._counts = np.zeros(0)
        # Rows are kept relative to a point near the first batch: expanding
        # ||x||^2 - 2 x.m + ||m||^2 loses the digits of the rows' distance
        # from the origin (a shift of 1e7 cut accuracy from 0.93 to 0.80).
        self._origin = _rounded_centre(self._features(X))

    def _features(self, X):
        """The rows the means are taken of (default: as given)."""
        return X

    def _centred(self, X):
        """Rows relative to the state's origin."""
        return X - self._origin

    def _metric_weights(self):
        """Weights ``w`` of ``D = sum_j w_j (x_j - mu_j)^2``; None: Euclidean."""
        return None

    def _grow(self):
        missing = self.n_classes_ - self._counts.shape[0]
        if missing > 0:
            self._sums = np.vstack([self._sums, np.zeros((missing,
                                                          self._sums.shape[1]))])
            self._counts = np.concatenate([self._counts, np.zeros(missing)])

    def _checkpoint(self, index):
        sums, counts = self._sums, self._counts
        rows = np.unique(index[index < counts.shape[0]])
        saved_sums, saved_counts = sums[rows].copy(), counts[rows].copy()

        def undo():
            sums[rows], counts[rows] = saved_sums, saved_counts

        return undo

    def _learn(self, X, index):
        self._learn_centred(self._centred(self._features(X)), index)

    def _learn_centred(self, X, index):
        self._grow()
        if index.shape[0] == 1:
            self._sums[index[0]] += X[0]
            self._counts[index[0]] += 1.0
            return
        classes, sums, counts = group_sums(X, index)
        self._sums[classes] += sums
        self._counts[classes] += counts

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

    def _rank(self, distances):
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
        return self._rank(self._distances_to_means(
            self._centred(self._features(X)), self._sums, self._counts))

    def _stream(self, X, index, is_new):
        """Vectorised predict-then-learn, chunk by chunk."""
        self._grow()
        X = self._centred(self._features(X))
        n_rows = X.shape[0]
        known_index = np.empty(n_rows, dtype=np.intp)
        score = np.empty(n_rows)
        for rows in chunk_slices(index, n_classes=self.n_classes_,
                                 width=X.shape[1]):
            known_index[rows], score[rows] = self._rank(
                self._chunk_distances(X[rows], index[rows])
            )
            self._learn_centred(X[rows], index[rows])
        return known_index, score, self._is_novel(known_index, score)

    def _chunk_distances(self, X, index):
        """Distance of each row to every class as it stands before that row."""
        distances = self._distances_to_means(X, self._sums, self._counts)
        table = prefix_states(X, index)
        states = self._distances_to_means(X, self._sums[table.owner] + table.sums,
                                          self._counts[table.owner] + table.counts)
        distances[:, table.touched] = np.take_along_axis(states, table.pick, axis=1)
        return distances

    # -------------------------------------------------------------- attributes
    @property
    def class_count_(self):
        return self._fitted("class_count_")._counts[: self.n_classes_].copy()

    @property
    def class_mean_(self):
        n = self._fitted("class_mean_").n_classes_
        # A class registered by a running stream but without rows has no mean.
        with np.errstate(invalid="ignore", divide="ignore"):
            means = self._sums[:n] / self._counts[:n, None]
        return means + self._origin


def _rounded_centre(X):
    """The mean row of ``X`` rounded to a power of two near the rows' spread
    (so that subtracting it is exact for data on a coarser grid)."""
    mean = X.mean(axis=0)
    spread = float(np.sqrt(np.mean(X.var(axis=0))))
    if not (np.isfinite(spread) and spread > 0):
        return mean
    step = 2.0 ** np.floor(np.log2(spread))
    return np.round(mean / step) * step
