"""Open-world evaluation at a fixed novelty true-positive rate (FLOWR, section 6)."""

from numbers import Integral, Real

import numpy as np
from scipy import stats
from sklearn.metrics import brier_score_loss, roc_auc_score
from sklearn.utils import Bunch, check_array, check_consistent_length, column_or_1d
from sklearn.utils._param_validation import Interval, StrOptions, validate_params

from ._calibration import (
    DEFAULT_N_BINS,
    expected_calibration_error,
    reliability_bins,
)
from ._h_measure import h_measure


def _check_p_novel(p_novel):
    p_novel = check_array(
        p_novel, ensure_2d=False, dtype=np.float64, input_name="p_novel"
    )
    if p_novel.ndim != 1:
        raise ValueError(f"p_novel must be one-dimensional; got shape {p_novel.shape}.")
    # Thresholds at a TPR, AUROC and H-measure depend only on the ranking, so
    # any finite novelty score works: FLOWR's P(novel), or a baseline's
    # distance to the nearest class (check_array already refused nan/inf).
    return p_novel


def _check_boolean(values, name):
    values = np.asarray(values)
    if values.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional; got shape {values.shape}.")
    if values.dtype != bool:
        raise ValueError(f"{name} must be a boolean array; got dtype {values.dtype}.")
    return values


@validate_params(
    {
        "p_novel": ["array-like"],
        "is_novel": ["array-like"],
        "tpr": [Interval(Real, 0.0, 1.0, closed="right")],
    },
    prefer_skip_nested_validation=True,
)
def novelty_threshold_at_tpr(p_novel, is_novel, tpr: float) -> float:
    """Largest threshold whose novelty true-positive rate reaches ``tpr``.

    A row is declared novel iff ``p_novel >= tau``. The true-positive rate
    ``TPR(tau)`` is the fraction of ``is_novel`` rows declared novel, pooled
    over all rows given. It falls as ``tau`` grows, so the returned ``tau`` is
    the largest value with ``TPR(tau) >= tpr``: with ``k`` the smallest count
    such that ``k / n_novel >= tpr``, ``tau`` is the ``k``-th largest
    ``p_novel`` among the novel rows. Ties are resolved by the rule itself:
    every row tied at ``tau`` is declared novel, so the attained TPR can exceed
    ``tpr`` but is never below it, and the result depends only on the values,
    not on the row order.

    Parameters
    ----------
    p_novel : array-like of shape (n_samples,)
        Probability that each row belongs to a novel class, or any finite
        novelty score (higher = more likely novel).

    is_novel : array-like of bool of shape (n_samples,)
        Whether each row's class was unseen at the moment it was predicted.
        Only these rows determine the threshold.

    tpr : float in (0, 1]
        Target true-positive rate on the novel rows, 0.15 in the paper's
        small-context and 0.6 in its large-context setting.

    Returns
    -------
    tau : float
        The threshold.

    References
    ----------
    .. [1] M. Willes, J. Harrison, A. Harakeh, C. Finn, M. Pavone and
       S. Waslander, "Bayesian embeddings for few-shot open world recognition",
       IEEE TPAMI, section 6.

    Examples
    --------
    >>> from sklearn_flowr.metrics import novelty_threshold_at_tpr
    >>> p_novel = [0.9, 0.8, 0.7, 0.2, 0.6]
    >>> is_novel = [True, True, True, True, False]
    >>> novelty_threshold_at_tpr(p_novel, is_novel, tpr=0.5)
    0.8
    """
    p_novel = _check_p_novel(p_novel)
    is_novel = _check_boolean(is_novel, "is_novel")
    check_consistent_length(p_novel, is_novel)
    novel_scores = np.sort(p_novel[is_novel])[::-1]
    n_novel = novel_scores.shape[0]
    if n_novel == 0:
        raise ValueError("is_novel has no True row; no novelty TPR can be set.")
    # Smallest k with k / n_novel >= tpr, decided by the same floating-point
    # comparison the docstring states (ceil(tpr * n) alone is off by one when
    # the product rounds up, e.g. 0.15 * 20).
    k = max(1, int(np.ceil(tpr * n_novel)))
    while k > 1 and (k - 1) / n_novel >= tpr:
        k -= 1
    while k < n_novel and k / n_novel < tpr:
        k += 1
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


