"""The online interface every baseline shares with the FLOWR head.

A baseline keeps per-class state that grows as labels arrive. This base class
does what does not depend on the method: input and label validation (all of it
before any state changes), label bookkeeping (``classes_`` in ``fit`` order,
then in order of arrival), the novel label, and the public methods ``fit``,
``partial_fit``, ``open_world_step``, ``predict`` and ``novelty_score``. A
method supplies these hooks:

- ``_start(X, y_index, n_labels, fitting)``: fresh method state (``fit`` or the
  first ``partial_fit``), e.g. a learned metric;
- ``_learn(X, index)``: condition on rows of the classes ``index``;
- ``_score(X)``: best known class index (-1 when no class exists) and novelty
  score of each row at the current state;
- ``_declares_novel(score)``: the method's own threshold rule;
- ``_check_hyper_parameters(n_features)``: optional checks that need the data;
- ``_stream(X, index)``: optional vectorised predict-then-learn; the default
  loops over the rows.
"""

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, _fit_context
from sklearn.utils import Bunch
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from .._head import _check_magnitude, _unchanged_on_error
from .._labels import check_new_labels, label_result_dtype, resolve_novel_label


class OpenWorldBaseline(ClassifierMixin, BaseEstimator):
    """Base class of the open-world baselines (not for direct use).

    Subclasses define ``_parameter_constraints``, ``_empty_score`` (the
    novelty score of a row when no class exists yet) and the hooks listed in
    the module docstring.
    """

    _empty_score = 1.0

    # ------------------------------------------------------------------ fitting
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Learn from labelled training data; forget any earlier state.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training embeddings.
        y : array-like of shape (n_samples,)
            Class labels (none equal to ``novel_label``).

        Returns
        -------
        self : object
            The fitted estimator.
        """
        with _unchanged_on_error(self):
            X, y = validate_data(self, X, y, dtype=np.float64, reset=True)
            _check_magnitude(X)
            labels, y_index = self._check_labels(y, first_call=True)
            self._check_hyper_parameters(X.shape[1])
        self._reset(labels)
        self._start(X, y_index, labels.shape[0], fitting=True)
        self._learn_batch(X, labels, y_index)
        return self

    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y, classes=None):
        """Condition on labelled rows; unseen labels instantiate classes.

        On an unfitted estimator this starts from an empty state.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Embeddings.
        y : array-like of shape (n_samples,)
            Labels; labels not in ``classes_`` create classes.
        classes : array-like of shape (n_classes,), default=None
            Accepted for compatibility with scikit-learn's incremental
            learners; classes need no declaration in the open world. When
            given, every label of ``y`` must be in it.

        Returns
        -------
        self : object
            The updated estimator.
        """
        first_call = not self.__sklearn_is_fitted__()
        with _unchanged_on_error(self):
            X, y = validate_data(self, X, y, dtype=np.float64, reset=first_call)
            _check_magnitude(X)
            labels, y_index = self._check_labels(y, first_call=first_call)
            if classes is not None:
                unexpected = np.setdiff1d(labels, np.asarray(classes))
                if unexpected.size:
                    raise ValueError(
                        f"y has labels {unexpected.tolist()} that are not in "
                        "`classes`."
                    )
            if first_call:
                self._check_hyper_parameters(X.shape[1])
        if first_call:
            self._reset(labels)
            self._start(X, y_index, labels.shape[0], fitting=False)
        self._learn_batch(X, labels, y_index)
        return self

    def open_world_step(self, X, y):
        """Predict each row with the state before it, then learn its label.

        Equals calling :meth:`predict` and :meth:`novelty_score` then
        :meth:`partial_fit` row by row. On an unfitted estimator the stream
        starts from an empty state.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Embeddings, in stream order.
        y : array-like of shape (n_samples,)
            True labels, revealed after each prediction.

        Returns
        -------
        result : :class:`~sklearn.utils.Bunch`
            Arrays of shape (n_samples,): ``y_pred`` (``novel_label_`` when the
            method's own threshold declares the row novel, else ``y_known``),
            ``y_known`` (best known class, ``novel_label_`` while none exists),
            ``p_novel`` (the novelty score, higher = more novel; see the class
            docstring) and ``is_novel`` (the label was unseen at that moment).
        """
        first_call = not self.__sklearn_is_fitted__()
        with _unchanged_on_error(self):
            if first_call:
                self._validate_params()
            X, y = validate_data(self, X, y, dtype=np.float64, reset=first_call)
            _check_magnitude(X)
            labels, y_index = self._check_labels(y, first_call=first_call)
            if first_call:
                self._check_hyper_parameters(X.shape[1])
        if first_call:
            self._reset(labels)
            self._start(X, y_index, labels.shape[0], fitting=False)
        # Classes that exist keep their index; new ones get the next indices in
        # order of first appearance, as row-by-row learning gives them.
        first_row = np.unique(y_index, return_index=True)[1]
        exists = np.array([lbl in self._label_index for lbl in labels.tolist()],
                          dtype=bool)
        new_first_rows = np.sort(first_row[~exists])
        index_of_label = np.empty(labels.shape[0], dtype=np.intp)
        index_of_label[exists] = [self._label_index[lbl]
                                  for lbl in labels[exists].tolist()]
        index_of_label[y_index[new_first_rows]] = self.n_classes_ + np.arange(
            new_first_rows.shape[0]
        )
        index = index_of_label[y_index]
        is_novel = np.zeros(X.shape[0], dtype=bool)
        is_novel[new_first_rows] = True
        self._add_labels(labels[y_index[new_first_rows]])
        known_index, score = self._stream(X, index)
        novel = (known_index < 0) | self._declares_novel(score)
        y_known = self._labels_of(known_index)
        y_pred = self._labels_of(np.where(novel, -1, known_index))
        return Bunch(y_pred=y_pred, y_known=y_known, p_novel=score,
                     is_novel=is_novel)

    # --------------------------------------------------------------- prediction
    def _score_rows(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, reset=False)
        _check_magnitude(X)
        return self._score(X)

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
        return self._score_rows(X)[1]

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
        known_index, score = self._score_rows(X)
        novel = (known_index < 0) | self._declares_novel(score)
        return self._labels_of(np.where(novel, -1, known_index))

    # ----------------------------------------------------------------- defaults
    def _check_hyper_parameters(self, n_features):
        """Checks that need ``n_features`` (before any state changes)."""

    def _stream(self, X, index):
        """Predict-then-learn, one row at a time (the classes of ``index`` are
        registered already; ``_score`` must only see those that have rows)."""
        known_index = np.empty(X.shape[0], dtype=np.intp)
        score = np.empty(X.shape[0])
        for row in range(X.shape[0]):
            known_index[row], score[row] = (
                value[0] for value in self._score(X[row : row + 1])
            )
            self._learn(X[row : row + 1], index[row : row + 1])
        return known_index, score

    # ------------------------------------------------------------------ labels
    def _reset(self, labels):
        self.novel_label_ = resolve_novel_label(self.novel_label, labels)
        dtype = labels.dtype if labels.dtype.kind in "biuf" else object
        self._labels = np.empty(0, dtype=dtype)
        self._label_index = {}

    def _add_labels(self, new_labels):
        if new_labels.shape[0] == 0:
            return
        if self._labels.dtype != object:
            dtype = np.result_type(self._labels.dtype, new_labels.dtype)
            self._labels = self._labels.astype(dtype)
        start = self._labels.shape[0]
        self._labels = np.concatenate([self._labels,
                                       new_labels.astype(self._labels.dtype)])
        for offset, label in enumerate(new_labels.tolist()):
            self._label_index[label] = start + offset

    def _learn_batch(self, X, labels, y_index):
        """Register unseen labels (in sorted order) and learn the rows."""
        new = np.array([lbl not in self._label_index for lbl in labels.tolist()],
                       dtype=bool)
        self._add_labels(labels[new])
        index = np.array([self._label_index[lbl] for lbl in labels.tolist()],
                         dtype=np.intp)
        self._learn(X, index[y_index])

    def _labels_of(self, index):
        """Map class indices to labels, ``-1`` to ``novel_label_``."""
        novel = index < 0
        if not novel.any():
            return self._labels[index]
        out = np.empty(index.shape[0],
                       dtype=label_result_dtype(self._labels, self.novel_label_))
        out[~novel] = self._labels[index[~novel]]
        out[novel] = self.novel_label_
        return out

    def _check_labels(self, y, *, first_call):
        """Validate labels against the novel label and the known label type."""
        if y.dtype.kind not in "biuU":
            check_classification_targets(y)
        labels, y_index = np.unique(y, return_inverse=True)
        if first_call:
            novel = resolve_novel_label(self.novel_label, labels)
            check_new_labels(labels, novel)
        else:
            novel = self.novel_label_
            check_new_labels(labels, novel, self._labels)
        return labels, y_index

    # -------------------------------------------------------------- attributes
    def __sklearn_is_fitted__(self):
        return hasattr(self, "_labels")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        return tags

    @property
    def classes_(self):
        if not self.__sklearn_is_fitted__():
            raise AttributeError("classes_ exists once the estimator is fitted.")
        return self._labels

    @property
    def n_classes_(self):
        if not self.__sklearn_is_fitted__():
            raise AttributeError("n_classes_ exists once the estimator is fitted.")
        return self._labels.shape[0]
