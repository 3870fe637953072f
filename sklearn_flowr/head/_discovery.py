"""The head's unlabelled stream: assign by the CRP posterior (a known class or
a new provisional one), learn above a threshold, move rows to late labels.
These change the head in place: it runs them on a copy (``base.on_a_copy``)."""

import hashlib

import numpy as np
from sklearn.exceptions import NotFittedError
from sklearn.utils import Bunch, _safe_indexing, column_or_1d
from sklearn.utils.validation import _num_samples, check_is_fitted

from .._core import log_softmax, novel_log_odds
from ..base import OnlineOpenWorldClassifier
from ..validation import label_result_dtype, provisional_label
from ._whitened import input_dtype, whiten


def nothing_discovered():
    """Provisional classes opened, their labels, rows learned without a label
    (label -> row digest -> count) and labels renamed (old -> new)."""
    return {"n_opened": 0, "provisional": [], "rows": {}, "aliases": {}}


def row_digest(row):
    """A row's identity: a digest of its float64 bytes (float32 rows' too)."""
    return hashlib.blake2b(np.ascontiguousarray(row, dtype=np.float64).tobytes(),
                           digest_size=16).hexdigest()


def rows_and_digests(head, X):
    """A fitted head's validated rows ``X`` in its coordinates, and the digests
    of the rows as given (whitened ones differ with the batch in the last bits)."""
    check_is_fitted(head)
    X = OnlineOpenWorldClassifier._validate_input(head, X,
                                                  dtype=input_dtype(head))[0]
    return whiten(head, X, None)[0], [row_digest(row) for row in X]


def unlabelled_steps(head, X, digests, *, threshold, novelty_map):
    """Assign, and maybe learn, each row of ``X`` (:func:`rows_and_digests`)
    in order."""
    state, registry, discovered = head._state, head._registry, head._discovered
    novel_label = head.novel_label_
    n = X.shape[0]
    out = {"y_pred": [], "y_known": [], "p_novel": np.empty(n),
           "is_novel": np.zeros(n, bool), "novelty_score": np.empty(n),
           "y_assigned": [], "learned": np.zeros(n, bool)}
    for t in range(n):
        x = X[t:t + 1]
        joint = state.joint_log_numerators(x, novelty_map)
        posterior = np.exp(log_softmax(joint)[0])
        out["p_novel"][t] = posterior[-1]
        out["novelty_score"][t] = novel_log_odds(joint)[0]
        n_known = joint.shape[1] - 1
        best = int(np.argmax(joint[0]))  # ties go to the known class
        labels = registry.labels.tolist()
        novel = best == n_known
        out["y_known"].append(labels[int(np.argmax(joint[0, :n_known]))] if n_known
                              else novel_label)
        out["y_pred"].append(novel_label if novel else labels[best])
        out["is_novel"][t] = novel
        learned = (threshold is not None and posterior[best] >= threshold
                   and (novel or not state.frozen[best]))
        if novel and learned:
            discovered["n_opened"] += 1
            label = provisional_label(discovered["n_opened"], [*labels, novel_label])
            discovered["provisional"].append(label)
        else:
            label = novel_label if novel else labels[best]
        if learned:
            index = registry.register(np.asarray([label]))
            state.learn(x, index, len(registry))
            rows = discovered["rows"].setdefault(label, {})
            key = digests[t]
            rows[key] = rows.get(key, 0) + 1
        out["y_assigned"].append(label)
        out["learned"][t] = learned
    dtype = label_result_dtype(registry.labels, [novel_label])
    for key in ("y_pred", "y_known", "y_assigned"):
        out[key] = np.asarray(out[key], dtype=dtype)
    return Bunch(**out)


