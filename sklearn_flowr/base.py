"""The online open-world interface that the head and the baselines share, and
the known labels (:class:`LabelRegistry`)."""

import copy

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, _fit_context
from sklearn.utils import Bunch
from sklearn.utils.validation import check_is_fitted, validate_data

from .validation import (
    check_magnitude,
    check_missing_labels,
    check_new_labels,
    check_params_unchanged,
    check_targets,
    fill_new_params,
    label_result_dtype,
    resolve_novel_label,
    validate_rows,
)

__all__ = ["DefaultParts", "LabelRegistry", "OnlineOpenWorldClassifier",
           "all_or_nothing", "on_a_copy"]


class DefaultParts:
    """``get_params`` and ``set_params`` of a composite whose parts (its
    parameters named in ``_DEFAULT_PARTS``, each with the factory of the part
    it stands for) may be left None: their defaults' parameters are reached as
    ``<part>__<name>``, as a given part's are (``GridSearchCV`` over them with
    the default part), and setting one puts the default part in place first."""

    _DEFAULT_PARTS = {}

    def get_params(self, deep=True):
        params = super().get_params(deep=deep)
        if deep:
            for part, default in self._unset_parts():
                params.update((f"{part}__{name}", value) for name, value
                              in default.get_params(deep=False).items())
        return params

    def set_params(self, **params):
        for part, default in self._unset_parts():
            if any(key.startswith(f"{part}__") for key in params):
                setattr(self, part, default)
        return super().set_params(**params)

    def _unset_parts(self):
        """The parts left None, each with a new part it stands for."""
        return [(part, make()) for part, make in self._DEFAULT_PARTS.items()
                if getattr(self, part) is None]

