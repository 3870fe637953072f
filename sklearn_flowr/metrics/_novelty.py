"""Novelty detection scores: FPR at a TPR, OpenAUC, and the error rates of a
decision from p-values or a selection (positive class: novel)."""

from numbers import Real

import numpy as np
from sklearn.utils import check_consistent_length, column_or_1d
from sklearn.utils._param_validation import Interval, validate_params

from ._checks import check_binary, check_boolean, check_scores, fill_doc, same_labels
from ._open_world import novelty_threshold_at_tpr

__all__ = [
    "false_discovery_proportion",
    "false_novel_rate",
    "fpr_at_tpr",
    "novelty_power",
    "open_auc",
    "selection_power",
]


def _check_is_novel(is_novel, *others):
    """A non-empty boolean ``is_novel``, as long as each of ``others``."""
    is_novel = check_boolean(is_novel, "is_novel")
    if is_novel.shape[0] == 0:
        raise ValueError("is_novel is empty.")
    check_consistent_length(is_novel, *others)
    return is_novel


def _power(is_novel, declared):
    """Share of the novel rows declared novel."""
    if not is_novel.any():
        raise ValueError("is_novel has no novel row; the power is undefined.")
    return float(np.mean(declared[is_novel]))


def _check_pvalues(pvalues):
    pvalues = check_scores(pvalues, "pvalues")
    if pvalues.min() < 0.0 or pvalues.max() > 1.0:
        raise ValueError("pvalues has values outside [0, 1].")
    return pvalues


@validate_params(
    {
        "y_true": ["array-like"],
        "score": ["array-like"],
        "tpr": [Interval(Real, 0.0, 1.0, closed="right")],
    },
    prefer_skip_nested_validation=True,
)
@fill_doc
def fpr_at_tpr(y_true, score, tpr: float = 0.95) -> float:
    """False-positive rate at :func:`novelty_threshold_at_tpr`'s threshold for
    ``tpr`` (no interpolation); ``tpr=0.95`` gives the FPR95 of [1]_.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Whether each row is novel: booleans, or 0 and 1; both must occur.
    score : array-like of shape (n_samples,)
        %(score)s
    tpr : float in (0, 1], default=0.95
        The true-positive rate to reach.

    Returns
    -------
    fpr : float
        In [0, 1].

    References
    ----------
    .. [1] S. Liang, Y. Li and R. Srikant, "Enhancing the reliability of
       out-of-distribution image detection in neural networks", ICLR, 2018.

    Examples
    --------
    >>> from sklearn_flowr.metrics import fpr_at_tpr
    >>> y_true = [1, 1, 1, 1, 0, 0, 0, 0]
    >>> score = [0.9, 0.8, 0.7, 0.3, 0.6, 0.4, 0.2, 0.1]
    >>> fpr_at_tpr(y_true, score, tpr=0.75)  # tau = 0.7: no negative above
    0.0
    >>> fpr_at_tpr(y_true, score, tpr=0.95)  # tau = 0.3: 0.6 and 0.4 above
    0.5
    """
    positive = check_binary(y_true)
    score = check_scores(score, "score")
    check_consistent_length(positive, score)
    if positive.all():
        raise ValueError("y_true has no negative row; the FPR is undefined.")
    tau = novelty_threshold_at_tpr(score, positive, tpr)
    return float(np.mean(score[~positive] >= tau))


@validate_params(
    {
        "y_true": ["array-like"],
        "y_known": ["array-like"],
        "novelty_score": ["array-like"],
        "is_novel": ["array-like"],
    },
    prefer_skip_nested_validation=True,
)
@fill_doc
def open_auc(y_true, y_known, novelty_score, is_novel) -> float:
    """OpenAUC: the chance that a known row is classified correctly *and*
    ranked below a novel row by its novelty score (ties count one half) [1]_.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True class of each row.
    y_known : array-like of shape (n_samples,)
        Most probable known class of each row (ignored on novel rows).
    novelty_score : array-like of shape (n_samples,)
        %(score)s
    %(is_novel)s At least one row must be novel and one known.

    Returns
    -------
    open_auc : float
        In [0, 1]; higher is better.

    References
    ----------
    .. [1] Z. Wang, Q. Xu, Z. Yang, Y. He, X. Cao and Q. Huang, "OpenAUC:
       towards AUC-oriented open-set recognition", NeurIPS, 2022.

    Examples
    --------
    Known row 1 is below both novel rows, row 3 below one and tied with the
    other, row 2 is misclassified: 3.5 of 6 pairs.

    >>> from sklearn_flowr.metrics import open_auc
    >>> y_true = [0, 1, 1, 7, 8]
    >>> y_known = [0, 0, 1, 0, 1]
    >>> novelty_score = [0.1, 0.2, 0.6, 0.6, 0.9]
    >>> is_novel = [False, False, False, True, True]
    >>> round(open_auc(y_true, y_known, novelty_score, is_novel), 4)
    0.5833
    """
    y_true = column_or_1d(y_true)
    y_known = column_or_1d(y_known)
    score = check_scores(novelty_score, "novelty_score")
    is_novel = _check_is_novel(is_novel, y_true, y_known, score)
    if is_novel.all() or not is_novel.any():
        raise ValueError(
            "OpenAUC needs both known and novel rows; is_novel is "
            f"{'all True' if is_novel.all() else 'all False'}."
        )
    known = ~is_novel
    correct = same_labels(y_known[known], y_true[known])
    novel_scores = np.sort(score[is_novel])
    known_scores = score[known][correct]
    below_or_tied = np.searchsorted(novel_scores, known_scores, side="right")
    strictly_below = np.searchsorted(novel_scores, known_scores, side="left")
    n_novel = novel_scores.shape[0]
    successes = np.sum(n_novel - below_or_tied) + 0.5 * np.sum(
        below_or_tied - strictly_below
    )
    return float(successes / (known.sum() * n_novel))


