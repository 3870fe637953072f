"""Which rows of an unlabelled batch to ask a person to label, under a budget."""

from __future__ import annotations

from collections.abc import Mapping
from numbers import Integral

import numpy as np
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions, validate_params

__all__ = ["choose_rows_to_label"]

STRATEGIES = ("uncertain", "largest-provisional", "random")

# The keys of the ``open_world_step`` result each strategy reads.
_NEEDED = {
    "uncertain": ("novelty_score",),
    "largest-provisional": ("y_assigned", "is_novel", "learned", "p_novel"),
    "random": ("y_assigned",),
}


def _checked_result(result, strategy):
    """The arrays of ``result`` that ``strategy`` reads, one entry per row."""
    missing = [key for key in _NEEDED[strategy] if key not in result]
    if missing:
        raise ValueError(
            f"result lacks {missing}, which strategy={strategy!r} reads: pass "
            "the Bunch that open_world_step(X) returned for the unlabelled batch.")
    arrays = {key: np.asarray(result[key]) for key in _NEEDED[strategy]}
    for key, array in arrays.items():
        if array.ndim != 1:
            raise ValueError(f"result[{key!r}] must be one-dimensional (one entry "
                             f"per row); got shape {array.shape}.")
    lengths = {key: array.shape[0] for key, array in arrays.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"result's arrays need one entry per row; got lengths "
                         f"{lengths}.")
    for key in ("novelty_score", "p_novel"):
        if key in arrays:
            try:
                arrays[key] = arrays[key].astype(float)
            except (TypeError, ValueError):
                raise ValueError(f"result[{key!r}] must hold numbers; got dtype "
                                 f"{arrays[key].dtype}.") from None
            if np.isnan(arrays[key]).any():
                raise ValueError(f"result[{key!r}] contains NaN.")
    for key in ("is_novel", "learned"):
        if key in arrays and arrays[key].dtype != bool:
            raise ValueError(f"result[{key!r}] must be a boolean array; got dtype "
                             f"{arrays[key].dtype}.")
    return arrays


def _largest_provisional(arrays, budget):
    """One row from each provisional class, largest first, in rounds; in a
    class, its learned rows by increasing P(novel)."""
    y_assigned, learned = arrays["y_assigned"], arrays["learned"]
    opened = (arrays["is_novel"] & learned).nonzero()[0]
    # Each class in the order it was opened; labels compared by == and hash,
    # as they may mix numbers and strings.
    classes = list(dict.fromkeys(y_assigned[opened].tolist()))
    rows_of = {label: [] for label in classes}
    for row in learned.nonzero()[0].tolist():
        members = rows_of.get(y_assigned[row])
        if members is not None:
            members.append(row)
    p_novel = arrays["p_novel"]
    queues = [sorted(rows_of[label], key=lambda row: (p_novel[row], row))
              for label in classes]
    # Stable sort: equal sizes keep the order the classes were opened in.
    queues.sort(key=len, reverse=True)
    chosen = []
    for depth in range(len(queues[0]) if queues else 0):
        for queue in queues:
            if len(chosen) == budget:
                return chosen
            if depth < len(queue):
                chosen.append(queue[depth])
    return chosen


@validate_params(
    {
        "result": [Mapping],
        "budget": [Interval(Integral, 0, None, closed="left")],
        "strategy": [StrOptions(set(STRATEGIES))],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def choose_rows_to_label(result, budget, *, strategy="uncertain",
                         random_state=None):
    """Choose the rows of an unlabelled batch to ask a person to label; their
    labels go to ``correct`` (rows the step learned) or ``partial_fit``.

    Parameters
    ----------
    result : :class:`~sklearn.utils.Bunch` or mapping
        What ``open_world_step(X)`` returned for the batch, without labels.
    budget : int >= 0
        How many labels may be asked for.
    strategy : {"uncertain", "largest-provisional", "random"}, \
default="uncertain"
        ``"uncertain"``: smallest ``|novelty_score|`` first (a toss-up between
        known and new). ``"largest-provisional"``: one row of each provisional
        class, largest first, in rounds, by increasing ``p_novel`` (may give
        fewer than ``budget``). ``"random"``: the baseline to beat.
    random_state : int, RandomState instance or None, default=None
        Seeds ``"random"``.

    Returns
    -------
    rows : ndarray of shape (n_chosen,), dtype intp
        Distinct indices into the batch, most wanted first.

    Examples
    --------
    >>> from sklearn_flowr import CRPGaussianClassifier
    >>> from sklearn_flowr.protocol import choose_rows_to_label
    >>> head = CRPGaussianClassifier().fit([[0.0], [0.3], [9.0], [9.2]],
    ...                                    [0, 0, 1, 1])
    >>> X = [[30.0], [30.2], [29.9], [0.1]]
    >>> out = head.open_world_step(X)
    >>> out.y_assigned
    array([-2, -2, -2,  0])
    >>> rows = choose_rows_to_label(out, 1, strategy="largest-provisional")
    >>> rows  # the member of class -2 best explained by the classes before it
    array([2])
    >>> head = head.correct([X[i] for i in rows], out.y_assigned[rows], [7])
    >>> head.classes_
    array([0, 1, 7])
    """
    if isinstance(budget, (bool, np.bool_)):
        raise ValueError(f"budget must be an int >= 0 (a number of labels); got "
                         f"the bool {budget!r}.")
    arrays = _checked_result(result, strategy)
    n_rows = next(iter(arrays.values())).shape[0]
    budget = min(int(budget), n_rows)
    if strategy == "uncertain":
        margin = np.abs(arrays["novelty_score"])
        rows = np.argsort(margin, kind="stable")[:budget]
    elif strategy == "largest-provisional":
        rows = _largest_provisional(arrays, budget)
    else:
        rng = check_random_state(random_state)
        rows = rng.choice(n_rows, size=budget, replace=False)
    return np.asarray(rows, dtype=np.intp)
