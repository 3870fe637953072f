"""A Platt map of the novel class's log-odds, applied to joint log-weights.

FLOWR's novel-class probability comes from the ratio of two Gaussian
predictives: the broad prior predictive of a class never seen and the narrow
predictives of the known classes. Where the embedding's classes are not
Gaussian (heavy tails, classes wider than those the prior was estimated from)
that ratio is far too sharp: on frozen Fashion-MNIST features, queries given
P(novel) ~ 0.97 are first sightings 13-22% of the time (docs/user_guide.rst,
"Calibrating P(novel)"). Tempering the whole likelihood softens it but also
the known-class posterior, and costs accuracy. This map changes only the odds
of novel against known:

    logit p'(novel) = slope * logit p(novel) + intercept,

with the known classes' probabilities rescaled by a common factor, so their
order, the argmax among them and the order of P(novel) over rows are all
unchanged (slope > 0): rank-based figures (H-measure, AUROC, the accuracy at a
fixed novelty TPR) are the same, only the probability and the argmax decision
move. It is Platt scaling (Platt, 1999) of the novelty odds.
"""

from ._namespace import get_namespace
from ._softmax import logsumexp

# Log-odds of a row without any known class (P(novel) = 1), and the clip of
# every log-odds: finite, so that ROC and H-measure code accepts them.
MAX_LOG_ODDS = 1e300


def _known_log_mass(scores, xp):
    """Log-sum-exp of the known columns, and which rows have a known class."""
    has_known = xp.isfinite(xp.max(scores[..., :-1], axis=-1))
    # Rows without a known class get zeros here (no log 0, no inf - inf).
    known_scores = xp.where(has_known[..., None], scores[..., :-1],
                            xp.zeros_like(scores[..., :-1]))
    return logsumexp(known_scores, axis=-1), has_known


def novel_log_odds(scores):
    """``log P(novel) - log P(known)`` of each row of joint log-weights.

    P(novel) itself rounds to exactly 1.0 in float64 once the known classes'
    share falls below ~1e-16, and a run's most novel queries then tie; the
    log-odds keep their order (a query's P(known) of 1e-20 against 1e-40).
    Rows without a known class get ``MAX_LOG_ODDS``; all are clipped to
    ``[-MAX_LOG_ODDS, MAX_LOG_ODDS]``.

    Parameters
    ----------
    scores : ndarray of shape (n_rows, n_classes + 1)
        Unnormalised log-weights, the novel class last.

    Returns
    -------
    ndarray of shape (n_rows,)

    Examples
    --------
    >>> import numpy as np
    >>> novel_log_odds(np.log([[0.6, 0.2, 0.2]])).round(4)  # 0.2 / 0.8
    array([-1.3863])
    >>> novel_log_odds(np.array([[-50.0, -60.0, 0.0]])) > 49  # P(novel) == 1.0
    array([ True])
    """
    xp = get_namespace(scores)
    if scores.shape[-1] < 2:
        return xp.full(scores.shape[:-1], MAX_LOG_ODDS, dtype=scores.dtype)
    known, has_known = _known_log_mass(scores, xp)
    odds = xp.where(has_known, scores[..., -1] - known,
                    xp.full_like(known, MAX_LOG_ODDS))
    return xp.clip(odds, -MAX_LOG_ODDS, MAX_LOG_ODDS)


def recalibrate_novel_column(scores, slope, intercept):
    """Apply ``logit p -> slope * logit p + intercept`` to the novel column.

    Parameters
    ----------
    scores : array of shape (..., n_classes + 1)
        Unnormalised log-weights of the known classes and, last, the novel
        class (any constant per row may be left out).
    slope : float
        ``> 0``.
    intercept : float

    Returns
    -------
    array of the same shape
        The known columns unchanged, the novel column replaced by
        ``L + slope * (s_novel - L) + intercept`` with ``L`` the log-sum-exp of
        the known columns. Rows without a known class (all ``-inf`` or no
        known column) are returned as they were: P(novel) stays 1.

    Examples
    --------
    >>> import numpy as np
    >>> scores = np.log([[0.6, 0.2, 0.2]])  # P(novel) = 0.2, odds 1/4
    >>> out = recalibrate_novel_column(scores, 0.5, 0.0)  # odds 1/2
    >>> p = np.exp(out) / np.exp(out).sum()
    >>> p.round(4)  # known classes keep their 3:1 ratio
    array([[0.5   , 0.1667, 0.3333]])
    """
    xp = get_namespace(scores)
    if scores.shape[-1] < 2:
        return scores
    known, _ = _known_log_mass(scores, xp)
    return with_novel_log_odds(
        scores, known + slope * (scores[..., -1] - known) + intercept - known)


def with_novel_log_odds(scores, log_odds):
    """Joint log-weights whose novel column has the given log-odds.

    The novel column becomes ``L + log_odds`` with ``L`` the log-sum-exp of
    the known columns; the known columns are unchanged, so after normalising
    they keep their ratios. Rows without a known class are returned as they
    were (P(novel) stays 1). :func:`recalibrate_novel_column` and
    :class:`~sklearn_flowr.calibration.NoveltyCalibratedClassifier` both set
    the novel column through this function.

    Parameters
    ----------
    scores : array of shape (..., n_classes + 1)
        Unnormalised log-weights, the novel class last.
    log_odds : array of shape (...)
        ``log P(novel) - log P(known)`` wanted for each row.

    Returns
    -------
    array of the same shape as ``scores``

    Examples
    --------
    >>> import numpy as np
    >>> out = with_novel_log_odds(np.log([[0.6, 0.2, 0.2]]), np.array([0.0]))
    >>> (np.exp(out) / np.exp(out).sum()).round(4)  # P(novel) = 1/2
    array([[0.375, 0.125, 0.5  ]])
    """
    xp = get_namespace(scores)
    if scores.shape[-1] < 2:
        return scores
    known, has_known = _known_log_mass(scores, xp)
    novel = xp.where(has_known, known + log_odds, scores[..., -1])
    return xp.concat([scores[..., :-1], novel[..., None]], axis=-1)
