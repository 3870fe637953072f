"""The CRP-Gaussian head on frozen features: a two-covariance whitener fitted
once, the head updated online in its coordinates."""

import contextlib
import functools
import warnings

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, MetaEstimatorMixin, clone
from sklearn.exceptions import NotFittedError
from sklearn.utils import _safe_indexing
from sklearn.utils._param_validation import HasMethods
from sklearn.utils.validation import _num_samples

from .._core import novel_log_odds
from ..base import DefaultParts, all_or_nothing
from ..validation import check_params_unchanged, params_equal, snapshot_params
from ._cross_fit import (
    as_float64,
    clone_refit,
    cross_fit_scores,
    fit_transform,
    fold_log_odds,
    refit_scores,
)
from ._state import check_novelty_map
from ._two_covariance import (
    _FLOATS,
    TwoCovarianceWhitener,
    fit_class_mean_rows,
    fit_transform_with_refit,
)

__all__ = ["RUNTIME_PARAMS", "WhitenedCRPClassifier", "calibration_scores",
           "fit_whitener", "input_dtype", "model_params", "refuse_whitened",
           "shared_whitener", "whiten"]

# The head's parameters the whitener fixes: unit noise, prior N(0, diag(beta)).
_SET_BY_WHITENER = ("sigma", "prior_mean", "prior_var")
# The head's parameters read at call time, which may change after fitting.
RUNTIME_PARAMS = ("novelty_calibration", "unlabelled_threshold", "novelty_alpha")


def model_params(head, prior_var=None):
    """``head.get_params()`` as the head's diagonal maths reads them: "auto"
    ``known_count`` and ``noise_shrinkage`` resolved and, with
    ``covariance="whitened"``, the isotropic head in the coordinates of a
    whitener of prior variances ``prior_var`` (None: ``whitener_``'s)
    ("auto": unit noise, prior ``N(0, prior_scale * beta)``)."""
    params = head.get_params(deep=False)
    whitened = params["covariance"] == "whitened"
    if _is_auto(params["known_count"]):
        params["known_count"] = "observed" if whitened else 1.0
    if params["noise_shrinkage"] == "dof" and params["covariance"] == "full":
        raise ValueError(
            "noise_shrinkage='dof' is the whitener's shrinkage "
            "(covariance='whitened'); with covariance='full' give a float in "
            "[0, 1] or 'auto' (0.0).")
    if not whitened:
        return {**params, "noise_shrinkage": 0.0 if isinstance(
            params["noise_shrinkage"], str) else params["noise_shrinkage"]}
    whitener = vars(head).get("whitener_")
    if prior_var is None and whitener is None:
        raise NotFittedError(
            "CRPGaussianClassifier(covariance='whitened') needs the prior and "
            "its whitener, which fit or partial_fit estimate from labelled rows: "
            "call one of them first.")
    beta = prior_var if prior_var is not None else whitener.prior_var_
    given = {"sigma": 1.0, "prior_mean": np.zeros(beta.shape[0]),
             "prior_var": params["prior_scale"] * beta}
    params.update((name, value) for name, value in given.items()
                  if _is_auto(params[name]))
    if _is_auto(head.prior_var):  # applied above
        params["prior_scale"] = 1.0
    return {**params, "covariance": "isotropic", "noise_shrinkage": 0.0}


def input_dtype(head):
    """The precisions the head's input checks keep: float32 too where the
    whitener maps the rows (it keeps a network's float32 in its map)."""
    return _FLOATS if head.covariance == "whitened" else np.float64


def whiten(head, X, y):
    """Validated rows ``X`` (labels ``y``) in the coordinates of the head's
    maths: with ``covariance="whitened"``, those of its fitted whitener."""
    if head.covariance != "whitened":
        return X, y
    with _isotropic_hint("scales every row to unit length"):
        return as_float64(head.whitener_.transform(X)), y


