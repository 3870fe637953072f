"""Open-world evaluation at a fixed novelty true-positive rate (FLOWR, section 6)."""

from numbers import Integral, Real

import numpy as np
from scipy import stats
from sklearn.metrics import brier_score_loss, roc_auc_score
from sklearn.utils import Bunch, check_consistent_length, column_or_1d
from sklearn.utils._param_validation import Interval, StrOptions, validate_params

from ._calibration import (
    DEFAULT_N_BINS,
    _reliability_bins,
    expected_calibration_error,
)
from ._checks import check_boolean, check_scores, fill_doc, same_labels
from ._h_measure import h_measure


@validate_params(
    {
        "p_novel": ["array-like"],
        "is_novel": ["array-like"],
        "tpr": [Interval(Real, 0.0, 1.0, closed="right")],
    },
    prefer_skip_nested_validation=True,
)
@fill_doc
def novelty_threshold_at_tpr(p_novel, is_novel, tpr: float) -> float:
    """Largest threshold whose novelty true-positive rate reaches ``tpr``: the
    ``k``-th largest novel ``p_novel``, ``k`` the least with ``k / n_novel >= tpr``.

    Parameters
    ----------
    p_novel : array-like of shape (n_samples,)
        P(novel), or any finite novelty score (higher = more likely novel).
    %(is_novel)s
    tpr : float in (0, 1]
        Target true-positive rate: the paper's 0.15 (small context) or 0.6 (large).

    Returns
    -------
    tau : float

    References
    ----------
    %(flowr)s

    Examples
    --------
    >>> from sklearn_flowr.metrics import novelty_threshold_at_tpr
    >>> p_novel = [0.9, 0.8, 0.7, 0.2, 0.6]
    >>> is_novel = [True, True, True, True, False]
    >>> novelty_threshold_at_tpr(p_novel, is_novel, tpr=0.5)
    0.8
    """
    p_novel = check_scores(p_novel, "p_novel")
    is_novel = check_boolean(is_novel, "is_novel")
    check_consistent_length(p_novel, is_novel)
    novel_scores = np.sort(p_novel[is_novel])[::-1]
    n_novel = novel_scores.shape[0]
    if n_novel == 0:
        raise ValueError("is_novel has no True row; no novelty TPR can be set.")
    # k / n_novel >= tpr compared in floats: ceil(tpr * n) is off by one when
    # the product rounds up (0.15 * 20).
    k = int(np.searchsorted(np.arange(1, n_novel + 1) / n_novel, tpr)) + 1
    return float(novel_scores[k - 1])


def _mean_and_half_width(values, confidence):
    """Mean over tasks and the t-based confidence half-width; nan if undefined."""
    values = values[np.isfinite(values)]
    n = values.shape[0]
    if n == 0:
        return np.nan, np.nan
    mean = float(np.mean(values))
    if n < 2:
        return mean, np.nan
    t_quantile = stats.t.ppf(0.5 + confidence / 2.0, df=n - 1)
    return mean, float(t_quantile * np.std(values, ddof=1) / np.sqrt(n))


def _task_accuracy(correct, rows, task_index, n_tasks, confidence):
    """Accuracy of each task over ``rows`` (NaN without any), its mean and CI."""
    hits = np.bincount(task_index[rows], weights=correct[rows], minlength=n_tasks)
    counts = np.bincount(task_index[rows], minlength=n_tasks)
    per_task = np.divide(hits, counts, out=np.full(n_tasks, np.nan), where=counts > 0)
    return (per_task, *_mean_and_half_width(per_task, confidence))


