"""The open-world probability array: ``predict_proba`` output that knows its classes.

scikit-learn's scorers hand a metric only ``(y_true, predict_proba(X))``. For
an open-world classifier the last column is P(novel), and whether a test row
is novel depends on the classes the model knew when it predicted, which
``y_true`` alone cannot tell. :class:`OpenWorldProba` carries those classes
with the array, so ``make_scorer(h_measure, response_method="predict_proba")``
and :func:`~sklearn_flowr.metrics.open_world_log_loss` work as written.
"""

import numpy as np
from sklearn.utils import column_or_1d


class OpenWorldProba(np.ndarray):
    """An ndarray of shape ``(n_samples, n_classes + 1)`` that knows its classes.

    It is what the open-world classifiers' ``predict_proba`` and
    ``predict_log_proba`` return: an ordinary ndarray (every NumPy and
    scikit-learn function takes it) whose columns follow ``known_classes``,
    the estimator's ``classes_`` at prediction time, and whose last column is
    the novel class. ``np.asarray`` gives the plain array.

    The attributes mean "this is the full open-world layout", so only row
    selections, copies and views of the whole array keep them. Anything else
    gives a plain ndarray: a column or any column selection (``proba[:, -1]``
    does not pass for an open-world output), the result of a ufunc
    (``np.exp(log_proba)`` is no longer a log-probability) or of a NumPy
    function (``np.sort``, ``np.concatenate``, ...).

    Parameters
    ----------
    values : array-like of shape (n_samples, n_classes + 1)
        Probabilities or log-probabilities; the last column is the novel class.

    known_classes : array-like of shape (n_classes,)
        The labels of the first ``n_classes`` columns, in order.

    is_log_proba : bool, default=False
        Whether ``values`` are log-probabilities.

    Attributes
    ----------
    known_classes : ndarray of shape (n_classes,)
        The classes the estimator knew (a read-only copy of its ``classes_``).

    is_log_proba : bool
        Whether the values are log-probabilities.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_flowr._proba import OpenWorldProba
    >>> proba = OpenWorldProba([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]], ["a", "b"])
    >>> proba.known_classes
    array(['a', 'b'], dtype='<U1')
    >>> proba[1:].known_classes  # rows of the full layout keep the classes
    array(['a', 'b'], dtype='<U1')
    >>> type(proba[:, -1])  # a column is a plain array
    <class 'numpy.ndarray'>
    >>> np.asarray(proba)
    array([[0.7, 0.2, 0.1],
           [0.1, 0.1, 0.8]])
    """

    def __new__(cls, values, known_classes, *, is_log_proba=False):
        obj = np.asarray(values).view(cls)
        known = np.array(known_classes)  # a copy: classes_ grows with partial_fit
        known.flags.writeable = False
        if known.ndim != 1 or not _is_full_layout(obj, known):
            raise ValueError(
                f"An open-world output has shape (n_samples, n_classes + 1); got "
                f"{obj.shape} for {known.shape[0]} known classes."
            )
        obj._known_classes = known
        obj._is_log_proba = bool(is_log_proba)
        return obj

    def __array_finalize__(self, obj):
        # Called for every view or copy, and with obj=None on unpickling.
        self._known_classes = getattr(obj, "_known_classes", None)
        self._is_log_proba = getattr(obj, "_is_log_proba", False)

    @property
    def known_classes(self):
        # Checked on access rather than in __array_finalize__: some views
        # (transpose, reshape) get their shape only after being finalized.
        known = self._known_classes
        return known if known is not None and _is_full_layout(self, known) else None

    @property
    def is_log_proba(self):
        return self.known_classes is not None and self._is_log_proba

    def __getitem__(self, key):
        result = super().__getitem__(key)
        if isinstance(result, OpenWorldProba) and (
            result.known_classes is None or not _selects_rows_only(key)
        ):
            # A column selection of matching width (proba[:, ::-1]) has the
            # right shape but not the layout.
            return result.view(np.ndarray)
        return result

    @property
    def T(self):
        """The transpose, a plain ndarray (rows are no longer samples)."""
        return self.view(np.ndarray).T

    def transpose(self, *axes):
        """The transpose, a plain ndarray (rows are no longer samples)."""
        return self.view(np.ndarray).transpose(*axes)

    def __array_ufunc__(self, ufunc, method, *inputs, out=None, **kwargs):
        # Computed on plain arrays: exp(log_proba) or 1 - proba is no longer
        # the output the attributes describe.
        inputs = tuple(_plain(x) for x in inputs)
        if out is not None:
            kwargs["out"] = tuple(_plain(x) for x in out)
        result = getattr(ufunc, method)(*inputs, **kwargs)
        if out is not None:
            # In place (proba /= total): the array itself, attributes and all.
            return out[0] if len(out) == 1 else out
        return result

    def __array_function__(self, func, types, args, kwargs):
        # np.sort, np.flip, np.concatenate, ...: plain results, as for ufuncs.
        result = super().__array_function__(func, types, args, kwargs)
        if isinstance(result, tuple | list):
            return type(result)(_plain(x) for x in result)
        return _plain(result)


def _plain(x):
    return x.view(np.ndarray) if isinstance(x, OpenWorldProba) else x


def _is_full_layout(array, known_classes):
    return array.ndim == 2 and array.shape[1] == len(known_classes) + 1


def _selects_rows_only(key):
    """Whether ``array[key]`` leaves the column axis untouched."""
    if not isinstance(key, tuple):
        return True
    if len(key) == 1:
        return True
    if len(key) == 2 and key[0] is not Ellipsis:
        columns = key[1]
        return columns is Ellipsis or (
            isinstance(columns, slice) and columns == slice(None)
        )
    return False


def novel_rows(y_true, known_classes, *, require_both=True):
    """Which rows of ``y_true`` are novel: their label is not a known class.

    The one rule shared by the open-world scorers: a test row is novel when
    its class was not among the classes the estimator trained on. A ranking
    score (the H-measure) cannot score a fold that has only novel rows or only
    known rows, so by default such a fold is refused.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels.

    known_classes : array-like of shape (n_classes,)
        The classes the estimator knew.

    require_both : bool, default=True
        Whether to refuse a fold without novel rows or without known rows.

    Returns
    -------
    is_novel : ndarray of shape (n_samples,), dtype bool
        True where the label is not in ``known_classes``.

    Raises
    ------
    ValueError
        When ``require_both`` and every row is novel or every row is known.

    Examples
    --------
    >>> from sklearn_flowr._proba import novel_rows
    >>> novel_rows([0, 3, 1, 3], known_classes=[0, 1])
    array([False,  True, False,  True])
    """
    y_true = column_or_1d(y_true)
    is_novel = ~np.isin(y_true, np.asarray(known_classes))
    if not require_both:
        return is_novel
    if not is_novel.any():
        raise ValueError(
            "Cannot score this fold: every row has a known label, so the fold "
            "has no row of a class the estimator did not train on. Use "
            "sklearn_flowr.model_selection.OpenWorldSplit, which holds whole "
            "classes out of the training fold, rather than a splitter such as "
            "KFold or StratifiedKFold."
        )
    if is_novel.all():
        raise ValueError(
            "Cannot score this fold: every row has a novel label, so the fold "
            "has no row of a class the estimator trained on. Use "
            "sklearn_flowr.model_selection.OpenWorldSplit with test_size > 0, "
            "which also puts rows of the training classes in the test fold."
        )
    return is_novel