def fit_whitener(head, X, y, *, refit=True):
    """A whitened head's whitener fitted on its validated rows ``X`` (labels
    ``y``), the rows whitened, and (``refit``; else None) ``refit(train,
    held)`` of the whitener without a fold of them (for
    :func:`calibration_scores`)."""
    head._check_labels(y)  # fit's own label errors come first
    whitener = _whitener_of(head)
    with _isotropic_hint("fits a TwoCovarianceWhitener on fit's rows"):
        if not refit:
            return whitener, as_float64(whitener.fit_transform(X, y)), None
        # The head reads the whitened rows' class sums only (unit noise, a
        # given prior): the fit's rows come as their classes' whitened means.
        U, refitted = fit_transform_with_refit(whitener, X, y, class_means=True)
    # The span's refits turn coordinates of equal prior variance, which only
    # the whitener's own prior (zero mean, scaled beta) cannot tell apart.
    if refitted is None or not all(_is_auto(getattr(head, name))
                                   for name in _SET_BY_WHITENER):
        refitted = clone_refit(_whitener_of(head), X, y,
                               fit_rows=fit_class_mean_rows)
    return whitener, as_float64(U), refitted


def calibration_scores(head, refit, y_index):
    """The held-out scores of a whitened head's ``fit`` rows (classes
    ``y_index``): each fold's rows whitened by the whitener fitted on the
    other folds (``refit``, of :func:`fit_whitener`), as the head that
    decides (whitener fitted on every row) sees a new row."""
    def head_scores(prior_var, U, y_train, U_held):
        return fold_log_odds(U, y_train, U_held, model_params(head, prior_var))
    return cross_fit_scores(y_index, refit_scores(refit, y_index, head_scores))


def _whitener_of(head):
    """The unfitted whitener of a whitened head."""
    shrinkage = head.noise_shrinkage
    return TwoCovarianceWhitener(
        noise_shrinkage="dof" if _is_auto(shrinkage) else shrinkage)


@contextlib.contextmanager
def _isotropic_hint(what):
    """Name the fix in the whitener's errors: the paper's isotropic head."""
    try:
        yield
    except ValueError as error:
        raise ValueError(f"{error} (covariance='whitened' {what}; for such data "
                         "use covariance='isotropic'.)") from error


def refuse_whitened(head, what):
    """Raise when ``covariance="whitened"`` cannot take ``what``."""
    if head.covariance == "whitened":
        raise ValueError(
            f"covariance='whitened' fits its whitener on labelled rows in "
            f"memory and cannot take {what}; use covariance='isotropic' (the "
            "paper's head) or 'full' for it.")


def shared_whitener(head, other):
    """The whitener of two whitened heads that ``merge`` pools (one map)."""
    first, second = head.whitener_, other.whitener_
    if first is second or all(
            np.array_equal(getattr(first, name), getattr(second, name))
            for name in ("prior_mean_", "prior_var_", "scalings_")):
        return first
    raise ValueError(
        "merge needs whitened heads with one whitener (those fitted on "
        "different rows differ): fit one head on both heads' rows, or use "
        "covariance='isotropic'.")


def _is_auto(value):
    return isinstance(value, str) and value == "auto"


def _default_head():
    from ._classifier import CRPGaussianClassifier  # (it imports this module)

    return CRPGaussianClassifier(covariance="isotropic", known_count="observed")


