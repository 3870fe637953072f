"""The CRP-Gaussian head on frozen features: a two-covariance whitener fitted
once, the head updated online in its coordinates."""

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, MetaEstimatorMixin, clone
from sklearn.utils._param_validation import HasMethods
from sklearn.utils.validation import check_is_fitted

from ._classifier import CRPGaussianClassifier
from ._two_covariance import TwoCovarianceWhitener

__all__ = ["WhitenedCRPClassifier"]

# The head's parameters the whitener fixes: unit noise, prior N(0, diag(beta)).
_SET_BY_WHITENER = ("sigma", "prior_mean", "prior_var")
# The start of every method's Examples (the head documents the rest).
_EXAMPLE = """Examples
        --------
        >>> import numpy as np
        >>> from sklearn_flowr import WhitenedCRPClassifier
        >>> y = np.repeat([0, 1, 2], 4)
        >>> X = 4 * np.eye(3, 4)[y] + 1 + np.random.default_rng(0).normal(size=(12, 4))
        >>> clf = WhitenedCRPClassifier().fit(X, y)"""


def _shared_doc(method):
    """Fill ``%(example)s`` and ``%(see)s`` (parameters and returns as the
    head's method of the same name, on the whitened rows)."""
    see = (f"Parameters and returns as the head's :meth:`~sklearn_flowr."
           f"CRPGaussianClassifier.{method.__name__}`, on the whitened rows.")
    method.__doc__ = method.__doc__ % {"example": _EXAMPLE, "see": see}
    return method