class OnlineOpenWorldClassifier(ClassifierMixin, BaseEstimator):
    """Base of the online open-world classifiers (not for direct use).

    Subclasses define ``_parameter_constraints``, a ``novel_label`` parameter
    and the hooks ``_start``, ``_learn`` and ``_stream`` (optionally
    ``_checkpoint``, ``_end_fit``, ``_check_stream_start`` and
    ``_learn_more``).

    Examples
    --------
    >>> from sklearn_flowr import CRPGaussianClassifier
    >>> from sklearn_flowr.base import OnlineOpenWorldClassifier
    >>> clf = CRPGaussianClassifier(covariance="isotropic").partial_fit(
    ...     [[0.0], [0.2], [4.0], [4.2]], [0, 0, 1, 1])
    >>> isinstance(clf, OnlineOpenWorldClassifier), clf.classes_
    (True, array([0, 1]))
    """

    # Parameters the fitted state was built from (None: any may change), and
    # those read at call time, which may change after fitting.
    _fitted_params = None
    _runtime_params = ()
    # Whether the maths sees the rows' directions only (features of any units).
    _scale_free = False

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Learn from labelled rows, forgetting any earlier state.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Embeddings.
        y : array-like of shape (n_samples,)
            Labels, none equal to ``novel_label``.

        Returns
        -------
        self : estimator
        """
        return self._partial_fit(X, y, reset=True, fitting=True)

    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y, classes=None):
        """Condition on labelled rows; unseen labels instantiate classes, in
        order of first appearance (an unfitted estimator starts from these
        rows, as online rows: ``fit`` may do more, such as hold rows out to
        calibrate).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Embeddings.
        y : array-like of shape (n_samples,)
            Labels, none equal to ``novel_label``.
        classes : array-like of shape (n_classes,), default=None
            Accepted for scikit-learn's incremental learners; when given, it
            must hold every label of ``y``.

        Returns
        -------
        self : estimator
        """
        return self._partial_fit(X, y, classes=classes,
                                 reset=not self.__sklearn_is_fitted__(),
                                 fitting=False)

    def _partial_fit(self, X, y, classes=None, *, reset, fitting):
        with all_or_nothing(self) as undo:
            X, y = self._validate_input(X, y, reset=reset, fitting=fitting)
            labels, y_index = self._check_labels(
                y, None if reset else self._registry, arrival_order=not fitting)
            if classes is not None:
                unexpected = np.setdiff1d(labels, np.asarray(classes))
                if unexpected.size:
                    raise ValueError(f"y has labels {unexpected.tolist()} that "
                                     "are not in `classes`.")
            if reset:
                self._start_labels(labels)
                self._start(X, y_index, labels, fitting=fitting)
            undo.append(self._registry.checkpoint())
            index = self._registry.register(labels)[y_index]
            undo.append(self._checkpoint(index))
            if fitting:
                self._learn(X, index)
            elif reset:
                self._learn_first(X, index)
            else:
                self._learn_more(X, index)
            if fitting:
                self._end_fit(X, index)
        return self

    def open_world_step(self, X, y):
        """Predict each row with the state before it, then learn its label:
        predicting then calling ``partial_fit`` row by row, vectorised.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Embeddings, in stream order.
        y : array-like of shape (n_samples,)
            Labels, revealed after each prediction.

        Returns
        -------
        result : :class:`~sklearn.utils.Bunch`
            Arrays of shape (n_samples,): ``y_pred``, ``y_known`` (best known
            class), ``p_novel`` (novelty score, higher = more novel),
            ``is_novel`` (the label was unseen then), ``y_assigned``,
            ``learned`` and, for a probability, ``novelty_score`` (its
            log-odds).
        """
        first_call = not self.__sklearn_is_fitted__()
        if first_call:
            self._check_stream_start()
        with all_or_nothing(self) as undo:
            if first_call:
                self._validate_params()
            X, y = self._validate_input(X, y, reset=first_call)
            labels, y_index = self._check_labels(
                y, None if first_call else self._registry)
            if first_call:
                self._start_labels(labels)
                self._start(X, y_index, labels, fitting=False)
            undo.append(self._registry.checkpoint())
            index, is_new = self._registry.register_stream(labels, y_index)
            undo.append(self._checkpoint(index))
            known_index, score, novel, *ranking = self._stream(X, index, is_new)
            # Inside the guard: no rows learned without their predictions.
            y_known = self._labels_of(known_index)
            y_pred = self._labels_of(np.where(novel, -1, known_index))
            result = Bunch(y_pred=y_pred, y_known=y_known, p_novel=score,
                           is_novel=is_new, y_assigned=y,
                           learned=np.ones(y.shape[0], dtype=bool))
            if ranking:
                result["novelty_score"] = ranking[0]
        return result

    def _learn_more(self, X, index):
        """Learn ``partial_fit``'s rows ``X`` (of classes ``index``) once fitted."""
        self._learn(X, index)

    def _learn_first(self, X, index):
        """Learn the rows ``X`` (of classes ``index``) of ``partial_fit`` on an
        unfitted estimator."""
        self._learn(X, index)

    def _check_stream_start(self):
        """Raise when a stream cannot start on the unfitted estimator."""

    def _end_fit(self, X, index):
        """Finish ``fit`` once its rows ``X`` (of classes ``index``) are learned."""

    def _checkpoint(self, index):
        """The undo of what learning rows of classes ``index`` changes in place."""
        return _nothing_to_undo

    def _validate_input(self, X, y=None, *, reset=False, dtype=np.float64,
                        fitting=False):
        """Checked rows (``reset``: the first ones, which set the features);
        ``fitting``: ``fit``'s rows (a subclass may prepare its calibration)."""
        if reset:
            check_missing_labels(y)
            X, y = validate_data(self, X, y, dtype=dtype, reset=True)
            check_magnitude(X, units=not self._scale_free)
            return X, y
        check_params_unchanged(self, self._fitted_params,
                               runtime=self._runtime_params)
        return validate_rows(self, X, y, dtype=dtype)

    def _validated_rows(self, X):
        """Rows to predict on: fitted, and valid like every input."""
        check_is_fitted(self)
        return self._validate_input(X)[0]

    def _check_labels(self, y, registry=None, *, arrival_order=False):
        """Checked distinct labels (sorted, or in ``arrival_order``) and each
        row's position among them."""
        y = check_targets(np.asarray(y))
        if y.shape[0] == 1:
            labels, y_index = y, np.zeros(1, dtype=np.intp)
        elif arrival_order:
            labels, first, y_index = np.unique(y, return_index=True,
                                               return_inverse=True)
            order = np.argsort(first, kind="stable")
            labels, y_index = labels[order], np.argsort(order)[y_index.reshape(-1)]
        else:
            labels, y_index = np.unique(y, return_inverse=True)
        if registry is None:
            check_new_labels(labels, resolve_novel_label(self.novel_label, labels))
        else:
            check_new_labels(labels, self.novel_label_, registry.labels)
        return labels, y_index.reshape(-1)

    def _start_labels(self, labels):
        """The novel label and an empty registry for a fresh state."""
        self.novel_label_ = resolve_novel_label(self.novel_label, labels,
                                                warn=True)
        self._registry = LabelRegistry.for_labels(labels)

    def _labels_of(self, index):
        """Map class indices to labels, ``-1`` to ``novel_label_``."""
        return self._registry.labels_of(index, self.novel_label_)

    def __sklearn_is_fitted__(self):
        return hasattr(self, "_registry")

    def __setstate__(self, state):
        # An older fitted state loaded as "unfitted" would start over silently.
        if "_registry" not in state and ("_state" in state or "_labels" in state):
            raise ValueError(
                f"This {type(self).__name__} was saved by an older version of "
                "sklearn_flowr whose fitted state this version cannot read; "
                "fit it again.")
        super().__setstate__(state)
        fill_new_params(self)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        return tags

    def _fitted(self, name):
        """``self``, or the AttributeError of fitted attribute ``name``."""
        if not self.__sklearn_is_fitted__():
            raise AttributeError(f"{name} exists once the estimator is fitted.")
        return self

    @property
    def classes_(self):
        return self._fitted("classes_")._registry.labels


