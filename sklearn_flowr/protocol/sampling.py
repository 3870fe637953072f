"""Seeded sampling of few-shot open-world tasks and episodes (FLOWR, section 6):
the protocol's test tasks (index arrays into the caller's arrays; task ``i``
depends only on ``(seed, i)``), meta-training's episodes, and the checks that
name the classes too few or too small."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from numbers import Integral

import numpy as np
from sklearn.utils import column_or_1d
from sklearn.utils._param_validation import Interval, validate_params

from .._core import FLOWR_REFERENCE, fill_doc

__all__ = ["LargeContextTasks", "SmallContextTasks", "Task", "check_class_sizes",
           "check_labels", "check_n_classes", "check_shots", "draw_large_context",
           "draw_small_context", "resolve_seed", "rows_by_class"]


# ------------------------------------------------------------------- drawing
def rows_by_class(y):
    """Sorted distinct labels and, for each, its row indices in ascending order."""
    labels, inverse = np.unique(y, return_inverse=True)
    order = np.argsort(inverse, kind="stable").astype(np.intp)
    counts = np.bincount(inverse, minlength=labels.shape[0])
    return labels, np.split(order, np.cumsum(counts)[:-1])


def draw_small_context(rng, class_rows, n_support_classes, shots,
                       n_novel_classes, n_query):
    """One small-context episode ``(classes, support, query, order)``: positions
    into ``class_rows`` (support classes first), their support and query rows,
    and the permutation of the concatenated queries into the stream.
    """
    low, high = shots
    classes = rng.choice(len(class_rows), n_support_classes + n_novel_classes,
                         replace=False)
    support, query = [], []
    for position in classes[:n_support_classes].tolist():
        n_shots = int(rng.integers(low, high + 1))
        rows = rng.choice(class_rows[position], n_shots + n_query, replace=False)
        support.append(rows[:n_shots])
        query.append(rows[n_shots:])
    for position in classes[n_support_classes:].tolist():
        query.append(rng.choice(class_rows[position], n_query, replace=False))
    order = rng.permutation(n_query * classes.shape[0])
    return classes, support, query, order


def draw_large_context(rng, known_rows, novel_rows, n_known_query_classes,
                       n_novel_classes, n_query):
    """One large-context (query-only) episode: ``(known, novel, query,
    order)``, sorted positions into ``known_rows``, positions into
    ``novel_rows``, ``n_query`` rows of each class, and the stream order."""
    known = np.sort(rng.choice(len(known_rows), n_known_query_classes,
                               replace=False))
    query = [rng.choice(known_rows[k], n_query, replace=False)
             for k in known.tolist()]
    novel = rng.choice(len(novel_rows), n_novel_classes, replace=False)
    query += [rng.choice(novel_rows[c], n_query, replace=False)
              for c in novel.tolist()]
    order = rng.permutation(n_query * (known.shape[0] + novel.shape[0]))
    return known, novel, query, order


# ---------------------------------------------------------------- validation
def check_shots(shots):
    try:
        low, high = shots
    except (TypeError, ValueError):
        raise ValueError(
            f"shots must be a pair (low, high) of ints; got {shots!r}."
        ) from None
    if not all(isinstance(s, Integral) and not isinstance(s, bool)
               for s in (low, high)) or not 1 <= low <= high:
        raise ValueError(
            f"shots must be (low, high) with 1 <= low <= high; got {shots!r}."
        )
    return int(low), int(high)


def check_n_classes(available, needed, what, subject, hint=""):
    """Raise when fewer than ``needed`` classes are available."""
    if available < needed:
        raise ValueError(
            f"{subject} needs {needed} classes ({what}) but only {available} "
            f"are available.{hint}"
        )


def check_class_sizes(labels, class_rows, needed, requirement, hint=""):
    """Raise, naming the classes, when a class has fewer than ``needed`` rows."""
    counts = np.array([rows.shape[0] for rows in class_rows], dtype=np.intp)
    small = np.flatnonzero(counts < needed)
    if small.size:
        listed = ", ".join(f"{labels[i].item()!r} ({counts[i]} examples)"
                           for i in small[:10].tolist())
        more = f" and {small.size - 10} more" if small.size > 10 else ""
        raise ValueError(
            f"Every class needs at least {needed} examples ({requirement}); "
            f"{small.size} of {counts.shape[0]} classes have fewer: "
            f"{listed}{more}.{hint}"
        )


def resolve_seed(random_state):
    """A non-negative int seed fixed at construction (None draws a fresh one)."""
    if random_state is None:
        return int(np.random.SeedSequence().generate_state(1, np.uint64)[0])
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(2**63))
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(2**31 - 1))
    if isinstance(random_state, bool) or not isinstance(random_state, Integral) \
            or random_state < 0:
        raise ValueError(
            "random_state must be None, a non-negative int or a numpy Generator "
            f"/ RandomState; got {random_state!r}."
        )
    return int(random_state)


def check_labels(y):
    y = column_or_1d(y)
    if y.shape[0] == 0:
        raise ValueError("y is empty; tasks are drawn from the rows of y.")
    return y


_COUNTS = {"n_novel_classes": [Interval(Integral, 0, None, closed="left")],
           "n_query": [Interval(Integral, 1, None, closed="left")],
           "n_tasks": [Interval(Integral, 1, None, closed="left")]}


fill_reference = fill_doc({"flowr": f".. [1] {FLOWR_REFERENCE}, section 6."})


# --------------------------------------------------------------------- tasks
@dataclass(frozen=True, eq=False, repr=False)
class Task:
    """One few-shot open-world task: index arrays into the caller's arrays.

    Attributes
    ----------
    support : ndarray of shape (n_support,)
        Rows learned before the stream (empty in the large context).
    query : ndarray of shape (n_query,)
        Rows of the stream, in order.
    task_id : int
        Index of the task in its sampler.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_flowr.protocol import Task
    >>> Task(support=np.array([0, 1]), query=np.array([2, 3, 4]), task_id=7)
    Task(task_id=7, n_support=2, n_query=3)
    """

    support: np.ndarray
    query: np.ndarray
    task_id: int

    def __eq__(self, other):
        if not isinstance(other, Task):
            return NotImplemented
        return (self.task_id == other.task_id
                and np.array_equal(self.support, other.support)
                and np.array_equal(self.query, other.query))

    __hash__ = None

    def __repr__(self):
        return (f"Task(task_id={self.task_id}, n_support={self.support.shape[0]}, "
                f"n_query={self.query.shape[0]})")


class _TaskSampler(Sequence):
    """Indexable, reproducible sequence of tasks drawn from the labels ``y``."""

    def _start(self, y, n_novel_classes, n_query, n_tasks, random_state):
        """Check and store the settings both samplers share; index ``y``."""
        self.n_novel_classes = int(n_novel_classes)
        self.n_query = int(n_query)
        self.n_tasks = int(n_tasks)
        self.random_state = random_state
        self.seed = resolve_seed(random_state)
        y = check_labels(y)
        self.n_samples = y.shape[0]
        self._labels, self._class_rows = rows_by_class(y)
        self.classes = self._labels

    def __len__(self) -> int:
        return self.n_tasks

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self.n_tasks))]
        if isinstance(index, bool) or not isinstance(index, Integral):
            raise TypeError(f"Task indices must be ints or slices; got {index!r}.")
        i = int(index) + self.n_tasks if index < 0 else int(index)
        if not 0 <= i < self.n_tasks:
            raise IndexError(f"Task index {index} out of range for "
                             f"{self.n_tasks} tasks.")
        return self._draw(np.random.default_rng([self.seed, i]), i)

    def _matches(self, y):
        """Whether ``y`` holds the labels the tasks were drawn from."""
        if y.shape[0] != self.n_samples:
            return False
        rows = np.concatenate(self._class_rows)
        counts = [r.shape[0] for r in self._class_rows]
        return bool(np.array_equal(y[rows], np.repeat(self._labels, counts)))


@fill_reference
class SmallContextTasks(_TaskSampler):
    """Small-context (SC) few-shot open-world tasks, the paper's test protocol:
    ``n_support_classes`` with ``U{shots}`` support rows and ``n_novel_classes``
    more, ``n_query`` queries each in random order; task ``i`` depends only on
    ``(seed, i)``.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        Labels of the rows tasks are drawn from (e.g. the test split).
    n_support_classes : int >= 1, default=10
        Classes known before the stream, per task.
    shots : tuple of (int, int), default=(1, 10)
        Inclusive range of the uniform number of support rows per class.
    n_novel_classes : int >= 0, default=5
        Classes that appear only in the stream.
    n_query : int >= 1, default=10
        Query rows per class.
    n_tasks : int >= 1, default=1000
    random_state : int, Generator, RandomState or None, default=None
        Seed; None draws one at construction (stored in ``seed``).

    Attributes
    ----------
    seed : int
        The resolved seed.
    classes : ndarray of shape (n_classes,)
        The distinct labels of ``y``.

    References
    ----------
    %(flowr)s

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_flowr.protocol import SmallContextTasks
    >>> y = np.repeat(np.arange(20), 25)
    >>> tasks = SmallContextTasks(y, n_tasks=3, random_state=0)
    >>> task = tasks[0]
    >>> task.query.shape, len(np.unique(y[task.query])), len(np.unique(y[task.support]))
    ((150,), 15, 10)
    """

    @validate_params(
        {**_COUNTS, "n_support_classes": [Interval(Integral, 1, None, closed="left")]},
        prefer_skip_nested_validation=True)
    def __init__(self, y, *, n_support_classes: int = 10,
                 shots: tuple[int, int] = (1, 10), n_novel_classes: int = 5,
                 n_query: int = 10, n_tasks: int = 1000, random_state=None):
        self.n_support_classes = int(n_support_classes)
        self.shots = check_shots(shots)
        self._start(y, n_novel_classes, n_query, n_tasks, random_state)
        needed = self.n_support_classes + self.n_novel_classes
        check_n_classes(
            self._labels.shape[0], needed,
            f"n_support_classes={self.n_support_classes} + "
            f"n_novel_classes={self.n_novel_classes}",
            "A small-context task",
            " Lower n_support_classes or n_novel_classes, or draw the tasks "
            "from a split with more classes.",
        )
        high = self.shots[1]
        check_class_sizes(
            self._labels, self._class_rows, high + self.n_query,
            f"up to {high} shots + n_query={self.n_query} queries, as any class "
            "can be a support class",
            " Lower shots[1] or n_query, or drop those classes from y.",
        )

    def _draw(self, rng, task_id):
        _, support, query, order = draw_small_context(
            rng, self._class_rows, self.n_support_classes, self.shots,
            self.n_novel_classes, self.n_query)
        return Task(support=np.concatenate(support),
                    query=np.concatenate(query)[order], task_id=task_id)


@fill_reference
class LargeContextTasks(_TaskSampler):
    """Large-context (LC) open-world tasks: query-only streams of ``n_query``
    rows of each known class (or ``n_known_query_classes`` of them) and of
    ``n_novel_classes`` classes outside ``known_classes``, in random order.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        Labels of the rows queries are drawn from: held-out rows of the known
        classes and the rows of the test classes.
    known_classes : array-like of shape (n_known,)
        Labels known before the stream; each needs rows in ``y``.
    n_novel_classes : int >= 0, default=5
        Novel classes per task.
    n_query : int >= 1, default=10
        Query rows per class.
    n_tasks : int >= 1, default=1000
    n_known_query_classes : int >= 0 or None, default=None
        Known classes queried per task; None: all, as in the paper.
    random_state : int, Generator, RandomState or None, default=None

    Attributes
    ----------
    seed : int
        The resolved seed.
    novel_pool : ndarray
        Labels of ``y`` outside ``known_classes`` (candidate novel classes).

    References
    ----------
    %(flowr)s

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_flowr.protocol import LargeContextTasks
    >>> y = np.repeat(np.arange(12), 15)
    >>> tasks = LargeContextTasks(y, known_classes=range(6), n_tasks=2,
    ...                           random_state=0)
    >>> task = tasks[1]
    >>> task.support.size, task.query.size
    (0, 110)
    >>> np.bincount(y[task.query] < 6).tolist()  # 5 novel, 6 known classes
    [50, 60]
    """

    @validate_params(
        {**_COUNTS,
         "n_known_query_classes": [Interval(Integral, 0, None, closed="left"), None]},
        prefer_skip_nested_validation=True)
    def __init__(self, y, known_classes, *, n_novel_classes: int = 5,
                 n_query: int = 10, n_tasks: int = 1000,
                 n_known_query_classes: int | None = None, random_state=None):
        self._start(y, n_novel_classes, n_query, n_tasks, random_state)
        known = np.asarray(list(known_classes) if not hasattr(known_classes, "shape")
                           else known_classes)
        if known.ndim != 1 or known.shape[0] == 0:
            raise ValueError("known_classes must be a non-empty 1-d array of labels.")
        if np.unique(known).shape[0] != known.shape[0]:
            raise ValueError("known_classes contains repeated labels.")
        is_known = np.isin(self._labels, known)
        missing = known[~np.isin(known, self._labels)]
        if missing.size:
            raise ValueError(
                f"known_classes {missing[:10].tolist()}"
                f"{' ...' if missing.size > 10 else ''} ({missing.size} of "
                f"{known.shape[0]}) have no rows in y: pass the held-out rows of "
                "the known classes in y (queries of known classes come from them)."
            )
        if n_known_query_classes is None:
            self.n_known_query_classes = known.shape[0]
        else:
            self.n_known_query_classes = int(n_known_query_classes)
            check_n_classes(known.shape[0], self.n_known_query_classes,
                            "n_known_query_classes", "A large-context task",
                            " Lower n_known_query_classes.")
        if self.n_known_query_classes + self.n_novel_classes == 0:
            raise ValueError("n_known_query_classes and n_novel_classes are both 0: "
                             "a task would have no query.")
        self.known_classes = known
        position = {label: i for i, label in enumerate(self._labels.tolist())}
        self._known_rows = [self._class_rows[position[label]]
                            for label in known.tolist()]
        self.novel_pool = self._labels[~is_known]
        self._novel_rows = [self._class_rows[i]
                            for i in np.flatnonzero(~is_known).tolist()]
        check_n_classes(
            self.novel_pool.shape[0], self.n_novel_classes,
            "n_novel_classes, drawn from the labels of y outside known_classes",
            "A large-context task",
            " Add rows of more unseen (test) classes to y or lower "
            "n_novel_classes.",
        )
        check_class_sizes(
            self._labels, self._class_rows, self.n_query,
            f"n_query={self.n_query} queries",
            " Lower n_query or drop those classes from y.",
        )

    def _draw(self, rng, task_id):
        _, _, query, order = draw_large_context(
            rng, self._known_rows, self._novel_rows, self.n_known_query_classes,
            self.n_novel_classes, self.n_query)
        return Task(support=np.empty(0, dtype=np.intp),
                    query=np.concatenate(query)[order], task_id=task_id)