def mixed_steps(head, X, y, labelled, *, threshold, novelty_map):
    """``open_world_step`` of the labelled and unlabelled runs of one batch,
    in order: everything is checked before the first run changes ``head``."""
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
    if labelled.shape[0] == 0:
        raise ValueError("Found an empty batch (0 rows) while a minimum of 1 "
                         "is required.")
    if not labelled[0] and not head.__sklearn_is_fitted__():
        raise NotFittedError("open_world_step with unlabelled rows first needs "
                             f"a fitted {type(head).__name__}.")
    if labelled.any():  # the labels of every run, before any run is learned
        head._check_labels(y[labelled], head._registry
                           if head.__sklearn_is_fitted__() else None)
    X = np.asarray(X) if not hasattr(X, "iloc") else X
    bounds = np.flatnonzero(np.diff(labelled.astype(np.int8))) + 1
    parts = []
    for rows in np.split(np.arange(labelled.shape[0]), bounds):
        X_run = _safe_indexing(X, rows)
        parts.append(
            OnlineOpenWorldClassifier.open_world_step(head, X_run, y[rows])
            if labelled[rows[0]] else unlabelled_steps(
                head, *rows_and_digests(head, X_run), threshold=threshold,
                novelty_map=novelty_map))
    return Bunch(**{key: np.concatenate([
        np.asarray(part[key], dtype=object)
        if key in ("y_pred", "y_known", "y_assigned") else part[key]
        for part in parts]) for key in parts[0]})


def correct(head, X, digests, y_assigned, y_true):
    """Move rows ``X`` (:func:`rows_and_digests`) learned without a label from
    their assigned class to their true one; every argument is checked before
    the first change."""
    state, registry, discovered = head._state, head._registry, head._discovered
    y_assigned = column_or_1d(np.asarray(y_assigned, dtype=object)).tolist()
    y_true = column_or_1d(np.asarray(y_true))
    if not X.shape[0] == len(y_assigned) == y_true.shape[0]:
        raise ValueError("X, y_assigned and y_true need one entry per row; got "
                         f"{X.shape[0]}, {len(y_assigned)} and {y_true.shape[0]}.")
    # partial_fit's label checks (novel label, NaN, None, kind of classes_).
    head._check_labels(y_true, registry)
    y_true = y_true.tolist()
    aliases, record = discovered["aliases"], discovered["rows"]
    wanted = {}
    for row, label in enumerate(aliases.get(label, label) for label in y_assigned):
        if registry.index_of(label) is None:
            raise ValueError(f"y_assigned holds {label!r}, which is not a class "
                             "this head assigned rows to.")
        key = (label, digests[row])
        wanted[key] = wanted.get(key, 0) + 1
        if wanted[key] > record.get(label, {}).get(digests[row], 0):
            raise ValueError(
                f"Row {row} was not learned into class {label!r} without a "
                "label (or has been corrected already): pass only rows whose "
                "open_world_step result says learned, with their y_assigned.")
    provisional = discovered["provisional"]
    for row, (assigned, true) in enumerate(zip(y_assigned, y_true, strict=True)):
        label = aliases.get(assigned, assigned)
        _forget_row(record, label, digests[row])
        if label == true:
            continue
        if label in provisional and registry.index_of(true) is None:
            registry.rename(label, true)  # a provisional class takes its label
            if label in record:
                record[true] = record.pop(label)
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
        provisional.remove(label)
        for key, value in list(aliases.items()):
            if value == label:
                aliases[key] = true
        aliases[label] = true
    return head


def _forget_row(record, label, digest):
    rows = record[label]
    rows[digest] -= 1
    if rows[digest] == 0:
        del rows[digest]
    if not rows:
        del record[label]


def merged_discoveries(first, second):
    """The record of two heads without provisional classes, pooled."""
    aliases = dict(first["aliases"])
    for old, new in second["aliases"].items():
        if aliases.setdefault(old, new) != new:
            raise ValueError(
                f"merge cannot pool the heads' corrections: the provisional "
                f"label {old!r} became {aliases[old]!r} in one and {new!r} in "
                "the other.")
    rows = {label: dict(digests) for label, digests in first["rows"].items()}
    for label, digests in second["rows"].items():
        pooled = rows.setdefault(label, {})
        for digest, count in digests.items():
            pooled[digest] = pooled.get(digest, 0) + count
    return {"n_opened": first["n_opened"] + second["n_opened"], "provisional": [],
            "rows": rows, "aliases": aliases}