@validate_params(
    {
        "y_true": ["array-like"],
        "y_known": ["array-like"],
        "p_novel": ["array-like"],
        "is_novel": ["array-like"],
        "tpr": [Interval(Real, 0.0, 1.0, closed="right")],
        "task_ids": ["array-like", None],
        "confidence": [Interval(Real, 0.0, 1.0, closed="neither")],
        "support_mask": ["array-like", None],
        "y_pred": ["array-like", None],
        "novel_label": "no_validation",
        "probability": [StrOptions({"auto"}), "boolean"],
        "n_bins": [Interval(Integral, 1, None, closed="left")],
    },
    prefer_skip_nested_validation=True,
)
@fill_doc
def open_world_report(
    y_true,
    y_known,
    p_novel,
    is_novel,
    *,
    tpr: float = 0.15,
    task_ids=None,
    confidence: float = 0.95,
    support_mask=None,
    y_pred=None,
    novel_label=None,
    probability="auto",
    n_bins: int = DEFAULT_N_BINS,
    novelty_score=None,
) -> Bunch:
    """Score an open-world run as the FLOWR paper reports it: a query is novel
    iff ``p_novel >= tau`` (novelty TPR ``tpr``), else it gets ``y_known``.

    Accuracies are means over tasks with Student-t half-widths; H-measure,
    AUROC and calibration are pooled (user guide, "Evaluation protocol").

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True class of each query.
    y_known : array-like of shape (n_samples,)
        Most probable known class of each query.
    p_novel : array-like of shape (n_samples,)
        P(novel), or any finite novelty score (higher = more likely novel).
    %(is_novel)s
    tpr : float in (0, 1], default=0.15
        Novelty TPR of the operating point: 0.15 (small context), 0.6 (large).
    task_ids : array-like of shape (n_samples,), default=None
        Task of each row; None: one task (half-widths are then NaN).
    confidence : float in (0, 1), default=0.95
        Level of the confidence intervals.
    support_mask : array-like of bool of shape (n_samples,), default=None
        Rows of classes known before the stream; None: without ``is_novel`` rows.
    y_pred : array-like of shape (n_samples,), default=None
        The model's own decision, a known class or ``novel_label``.
    novel_label : object, default=None
        The label ``y_pred`` uses for "novel"; required with ``y_pred``.
    probability : bool or "auto", default="auto"
        Whether ``p_novel`` is a probability (calibration and argmax figures
        reported); "auto": when every value is in [0, 1].
    n_bins : int >= 1, default=15
        Equal-width bins of the calibration error and reliability diagram.
    novelty_score : array-like of shape (n_samples,), default=None
        A score in ``p_novel``'s order without its rounding (the log-odds);
        then the threshold, H-measure and AUROC use it.

    Returns
    -------
    report : :class:`~sklearn.utils.Bunch`
        ``accuracy``, ``support_accuracy``, ``incremental_accuracy`` (means
        over tasks), their ``*_ci`` half-widths and ``task_*`` values;
        ``h_measure``, ``auroc``, ``threshold``, ``novel_tpr``, ``n_tasks``;
        for a probability ``ece``, ``brier``, ``reliability`` and, with
        ``y_pred``, ``argmax_accuracy`` (``_ci``, ``task_``) and
        ``argmax_novel_tpr`` (else None).

    References
    ----------
    %(flowr)s

    Examples
    --------
    >>> from sklearn_flowr.metrics import open_world_report
    >>> y_true = [0, 1, 2, 2, 0, 1]
    >>> y_known = [0, 1, 0, 2, 0, 0]
    >>> p_novel = [0.1, 0.2, 0.9, 0.3, 0.2, 0.4]
    >>> is_novel = [False, False, True, False, False, False]
    >>> report = open_world_report(y_true, y_known, p_novel, is_novel, tpr=1.0)
    >>> report.threshold, round(report.accuracy, 3), report.support_accuracy
    (0.9, 0.833, 0.75)
    >>> round(report.brier, 4), round(report.ece, 4)
    (0.0583, 0.2167)
    >>> report = open_world_report(y_true, y_known, p_novel, is_novel, tpr=1.0,
    ...                            y_pred=[0, 1, -1, 2, 0, 0], novel_label=-1)
    >>> round(report.argmax_accuracy, 3), report.argmax_novel_tpr
    (0.833, 1.0)
    """
    y_true = column_or_1d(y_true)
    y_known = column_or_1d(y_known)
    p_novel = check_scores(p_novel, "p_novel")
    is_novel = check_boolean(is_novel, "is_novel")
    task_ids = (
        np.zeros(y_true.shape[0], dtype=np.intp)
        if task_ids is None
        else column_or_1d(task_ids)
    )
    arrays = [y_true, y_known, p_novel, is_novel, task_ids]
    if support_mask is not None:
        support_mask = check_boolean(support_mask, "support_mask")
        arrays.append(support_mask)
    if y_pred is not None:
        y_pred = column_or_1d(y_pred)
        arrays.append(y_pred)
        if novel_label is None:
            raise ValueError("novel_label is required with y_pred: it says which "
                             "decisions are 'novel'.")
    check_consistent_length(*arrays)
    in_unit_interval = bool(p_novel.min() >= 0.0 and p_novel.max() <= 1.0)
    if probability == "auto":
        probability = in_unit_interval
    elif probability and not in_unit_interval:
        raise ValueError(
            "probability=True but p_novel has values outside [0, 1]; pass "
            "probability=False (or 'auto') for a novelty score."
        )
    if is_novel.all():
        raise ValueError(
            "Every row is novel; the report needs known rows as well to score "
            "the novelty detector."
        )

    ranking = p_novel
    if novelty_score is not None:
        ranking = check_scores(novelty_score, "novelty_score")
        check_consistent_length(ranking, p_novel)
    threshold = novelty_threshold_at_tpr(ranking, is_novel, tpr)
    declared_novel = ranking >= threshold
    correct = np.where(declared_novel, is_novel,
                       ~is_novel & same_labels(y_known, y_true))

    tasks, task_index = np.unique(task_ids, return_inverse=True)
    n_tasks = tasks.shape[0]
    _, class_index = np.unique(y_true, return_inverse=True)
    # One key per (task, class): a class is incremental in a task iff one of its
    # rows in that task was novel when it arrived.
    pair_key = task_index * (class_index.max() + 1) + class_index
    novel_pairs = np.zeros(pair_key.max() + 1, dtype=bool)
    novel_pairs[pair_key[is_novel]] = True
    incremental_rows = novel_pairs[pair_key]
    support_rows = ~incremental_rows if support_mask is None else support_mask

    report = Bunch(
        threshold=threshold,
        novel_tpr=float(np.mean(declared_novel[is_novel])),
        h_measure=h_measure(is_novel.astype(np.int8), ranking),
        auroc=float(roc_auc_score(is_novel, ranking)),
        n_tasks=n_tasks,
        argmax_novel_tpr=None,
    )
    report.update(_calibration(p_novel, is_novel, probability, n_bins))
    argmax_correct = None
    if probability and y_pred is not None:
        pred_novel = same_labels(y_pred, np.full(y_pred.shape[0], novel_label,
                                                  dtype=object))
        argmax_correct = np.where(pred_novel, is_novel,
                                  ~is_novel & same_labels(y_pred, y_true))
        report.argmax_novel_tpr = float(np.mean(pred_novel[is_novel]))
    all_rows = np.ones_like(is_novel)
    for name, hits, rows in [("accuracy", correct, all_rows),
                             ("support_accuracy", correct, support_rows),
                             ("incremental_accuracy", correct, incremental_rows),
                             ("argmax_accuracy", argmax_correct, all_rows)]:
        report[f"task_{name}"], report[name], report[f"{name}_ci"] = (
            (None,) * 3 if hits is None else _task_accuracy(
                hits.astype(np.float64), rows, task_index, n_tasks, confidence))
    return report


def _calibration(p_novel, is_novel, probability, n_bins):
    """ECE, Brier score and reliability bins of P(novel), or None for a score."""
    if not probability:
        return dict(probability=False, ece=None, brier=None, reliability=None)
    return dict(
        probability=True,
        ece=expected_calibration_error(is_novel, p_novel, n_bins=n_bins),
        brier=float(brier_score_loss(is_novel, p_novel)),
        reliability=_reliability_bins(is_novel, p_novel, n_bins=n_bins),
    )
