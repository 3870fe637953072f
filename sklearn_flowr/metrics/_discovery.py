"""Class discovery: how well unlabelled rows were grouped into new classes
(clustering accuracy under the Hungarian matching, NMI, ARI)."""

import numpy as np
from scipy.optimize import linear_sum_assignment
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score
from sklearn.utils import Bunch, check_consistent_length, column_or_1d
from sklearn.utils._param_validation import validate_params

__all__ = ["clustering_accuracy", "discovery_report"]


def _check_labels(labels, name):
    """A 1-d label array without NaN; a list mixing numbers and strings stays
    objects (``np.asarray`` would turn 0 into "0")."""
    array = np.asarray(labels)
    if array.dtype.kind in "US" and not isinstance(labels, np.ndarray):
        array = np.asarray(labels, dtype=object)
    array = column_or_1d(array, warn=True)
    if array.dtype.kind == "f":
        has_nan = bool(np.isnan(array).any())
    else:
        has_nan = array.dtype.kind == "O" and any(
            isinstance(label, float) and label != label for label in array.tolist())
    if has_nan:
        raise ValueError(f"{name} contains NaN.")
    return array


def _codes(labels):
    """Integer code of each label and the distinct count; objects of mixed
    types are numbered in order of appearance."""
    if labels.dtype.kind != "O":
        distinct, codes = np.unique(labels, return_inverse=True)
        return codes.reshape(-1), distinct.shape[0]
    index = {}
    codes = np.fromiter((index.setdefault(label, len(index))
                         for label in labels.tolist()),
                        dtype=np.intp, count=labels.shape[0])
    return codes, len(index)


def _clustering_scores(y_true, y_pred):
    """Clustering accuracy, NMI and ARI of two non-empty label arrays."""
    (true_codes, n_true), (pred_codes, n_pred) = _codes(y_true), _codes(y_pred)
    contingency = np.bincount(pred_codes * n_true + true_codes,
                              minlength=n_pred * n_true).reshape(n_pred, n_true)
    # The best one-to-one map of clusters to classes; unmatched rows are wrong.
    rows, cols = linear_sum_assignment(contingency, maximize=True)
    return (int(contingency[rows, cols].sum()) / y_true.shape[0],
            float(normalized_mutual_info_score(true_codes, pred_codes)),
            float(adjusted_rand_score(true_codes, pred_codes)))


def _is_in(labels, reference):
    """Whether each label is one of ``reference`` (by ``==`` and hash, so
    labels of mixed types need no sorting)."""
    members = set(reference)
    return np.fromiter((label in members for label in labels.tolist()),
                       dtype=bool, count=labels.shape[0])


@validate_params(
    {"y_true": ["array-like"], "y_pred": ["array-like"]},
    prefer_skip_nested_validation=True,
)
def clustering_accuracy(y_true, y_pred) -> float:
    """Accuracy of a clustering under the best one-to-one matching of clusters
    to classes (Hungarian algorithm) [1]_; unmatched clusters' rows are errors.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True class of each row; any hashable labels.
    y_pred : array-like of shape (n_samples,)
        Predicted cluster of each row; any hashable labels.

    Returns
    -------
    accuracy : float
        In [0, 1].

    References
    ----------
    .. [1] K. Han, A. Vedaldi and A. Zisserman, "Learning to Discover Novel
       Visual Categories via Deep Transfer Clustering", ICCV, 2019.

    Examples
    --------
    >>> from sklearn_flowr.metrics import clustering_accuracy
    >>> clustering_accuracy([0, 0, 1, 1, 1], ["b", "b", "a", "a", "c"])  # "c" unmatched
    0.8
    """
    y_true = _check_labels(y_true, "y_true")
    y_pred = _check_labels(y_pred, "y_pred")
    check_consistent_length(y_true, y_pred)
    if y_true.shape[0] == 0:
        raise ValueError("y_true and y_pred are empty.")
    return _clustering_scores(y_true, y_pred)[0]


@validate_params(
    {
        "y_true": ["array-like"],
        "y_pred": ["array-like"],
        "known_classes": ["array-like"],
        "novel_label": "no_validation",
    },
    prefer_skip_nested_validation=True,
)
def discovery_report(y_true, y_pred, known_classes, *, novel_label=None) -> Bunch:
    """Score the classes a model discovered in a stream [1]_: known rows by
    accuracy, new and all rows by :func:`clustering_accuracy`, NMI and ARI.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True class of each row; any hashable labels.
    y_pred : array-like of shape (n_samples,)
        Label the model gave each row: known, opened (``"new-1"``) or novel.
    known_classes : array-like of shape (n_known,)
        Labels of the classes the model was given labels for; may be empty.
    novel_label : object, default=None
        Label meaning "novel, no class given" (None: the model has none).

    Returns
    -------
    report : :class:`~sklearn.utils.Bunch`
        ``accuracy_new``, ``nmi_new``, ``ari_new`` (new rows; NaN without),
        ``accuracy_all``, ``nmi_all``, ``ari_all``, ``known_accuracy``,
        ``n_discovered`` (distinct predicted labels outside ``known_classes``
        and ``novel_label``), ``n_true_new``, ``n_new`` and ``n_known``.

    References
    ----------
    .. [1] K. Cao, M. Brbic and J. Leskovec, "Open-World Semi-Supervised
       Learning", ICLR, 2022.

    Examples
    --------
    >>> from sklearn_flowr.metrics import discovery_report
    >>> y_true = [0, 0, 1, 7, 7, 8, 8, 8]
    >>> y_pred = [0, 0, 1, "new-1", "new-1", "new-2", "new-2", 1]
    >>> report = discovery_report(y_true, y_pred, known_classes=[0, 1])
    >>> report.known_accuracy, report.accuracy_new, report.accuracy_all
    (1.0, 0.8, 0.875)
    >>> report.n_discovered, report.n_true_new
    (2, 2)
    """
    y_true = _check_labels(y_true, "y_true")
    y_pred = _check_labels(y_pred, "y_pred")
    known_classes = _check_labels(known_classes, "known_classes").tolist()
    check_consistent_length(y_true, y_pred)
    if y_true.shape[0] == 0:
        raise ValueError("y_true and y_pred are empty.")
    # Objects compare label by label (``==``), whatever the two dtypes are.
    y_true_objects = y_true.astype(object)
    y_pred_objects = y_pred.astype(object)
    known = _is_in(y_true_objects, known_classes)
    new = ~known

    accuracy_all, nmi_all, ari_all = _clustering_scores(y_true_objects,
                                                        y_pred_objects)
    if new.any():
        accuracy_new, nmi_new, ari_new = _clustering_scores(
            y_true_objects[new], y_pred_objects[new])
    else:
        accuracy_new = nmi_new = ari_new = np.nan
    known_accuracy = (
        float(np.mean(np.asarray(y_pred_objects[known] == y_true_objects[known],
                                 dtype=bool)))
        if known.any() else np.nan
    )
    not_discovered = known_classes + ([] if novel_label is None else [novel_label])
    claimed = y_pred_objects[~_is_in(y_pred_objects, not_discovered)]
    return Bunch(
        accuracy_new=accuracy_new,
        nmi_new=nmi_new,
        ari_new=ari_new,
        accuracy_all=accuracy_all,
        nmi_all=nmi_all,
        ari_all=ari_all,
        known_accuracy=known_accuracy,
        n_discovered=len(set(claimed.tolist())),
        n_true_new=len(set(y_true_objects[new].tolist())),
        n_new=int(new.sum()),
        n_known=int(known.sum()),
    )