class WhitenedCRPClassifier(DefaultParts, MetaEstimatorMixin, ClassifierMixin,
                            BaseEstimator):
    """FLOWR's head on frozen features: the two-covariance model, exactly
    updatable online.

    ``fit`` fits ``whitener`` (:class:`TwoCovarianceWhitener` by default) on
    the labelled rows, then ``head`` on the whitened rows with ``sigma=1``,
    ``prior_mean=0`` and ``prior_var=whitener.prior_var_``: the two-covariance
    model of [1]_ [2]_; ``predict``'s novel label is calibrated on ``fit``'s
    rows, each scored by a whitener and a head fitted without its fold of the
    rows. The whitener stays frozen after ``fit``; every other
    method whitens its rows (``O(d^2)`` each) and calls the head's method of
    the same name (parameters and returns as
    :class:`~sklearn_flowr.CRPGaussianClassifier`'s), so P(novel) is the
    head's CRP P(novel) and the online path equals ``fit`` on the same rows.

    Parameters
    ----------
    whitener : transformer or None, default=None
        Fitted on ``fit``'s rows; it must expose ``prior_var_`` of shape
        (n_features_out,). None: ``TwoCovarianceWhitener()``. Its parameters
        are reached as ``whitener__<name>``.
    head : CRPGaussianClassifier or None, default=None
        The head, ``sigma``, ``prior_mean`` and ``prior_var`` left "auto" (the
        whitener sets them; its clone is isotropic in the whitened rows). None:
        ``CRPGaussianClassifier(covariance="isotropic", known_count="observed")``:
        CRP counts are class sizes, so ``partial_fit`` after ``fit`` equals
        ``fit`` on all rows.
        Its parameters are reached as ``head__<name>`` (None's too). After
        ``fit`` only ``head__novelty_alpha``, ``head__novelty_calibration``
        and ``head__unlabelled_threshold`` may change (read at call time); a
        change to any other parameter raises ValueError until ``fit`` again.

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
    sklearn_flowr.CRPGaussianClassifier : ``CRPGaussianClassifier()`` is this
        model in one estimator (``covariance="whitened"``).

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
    >>> y = np.repeat([0, 1, 2, 3, 4, 5], 4)
    >>> X = np.random.default_rng(0).normal(size=(6, 8))[y]
    >>> X += 0.1 * np.random.default_rng(1).normal(size=(24, 8))
    >>> clf = WhitenedCRPClassifier().fit(X[:12], y[:12])
    >>> clf.predict(X[[0, 12]])  # class 3 is novel
    array([ 0, -1])
    >>> clf.predict_proba(X[:1]).shape, clf.predict_log_proba(X[:1]).shape
    ((1, 4), (1, 4))
    >>> clf.predict_joint_log_proba(X[:1]).shape  # three known classes + novel
    (1, 4)
    >>> clf = clf.partial_fit(X[12:16], y[12:16])  # class 3 learned
    >>> out = clf.open_world_step(X[16:20], y[16:20])  # class 4, online
    >>> out.y_pred
    array([-1,  4,  4,  4])
    >>> out = clf.open_world_step(X[20:22])  # no labels: a provisional class
    >>> clf.correct(X[20:22], out.y_assigned, [5, 5]).classes_
    array([0, 1, 2, 3, 4, 5])
    >>> clf.novelty_pvalues(X[:1]).shape
    (1,)
    >>> clf = clf.freeze_classes().set_conformal_scores(np.arange(20.0))
    >>> clf.forget_classes().__sklearn_is_fitted__()  # the whitener stays
    False
    >>> WhitenedCRPClassifier().set_params(head__a=0.0).get_params()["head__a"]
    0.0
    """

    _DEFAULT_PARTS = {"whitener": TwoCovarianceWhitener, "head": _default_head}
    _parameter_constraints: dict = {
        "whitener": [HasMethods(["fit", "transform"]), None],
        "head": [HasMethods(["fit", "partial_fit", "open_world_step"]), None],
    }

    def __init__(self, whitener=None, head=None):
        self.whitener = whitener
        self.head = head

    def _validate_params(self):
        super()._validate_params()
        _check_head(self.head if self.head is not None else _default_head())

    def fit(self, X, y):
        """Fit the whitener, then the head on the whitened rows."""
        self._validate_params()
        unfitted = (self.whitener if self.whitener is not None
                    else TwoCovarianceWhitener())
        template = self.head if self.head is not None else _default_head()
        whitener = clone(unfitted)
        # The head reads the whitened rows' class sums only (unit noise, the
        # whitener's prior): the two-covariance whitener gives class means.
        ours = type(whitener) is TwoCovarianceWhitener
        if ours:
            U, refit = fit_transform_with_refit(whitener, X, y, class_means=True)
        else:
            U, refit = fit_transform(whitener, X, y), None
        head = _learn(_head_for(template, whitener.prior_var_), as_float64(U), y)
        # Calibrated on rows whitened by a whitener that did not see them.
        X, y = X if hasattr(X, "shape") else np.asarray(X), np.asarray(y).ravel()
        template = clone(template).set_params(novel_label=head.novel_label_)
        head.set_conformal_scores(cross_fit_scores(y, refit_scores(
            refit or clone_refit(unfitted, X, y, fit_rows=(
                fit_class_mean_rows if ours else None)), y,
            functools.partial(_fold_head_scores, template))))  # warns if few
        # Both fitted before either is kept: a failure leaves self as it was.
        with all_or_nothing(self):  # (an interrupt among the attributes too)
            self.whitener_, self.head_ = whitener, head
            self._fitted_params = {name: self._part_params(name)
                                   for name in self._DEFAULT_PARTS}
            for name in ("n_features_in_", "feature_names_in_"):
                self.__dict__.pop(name, None)
                if hasattr(whitener, name):
                    setattr(self, name, getattr(whitener, name))
        return self

    def partial_fit(self, X, y, classes=None):
        """Condition the head on labelled rows (the whitener stays as fitted);
        without a whitener, ``fit``."""
        if not hasattr(self, "whitener_"):
            return self.fit(X, y)
        self._call_head("partial_fit", X, y, classes=classes)
        return self

    def open_world_step(self, X, y=None, *, labelled=None):
        """Predict each row with the state before it, then learn from it."""
        return self._call_head("open_world_step", X, y, labelled=labelled,
                               one_by_one=y is None or labelled is not None)

    def correct(self, X, y_assigned, y_true):
        """Move rows learned without labels to their true classes."""
        self._call_head("correct", X, y_assigned, y_true, one_by_one=True)
        return self

    def predict_joint_log_proba(self, X):
        """Joint log-probabilities of the known classes and the novel class
        (last column)."""
        return self._call_head("predict_joint_log_proba", X)

    def predict_log_proba(self, X):
        """Log posterior probabilities, the novel class last."""
        return self._call_head("predict_log_proba", X)

    def predict_proba(self, X):
        """Posterior probabilities of the known classes and the novel class
        (last column: P(novel) from the CRP prior)."""
        return self._call_head("predict_proba", X)

    def predict(self, X):
        """Most probable class, or ``novel_label_`` where the head's decision
        calls the row novel."""
        return self._call_head("predict", X)

    def novelty_pvalues(self, X):
        """Conformal p-values of "a known class" for each row."""
        return self._call_head("novelty_pvalues", X)

    def set_conformal_scores(self, scores):
        """Calibrate ``predict``'s decision on held-out known-class scores."""
        self._head("set_conformal_scores").set_conformal_scores(scores)
        return self

    def freeze_classes(self, frozen=True):
        """Keep the classes known so far fixed online, or release them."""
        self._head("freeze_classes").freeze_classes(frozen)
        return self

    def forget_classes(self):
        """Drop every class, keeping the whitener and the head's prior and
        ``b_``: the state a new task starts from. Returns ``self``."""
        head = self._head("forget_classes")
        if head.__sklearn_is_fitted__():
            self.head_ = clone(head).set_params(
                prior_mean=head.prior_mean_, prior_var=head.prior_var_, b=head.b_)
        return self

    def _call_head(self, method, X, *args, one_by_one=False, **kwargs):
        """The head's ``method`` on the whitened rows (``one_by_one``: each
        whitened alone, as the bytes of rows learned without labels identify
        them in ``correct``, and a batch's product may round them otherwise)."""
        head, n_rows = self._head(method), _num_samples(X)
        U = (np.vstack([self.whitener_.transform(_safe_indexing(X, [i]))
                        for i in range(n_rows)])
             if one_by_one and n_rows else self.whitener_.transform(X))
        return getattr(head, method)(as_float64(U), *args, **kwargs)

    def _head(self, method):
        """The fitted head, its call-time parameters set as ``head__<name>``
        says; the other parameters must be those ``fit`` used."""
        if not hasattr(self, "whitener_"):
            raise NotFittedError(
                f"{method} needs a fitted {type(self).__name__}: the whitener is "
                "estimated by fit on labelled rows first.")
        self._check_parts()
        return self.head_

    def _part_params(self, name):
        """Part ``name`` as set (None: the default) and its parameters."""
        part = getattr(self, name)
        return part, snapshot_params(
            part if part is not None else self._DEFAULT_PARTS[name]())

    def _check_parts(self):
        """Refuse parts replaced, or their parameters changed, since ``fit``;
        pass the head's call-time ones (``RUNTIME_PARAMS``) to the fitted head."""
        fitted = getattr(self, "_fitted_params", None)  # None: saved before
        for name, (fitted_part, params) in (fitted or {}).items():
            part = getattr(self, name)
            if part is None and fitted_part is None:  # the default, as in fit
                continue
            make = self._DEFAULT_PARTS[name]
            part = part if part is not None else make()
            was = type(fitted_part if fitted_part is not None else make())
            if type(part) is not was:
                raise ValueError(
                    f"{type(self).__name__}'s {name} changed after fitting (a "
                    f"{was.__name__} was fitted, it is now a "
                    f"{type(part).__name__}): call fit again.")
            check_params_unchanged(part, params, runtime=RUNTIME_PARAMS
                                   if name == "head" else (), part_of=self,
                                   part=name)
        head = self.head if self.head is not None else _default_head()
        changed = {key: getattr(head, key) for key in RUNTIME_PARAMS
                   if not params_equal(getattr(head, key), getattr(self.head_, key))}
        if changed:  # checked before the fitted head takes them
            head._validate_params()
            check_novelty_map(head.novelty_calibration)
            self.head_.set_params(**changed)

    def __sklearn_is_fitted__(self):
        return hasattr(self, "head_") and self.head_.__sklearn_is_fitted__()

    classes_ = property(lambda self: self._head("classes_").classes_)
    novel_label_ = property(lambda self: self._head("novel_label_").novel_label_)
    frozen_classes_ = property(
        lambda self: self._head("frozen_classes_").frozen_classes_)


