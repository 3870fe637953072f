"""The online open-world classifier that the head and the baselines share.

What does not depend on the method is written here once: the public learning
methods (``fit`` is ``_partial_fit(reset=True)``, as in scikit-learn's
GaussianNB), input and label validation (all of it before any state changes,
and undone if it fails half-way), the novel label, the registry of known
labels (``classes_`` sorted in ``fit``, then in order of arrival) and the
stream's bookkeeping. A method supplies these hooks:

- ``_start(X, y_index, labels, fitting)``: a fresh state (``fit``, or the
  first ``partial_fit`` or ``open_world_step``); it may raise;
- ``_learn(X, index)``: condition on rows of the classes ``index`` (classes
  the registry has but the state not yet are new);
- ``_stream(X, index, is_new)``: predict each row with the state before it,
  then learn it; returns the best known class index (-1 when none exists),
  the novelty score and the novel decision of each row, and optionally a
  ranking score (the log-odds of a probability);
- ``_end_fit()``: optional, after ``fit`` has learned its rows;
- ``_checkpoint(index)``: what undoes the in-place changes that learning rows
  of the classes ``index`` makes (see below);
- ``_stream_one(X, i, is_new, undo)``: optional, ``_checkpoint`` and
  ``_stream`` of one row fused for the online hot path (``open_world_step``
  of one valid row of a fitted estimator, which skips scikit-learn's
  validation and the label arrays of a batch: per call, that overhead costs
  more than the arithmetic of a small model); it returns ``_stream``'s
  values of the row as scalars (the ranking score None when there is none).

Every learning method is all-or-nothing: an exception or a KeyboardInterrupt
at any point leaves the estimator exactly as it was. Attributes that learning
*replaces* are restored from a shallow copy of ``__dict__``; what it changes
*in place* (the registry, rows of the per-class buffers) is journalled before
the change: the labels' count and buffer, and a copy of the rows of the
classes ``index`` touches -- O(rows x d), not a copy of the whole state, so a
one-row step at 10^4 classes pays a few microseconds for it.
"""

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, _fit_context
from sklearn.utils import Bunch
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import assert_all_finite, check_is_fitted, validate_data

from ._labels import (
    LabelRegistry,
    check_new_labels,
    resolve_novel_label,
    same_label,
)
from ._params import check_params_unchanged, fill_new_params

# ``y_index`` of a one-row batch (read-only: it is shared).
_FIRST_LABEL = np.zeros(1, dtype=np.intp)
_FIRST_LABEL.flags.writeable = False

# Largest |x| the estimators score: squared distances of float64 rows stay
# finite (d * (2 x)^2 / sigma far below 1.8e308 for any realistic d and sigma).
MAX_ABS_INPUT = 1e100
_MAX_SQUARED_NORM = MAX_ABS_INPUT**2
_FLOAT64 = np.dtype(np.float64)
# One-row boolean results, copied (a copy costs half of ``np.array``).
_TRUE, _FALSE = np.array([True]), np.array([False])
_TRUE.flags.writeable = _FALSE.flags.writeable = False
# ``_hot_row_label``'s answer for inputs the general path takes.
_GENERAL_PATH = object()