class WhitenedCRPClassifier(MetaEstimatorMixin, ClassifierMixin, BaseEstimator):
    """FLOWR's head on frozen features: the two-covariance model, exactly
    updatable online.

    ``fit`` fits ``whitener`` (:class:`TwoCovarianceWhitener` by default) on
    the labelled rows, then ``head`` on the whitened rows with ``sigma=1``,
    ``prior_mean=0`` and ``prior_var=whitener.prior_var_``: the two-covariance
    model of [1]_ [2]_. The whitener stays frozen after ``fit``; every other
    method whitens its rows (``O(d^2)`` each) and calls the head's method of
    the same name, so P(novel) is the head's CRP P(novel) and the online path
    equals ``fit`` on the same rows.

    Parameters
    ----------
    whitener : transformer or None, default=None
        Fitted on ``fit``'s rows; it must expose ``prior_var_`` of shape
        (n_features_out,). None: ``TwoCovarianceWhitener()``. Its parameters
        are reached as ``whitener__<name>``.
    head : CRPGaussianClassifier or None, default=None
        The head, ``sigma``, ``prior_mean`` and ``prior_var`` left "auto" (the
        whitener sets them), ``covariance="isotropic"``. None:
        ``CRPGaussianClassifier(known_count="observed")``: CRP counts are class
        sizes, so ``partial_fit`` after ``fit`` equals ``fit`` on all rows.
        Its parameters are reached as ``head__<name>``.

    Attributes
    ----------
    whitener_ : transformer
        The fitted clone of ``whitener`` (frozen).
    head_ : CRPGaussianClassifier
        The fitted clone of ``head``, on the whitened rows.
    classes_ : ndarray of shape (n_classes,)
        Known labels (``head_.classes_``).
    novel_label_ : object
        Label of the novel class.
    n_features_in_ : int
        Number of features seen during ``fit``.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during ``fit`` (string column names only).

    See Also
    --------
    sklearn_flowr.CRPGaussianClassifier : the head on features as they are.

    References
    ----------
    .. [1] J. Willes, J. Harrison, A. Harakeh, C. Finn, M. Pavone,
       S. Waslander, "Bayesian Embeddings for Few-Shot Open World
       Recognition", IEEE TPAMI, 2022.
    .. [2] S. Ioffe, "Probabilistic Linear Discriminant Analysis", ECCV, 2006.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_flowr.head import WhitenedCRPClassifier
    >>> y = np.repeat([0, 1, 2, 3, 4], 4)
    >>> X = np.random.default_rng(0).normal(size=(5, 8))[y]
    >>> X += 0.1 * np.random.default_rng(1).normal(size=(20, 8))
    >>> clf = WhitenedCRPClassifier().fit(X[:16], y[:16])
    >>> clf.predict(X[[0, 16]])  # class 4 is novel
    array([ 0, -1])
    >>> out = clf.open_world_step(X[16:], y[16:])  # then learned online
    >>> out.y_pred
    array([-1,  4,  4,  4])
    """

    _parameter_constraints: dict = {
        "whitener": [HasMethods(["fit", "transform"]), None],
        "head": [HasMethods(["fit", "partial_fit", "open_world_step"]), None],
    }

    def __init__(self, whitener=None, head=None):
        self.whitener = whitener
        self.head = head

    @_shared_doc
    def fit(self, X, y):
        """Fit the whitener, then the head on the whitened rows. %(see)s

        %(example)s
        >>> clf.classes_, clf.whitener_.prior_var_.shape
        (array([0, 1, 2]), (4,))
        """
        self._validate_params()
        whitener = clone(self.whitener if self.whitener is not None
                         else TwoCovarianceWhitener())
        head = clone(self.head if self.head is not None
                     else CRPGaussianClassifier(known_count="observed"))
        _check_head(head)
        whitener.fit(X, y)
        if not hasattr(whitener, "prior_var_"):
            raise ValueError(
                "WhitenedCRPClassifier's whitener must set prior_var_ (the prior "
                f"variances of the class means in its output) in fit; {whitener!r} "
                "does not.")
        prior_var = np.asarray(whitener.prior_var_, dtype=np.float64)
        head.set_params(sigma=1.0, prior_mean=np.zeros(prior_var.shape[0]),
                        prior_var=prior_var)
        head.fit(whitener.transform(X), y)
        # Both fitted before either is kept: a failure leaves self as it was.
        self.whitener_, self.head_ = whitener, head
        for name in ("n_features_in_", "feature_names_in_"):
            self.__dict__.pop(name, None)
            if hasattr(whitener, name):
                setattr(self, name, getattr(whitener, name))
        return self

    @_shared_doc
    def partial_fit(self, X, y, classes=None):
        """Condition the head on labelled rows (the whitener stays as fitted);
        an unfitted classifier is ``fit``. %(see)s

        %(example)s
        >>> clf = WhitenedCRPClassifier().fit(X[:8], y[:8]).partial_fit(X[8:], y[8:])
        >>> clf.classes_, clf.head_.class_count_
        (array([0, 1, 2]), array([4., 4., 4.]))
        """
        if not self.__sklearn_is_fitted__():
            return self.fit(X, y)
        self._call_head("partial_fit", X, y, classes=classes)
        return self

    @_shared_doc
    def open_world_step(self, X, y=None, *, labelled=None):
        """Predict each row with the state before it, then learn from it. %(see)s

        %(example)s
        >>> clf = WhitenedCRPClassifier().fit(X[:8], y[:8])
        >>> clf.open_world_step(X[8:], y[8:]).is_novel
        array([ True, False, False, False])
        """
        return self._call_head("open_world_step", X, y, labelled=labelled)

    @_shared_doc
    def correct(self, X, y_assigned, y_true):
        """Move rows learned without labels to their true classes. %(see)s

        %(example)s
        >>> clf = WhitenedCRPClassifier().fit(X[:8], y[:8])
        >>> out = clf.open_world_step(X[8:10])  # no labels: learned as new
        >>> out.y_assigned, out.learned
        (array([-2, -2]), array([ True,  True]))
        >>> clf.correct(X[8:10], out.y_assigned, [2, 2]).classes_
        array([0, 1, 2])
        """
        self._call_head("correct", X, y_assigned, y_true)
        return self

    @_shared_doc
    def predict_joint_log_proba(self, X):
        """Joint log-probabilities of the known classes and the novel class
        (last column). %(see)s

        %(example)s
        >>> clf.predict_joint_log_proba(X[:2]).shape
        (2, 4)
        """
        return self._call_head("predict_joint_log_proba", X)

    @_shared_doc
    def predict_log_proba(self, X):
        """Log posterior probabilities of the known classes and the novel class
        (last column). %(see)s

        %(example)s
        >>> bool(np.allclose(np.exp(clf.predict_log_proba(X)).sum(axis=1), 1.0))
        True
        """
        return self._call_head("predict_log_proba", X)

    @_shared_doc
    def predict_proba(self, X):
        """Posterior probabilities of the known classes and the novel class
        (last column: P(novel) from the CRP prior). %(see)s

        %(example)s
        >>> clf.predict_proba(X[:1]).shape  # three known classes + novel
        (1, 4)
        """
        return self._call_head("predict_proba", X)

    @_shared_doc
    def predict(self, X):
        """Most probable class, or ``novel_label_`` when the novel class wins.
        %(see)s

        %(example)s
        >>> clf.predict(X[[0, 4, 8]])
        array([0, 1, 2])
        """
        return self._call_head("predict", X)

    def _call_head(self, method, X, *args, **kwargs):
        """The head's ``method`` on the whitened rows."""
        head = self._head(method)
        return getattr(head, method)(self.whitener_.transform(X), *args, **kwargs)

    def _head(self, method):
        check_is_fitted(self, msg=f"{method} needs a fitted %(name)s: the "
                        "whitener is estimated by fit on labelled rows first.")
        return self.head_

    def __sklearn_is_fitted__(self):
        return hasattr(self, "head_")

    @property
    def classes_(self):
        return self._head("classes_").classes_

    @property
    def novel_label_(self):
        return self._head("novel_label_").novel_label_


def _check_head(head):
    """Refuse a head whose noise or prior would contradict the whitener's."""
    params = head.get_params(deep=False)
    if not {*_SET_BY_WHITENER, "covariance"} <= set(params):
        raise ValueError(
            "WhitenedCRPClassifier's head is a CRPGaussianClassifier (it needs "
            f"sigma, prior_mean, prior_var and covariance); got {head!r}.")
    given = [name for name in _SET_BY_WHITENER
             if not (isinstance(params.get(name), str) and params[name] == "auto")]
    if given or params.get("covariance") != "isotropic":
        raise ValueError(
            "WhitenedCRPClassifier sets the head's sigma, prior_mean and "
            "prior_var from the whitener (unit noise, prior N(0, "
            "diag(prior_var_))): leave them 'auto' and covariance='isotropic'; "
            f"got {', '.join(given) or 'covariance'} set.")
