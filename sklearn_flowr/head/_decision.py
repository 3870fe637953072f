"""The head's novelty decision at a stated false-novel rate: conformal p-values
of P(novel)'s log-odds (before ``novelty_calibration``'s increasing map) against
held-out scores of known-class rows (user guide, "What predict's novel label
means")."""

import warnings
from math import isqrt

import numpy as np
from sklearn.utils.validation import check_is_fitted

from .._core import MAX_LOG_ODDS, needs_moments, novel_log_odds
from ..validation import caller_stacklevel
from ._cross_fit import (
    NO_SCORES,
    can_reject,
    cross_fit_scores,
    state_scores,
    warn_if_too_few_scores,
)
from ._whitened import model_params

# Rows decided per block of a stream.
_BLOCK = 2048
# One-row steps keep held-out scores unsorted, up to this plus 4 sqrt(n) of
# them, then merge them into the n sorted ones: a step costs O(sqrt(n)).
_RECENT = 256


def with_scores(calibration, scores):
    """A new sorted array: ``calibration`` (sorted) and ``scores``, in
    O(n + m log m) (no sort of the n held already)."""
    if scores.shape[0] == 0:
        return calibration
    new = np.sort(scores)
    return np.insert(calibration, np.searchsorted(calibration, new), new)


def n_at_least(calibration, scores):
    """For each score, how many of the sorted ``calibration`` are >= it."""
    return calibration.shape[0] - np.searchsorted(calibration, scores, side="left")


def stream_decisions(calibration, scores, held_out, fallback, alpha):
    """The decisions of a stream's rows and the calibration after it: row
    ``t`` is tested against ``calibration`` plus the held-out scores of the
    rows before it (``held_out``: rows of a class known then); with too few
    scores to reach ``alpha``, its ``fallback`` (the argmax rule) stands."""
    novel = np.empty(scores.shape[0], dtype=bool)
    for start in range(0, scores.shape[0], _BLOCK):
        rows = slice(start, start + _BLOCK)
        s, keep = scores[rows], held_out[rows]
        # Earlier rows of the block: a strictly lower triangle.
        earlier = np.tril(np.ones((s.shape[0], s.shape[0]), dtype=bool), -1)
        earlier &= keep[None, :]
        n_before = calibration.shape[0] + earlier.sum(axis=1)
        at_least = n_at_least(calibration, s) + (earlier & (s[None, :] >= s[:, None])
                                                 ).sum(axis=1)
        decided = 1.0 + at_least <= alpha * (n_before + 1)
        novel[rows] = np.where(can_reject(n_before, alpha), decided, fallback[rows])
        calibration = with_scores(calibration, s[keep])
    return novel, calibration


