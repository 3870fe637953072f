"""The novel class's log-odds of joint log-weights, and the Platt map
``logit p'(novel) = slope * logit p(novel) + intercept`` on them."""

from ._namespace import get_namespace
from ._softmax import logsumexp

# Log-odds of a row without known classes, and the clip of every log-odds:
# finite, for ROC and H-measure code.
MAX_LOG_ODDS = 1e300


def _known_log_mass(scores, xp):
    """Log-sum-exp of the known columns, and which rows have a known class."""
    has_known = xp.isfinite(xp.max(scores[..., :-1], axis=-1))
    # Zeros in rows without a known class: no log 0.
    known_scores = xp.where(has_known[..., None], scores[..., :-1],
                            xp.zeros_like(scores[..., :-1]))
    return logsumexp(known_scores, axis=-1), has_known


def novel_log_odds(scores):
    """``log P(novel) - log P(known)`` (n_rows,) of joint log-weights (n_rows,
    n_classes + 1), clipped to ``MAX_LOG_ODDS`` (keeps the most novel rows' order)."""
    xp = get_namespace(scores)
    if scores.shape[-1] < 2:
        return xp.full(scores.shape[:-1], MAX_LOG_ODDS, dtype=scores.dtype)
    known, has_known = _known_log_mass(scores, xp)
    odds = xp.where(has_known, scores[..., -1] - known,
                    xp.full_like(known, MAX_LOG_ODDS))
    return xp.clip(odds, -MAX_LOG_ODDS, MAX_LOG_ODDS)


def recalibrate_novel_column(scores, slope, intercept):
    """Joint log-weights whose novel log-odds are mapped by ``slope * logit +
    intercept`` (``slope > 0``); rows without a known class stay as they were."""
    return with_novel_log_odds(scores, lambda odds: slope * odds + intercept)


def with_novel_log_odds(scores, log_odds):
    """``scores`` with the novel column set to the known classes' log-sum-exp plus
    ``log_odds`` (or ``log_odds(present log-odds)``); rows without a known class
    stay as they were."""
    xp = get_namespace(scores)
    if scores.shape[-1] < 2:
        return scores
    known, has_known = _known_log_mass(scores, xp)
    if callable(log_odds):
        log_odds = log_odds(scores[..., -1] - known)
    novel = xp.where(has_known, known + log_odds, scores[..., -1])
    return xp.concat([scores[..., :-1], novel[..., None]], axis=-1)