def _per_task_accuracy(correct, rows, task_index, n_tasks):
    """Accuracy of each task over the selected rows; nan for a task with none."""
    hits = np.bincount(task_index[rows], weights=correct[rows], minlength=n_tasks)
    counts = np.bincount(task_index[rows], minlength=n_tasks)
    accuracy = np.full(n_tasks, np.nan)
    np.divide(hits, counts, out=accuracy, where=counts > 0)
    return accuracy


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
    """Score an open-world run the way the FLOWR paper reports it.

    The rows are queries of one or more online tasks (predict, then reveal the
    label). The threshold ``tau`` is set on the pooled run so that the novelty
    true-positive rate is ``tpr`` (see :func:`novelty_threshold_at_tpr`); a
    query is declared novel iff ``p_novel >= tau`` and otherwise gets its best
    known class ``y_known``. It is correct when declared novel and ``is_novel``,
    or when not declared novel, not ``is_novel`` and ``y_known == y_true``.

    Accuracies are computed per task, then averaged over tasks, with a
    Student-t confidence interval ``t_{(1+confidence)/2, n-1} * s / sqrt(n)``
    over the ``n`` tasks (``s`` the sample standard deviation); with 1000 tasks
    this is the usual ``1.96 s / sqrt(n)``. A task without support (or without
    incremental) rows is left out of that average. The H-measure and AUROC of
    ``p_novel`` against ``is_novel`` are computed on the pooled rows, like the
    threshold.

    When ``p_novel`` is a probability, the report also says how well it is
    calibrated against the first sightings ``is_novel``: the expected
    calibration error (:func:`expected_calibration_error`, ``n_bins``
    equal-width bins, 15 by default), the Brier score
    (:func:`sklearn.metrics.brier_score_loss`) and the reliability-diagram bins
    (:func:`sklearn.calibration.calibration_curve`), pooled over the run. With
    ``y_pred``, the threshold-free decision of the model (the argmax over its
    N + 1 columns: novel when ``P(novel)`` beats every known class) is scored
    like the thresholded one, next to it. A novelty score that is not a
    probability (a baseline's distance) gets none of these: the keys are
    None.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True class of each query.

    y_known : array-like of shape (n_samples,)
        Most probable known class of each query (used when not declared novel).

    p_novel : array-like of shape (n_samples,)
        Probability that the query belongs to a class not seen yet, or any
        finite novelty score (higher = more likely novel; a baseline's
        distance to the nearest class, say).

    is_novel : array-like of bool of shape (n_samples,)
        Whether the query's class had not been seen at that moment.

    tpr : float in (0, 1], default=0.15
        Novelty true-positive rate that fixes the operating point: 0.15 in the
        small-context setting, 0.6 in the large-context one.

    task_ids : array-like of shape (n_samples,), default=None
        Task of each row. None means a single task (confidence half-widths are
        then nan).

    confidence : float in (0, 1), default=0.95
        Level of the confidence intervals.

    support_mask : array-like of bool of shape (n_samples,), default=None
        Rows whose class was known before the stream started. If None, a row is
        a support row when its class has no ``is_novel`` row in its task.

    y_pred : array-like of shape (n_samples,), default=None
        The model's own threshold-free decision, a known class or
        ``novel_label``: the argmax over the N + 1 columns of
        ``predict_proba`` (``open_world_step``'s ``y_pred`` for FLOWR). Scored
        only when ``p_novel`` is a probability.

    novel_label : object, default=None
        The label ``y_pred`` uses for "novel"; required with ``y_pred``.

    probability : bool or "auto", default="auto"
        Whether ``p_novel`` is the probability P(novel), so that its
        calibration and the argmax decision are reported. ``"auto"``: when
        every value lies in [0, 1]. Pass False for a score that happens to lie
        there without being a probability (a cosine distance, ``1 -`` a
        softmax over the known classes only).

    n_bins : int, default=15
        Equal-width bins of [0, 1] of the calibration error and the
        reliability diagram.

    novelty_score : array-like of shape (n_samples,), default=None
        A score in the same order as ``p_novel`` without its float rounding,
        e.g. the log-odds ``log P(novel) - log P(known)`` (FLOWR's
        ``open_world_step`` returns it): far from the decision boundary
        P(novel) rounds to exactly 1 (or 0) in float64, and those ties would
        move the operating point above ``tpr``. When given, the threshold
        (then on this score), the H-measure and the AUROC use it; the
        calibration keys use ``p_novel``. ``None``: ``p_novel`` for all.

    Returns
    -------
    report : :class:`~sklearn.utils.Bunch`
        With keys ``accuracy``, ``support_accuracy`` and
        ``incremental_accuracy`` (means over tasks) and their ``*_ci``
        half-widths; ``h_measure``, ``auroc``, ``threshold`` (``tau``),
        ``novel_tpr`` (the attained pooled TPR), ``n_tasks``, and the per-task
        arrays ``task_accuracy``, ``task_support_accuracy`` and
        ``task_incremental_accuracy`` of shape (n_tasks,). Incremental rows are
        all rows of the classes with at least one ``is_novel`` row in the task.
        Calibration: ``probability`` (bool), ``ece``, ``brier`` (floats), and
        ``reliability`` (a Bunch of ``prob_pred``, ``prob_true``, ``count``
        over the non-empty bins, and ``n_bins``). Threshold-free decision:
        ``argmax_accuracy`` and its ``argmax_accuracy_ci`` (mean over tasks,
        as ``accuracy``), ``argmax_novel_tpr`` (its pooled novelty TPR) and
        ``task_argmax_accuracy``. All of them None when ``p_novel`` is not a
        probability; the argmax ones also when ``y_pred`` is not given.

    References
    ----------
    .. [1] M. Willes, J. Harrison, A. Harakeh, C. Finn, M. Pavone and
       S. Waslander, "Bayesian embeddings for few-shot open world recognition",
       IEEE TPAMI, section 6.

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
    >>> round(report.brier, 4), round(report.ece, 4)  # P(novel) vs first sightings
    (0.0583, 0.2167)

    The model's own argmax decision, here novel only for the third row:

    >>> y_pred = [0, 1, -1, 2, 0, 0]
    >>> report = open_world_report(y_true, y_known, p_novel, is_novel, tpr=1.0,
    ...                            y_pred=y_pred, novel_label=-1)
    >>> round(report.argmax_accuracy, 3), report.argmax_novel_tpr
    (0.833, 1.0)

    A distance is not a probability: no calibration figure.

    >>> report = open_world_report(y_true, y_known, [3.0, 1.0, 9.0, 2.0, 1.5, 4.0],
    ...                            is_novel, tpr=1.0)
    >>> report.probability, report.ece
    (False, None)
    """
    y_true = column_or_1d(y_true)
    y_known = column_or_1d(y_known)
    p_novel = _check_p_novel(p_novel)
    is_novel = _check_boolean(is_novel, "is_novel")
    task_ids = (
        np.zeros(y_true.shape[0], dtype=np.intp)
        if task_ids is None
        else column_or_1d(task_ids)
    )
    arrays = [y_true, y_known, p_novel, is_novel, task_ids]
    if support_mask is not None:
        support_mask = _check_boolean(support_mask, "support_mask")
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
        ranking = _check_p_novel(novelty_score)
        check_consistent_length(ranking, p_novel)
    threshold = novelty_threshold_at_tpr(ranking, is_novel, tpr)
    declared_novel = ranking >= threshold
    correct = np.where(declared_novel, is_novel,
                       ~is_novel & _same_labels(y_known, y_true))

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

    correct = correct.astype(np.float64)
    all_rows = np.ones_like(is_novel)
    task_accuracy = _per_task_accuracy(correct, all_rows, task_index, n_tasks)
    task_support = _per_task_accuracy(correct, support_rows, task_index, n_tasks)
    task_incremental = _per_task_accuracy(
        correct, incremental_rows, task_index, n_tasks
    )

    report = Bunch(
        threshold=threshold,
        novel_tpr=float(np.mean(declared_novel[is_novel])),
        h_measure=h_measure(is_novel.astype(np.int8), ranking),
        auroc=float(roc_auc_score(is_novel, ranking)),
        n_tasks=n_tasks,
        task_accuracy=task_accuracy,
        task_support_accuracy=task_support,
        task_incremental_accuracy=task_incremental,
    )
    for name, per_task in [
        ("accuracy", task_accuracy),
        ("support_accuracy", task_support),
        ("incremental_accuracy", task_incremental),
    ]:
        report[name], report[f"{name}_ci"] = _mean_and_half_width(per_task, confidence)
    report.update(_calibration(p_novel, is_novel, probability, n_bins))
    argmax = dict.fromkeys(["argmax_accuracy", "argmax_accuracy_ci",
                            "argmax_novel_tpr", "task_argmax_accuracy"])
    if probability and y_pred is not None:
        pred_novel = _same_labels(y_pred, np.full(y_pred.shape[0], novel_label,
                                                  dtype=object))
        argmax_correct = np.where(pred_novel, is_novel,
                                  ~is_novel & _same_labels(y_pred, y_true))
        per_task = _per_task_accuracy(argmax_correct.astype(np.float64), all_rows,
                                      task_index, n_tasks)
        mean, half_width = _mean_and_half_width(per_task, confidence)
        argmax.update(argmax_accuracy=mean, argmax_accuracy_ci=half_width,
                      argmax_novel_tpr=float(np.mean(pred_novel[is_novel])),
                      task_argmax_accuracy=per_task)
    report.update(argmax)
    return report


def _same_labels(a, b):
    """Elementwise label equality; as objects when the dtypes differ (e.g. an
    int novel_label next to string classes), so numpy never refuses it."""
    if a.dtype != b.dtype:
        return np.asarray(a.astype(object) == b.astype(object), dtype=bool)
    return a == b


def _calibration(p_novel, is_novel, probability, n_bins):
    """ECE, Brier score and reliability bins of P(novel), or None for a score."""
    if not probability:
        return dict(probability=False, ece=None, brier=None, reliability=None)
    return dict(
        probability=True,
        ece=expected_calibration_error(is_novel, p_novel, n_bins=n_bins),
        brier=float(brier_score_loss(is_novel, p_novel)),
        reliability=reliability_bins(is_novel, p_novel, n_bins=n_bins),
    )
