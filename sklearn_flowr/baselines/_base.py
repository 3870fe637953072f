"""What the baselines add to the online open-world classifier of the head.

:class:`~sklearn_flowr._online_base.OnlineOpenWorldClassifier` holds the
learning methods, validation, labels and the stream's bookkeeping for the head
and the baselines alike. A baseline adds a novelty score and its own threshold
rule, through these hooks (next to ``_start`` and ``_learn``):

- ``_score(X)``: best known class index (-1 when no class exists) and novelty
  score of each row at the current state;
- ``_declares_novel(score)``: the method's own threshold rule;
- ``_stream(X, index, is_new)``: optional vectorised predict-then-learn; the
  default loops over the rows.
"""

import numpy as np

from .._online_base import OnlineOpenWorldClassifier


class OpenWorldBaseline(OnlineOpenWorldClassifier):
    """Base class of the open-world baselines (not for direct use).

    Subclasses define ``_parameter_constraints``, ``_empty_score`` (the
    novelty score of a row when no class exists yet) and the hooks listed in
    the module docstring.
    """

    _empty_score = 1.0

    def novelty_score(self, X):
        """Novelty score of each row at the current state (higher = more novel).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Embeddings.

        Returns
        -------
        score : ndarray of shape (n_samples,)
            The method's novelty score (see the class docstring).
        """
        return self._score(self._validated_rows(X))[1]

    def predict(self, X):
        """Best known class, or ``novel_label_`` when the threshold says novel.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Embeddings.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
            Labels from ``classes_`` or ``novel_label_``.
        """
        known_index, score = self._score(self._validated_rows(X))
        novel = self._is_novel(known_index, score)
        return self._labels_of(np.where(novel, -1, known_index))

    def predict_known(self, X):
        """Best known class of each row, whatever its novelty score.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Embeddings.

        Returns
        -------
        y_known : ndarray of shape (n_samples,)
            Labels from ``classes_`` (``novel_label_`` while no class exists).
        """
        return self._labels_of(self._score(self._validated_rows(X))[0])

    def _is_novel(self, known_index, score):
        """No class to give, or the method's threshold says novel."""
        return (known_index < 0) | self._declares_novel(score)

    def _stream(self, X, index, is_new):
        """Predict-then-learn, one row at a time (the classes of ``index`` are
        registered already; ``_score`` must only see those that have rows)."""
        known_index = np.empty(X.shape[0], dtype=np.intp)
        score = np.empty(X.shape[0])
        for row in range(X.shape[0]):
            known_index[row], score[row] = (
                value[0] for value in self._score(X[row : row + 1])
            )
            self._learn(X[row : row + 1], index[row : row + 1])
        return known_index, score, self._is_novel(known_index, score)

    @property
    def n_classes_(self):
        return len(self._fitted("n_classes_")._registry)
