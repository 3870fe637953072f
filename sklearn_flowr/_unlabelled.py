"""The head's unlabelled stream: assign by the CRP posterior, open provisional
classes, and take late labels exactly.

The head's posterior over "known class n" and "new class" is the sequential
Chinese-restaurant-process assignment rule, and a class is a sum of its rows
(natural parameters and counts). An unlabelled row is therefore assigned to
its MAP class -- a known one, or a new *provisional* class with a generated
label (:func:`~sklearn_flowr._labels.provisional_label`) -- and learned when
that assignment's posterior probability reaches ``unlabelled_threshold``.
When its true label arrives, :meth:`UnlabelledStreamMixin.correct` takes the
row out of the class it was assigned to and adds it to its true class: the
head is then the one that saw the row labelled.
"""

from __future__ import annotations

import copy

import numpy as np
from scipy.special import logsumexp
from sklearn.utils import Bunch, column_or_1d
from sklearn.utils.validation import check_is_fitted

from ._labels import provisional_label
from ._params import check_novelty_map

__all__ = ["UnlabelledStreamMixin"]


class UnlabelledStreamMixin:
    """``open_world_step(X)`` without labels, and ``correct``, for the head."""

    def _unlabelled_steps(self, X, undo):
        """Assign and maybe learn each row of ``X`` (validated), in order;
        the per-row outputs. Runs inside the caller's all-or-nothing guard."""
        n = X.shape[0]
        out = {"y_pred": [], "y_known": [], "p_novel": np.empty(n),
               "is_novel": np.zeros(n, bool), "novelty_score": np.empty(n),
               "y_assigned": [], "learned": np.zeros(n, bool)}
        threshold = self.unlabelled_threshold
        novelty_map = check_novelty_map(self.novelty_calibration)
        for t in range(n):
            x = X[t:t + 1]
            joint = self._state.joint_log_numerators(x, novelty_map)[0]
            n_known = joint.shape[0] - 1
            log_known = logsumexp(joint[:n_known]) if n_known else -np.inf
            total = np.logaddexp(log_known, joint[-1])
            out["p_novel"][t] = np.exp(joint[-1] - total)
            out["novelty_score"][t] = joint[-1] - log_known
            best = int(np.argmax(joint))
            labels = self._registry.labels
            best_known = int(np.argmax(joint[:n_known])) if n_known else None
            out["y_known"].append(self.novel_label_ if best_known is None
                                  else labels[best_known])
            novel = best == n_known
            out["y_pred"].append(self.novel_label_ if novel else labels[best])
            out["is_novel"][t] = novel
            learned = (threshold is not None
                       and np.exp(joint[best] - total) >= threshold
                       and (novel or not self._state.frozen[best]))
            if novel and learned:
                label = provisional_label(
                    self._n_provisional + 1,
                    [*labels.tolist(), self.novel_label_])
            elif novel:
                label = self.novel_label_
            else:
                label = labels[best]
            if learned:
                undo.append(self._registry.checkpoint())
                index = self._registry.register(np.asarray([label]))
                undo.append(self._checkpoint(index))
                self._learn(x, index)
                if novel:
                    self._n_provisional += 1
                    self._provisional = (*self._provisional, label)
                self._unlabelled_counts = {
                    **self._unlabelled_counts,
                    label: self._unlabelled_counts.get(label, 0) + 1}
            out["y_assigned"].append(label)
            out["learned"][t] = learned
        dtype = self._registry.labels.dtype if len(self._registry) else object
        for key in ("y_pred", "y_known", "y_assigned"):
            values = out[key]
            out[key] = np.asarray(values, dtype=np.result_type(
                dtype, np.asarray([self.novel_label_]).dtype)
                if dtype.kind != "O" else object)
        return Bunch(**out)

    def correct(self, X, y_assigned, y_true):
        """Move rows learned without labels from their assigned class to
        their true one.

        A provisional class takes the true label when its first label arrives
        (when that label is not a class yet); a row whose true class exists
        already moves into it, so two provisional classes of one true class
        merge as their rows are corrected; a provisional class left without
        rows disappears. After every row learned without a label has been
        corrected, the head equals (to float64 rounding) the head that
        learned the same rows with their true labels.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The rows, as passed to ``open_world_step``.
        y_assigned : array-like of shape (n_samples,)
            The ``y_assigned`` that ``open_world_step`` returned for them (a
            provisional label renamed since is followed to its new name).
        y_true : array-like of shape (n_samples,)
            Their true labels.

        Returns
        -------
        self : CRPGaussianClassifier

        Raises
        ------
        ValueError
            Lengths differ, a label was never assigned, or more rows are
            corrected out of a class than were learned into it without a
            label (a row the head did not learn from); before any change.

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn_flowr import CRPGaussianClassifier
        >>> head = CRPGaussianClassifier().fit([[0.0], [0.3], [9.0], [9.2]],
        ...                                    [0, 0, 1, 1])
        >>> out = head.open_world_step([[30.0], [30.2]])
        >>> out.y_assigned, out.learned
        (array([-2, -2]), array([ True,  True]))
        >>> head = head.correct([[30.0], [30.2]], out.y_assigned, [7, 7])
        >>> head.classes_
        array([0, 1, 7])
        """
        check_is_fitted(self)
        X = self._validated_rows(X)
        y_assigned = column_or_1d(np.asarray(y_assigned, dtype=object))
        y_true = column_or_1d(np.asarray(y_true))
        if not X.shape[0] == y_assigned.shape[0] == y_true.shape[0]:
            raise ValueError("X, y_assigned and y_true need one entry per row; got "
                             f"{X.shape[0]}, {y_assigned.shape[0]} and "
                             f"{y_true.shape[0]}.")
        aliases = dict(self._aliases)
        current = [aliases.get(label, label) for label in y_assigned.tolist()]
        wanted = {}
        for label in current:
            if self._registry.index_of(label) is None:
                raise ValueError(f"y_assigned holds {label!r}, which is not a class "
                                 "this head assigned rows to.")
            wanted[label] = wanted.get(label, 0) + 1
        for label, count in wanted.items():
            if count > self._unlabelled_counts.get(label, 0):
                raise ValueError(
                    f"{count} rows are corrected out of class {label!r}, but the "
                    f"head learned {self._unlabelled_counts.get(label, 0)} rows "
                    "into it without a label: pass only rows whose "
                    "open_world_step result says learned.")
        if any(label == self.novel_label_ for label in y_true.tolist()):
            raise ValueError(f"y_true holds the novel label {self.novel_label_!r}.")
        state, registry = copy.deepcopy(self._state), copy.deepcopy(self._registry)
        counts, provisional = dict(self._unlabelled_counts), set(self._provisional)
        for row, (assigned, true) in enumerate(zip(y_assigned.tolist(),
                                                   y_true.tolist(), strict=True)):
            label = aliases.get(assigned, assigned)
            counts[label] -= 1
            if label == true:
                continue
            if label in provisional and registry.index_of(true) is None:
                registry.rename(label, true)
                provisional.discard(label)
                counts[true] = counts.pop(label)
                aliases = {key: (true if value == label else value)
                           for key, value in aliases.items()}
                aliases[label] = true
                continue
            target = registry.index_of(true)
            if target is None:
                registry.register(np.asarray([true]))
                state.add_classes(1)
                target = registry.index_of(true)
            source = registry.index_of(label)
            state.move(X[row:row + 1], np.array([source]), np.array([target]))
            if label in provisional and state.n_obs[source] <= 0:
                state.remove_class(source)
                registry.remove(label)
                provisional.discard(label)
                aliases = {key: (true if value == label else value)
                           for key, value in aliases.items()}
                aliases[label] = true
        self.__dict__.update(_state=state, _registry=registry,
                             _unlabelled_counts={k: v for k, v in counts.items()
                                                 if v > 0},
                             _provisional=tuple(label for label in self._provisional
                                                if label in provisional),
                             _aliases=aliases)
        return self
