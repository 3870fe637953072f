"""Log-loss of an open-world classifier, novel rows scored on the novel column."""

import numpy as np
from sklearn.utils import check_consistent_length, column_or_1d
from sklearn.utils._param_validation import validate_params

from ..validation import novel_rows
from ._checks import check_proba


@validate_params(
    {
        "y_true": ["array-like"],
        "y_proba": ["array-like"],
        "sample_weight": ["array-like", None],
    },
    prefer_skip_nested_validation=True,
)
def open_world_log_loss(y_true, y_proba, *, sample_weight=None) -> float:
    """Log-loss of open-world probabilities: a row of a known class is scored
    on its column, any other on the last (novel) one; lower is better.

    ``make_scorer(open_world_log_loss, greater_is_better=False,
    response_method="predict_proba")`` is the open-world ``neg_log_loss``.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels, unseen ones included.
    y_proba : array of shape (n_samples, n_classes + 1)
        An open-world ``predict_proba`` or ``predict_log_proba`` output, as
        returned (it carries the known classes).
    sample_weight : array-like of shape (n_samples,), default=None

    Returns
    -------
    loss : float
        The (weighted) mean negative log-likelihood, probabilities clipped to
        ``[eps, 1 - eps]`` as in :func:`sklearn.metrics.log_loss`.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_flowr import CRPGaussianClassifier
    >>> from sklearn_flowr.metrics import open_world_log_loss
    >>> X = np.array([[0.0], [0.3], [5.0], [5.2], [9.0], [9.4]])
    >>> y = np.array([0, 0, 1, 1, 2, 2])
    >>> head = CRPGaussianClassifier(sigma=0.1).fit(X[y < 2], y[y < 2])
    >>> proba = head.predict_proba(X)  # columns 0, 1, novel
    >>> loss = open_world_log_loss(y, proba)  # class 2 scored on P(novel)
    >>> bool(np.isclose(loss, -np.log(proba[[0, 1, 2, 3, 4, 5],
    ...                                     [0, 0, 1, 1, 2, 2]]).mean()))
    True
    """
    known_classes = getattr(y_proba, "known_classes", None)
    if known_classes is None:
        raise ValueError(
            "open_world_log_loss needs the array an open-world classifier's "
            "predict_proba or predict_log_proba returned, unchanged: it carries "
            "the classes the classifier knew (known_classes), which tell the "
            "novel rows. Got a plain array (np.asarray, slicing or arithmetic "
            "drops them)."
        )
    y_true = column_or_1d(y_true)
    values, _, is_log_proba = check_proba(y_proba, dtype=[np.float64, np.float32])
    check_consistent_length(y_true, values, sample_weight)
    is_novel = novel_rows(y_true, known_classes, require_both=False)
    # The novel column is the last; a known label's column is its position in
    # known_classes, which follow classes_ and need not be sorted.
    order = np.argsort(known_classes, kind="stable")
    columns = np.full(y_true.shape[0], known_classes.shape[0])
    columns[~is_novel] = order[np.searchsorted(known_classes[order], y_true[~is_novel])]
    chosen = values[np.arange(y_true.shape[0]), columns]
    eps = np.finfo(values.dtype).eps
    if is_log_proba:
        log_p = np.clip(chosen, np.log(eps), np.log1p(-eps))
    else:
        log_p = np.log(np.clip(chosen, eps, 1.0 - eps))
    return float(-np.average(log_p, weights=sample_weight))
