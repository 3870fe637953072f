"""Scores of a stream's rows against the states they really see.

A stream predicts each row with the state before it, then learns it. A lone
row sees exactly the cached state: one matrix-vector product, then its
decision and P(novel) from the scores' log-sum-exp. A chunk of rows sees the
cached state for the classes it does not touch and, for those it does, the
prefix states of ``_streaming.prefix_states``, scored with one GEMM. Mixed
into ``_online_state.OnlineClassState``, whose buffers and caches it reads.
"""

import math

import numpy as np

from ._core import (
    MAX_LOG_ODDS,
    add_observations,
    log_density_coef,
    log_softmax,
    novel_log_odds,
    recalibrate_novel_column,
)
from ._streaming import prefix_states

# Ones to sum a one-row step's exponentials with a dot product.
_ONES = np.ones(4096)
_ONES.flags.writeable = False
# The floor of a one-row step's exponents: a 0-d array, which a ufunc takes
# faster than a Python float (~0.4 against ~0.55 us a call).
_EXP_FLOOR = np.array(-700.0)
_EXP_FLOOR.flags.writeable = False


class StreamScoring:
    """Mixin of ``OnlineClassState``: the scores of a stream's rows."""

    def _score_one(self, features, novelty_map=None):
        """Best known class (-1: none), P(novel), the novel decision and
        P(novel)'s log-odds of one row's ``features``, as Python scalars."""
        n = self.n_classes
        if n == 0:
            return -1, 1.0, True, MAX_LOG_ODDS
        scores = self.joint_coef[: n + 1].dot(features)
        if novelty_map is not None:
            scores = recalibrate_novel_column(scores, *novelty_map)
        known = scores[:n]
        best = int(known.argmax())
        top, novel = known.item(best), scores.item(n)
        if not (math.isfinite(top) and math.isfinite(novel)):
            return self._score_one_row_as_batch(scores, best)
        # log sum_n exp(known_n) - top, the known mass relative to the best
        # known class. exp is taken of ``known - shift``: shift = top in
        # general (a sum >= 1: exact however far the novel class is ahead),
        # or 0 when |top| <= 600, which spares the subtraction (a quarter of
        # this block's time at 100 classes): the sum then lies in [e^-600,
        # N e^600], far from under- and overflow. Arguments whose exp is
        # subnormal or underflows take exp's slow path (2-3 times slower):
        # clamped at -700 they add at most N e^-100 of the sum, nothing. One
        # pairwise ``logaddexp`` reduction is one call, but slower than these
        # (2.5 against 2.0 us at 100 classes, far more beyond).
        if -600.0 <= top <= 600.0:
            shift = 0.0
        else:
            shift = top
            known -= top  # in place: ``scores`` is ours
        np.maximum(known, _EXP_FLOOR, out=known)
        np.exp(known, out=known)
        # (a dot product with ones sums short vectors twice as fast as sum)
        log_known = math.log(known.dot(_ONES[:n]) if n <= _ONES.shape[0]
                             else known.sum()) + (shift - top)
        log_odds = novel - top - log_known
        # P(novel) = sigmoid(log-odds), without overflow on either side; the
        # log-odds clipped to +-MAX_LOG_ODDS (comparisons: a third of the
        # time of ``min(max(...))``).
        if log_odds >= 0.0:
            if log_odds > MAX_LOG_ODDS:
                log_odds = MAX_LOG_ODDS
            p_novel = 1.0 / (1.0 + math.exp(-log_odds))
        else:
            if log_odds < -MAX_LOG_ODDS:
                log_odds = -MAX_LOG_ODDS
            odds = math.exp(log_odds)
            p_novel = odds / (1.0 + odds)
        return best, p_novel, novel > top, log_odds

    @staticmethod
    def _score_one_row_as_batch(scores, best):
        """Scores with infinite entries: the batch path's formulas."""
        scores = scores[None]
        return (best, float(np.exp(log_softmax(scores)[0, -1])),
                bool(scores[0, -1] > scores[0, best]),
                float(novel_log_odds(scores)[0]))

    def _score_chunk(self, Z, index, is_new_class, first_new, novelty_map=None):
        """Scores of one chunk against the states each row really sees.

        Classes the chunk does not touch are scored through the cached GEMM;
        the states of touched classes come from ``_streaming.prefix_states``
        (rows of frozen classes change nothing) and are scored with one GEMM.
        """
        n_classes = self.n_classes
        features = self.features(Z)
        scores = features @ self.joint_coef[: n_classes + 1].T
        table = prefix_states(Z, index, live=~self.frozen[index])
        touched, seen = table.touched, table.seen
        nat_mean, precision = add_observations(
            self.nat_mean[table.owner], self.precision[table.owner], table.sums,
            table.counts[:, None], self.sigma)
        state_density = features @ log_density_coef(nat_mean, precision, self.sigma).T
        density = np.take_along_axis(state_density, table.pick, axis=1)

        # Per-row CRP prior: counts and N as they stand before each row.
        classes_before = first_new + np.cumsum(is_new_class) - is_new_class
        log_known, log_novel = self._log_numerators(
            self.crp_count[touched] + seen, classes_before
        )
        # Classes not instantiated before a row have no mass at that row.
        exists = (touched < first_new) | (seen > 0)
        scores[:, touched] = np.where(exists, density + log_known, -np.inf)
        scores[:, -1] = features @ self.prior_coef + log_novel
        if novelty_map is not None:
            scores = recalibrate_novel_column(scores, *novelty_map)

        known_index = np.full(Z.shape[0], -1, dtype=np.intp)
        if n_classes:
            best = np.argmax(scores[:, :-1], axis=1)
            # A row that precedes every class has no known candidate.
            has_class = np.isfinite(scores[np.arange(Z.shape[0]), best])
            known_index[has_class] = best[has_class]
            # Ties go to the known class, as np.argmax does in ``predict``.
            pred_novel = scores[:, -1] > scores[np.arange(Z.shape[0]), best]
        else:
            pred_novel = np.ones(Z.shape[0], dtype=bool)
        log_odds = novel_log_odds(scores)
        return known_index, np.exp(log_softmax(scores)[:, -1]), pred_novel, log_odds
