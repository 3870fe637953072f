"""Cross-validation that holds whole classes out of training (open world)."""

import math
from numbers import Integral, Real

import numpy as np
from sklearn.model_selection import BaseCrossValidator, GroupKFold
from sklearn.utils import check_random_state, column_or_1d
from sklearn.utils._param_validation import Interval, RealNotInt, validate_params

__all__ = ["OpenWorldSplit", "class_disjoint_folds"]


class OpenWorldSplit(BaseCrossValidator):
    """Open-world cross-validator: each split holds ``n_novel_classes`` whole
    classes out of training (in turn, from a shuffled class order) and a share
    ``test_size`` of every other class's rows. Score it with
    :func:`~sklearn_flowr.metrics.novelty_scorer` in ``GridSearchCV``.

    Parameters
    ----------
    n_splits : int >= 1, default=5
        Number of splits.
    n_novel_classes : int >= 1, float in (0, 1) or None, default=0.2
        Classes held out per split: a count, or a fraction of the classes
        (rounded up); None: ``n_classes // n_splits``.
    test_size : float in [0, 1), default=0.2
        Share of each kept class's rows in the test fold (one stays in training).
    random_state : int, RandomState instance or None, default=None
        Class order and row shares; an int gives the same splits every call.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_flowr.model_selection import OpenWorldSplit
    >>> y = np.repeat([0, 1, 2, 3, 4], 4)
    >>> cv = OpenWorldSplit(n_splits=2, n_novel_classes=1, test_size=0.25,
    ...                     random_state=0)
    >>> cv.get_n_splits()
    2
    >>> for train, test in cv.split(np.zeros((20, 1)), y):
    ...     print(np.setdiff1d(y[test], y[train]), len(train), len(test))
    [2] 12 8
    [0] 12 8
    """

    # Checked where it is built, as scikit-learn's splitters do.
    @validate_params(
        {"n_splits": [Interval(Integral, 1, None, closed="left")],
         "n_novel_classes": [Interval(Integral, 1, None, closed="left"),
                             Interval(RealNotInt, 0, 1, closed="neither"), None],
         "test_size": [Interval(Real, 0, 1, closed="left")]},
        prefer_skip_nested_validation=True)
    def __init__(
        self, n_splits=5, *, n_novel_classes=0.2, test_size=0.2, random_state=None
    ):
        if isinstance(n_novel_classes, bool):  # Interval(Integral) takes bools
            raise ValueError("n_novel_classes must be an int >= 1, a float in (0, 1) "
                             f"or None, not a bool; got {n_novel_classes!r}.")
        self.n_splits = n_splits
        self.n_novel_classes = n_novel_classes
        self.test_size = test_size
        self.random_state = random_state

    def get_n_splits(self, X=None, y=None, groups=None):
        """Return the number of splits.

        Parameters
        ----------
        X, y, groups : object
            Ignored.

        Returns
        -------
        n_splits : int
        """
        return self.n_splits

    def _n_held_out(self, n_classes):
        if self.n_novel_classes is None:
            n_held = n_classes // self.n_splits
        elif isinstance(self.n_novel_classes, Integral):
            n_held = int(self.n_novel_classes)
        else:
            n_held = math.ceil(self.n_novel_classes * n_classes)
        if n_held < 1 or n_held >= n_classes:
            raise ValueError(
                f"n_novel_classes={self.n_novel_classes!r} holds out {n_held} of "
                f"{n_classes} classes; it must leave at least one class out and "
                "at least one class in the training fold."
            )
        return n_held

    def _held_out_classes(self, n_classes, n_held, rng):
        """Class indices held out by each split, cycling shuffled orders."""
        order = list(rng.permutation(n_classes))
        for _ in range(self.n_splits):
            if len(order) < n_held:
                # A new pass: the old pass's pending classes first and again at
                # its end, so no split holds out one class twice.
                pending = order
                fresh = [c for c in rng.permutation(n_classes) if c not in pending]
                order = pending + fresh + pending
            yield np.asarray(order[:n_held], dtype=np.intp)
            order = order[n_held:]

    def _iter_test_masks(self, X, y, groups=None):
        if y is None:
            raise ValueError("OpenWorldSplit needs y: it splits by class.")
        y = column_or_1d(y)
        _, class_index = np.unique(y, return_inverse=True)
        n_classes = int(class_index.max()) + 1 if y.size else 0
        if n_classes < 2:
            raise ValueError(
                f"OpenWorldSplit needs at least 2 classes in y; got {n_classes}."
            )
        n_held = self._n_held_out(n_classes)
        rng = check_random_state(self.random_state)
        rows_of_class = [np.flatnonzero(class_index == c) for c in range(n_classes)]
        for held in self._held_out_classes(n_classes, n_held, rng):
            test_mask = np.isin(class_index, held)
            for c in np.setdiff1d(np.arange(n_classes), held):
                rows = rows_of_class[c]
                # Round half up; keep one row so the class is known in training.
                n_test = min(
                    int(math.floor(self.test_size * rows.size + 0.5)), rows.size - 1
                )
                test_mask[rng.choice(rows, size=n_test, replace=False)] = True
            yield test_mask