def _head_for(head, prior_var):
    """A clone of ``head`` with a whitener's unit noise and prior variances
    ``prior_var``."""
    prior_var = np.asarray(prior_var, dtype=np.float64)
    return clone(head).set_params(
        sigma=1.0, prior_mean=np.zeros(prior_var.shape[0]), prior_var=prior_var,
        covariance="isotropic")


def _fold_head_scores(head, prior_var, U, y, U_held):
    """Novel log-odds (before any map) of ``U_held`` under ``head`` fitted on
    the rows ``U`` that a whitener of prior variances ``prior_var`` (fitted on
    them) whitened."""
    fold_head = _head_for(head, prior_var).set_params(novelty_calibration=None,
                                                     novelty_alpha=None)
    return novel_log_odds(_learn(fold_head, U, y).predict_joint_log_proba(U_held))


def _learn(head, U, y):
    """The unfitted ``head`` fitted on ``U, y``: with CRP counts the class
    sizes, by ``partial_fit`` of the rows in the order of their labels (its
    classes then in ``fit``'s order), which is ``fit`` without ``fit``'s own
    calibration (the wrapper calibrates it on whitened held-out rows)."""
    if head.get_params(deep=False).get("known_count") != "observed":
        return head.fit(U, y)
    y = np.asarray(y).ravel()
    order = np.argsort(y, kind="stable")
    with warnings.catch_warnings():  # the wrapper calibrates the head itself
        warnings.filterwarnings("ignore", message="partial_fit on an unfitted")
        return head.partial_fit(_safe_indexing(U, order), y[order])


def _check_head(head):
    """Refuse a head whose noise or prior would contradict the whitener's."""
    params = head.get_params(deep=False)
    if not {*_SET_BY_WHITENER, "covariance"} <= set(params):
        raise ValueError(
            "WhitenedCRPClassifier's head is a CRPGaussianClassifier (it needs "
            f"sigma, prior_mean, prior_var and covariance); got {head!r}.")
    given = [name for name in _SET_BY_WHITENER
             if not (isinstance(params.get(name), str) and params[name] == "auto")]
    if given or params.get("covariance") not in ("isotropic", "whitened"):
        raise ValueError(
            "WhitenedCRPClassifier sets the head's sigma, prior_mean and "
            "prior_var from the whitener (unit noise, prior N(0, "
            "diag(prior_var_))): leave them 'auto' and covariance='isotropic' "
            f"or 'whitened'; got {', '.join(given) or 'covariance'} set.")