_PVALUES = {"is_novel": ["array-like"], "pvalues": ["array-like"],
            "alpha": [Interval(Real, 0.0, 1.0, closed="both")]}
_SELECTION = {"is_novel": ["array-like"], "selected": ["array-like"]}


@validate_params(_PVALUES, prefer_skip_nested_validation=True)
@fill_doc
def false_novel_rate(is_novel, pvalues, alpha: float) -> float:
    """Share of the known rows whose novelty p-value is at most ``alpha``
    (at most ``alpha`` for a valid conformal p-value).

    Parameters
    ----------
    %(is_novel)s At least one row must be known.
    %(pvalues)s

    Returns
    -------
    rate : float
        In [0, 1].

    References
    ----------
    .. [1] S. Bates, E. Candès, L. Lei, Y. Romano and M. Sesia, "Testing for
       outliers with conformal p-values", The Annals of Statistics, 51(1),
       149-178, 2023.

    Examples
    --------
    >>> from sklearn_flowr.metrics import false_novel_rate
    >>> is_novel = [False, False, False, False, True, True]
    >>> pvalues = [0.8, 0.04, 0.3, 0.05, 0.01, 0.2]
    >>> false_novel_rate(is_novel, pvalues, alpha=0.05)  # 0.04 and 0.05
    0.5
    """
    pvalues = _check_pvalues(pvalues)
    is_novel = _check_is_novel(is_novel, pvalues)
    if is_novel.all():
        raise ValueError("is_novel has no known row; the false-novel rate is "
                         "undefined.")
    return float(np.mean(pvalues[~is_novel] <= alpha))


@validate_params(_PVALUES, prefer_skip_nested_validation=True)
@fill_doc
def novelty_power(is_novel, pvalues, alpha: float) -> float:
    """Share of the novel rows whose novelty p-value is at most ``alpha`` (power).

    Parameters
    ----------
    %(is_novel)s At least one row must be novel.
    %(pvalues)s

    Returns
    -------
    power : float
        In [0, 1].

    Examples
    --------
    >>> from sklearn_flowr.metrics import novelty_power
    >>> is_novel = [False, False, False, False, True, True]
    >>> pvalues = [0.8, 0.04, 0.3, 0.05, 0.01, 0.2]
    >>> novelty_power(is_novel, pvalues, alpha=0.05)  # only 0.01
    0.5
    """
    pvalues = _check_pvalues(pvalues)
    return _power(_check_is_novel(is_novel, pvalues), pvalues <= alpha)


def _check_selected(is_novel, selected):
    selected = check_boolean(selected, "selected")
    return _check_is_novel(is_novel, selected), selected


@validate_params(_SELECTION, prefer_skip_nested_validation=True)
@fill_doc
def false_discovery_proportion(is_novel, selected) -> float:
    """Share of the selected rows that are not novel; 0 when none is selected.

    Parameters
    ----------
    %(is_novel)s
    %(selected)s

    Returns
    -------
    fdp : float
        In [0, 1].

    References
    ----------
    .. [1] Y. Benjamini and Y. Hochberg, "Controlling the false discovery
       rate: a practical and powerful approach to multiple testing", Journal
       of the Royal Statistical Society, Series B, 57(1), 289-300, 1995.

    Examples
    --------
    >>> from sklearn_flowr.metrics import false_discovery_proportion
    >>> is_novel = [True, True, False, False, True]
    >>> false_discovery_proportion(is_novel, [True, True, True, False, False])
    0.3333333333333333
    >>> false_discovery_proportion(is_novel, [False] * 5)
    0.0
    """
    is_novel, selected = _check_selected(is_novel, selected)
    n_selected = int(selected.sum())
    if n_selected == 0:
        return 0.0
    return float(np.sum(selected & ~is_novel) / n_selected)


@validate_params(_SELECTION, prefer_skip_nested_validation=True)
@fill_doc
def selection_power(is_novel, selected) -> float:
    """Share of the novel rows that the selection holds (its power).

    Parameters
    ----------
    %(is_novel)s At least one row must be novel.
    %(selected)s

    Returns
    -------
    power : float
        In [0, 1].

    Examples
    --------
    >>> from sklearn_flowr.metrics import selection_power
    >>> is_novel = [True, True, False, False, True]
    >>> selection_power(is_novel, [True, True, True, False, False])
    0.6666666666666666
    """
    return _power(*_check_selected(is_novel, selected))