def _nothing_to_undo():
    """The undo of a change that was not made in place."""


class all_or_nothing:
    """Leave ``estimator`` as it was if the ``with`` block fails: the undo callables
    the block appends run last-first, then ``__dict__`` comes back."""

    __slots__ = ("estimator", "saved", "undo")

    def __init__(self, estimator):
        self.estimator = estimator
        self.saved = estimator.__dict__.copy()
        self.undo = []

    def __enter__(self):
        return self.undo

    def __exit__(self, kind, value, traceback):
        return kind is not None and self._restore()

    def _restore(self):
        interrupted = None
        while True:
            try:
                for restore in reversed(self.undo):
                    restore()  # each one is idempotent: it may run again
                self.estimator.__dict__ = dict(self.saved)
                break
            except KeyboardInterrupt as error:
                interrupted = error
        if interrupted is not None:
            raise interrupted
        return False  # the exception goes on


def on_a_copy(estimator, change, mutable):
    """``change(work)`` on a copy of ``estimator`` (attributes ``mutable`` deep
    copied) that then replaces its ``__dict__`` in one step; returns its result."""
    work = object.__new__(type(estimator))
    work.__dict__.update(estimator.__dict__)
    for name in mutable:  # (a class attribute's default is copied too)
        if hasattr(estimator, name):
            setattr(work, name, copy.deepcopy(getattr(estimator, name)))
    result = change(work)
    estimator.__dict__ = work.__dict__
    return result


