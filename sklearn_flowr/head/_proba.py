"""Open-world probabilities: the output that knows its classes, and the
predictions derived from one joint log-likelihood."""

import numpy as np

from .._core import log_softmax, softmax_rows_inplace
from ..base import OnlineOpenWorldClassifier

__all__ = ["OpenWorldProba"]


class _ProbabilisticOpenWorldClassifier(OnlineOpenWorldClassifier):
    """Predictions derived from ``_joint_log_numerators(X)`` (novel last, up to
    ``_state.log_normaliser()``), as GaussianNB derives them from one joint."""

    def predict_joint_log_proba(self, X):
        """Joint log-probabilities ``log p(x, n)`` of the known and novel classes.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Embeddings.

        Returns
        -------
        joint : ndarray of shape (n_samples, n_classes + 1)
            ``log N(x; m_n, v_n) + log p(n)``; columns follow ``classes_``, the
            last column is the novel class (mapped by ``novelty_calibration``
            when set).
        """
        return self._joint_log_numerators(X) + self._state.log_normaliser()

    def predict_log_proba(self, X):
        """Log posterior probabilities of the known classes and the novel class.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Embeddings.

        Returns
        -------
        log_proba : ndarray of shape (n_samples, n_classes + 1)
            An :class:`~sklearn_flowr.head.OpenWorldProba`; columns follow
            ``classes_``, the last column is the novel class.
        """
        log_proba = log_softmax(self._joint_log_numerators(X))
        return OpenWorldProba(log_proba, self.classes_, is_log_proba=True)

    def predict_proba(self, X):
        """Posterior probabilities of the known classes and the novel class.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Embeddings.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes + 1)
            An :class:`~sklearn_flowr.head.OpenWorldProba`; columns follow
            ``classes_``, the last column is the novel class.
        """
        proba = softmax_rows_inplace(self._joint_log_numerators(X))
        return OpenWorldProba(proba, self.classes_)

    def predict(self, X):
        """The argmax over the known classes and the novel class (ties: known)."""
        scores = self._joint_log_numerators(X)
        best = np.argmax(scores, axis=1)
        best[best == scores.shape[1] - 1] = -1
        return self._labels_of(best)


class OpenWorldProba(np.ndarray):
    """An ndarray of shape ``(n_samples, n_classes + 1)`` that knows its classes.

    What ``predict_proba`` and ``predict_log_proba`` return, so that scorers
    given only ``(y_true, proba)`` can tell novel rows. Row selections and
    views of the whole array keep the attributes; a column selection, a
    ufunc's or a NumPy function's result is a plain ndarray.

    Parameters
    ----------
    values : array-like of shape (n_samples, n_classes + 1)
        Probabilities or log-probabilities; the last column is the novel class.
    known_classes : array-like of shape (n_classes,)
        The labels of the first ``n_classes`` columns, in order.
    is_log_proba : bool, default=False
        Whether ``values`` are log-probabilities.

    Attributes
    ----------
    known_classes : ndarray of shape (n_classes,)
        The classes the estimator knew (a read-only copy of its ``classes_``).
    is_log_proba : bool
        Whether the values are log-probabilities.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_flowr.head import OpenWorldProba
    >>> proba = OpenWorldProba([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]], ["a", "b"])
    >>> proba.known_classes
    array(['a', 'b'], dtype='<U1')
    >>> proba[1:].known_classes  # rows of the full layout keep the classes
    array(['a', 'b'], dtype='<U1')
    >>> type(proba[:, -1])  # a column is a plain array
    <class 'numpy.ndarray'>
    """

    def __new__(cls, values, known_classes, *, is_log_proba=False):
        self = np.asarray(values).view(cls)
        known = np.array(known_classes)  # a copy: classes_ grows with partial_fit
        known.flags.writeable = False
        if known.ndim != 1 or not _is_full_layout(self, known):
            raise ValueError(
                f"An open-world output has shape (n_samples, n_classes + 1); got "
                f"{self.shape} for {known.shape[0]} known classes.")
        self._known_classes = known
        self._is_log_proba = bool(is_log_proba)
        return self

    def __array_finalize__(self, obj):
        self._known_classes = getattr(obj, "_known_classes", None)
        self._is_log_proba = getattr(obj, "_is_log_proba", False)

    @property
    def known_classes(self):
        # Checked on access: some views get their shape after being finalized.
        known = self._known_classes
        return known if known is not None and _is_full_layout(self, known) else None

    @property
    def is_log_proba(self):
        return self.known_classes is not None and self._is_log_proba

    def __getitem__(self, key):
        result = super().__getitem__(key)
        if isinstance(result, OpenWorldProba) and (
                result.known_classes is None or not _selects_rows_only(key)):
            return result.view(np.ndarray)
        return result

    @property
    def T(self):
        """The transpose, a plain ndarray (rows are no longer samples)."""
        return self.view(np.ndarray).T

    def transpose(self, *axes):
        """The transpose, a plain ndarray (rows are no longer samples)."""
        return self.view(np.ndarray).transpose(*axes)

    def __array_ufunc__(self, ufunc, method, *inputs, out=None, **kwargs):
        inputs = tuple(_plain(x) for x in inputs)
        if out is not None:
            kwargs["out"] = tuple(_plain(x) for x in out)
        result = getattr(ufunc, method)(*inputs, **kwargs)
        if out is not None:  # in place: the array itself, attributes and all
            return out[0] if len(out) == 1 else out
        return result

    def __array_function__(self, func, types, args, kwargs):
        result = super().__array_function__(func, types, args, kwargs)
        if isinstance(result, tuple | list):
            return type(result)(_plain(x) for x in result)
        return _plain(result)


def _plain(x):
    return x.view(np.ndarray) if isinstance(x, OpenWorldProba) else x


def _is_full_layout(array, known_classes):
    return array.ndim == 2 and array.shape[1] == len(known_classes) + 1


def _selects_rows_only(key):
    """Whether ``array[key]`` leaves the column axis untouched."""
    if not isinstance(key, tuple) or len(key) == 1:
        return True
    if len(key) == 2 and key[0] is not Ellipsis:
        return key[1] is Ellipsis or (isinstance(key[1], slice)
                                      and key[1] == slice(None))
    return False