class ConformalDecision:
    """The head's ``predict`` and ``novelty_pvalues`` at ``novelty_alpha``
    and the calibration scores they read (a mixin of
    :class:`~sklearn_flowr.CRPGaussianClassifier`, not for direct use)."""

    # The calibration scores: sorted held-out log-odds (``_conformal``; none
    # in heads saved before it existed) and, unsorted, those of the latest
    # one-row steps (``_recent``: a view of ``_buffer``, which is not saved).
    _recent = _buffer = NO_SCORES

    @property
    def _conformal(self):
        """Every calibration score, sorted (the recent ones merged in)."""
        if self._recent.shape[0]:
            vars(self).update(_conformal=with_scores(self._sorted, self._recent),
                              _recent=NO_SCORES)
        return self._sorted

    @_conformal.setter
    def _conformal(self, scores):
        vars(self).update(_conformal=scores, _recent=NO_SCORES)

    @property
    def _sorted(self):
        return vars(self).get("_conformal", NO_SCORES)

    def __getstate__(self):  # without the buffer (``_recent`` is kept)
        state = dict(super().__getstate__())
        state.pop("_buffer", None)
        return state

    @property
    def conformal_scores_(self):
        return self._fitted("conformal_scores_")._conformal.copy()

    def novelty_pvalues(self, X):
        """Conformal p-values of "this row is of a known class".

        ``(1 + #{c_i >= s(x)}) / (n + 1)`` for the novel log-odds ``s(x)``
        and the ``n`` calibration scores ``conformal_scores_``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Embeddings.

        Returns
        -------
        pvalues : ndarray of shape (n_samples,)
            In ``[1 / (n + 1), 1]``; small means novel.

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn_flowr import CRPGaussianClassifier
        >>> rng = np.random.default_rng(0)
        >>> y = np.repeat(np.arange(4), 25)
        >>> X = rng.normal(scale=4.0, size=(4, 2))[y] + rng.normal(size=(100, 2))
        >>> clf = CRPGaussianClassifier(covariance="isotropic").fit(X, y)
        >>> clf.novelty_pvalues([X[0], [40.0, -40.0]]).round(2)
        array([0.26, 0.01])
        """
        check_is_fitted(self)
        at_least, n = self._n_at_least(
            novel_log_odds(self._joint_log_numerators_unmapped(X)))
        return (1.0 + at_least) / (n + 1.0)

    def set_conformal_scores(self, scores):
        """Set ``conformal_scores_``: novel log-odds (before the map) of rows of
        known classes that neither the head nor the features' encoder learned
        from, as :class:`~sklearn_flowr.FLOWRClassifier`'s ``fit`` scores them.

        Parameters
        ----------
        scores : array-like of shape (n_calibration,)
            Finite novel log-odds; higher means more novel. Fewer than
            ``novelty_alpha`` needs (19 at 0.05) warn: ``predict`` then takes
            the argmax rule.

        Returns
        -------
        self : CRPGaussianClassifier

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn_flowr import CRPGaussianClassifier
        >>> clf = CRPGaussianClassifier(covariance="isotropic").fit(
        ...     [[0, 0], [0.2, 0], [4, 4], [4, 4.2]], [0, 0, 1, 1])
        >>> clf.set_conformal_scores(np.linspace(-9, -1, 39)).conformal_scores_.shape
        (39,)
        """
        self._n_scores()
        scores = np.asarray(scores, dtype=np.float64)
        if scores.ndim != 1:
            raise ValueError("set_conformal_scores needs a 1-d array of scores; "
                             f"got shape {scores.shape}.")
        if not np.isfinite(scores).all():
            raise ValueError("set_conformal_scores needs finite scores; got "
                             f"{int((~np.isfinite(scores)).sum())} that are not.")
        self._conformal = np.sort(scores)
        warn_if_too_few_scores(self)
        return self

    def predict(self, X):
        """The most probable known class, or ``novel_label_`` where the
        conformal p-value is at most ``novelty_alpha``.

        With ``novelty_alpha=None``, or fewer than ``1 / novelty_alpha - 1``
        calibration scores: the most probable of the known classes and the
        novel class.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Embeddings.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
            Labels from ``classes_`` or ``novel_label_``.

        Examples
        --------
        >>> from sklearn_flowr import CRPGaussianClassifier
        >>> clf = CRPGaussianClassifier(covariance="isotropic", novel_label="unknown")
        >>> clf = clf.fit([[0, 0], [0.2, 0], [4, 4], [4, 4.2]], ["a", "a", "b", "b"])
        >>> clf.predict([[0.1, 0.0], [3.9, 4.1], [-6.0, 7.0]])
        array(['a', 'b', 'unknown'], dtype=object)
        """
        alpha = self.novelty_alpha
        if alpha is None or not can_reject(self._n_scores(), alpha):
            return super().predict(X)
        scores = self._joint_log_numerators_unmapped(X)
        best = np.argmax(scores[:, :-1], axis=1)
        at_least, n = self._n_at_least(novel_log_odds(scores))
        novel = 1.0 + at_least <= alpha * (n + 1)
        return self._labels_of(np.where(novel, -1, best))

    def _n_scores(self):
        if not self.__sklearn_is_fitted__():
            self._validated_rows(np.zeros((1, 1)))  # the NotFittedError
        return self._sorted.shape[0] + self._recent.shape[0]

    def _n_at_least(self, scores):
        """How many calibration scores are >= each score, and how many in all."""
        recent = np.sort(self._recent)
        return (n_at_least(self._sorted, scores) + n_at_least(recent, scores),
                self._sorted.shape[0] + recent.shape[0])

    def _joint_log_numerators_unmapped(self, X):
        return self._state.joint_log_numerators(self._validated_rows(X))

    def _calibrate_fit(self, X, index):
        """Cross-fitted scores of ``fit``'s rows ``X`` (the maths' coordinates)."""
        return cross_fit_scores(index, state_scores(X, index, model_params(self)))

    def _learn_more(self, X, index):
        """Learn rows as one-row calls would: each row of a class known before
        it is held out against the state before it (so ``predict`` does not
        depend on how ``partial_fit``'s rows are split into calls)."""
        is_new = np.zeros(index.shape[0], dtype=bool)
        classes, first = np.unique(index, return_index=True)
        is_new[first[classes >= self._state.n_classes]] = True
        self._hold_out(self._state.stream(X, index, is_new)[3], is_new)

    def _learn_first(self, X, index):
        """``partial_fit``'s rows on an unfitted head: held out as later calls'
        rows are (:meth:`_learn_more`), unless the whitener or an "auto"
        hyper-parameter was estimated from them, which makes them look familiar:
        then none is, and a set ``novelty_alpha`` warns."""
        whitened = self.covariance == "whitened"
        if not whitened and not needs_moments(model_params(self)):
            return self._learn_more(X, index)
        self._learn(X, index)
        if self.novelty_alpha is not None:
            warnings.warn(
                "partial_fit on an unfitted CRPGaussianClassifier estimated its "
                + ("whitener" if whitened else "'auto' hyper-parameters")
                + " from its rows, so it holds none of them out to calibrate "
                "predict's novel label: predict takes the argmax over the "
                "classes and the novel class (which does not keep the "
                "false-novel rate) until later labelled rows add scores. Call "
                "fit, which calibrates on held-out folds"
                + ("." if whitened else ", or give prior_mean, prior_var, b and "
                   "sigma."), UserWarning, stacklevel=caller_stacklevel())

    def _hold_out(self, scores, is_new):
        """Append the scores (novel log-odds, before the map) of rows of
        classes known before them."""
        if scores.shape[0] == 1:  # held as one-row steps hold it
            if not is_new[0]:
                self._decide_row(scores[0], True, None, None)
        else:
            self._conformal = with_scores(self._conformal, scores[~is_new])

    def _decide_stream(self, streamed, is_new, novelty_map):
        """The stream's four outputs with the decision at ``novelty_alpha``;
        rows of classes known then join the calibration scores."""
        known_index, p_novel, novel, log_odds = streamed
        scores, alpha = log_odds, self.novelty_alpha
        if novelty_map is not None:  # the log-odds before slope * x + intercept
            slope, intercept = novelty_map
            scores = np.clip((log_odds - intercept) / slope, -MAX_LOG_ODDS,
                             MAX_LOG_ODDS)
        if scores.shape[0] == 1:  # the online loop's case, without a block
            novel = self._decide_row(scores[0], not is_new[0], novel, alpha)
        elif alpha is None:
            self._conformal = with_scores(self._conformal, scores[~is_new])
        else:
            novel, self._conformal = stream_decisions(
                self._conformal, scores, ~is_new, novel, alpha)
        return known_index, p_novel, novel, log_odds

    def _decide_row(self, score, held_out, fallback, alpha):
        """``stream_decisions`` of one row, over the sorted scores and the
        recent ones (unsorted in a buffer merged into them when full)."""
        calibration, recent, buffer = self._sorted, self._recent, self._buffer
        k = recent.shape[0]
        n = calibration.shape[0] + k
        if alpha is not None and can_reject(n, alpha):
            bound = alpha * (n + 1)
            at_least = calibration.shape[0] - int(calibration.searchsorted(score))
            if 1.0 + at_least <= bound < 1.0 + at_least + k:  # the recent decide
                at_least += int(np.count_nonzero(recent >= score))
            fallback = np.array([1.0 + at_least <= bound])
        if held_out:
            # Full, or none of this head's (after a merge, a copy, a load).
            if recent.base is not buffer or k == buffer.shape[0]:
                buffer, k = np.empty(_RECENT + 4 * isqrt(n)), 0
                vars(self).update(_conformal=with_scores(calibration, recent),
                                  _recent=buffer[:0], _buffer=buffer)
            buffer[k] = score
            self._recent = buffer[:k + 1]
        return fallback
