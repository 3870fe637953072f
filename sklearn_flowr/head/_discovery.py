"""The head's unlabelled stream: assign by the CRP posterior (a known class or
a new *provisional* one), learn above a threshold, and take late labels
exactly (a class is a sum of its rows, so a row moves between classes). What
was opened and learned is a plain dict, replaced, never changed in place.
"""

import copy

import numpy as np
from scipy.special import logsumexp
from sklearn.exceptions import NotFittedError
from sklearn.utils import Bunch, _safe_indexing, column_or_1d
from sklearn.utils.validation import _num_samples

from ..base import all_or_nothing
from ..validation import provisional_label

# provisional classes opened, their labels, rows learned per label without a
# label, and provisional labels renamed since (old -> new).
NOTHING_DISCOVERED = {"n_opened": 0, "provisional": (), "counts": {}, "aliases": {}}


def unlabelled_steps(state, registry, discovered, X, undo, *, novel_label,
                     threshold, novelty_map):
    """Assign and maybe learn each row of ``X`` (validated) in order, into
    ``state`` and ``registry``; the per-row outputs and the new discoveries.
    Runs inside the caller's all-or-nothing guard ``undo``."""
    discovered = dict(discovered)
    n = X.shape[0]
    out = {"y_pred": [], "y_known": [], "p_novel": np.empty(n),
           "is_novel": np.zeros(n, bool), "novelty_score": np.empty(n),
           "y_assigned": [], "learned": np.zeros(n, bool)}
    for t in range(n):
        x = X[t:t + 1]
        joint = state.joint_log_numerators(x, novelty_map)[0]
        n_known = joint.shape[0] - 1
        log_known = logsumexp(joint[:n_known]) if n_known else -np.inf
        total = np.logaddexp(log_known, joint[-1])
        out["p_novel"][t] = np.exp(joint[-1] - total)
        out["novelty_score"][t] = joint[-1] - log_known
        best = int(np.argmax(joint))
        labels = registry.labels
        novel = best == n_known
        out["y_known"].append(labels[int(np.argmax(joint[:n_known]))] if n_known
                              else novel_label)
        out["y_pred"].append(novel_label if novel else labels[best])
        out["is_novel"][t] = novel
        learned = (threshold is not None and np.exp(joint[best] - total) >= threshold
                   and (novel or not state.frozen[best]))
        if novel and learned:
            label = provisional_label(discovered["n_opened"] + 1,
                                      [*labels.tolist(), novel_label])
            discovered["n_opened"] += 1
            discovered["provisional"] = (*discovered["provisional"], label)
        else:
            label = novel_label if novel else labels[best]
        if learned:
            undo.append(registry.checkpoint())
            index = registry.register(np.asarray([label]))
            undo.append(state.checkpoint(index))
            state.learn(x, index, len(registry))
            counts = discovered["counts"]
            discovered["counts"] = {**counts, label: counts.get(label, 0) + 1}
        out["y_assigned"].append(label)
        out["learned"][t] = learned
    dtype = registry.labels.dtype if len(registry) else object
    for key in ("y_pred", "y_known", "y_assigned"):
        out[key] = np.asarray(out[key], dtype=object if dtype.kind == "O" else
                              np.result_type(dtype, np.asarray([novel_label]).dtype))
    return Bunch(**out), discovered


def mixed_steps(head, X, y, labelled):
    """``head.open_world_step`` of the labelled and unlabelled runs of one
    batch, in order, all or nothing."""
    if y is None:
        raise ValueError("labelled needs y (the labels of the labelled rows).")
    labelled = column_or_1d(np.asarray(labelled))
    if labelled.dtype != bool:
        raise ValueError(f"labelled must be a boolean mask; got dtype "
                         f"{labelled.dtype}.")
    y = column_or_1d(np.asarray(y))
    if not _num_samples(X) == y.shape[0] == labelled.shape[0]:
        raise ValueError("X, y and labelled need one entry per row; got "
                         f"{_num_samples(X)}, {y.shape[0]} and "
                         f"{labelled.shape[0]}.")
    if not labelled[0] and not head.__sklearn_is_fitted__():
        raise NotFittedError("open_world_step with unlabelled rows first needs "
                             f"a fitted {type(head).__name__}.")
    X = np.asarray(X) if not hasattr(X, "iloc") else X
    bounds = np.flatnonzero(np.diff(labelled.astype(np.int8))) + 1
    with all_or_nothing(head):
        parts = [head.open_world_step(_safe_indexing(X, rows),
                                      y[rows] if labelled[rows[0]] else None)
                 for rows in np.split(np.arange(labelled.shape[0]), bounds)]
    return Bunch(**{key: np.concatenate([
        np.asarray(part[key], dtype=object)
        if key in ("y_pred", "y_known", "y_assigned") else part[key]
        for part in parts]) for key in parts[0]})


def corrected(state, registry, discovered, X, y_assigned, y_true, novel_label):
    """The state, registry and discoveries after moving rows ``X`` learned
    without a label from their assigned class to their true one (copies: the
    arguments are left as they were). Raises before any change when the
    lengths differ or a row was not learned without a label."""
    if not X.shape[0] == len(y_assigned) == len(y_true):
        raise ValueError("X, y_assigned and y_true need one entry per row; got "
                         f"{X.shape[0]}, {len(y_assigned)} and {len(y_true)}.")
    aliases, counts = dict(discovered["aliases"]), dict(discovered["counts"])
    wanted = {}
    for label in (aliases.get(label, label) for label in y_assigned):
        if registry.index_of(label) is None:
            raise ValueError(f"y_assigned holds {label!r}, which is not a class "
                             "this head assigned rows to.")
        wanted[label] = wanted.get(label, 0) + 1
    for label, count in wanted.items():
        if count > counts.get(label, 0):
            raise ValueError(
                f"{count} rows are corrected out of class {label!r}, but the "
                f"head learned {counts.get(label, 0)} rows into it without a "
                "label: pass only rows whose open_world_step result says learned.")
    if any(label == novel_label for label in y_true):
        raise ValueError(f"y_true holds the novel label {novel_label!r}.")
    state, registry = copy.deepcopy(state), copy.deepcopy(registry)
    provisional = set(discovered["provisional"])
    for row, (assigned, true) in enumerate(zip(y_assigned, y_true, strict=True)):
        label = aliases.get(assigned, assigned)
        counts[label] -= 1
        if label == true:
            continue
        renamed = label in provisional and registry.index_of(true) is None
        if renamed:  # the provisional class takes its first true label
            registry.rename(label, true)
            counts[true] = counts.pop(label)
        else:
            if registry.index_of(true) is None:
                registry.register(np.asarray([true]))
                state.add_classes(1)
            source = registry.index_of(label)
            state.move(X[row:row + 1], np.array([source]),
                       np.array([registry.index_of(true)]))
            if not (label in provisional and state.n_obs[source] <= 0):
                continue
            state.remove_class(source)  # a provisional class left empty
            registry.remove(label)
        provisional.discard(label)
        aliases = {key: (true if value == label else value)
                   for key, value in aliases.items()}
        aliases[label] = true
    return state, registry, {
        "n_opened": discovered["n_opened"],
        "provisional": tuple(label for label in discovered["provisional"]
                             if label in provisional),
        "counts": {key: value for key, value in counts.items() if value > 0},
        "aliases": aliases}