class LabelRegistry:
    """The known labels in order of arrival (class ``i`` is ``labels[i]``), in a
    buffer that doubles and widens its dtype as new labels need."""

    def __init__(self, dtype):
        self._labels = np.empty(4, dtype=dtype)
        self._index = {}
        self.n_labels = 0

    @classmethod
    def for_labels(cls, labels):
        """An empty registry for labels like ``labels``."""
        return cls(labels.dtype if labels.dtype.kind in "biuf" else object)

    def __len__(self):
        return self.n_labels

    def __contains__(self, label):
        return label in self._index

    @property
    def labels(self):
        """The known labels, shape (n_labels,) (a view of the buffer)."""
        return self._labels[: self.n_labels]

    def add(self, new_labels):
        """Append labels not known yet, in the order given."""
        n_new = len(new_labels)
        if n_new == 0:
            return
        dtype = label_result_dtype(self._labels, new_labels)
        stop = self.n_labels + n_new
        if dtype != self._labels.dtype or stop > self._labels.shape[0]:
            grown = np.empty(max(stop, 2 * self._labels.shape[0]), dtype=dtype)
            grown[: self.n_labels] = self.labels
            self._labels = grown
        self._labels[self.n_labels : stop] = new_labels
        for offset, label in enumerate(np.asarray(new_labels).tolist()):
            self._index[label] = self.n_labels + offset
        self.n_labels = stop

    def checkpoint(self):
        """A callable that takes the registry back to its present labels."""
        labels, n_labels = self._labels, self.n_labels

        def undo():
            for key in [key for key, i in self._index.items() if i >= n_labels]:
                del self._index[key]
            self._labels, self.n_labels = labels, n_labels

        return undo

    def register(self, labels):
        """Index of each of the distinct ``labels``, unknown ones added in order."""
        keys = labels.tolist()
        self.add(labels[[key not in self._index for key in keys]])
        return np.array([self._index[key] for key in keys], dtype=np.intp)

    def register_stream(self, labels, y_index):
        """Class index of each row of a stream (``labels[y_index]``) and whether it
        opens a class, new ones in order of first appearance."""
        if y_index.shape[0] == 1:  # the online loop's case, without sorting
            known = self._index.get(labels.tolist()[0])
            if known is None:
                self.add(labels)
            return (np.array([self.n_labels - 1 if known is None else known]),
                    np.array([known is None]))
        first_row = np.unique(y_index, return_index=True)[1]
        order = np.argsort(first_row)  # the labels in order of first appearance
        n_known = self.n_labels
        index_of_label = np.empty(labels.shape[0], dtype=np.intp)
        index_of_label[order] = self.register(labels[order])
        is_new = np.zeros(y_index.shape[0], dtype=bool)
        is_new[first_row[index_of_label >= n_known]] = True
        return index_of_label[y_index], is_new

    def labels_of(self, index, novel):
        """Labels of class indices, ``novel`` for ``-1``."""
        labels = self.labels
        if index.shape[0] == 1 and index[0] >= 0:  # the online loop's case
            return labels[index]
        is_novel = index < 0
        if not is_novel.any():
            return labels[index]
        out = np.empty(index.shape[0], dtype=label_result_dtype(labels, novel))
        out[~is_novel] = labels[index[~is_novel]]
        out[is_novel] = novel
        return out

    def rename(self, old, new):
        """Give the class labelled ``old`` the new label ``new``."""
        i = self._index.pop(old)
        dtype = label_result_dtype(self._labels, [new])
        if dtype != self._labels.dtype:
            self._labels = self._labels.astype(dtype)
        self._labels[i] = new
        self._index[np.asarray([new]).tolist()[0]] = i

    def remove(self, label):
        """Forget ``label``; the labels after it move up one index."""
        i = self._index.pop(label)
        stop = self.n_labels
        self._labels[i:stop - 1] = self._labels[i + 1:stop].copy()
        self.n_labels = stop - 1
        for j, later in enumerate(self._labels[i:self.n_labels].tolist(), start=i):
            self._index[later] = j

    def index_of(self, label):
        """The class index of ``label``, or None when it is not known."""
        return self._index.get(label)

    def __getstate__(self):
        # The used labels only; the index is rebuilt from them.
        return {"_labels": self.labels.copy(), "n_labels": self.n_labels}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._index = {label: i for i, label in enumerate(self.labels.tolist())}