_CV_TYPES = "an int >= 2, a splitter of whole classes or an iterable of " \
            "(train, held) index arrays"


def check_row_indices(rows, n_samples, what):
    """``rows`` as intp indices into ``n_samples`` rows (``what``: their name)."""
    rows = np.asarray(rows)
    if rows.dtype.kind == "b":
        raise ValueError(f"{what} rows are a boolean mask; give integer indices "
                         "(np.flatnonzero(mask)).")
    if rows.size == 0:
        return rows.reshape(0).astype(np.intp)
    if rows.ndim != 1 or rows.dtype.kind not in "iu":
        raise ValueError(f"{what} rows must be integer indices in a 1-d integer "
                         f"array; got dtype {rows.dtype} and shape {rows.shape}.")
    if rows.min() < 0 or rows.max() >= n_samples:
        raise ValueError(f"{what} indices must lie in [0, {n_samples}) (the rows "
                         f"of X); got {rows.min()} to {rows.max()}.")
    return rows.astype(np.intp, copy=False)


def class_disjoint_folds(cv, X, y, *, min_held_classes: int = 1,
                         name: str = "calibration"):
    """``(train, held)`` row indices of each fold, checked to split classes.

    Parameters
    ----------
    cv : int, cross-validation generator or iterable
        An int: ``GroupKFold`` over the labels; a splitter, called as
        ``split(X, y, groups=y)``; or ``(train, held)`` index arrays.
    X : array-like of shape (n_samples, ...)
    y : ndarray of shape (n_samples,)
    min_held_classes : int, default=1
        Classes each fold must hold out.
    name : str, default="calibration"
        The caller's name of ``cv``, for error messages.

    Returns
    -------
    folds : list of (ndarray, ndarray)

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_flowr.model_selection import class_disjoint_folds
    >>> y = np.repeat([0, 1, 2, 3], 2)
    >>> [np.unique(y[held]).tolist() for _, held in
    ...  class_disjoint_folds(2, np.zeros((8, 1)), y)]
    [[1, 3], [0, 2]]
    """
    if isinstance(cv, (bool, str, bytes)):
        raise ValueError(f"{name} must be {_CV_TYPES}; got {cv!r}.")
    if isinstance(cv, Integral):
        if cv < 2:
            raise ValueError(f"{name} as an int must be >= 2; got {cv}.")
        n_classes = np.unique(y).shape[0]
        if cv > n_classes:
            raise ValueError(f"{name}={cv} folds over the classes need at "
                             f"least {cv} classes; got {n_classes}.")
        cv = GroupKFold(n_splits=cv)
    if hasattr(cv, "split"):
        splits = cv.split(X, y, groups=y)
    elif hasattr(cv, "__iter__"):
        splits = cv
    else:
        raise ValueError(f"{name} must be {_CV_TYPES}; got {cv!r}.")
    folds = []
    for number, (train, held) in enumerate(splits):
        fold = f"Fold {number} of {name}:"
        train = check_row_indices(train, y.shape[0], f"{fold} training")
        held = check_row_indices(held, y.shape[0], f"{fold} held-out")
        train_classes, held_classes = np.unique(y[train]), np.unique(y[held])
        shared = np.intersect1d(train_classes, held_classes)
        if shared.size:
            raise ValueError(
                f"{name} must split whole classes (use a group splitter "
                f"such as GroupKFold or GroupShuffleSplit); fold {number} has "
                f"class {shared.tolist()[0]!r} on both sides.")
        if held_classes.shape[0] < min_held_classes or train_classes.shape[0] < 2:
            raise ValueError(
                f"Fold {number} of {name} trains on "
                f"{train_classes.shape[0]} classes and holds out "
                f"{held_classes.shape[0]}; it needs at least 2 training classes "
                f"and {min_held_classes} held-out ones.")
        folds.append((train, held))
    if not folds:
        raise ValueError(f"{name} gave no fold.")
    return folds