class OnlineOpenWorldClassifier(ClassifierMixin, BaseEstimator):
    """Base of the online open-world classifiers (not for direct use).

    Subclasses define ``_parameter_constraints``, a ``novel_label`` parameter
    and the hooks listed in the module docstring.
    """

    # Parameters the fitted state was built from (see ``_params``); None: any
    # parameter may change after fitting.
    _fitted_params = None
    # Parameters read at call time, which may change after fitting.
    _runtime_params = ()

    # ------------------------------------------------------------------ fitting
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Learn from labelled rows ``X`` (n_samples, n_features) and labels
        ``y`` (n_samples,), none equal to ``novel_label``; forget any earlier
        state. Returns the fitted estimator."""
        return self._partial_fit(X, y, reset=True, fitting=True)

    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y, classes=None):
        """Condition on labelled rows; unseen labels instantiate classes.

        ``X`` (n_samples, n_features) and ``y`` (n_samples,) as in ``fit``;
        new labels become classes in order of first appearance. ``classes``
        (accepted for scikit-learn's incremental learners) must, when given,
        hold every label of ``y``. Returns the updated estimator.
        """
        return self._partial_fit(X, y, classes=classes,
                                 reset=not self.__sklearn_is_fitted__(),
                                 fitting=False)

    def _partial_fit(self, X, y, classes=None, *, reset, fitting):
        """Validate everything, then learn; ``reset`` starts a fresh state.

        All or nothing: any exception (or a KeyboardInterrupt) leaves the
        estimator as it was.
        """
        with _all_or_nothing(self) as undo:
            X, y = self._validate_input(X, y, reset=reset)
            labels, y_index = self._check_labels(
                y, None if reset else self._registry, arrival_order=not fitting
            )
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
            self._learn(X, index)
            if fitting:
                self._end_fit()
        return self

    def open_world_step(self, X, y):
        """Predict each row with the state before it, then learn its label.

        Equals predicting then calling ``partial_fit`` row by row; an unfitted
        estimator starts from an empty state. ``X`` (n_samples, n_features) is
        in stream order; ``y`` (n_samples,) is revealed after each prediction.
        Returns a :class:`~sklearn.utils.Bunch` of arrays of shape
        (n_samples,): ``y_pred`` (``novel_label_`` for a row declared novel,
        else ``y_known``), ``y_known`` (best known class, ``novel_label_``
        while none exists), ``p_novel`` (the novelty score, higher = more
        novel), ``is_novel`` (the label was unseen at that moment) and, where
        ``p_novel`` is a probability, ``novelty_score``: its log-odds, in the
        same order without rounding to 1; ``y_assigned`` (the labels) and
        ``learned`` (all True), as an unlabelled step reports them. All or
        nothing: an exception or a KeyboardInterrupt anywhere leaves the
        estimator as it was.
        """
        key = self._hot_row_label(X, y)
        if key is not _GENERAL_PATH:  # one valid row of a fitted estimator
            # ``_all_or_nothing`` inlined: its object and protocol calls cost
            # a one-row step more than its restore, which is the same.
            saved, undo = self.__dict__.copy(), []
            try:
                return self._open_world_step_one(X, y, key, undo)
            except BaseException:
                _restore(self, saved, undo)
                raise
        first_call = not self.__sklearn_is_fitted__()
        if first_call:
            self._check_stream_start()
        with _all_or_nothing(self) as undo:
            if first_call:
                self._validate_params()
            X, y = self._validate_input(X, y, reset=first_call)
            labels, y_index = self._check_labels(
                y, None if first_call else self._registry
            )
            if first_call:
                self._start_labels(labels)
                self._start(X, y_index, labels, fitting=False)
            undo.append(self._registry.checkpoint())
            index, is_new = self._registry.register_stream(labels, y_index)
            undo.append(self._checkpoint(index))
            known_index, score, novel, *ranking = self._stream(X, index, is_new)
            # The outputs are built inside the guard too: a failure here
            # must not leave the rows learned without their predictions.
            y_known = self._labels_of(known_index)
            y_pred = np.where(novel, self.novel_label_, y_known)
            # Every labelled row is learned under its label.
            result = Bunch(y_pred=y_pred, y_known=y_known, p_novel=score,
                           is_novel=is_new, y_assigned=y,
                           learned=np.ones(y.shape[0], dtype=bool))
            if ranking:  # a probability's order without its rounding near 0 and 1
                result["novelty_score"] = ranking[0]
        return result

    def _hot_row_label(self, X, y):
        """The label of a one-row step that the hot path takes, else
        ``_GENERAL_PATH``; changes nothing.

        The hot path (one row at a time, the paper's online loop) is a fitted
        estimator whose parameters equal those it was fitted with, a
        float64 ndarray ``X`` of one row of ``n_features_in_`` values whose
        Euclidean norm is at most ``MAX_ABS_INPUT`` (so is every value), and
        an ndarray ``y`` of one integer, boolean or str label of the known
        labels' kind that is not the novel label. It skips
        scikit-learn's validation (~10 cheap checks instead) and the label
        arrays of a batch. Anything else, bad input included, takes the
        general path, which raises its messages.
        """
        registry = self.__dict__.get("_registry")
        if (registry is None or X.__class__ is not np.ndarray
                or y.__class__ is not np.ndarray or X.dtype is not _FLOAT64
                or X.shape != (1, self.n_features_in_) or y.shape != (1,)
                or "feature_names_in_" in self.__dict__):
            return _GENERAL_PATH
        kind = y.dtype.kind
        if kind not in "biuU" or (kind == "U") == registry.numeric:
            return _GENERAL_PATH
        snapshot = self._fitted_params
        # Every parameter is the object fitted with, or equal to it, as
        # ``_params._same`` finds (it compares the values; one C call here).
        # A comparison that raises (arrays of another shape) or is False
        # takes the general path, which checks the change.
        try:
            if snapshot is not None and not snapshot.items() <= self.__dict__.items():
                return _GENERAL_PATH
        except Exception:
            return _GENERAL_PATH
        # Every |x| <= MAX_ABS_INPUT when the squared norm is at most its
        # square (one BLAS call; NaN and inf fail the comparison). Rows this
        # does not clear, those within range included, take the general path.
        if not np.vdot(X, X) <= _MAX_SQUARED_NORM:
            return _GENERAL_PATH
        key = y.item()
        return _GENERAL_PATH if same_label(key, self.novel_label_) else key

    def _open_world_step_one(self, X, y, key, undo):
        """:meth:`open_world_step` of one row that ``_hot_row_label`` passed
        (``key``: its label as a Python object), inside the caller's guard."""
        registry = self._registry
        index = registry.index_of(key)
        is_new = index is None
        if is_new:
            undo.append(registry.checkpoint())
            registry.add(y)
            index = registry.n_labels - 1
        best, score, novel, ranking = self._stream_one(X, index, is_new, undo)
        novel_label = self.novel_label_
        y_known = (registry.label_at(best) if best >= 0
                   else self._labels_of(np.array([best])))
        # (an empty Bunch merged with a dict: faster than its keywords)
        result = Bunch()
        result |= {
            "y_pred": (np.where(_TRUE, novel_label, y_known) if novel
                       else y_known.astype(_pred_dtype(y_known, novel_label))),
            "y_known": y_known, "p_novel": np.array([score]),
            "is_novel": (_TRUE if is_new else _FALSE).copy(),
            "y_assigned": y, "learned": _TRUE.copy(),
        }
        if ranking is not None:
            result["novelty_score"] = np.array([ranking])
        return result

    # ------------------------------------------------------------------ hooks
    def _stream_one(self, X, i, is_new, undo):
        """``_checkpoint`` (appended to ``undo``) and ``_stream`` of the one
        row ``X`` of class ``i``, which ``is_new`` (registered already).

        Methods may fuse the two for speed. Returns ``_stream``'s values of
        the row as scalars: the best known class index (-1: none), the
        novelty score, the novel decision and the ranking score (None when
        ``_stream`` gives none).
        """
        index = np.array([i], dtype=np.intp)
        undo.append(self._checkpoint(index))
        known_index, score, novel, *ranking = self._stream(X, index,
                                                           np.array([is_new]))
        return (int(known_index[0]), score[0], bool(novel[0]),
                ranking[0][0] if ranking else None)

    def _check_stream_start(self):
        """Raise when a stream cannot start on the unfitted estimator."""

    def _end_fit(self):
        """Finish ``fit`` once its rows are learned."""

    def _checkpoint(self, index):
        """A callable that undoes what learning rows of classes ``index``
        changes in place (attributes that are replaced come back with
        ``__dict__``).

        Called after the registry has registered the labels of ``index`` and
        before ``_learn`` or ``_stream``. The default has nothing to undo: a
        method whose learning writes into existing arrays must override it.
        """
        return _nothing_to_undo

    # ------------------------------------------------------------- validation
    def _validate_input(self, X, y=None, *, reset=False):
        """``validate_data`` and the magnitude check, with a shortcut for the
        hot path.

        One online step at 10^2 classes costs a few microseconds of arithmetic
        while ``validate_data`` costs ~0.2 ms; for float64 ndarrays without
        feature names the same checks are made here directly, with
        scikit-learn's messages. Anything else goes through ``validate_data``.
        """
        if reset:
            X, y = validate_data(self, X, y, dtype=np.float64, reset=True)
            _check_magnitude(X)
            return X, y
        check_params_unchanged(self, self._fitted_params,
                               runtime=self._runtime_params)
        return self._validate_rows(X, y)

    def _validated_rows(self, X):
        """Rows to predict on: fitted, and valid like every input."""
        check_is_fitted(self)
        return self._validate_input(X)[0]

    def _validate_rows(self, X, y):
        lean = (
            isinstance(X, np.ndarray) and X.dtype == np.float64 and X.ndim == 2
            and (y is None or (isinstance(y, np.ndarray) and y.ndim == 1))
            and not hasattr(self, "feature_names_in_")
        )
        if not lean:
            if y is None:
                X = validate_data(self, X, dtype=np.float64, reset=False)
            else:
                X, y = validate_data(self, X, y, dtype=np.float64, reset=False)
            _check_magnitude(X)
            return X, y
        if X.shape[0] == 0:
            raise ValueError(f"Found array with 0 sample(s) (shape={X.shape}) while "
                             "a minimum of 1 is required.")
        if X.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {X.shape[1]} features, but {type(self).__name__} is "
                f"expecting {self.n_features_in_} features as input."
            )
        # One pass for the hot path: NaN compares False, so does a value out
        # of range; only then are the two told apart (below).
        clean = bool(np.maximum.reduce(np.abs(X), axis=None) <= MAX_ABS_INPUT)
        if not clean and not np.isfinite(X).all():
            # scikit-learn's message, as ``validate_data`` gives it for lists;
            # under ``assume_finite`` it returns, and this shortcut refuses
            # the rows all the same (as it always has).
            assert_all_finite(X, estimator_name=type(self).__name__,
                              input_name="X")
            kind = "NaN" if np.isnan(X).any() else "infinity or a value too large"
            raise ValueError(f"Input X contains {kind}.")
        if y is not None and y.shape[0] != X.shape[0]:
            raise ValueError("Found input variables with inconsistent numbers of "
                             f"samples: [{X.shape[0]}, {y.shape[0]}]")
        if not clean:
            _check_magnitude(X)
        return X, y

    def _check_labels(self, y, registry=None, *, arrival_order=False):
        """Validate labels against the novel label and the known label type.

        ``labels`` are sorted, or in order of first appearance in ``y`` with
        ``arrival_order`` (``partial_fit``: one batch then creates its new
        classes in the order the same rows would one by one). ``registry``
        holds the known labels (``None``: a fresh start).
        """
        y = np.asarray(y)
        if y.dtype.kind not in "biuU":
            # type_of_target costs ~1 ms; integer and str labels need no check.
            check_classification_targets(y)
        if y.shape[0] == 1:  # the online hot path
            labels, y_index = y, _FIRST_LABEL
        elif arrival_order:
            labels, first, y_index = np.unique(y, return_index=True,
                                               return_inverse=True)
            order = np.argsort(first, kind="stable")
            rank = np.empty_like(order)
            rank[order] = np.arange(order.shape[0])
            labels, y_index = labels[order], rank[y_index.reshape(-1)]
        else:
            labels, y_index = np.unique(y, return_inverse=True)
        if registry is None:
            check_new_labels(labels, resolve_novel_label(self.novel_label, labels))
        else:
            # (the label buffer: only its dtype is compared)
            check_new_labels(labels, self.novel_label_, registry._labels)
        return labels, y_index.reshape(-1)

    # ------------------------------------------------------------------ labels
    def _start_labels(self, labels):
        """The novel label and an empty registry for a fresh state."""
        self.novel_label_ = resolve_novel_label(self.novel_label, labels)
        self._registry = LabelRegistry.for_labels(labels)

    def _labels_of(self, index):
        """Map class indices to labels, ``-1`` to ``novel_label_``."""
        return self._registry.labels_of(index, self.novel_label_)

    # -------------------------------------------------------------- attributes
    def __sklearn_is_fitted__(self):
        return hasattr(self, "_registry")

    def __setstate__(self, state):
        # Fitted states saved before the shared base (sklearn_flowr <= 0.x
        # of 2026-11) kept their labels in ``_state`` (head) or ``_labels``
        # (baselines). Loading one as "unfitted" would let ``partial_fit``
        # start over without a word, so refuse it by name.
        if "_registry" not in state and ("_state" in state or "_labels" in state):
            raise ValueError(
                f"This {type(self).__name__} was saved by an older version of "
                "sklearn_flowr whose fitted state this version cannot read; "
                "fit it again."
            )
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


def _check_magnitude(X):
    """Refuse finite values too large to score in float64 (they give NaN)."""
    if X.size and np.abs(X).max() > MAX_ABS_INPUT:
        raise ValueError(
            f"X holds values up to {np.abs(X).max():.3g} in magnitude; the "
            f"open-world estimators score values up to {MAX_ABS_INPUT:g} (squared "
            "distances overflow float64 beyond). Rescale the features, e.g. with "
            "StandardScaler."
        )


# dtype of ``np.where(novel, novel_label, y_known)`` by ``(y_known.dtype,
# type(novel_label), novel_label)``: np.where costs a one-row step ~2 us.
_PRED_DTYPES = {}


def _pred_dtype(y_known, novel_label):
    """The dtype of ``np.where(novel, novel_label, y_known)`` (it depends on
    the value of a Python scalar ``novel_label``, under NEP 50)."""
    try:
        key = (y_known.dtype, novel_label.__class__, novel_label)
        return _PRED_DTYPES[key]
    except TypeError:  # an unhashable novel label
        key = None
    except KeyError:
        pass
    dtype = np.where(np.zeros(1, dtype=bool), novel_label, y_known[:1]).dtype
    if key is not None and len(_PRED_DTYPES) < 1024:
        _PRED_DTYPES[key] = dtype
    return dtype


def _nothing_to_undo():
    """The undo of a change that was not made in place."""


class _all_or_nothing:
    """Leave ``estimator`` exactly as it was if the block does not finish.

    Yields a list to which the block appends, *before* each change it makes
    in place, a callable that undoes it (e.g.
    :meth:`~sklearn_flowr._labels.LabelRegistry.checkpoint`). On any
    exception, KeyboardInterrupt included, they run last-first, then the
    attributes the block replaced or added come back from a shallow copy of
    ``__dict__``. Nothing is copied on success beyond that shallow copy and
    what the callables saved. A class rather than a ``@contextmanager``
    generator: it costs a third as much. The one-row hot path of
    ``open_world_step`` writes the same guard out (a copy, a list, ``try``)
    and restores through the same :func:`_restore`.
    """

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
        _restore(self.estimator, self.saved, self.undo)
        return False  # the exception goes on


def _restore(estimator, saved, undo):
    """Run the callables of ``undo`` last-first, then give ``estimator`` back
    the attributes of ``saved``, a shallow copy of its ``__dict__``."""
    for restore in reversed(undo):
        restore()
    estimator.__dict__.clear()
    estimator.__dict__.update(saved)


def _unchanged_on_error(estimator):
    """Restore the estimator's attributes if the block fails part-way.

    :func:`_all_or_nothing` for blocks that only replace attributes (no
    in-place change to undo), e.g. ``validate_data(reset=True)``, which
    records ``n_features_in_`` before the labels are checked.
    """
    return _all_or_nothing(estimator)
