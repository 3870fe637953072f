"""Seeded sampling of few-shot open-world episodes (FLOWR, section 6): the
protocol's test tasks and meta-training's episodes, with the checks that name
the classes too few or too small."""

from __future__ import annotations

from numbers import Integral

import numpy as np
from sklearn.utils import column_or_1d

__all__ = ["check_class_sizes", "check_labels", "check_n_classes", "check_shots",
           "draw_large_context", "draw_small_context", "resolve_seed", "rows_by_class"]


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
