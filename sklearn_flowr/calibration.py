"""Calibrate an open-world classifier's P(novel) on classes it never trained on.

:class:`NoveltyCalibratedClassifier` is to novelty what scikit-learn's
:class:`~sklearn.calibration.CalibratedClassifierCV` is to class
probabilities: it wraps an open-world estimator (the head, ``FLOWRClassifier``
or a baseline), streams rows of classes held out of its training through
``open_world_step``, and fits a map from the estimator's novelty score to the
probability that a row is a first sighting of a new class. It reaches the
estimator only through public methods (``fit``, ``open_world_step``,
``partial_fit``, ``predict_log_proba`` or ``novelty_score``, ``classes_``).
"""

from __future__ import annotations

import copy
from numbers import Real

import numpy as np
from scipy.special import expit, logit
from sklearn.base import BaseEstimator, ClassifierMixin, MetaEstimatorMixin, clone
from sklearn.isotonic import IsotonicRegression
from sklearn.utils import Bunch, _safe_indexing, check_random_state
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from ._core._novelty_odds import novel_log_odds, with_novel_log_odds
from ._core._softmax import logsumexp
from ._novelty_score import (
    LOG_ODDS_CLIP,
    WrapperMixin,
    check_rows,
    check_scoring,
    has_log_proba,
    labels_of_columns,
    with_novel,
)
from ._proba import OpenWorldProba
from .protocol._calibrate import platt_fit
from .protocol._cross_fit import class_disjoint_folds

__all__ = ["NoveltyCalibratedClassifier"]

def _estimator_has_proba(self):
    return has_log_proba(self.estimator_ if hasattr(self, "estimator_")
                      else self._estimator())


class NoveltyCalibratedClassifier(WrapperMixin, MetaEstimatorMixin, ClassifierMixin,
                                  BaseEstimator):
    """Open-world classifier with a P(novel) calibrated on held-out classes.

    ``fit`` streams rows through copies of ``estimator`` with
    ``open_world_step`` -- rows of classes the copy knows and rows of classes
    it has never seen -- and fits a map from the copy's novelty score to
    "this row is the first sighting of a new class". With an integer or
    splitter ``cv``, each class-disjoint fold fits a clone on its training
    classes (less ``known_query_share`` of their rows, kept to be queried as
    known) and streams the held-out classes as the new ones; ``estimator_``
    is then fitted on all the data. With ``cv="prefit"`` the fitted
    ``estimator`` is used as it is and ``fit`` streams the rows it is given,
    which must not be rows it trained on.

    The map changes the probability of the novel class and the decision,
    never the order of the novelty scores: rank-based figures (H-measure,
    AUROC) are the estimator's own. A probabilistic estimator (one with
    ``predict_log_proba``: the head, ``FLOWRClassifier``) keeps its known
    classes' ratios and predicts the argmax of the calibrated
    probabilities; a baseline (``novelty_score``) predicts its best known
    class (``predict_known``) unless the calibrated P(novel) is at least 0.5.
    Classes learned online (``partial_fit``, ``open_world_step``) are
    predicted with the same map.

    Parameters
    ----------
    estimator : estimator or None, default=None
        An open-world classifier with ``fit``, ``partial_fit`` and
        ``open_world_step`` and either ``predict_log_proba`` (N+1 columns,
        the novel class last) or ``novelty_score`` and ``predict_known``.
        ``None``: ``CRPGaussianClassifier()``. Give it without its own
        novelty map (``FLOWRClassifier(calibration=None)``) unless the maps
        should stack.
    method : {"sigmoid", "isotonic"}, default="sigmoid"
        ``"sigmoid"``: Platt's map of the score (the log-odds of P(novel) for
        a probabilistic estimator), with Platt's smoothed targets.
        ``"isotonic"``: a non-decreasing step function; it needs more
        calibration rows (hundreds of new-class first sightings).
    cv : int, cross-validation generator, iterable or "prefit", default=3
        Class-disjoint folds: an int ``k`` is
        :class:`~sklearn.model_selection.GroupKFold` over the labels (``k``
        or more classes needed); a splitter is called as
        ``split(X, y, groups=y)`` and must keep classes whole; an iterable
        yields ``(train, held)`` index arrays. ``"prefit"``: ``estimator``
        is fitted already and ``fit`` only calibrates.
    known_query_share : float in (0, 0.5], default=0.25
        With folds: the share of each training class's rows kept out of the
        fold's fit and streamed as known-class rows.
    random_state : int, RandomState instance or None, default=None
        Seeds the rows kept as known queries and the stream's order.

    Attributes
    ----------
    estimator_ : estimator
        The fitted estimator (a copy of ``estimator`` with ``cv="prefit"``);
        ``partial_fit`` and ``open_world_step`` update it.
    calibrator_ : IsotonicRegression or None
        The isotonic map (``method="isotonic"``).
    slope_, intercept_ : float
        The sigmoid map ``logit P'(novel) = slope_ * score + intercept_``
        (``method="sigmoid"``; NaN otherwise).
    calibration_rows_ : Bunch
        ``score`` and ``is_first_sighting`` of the rows the map was fitted on.
    classes_ : ndarray of shape (n_classes,)
        Known classes of ``estimator_``.
    novel_label_ : object
        Label :meth:`predict` gives the novel class.

    See Also
    --------
    sklearn_flowr.protocol.calibrate_novelty : The map on few-shot tasks of the
        training classes (what ``FLOWRClassifier(calibration="train")`` sets
        on its head).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_flowr import CRPGaussianClassifier
    >>> from sklearn_flowr.calibration import NoveltyCalibratedClassifier
    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat(np.arange(12), 30)
    >>> X = rng.normal(scale=3.0, size=(12, 4))[y] + rng.standard_t(3, (360, 4))
    >>> clf = NoveltyCalibratedClassifier(CRPGaussianClassifier(), cv=3,
    ...                                   random_state=0).fit(X, y)
    >>> clf.predict_proba(X[:2]).shape  # 12 known classes + novel
    (2, 13)
    >>> p = clf.predict_novelty_proba(rng.normal(size=(1, 4)) + 20.0)
    >>> bool(p[0] > 0.5)  # far from every class
    True
    """

    _parameter_constraints: dict = {
        "estimator": [HasMethods(["fit", "partial_fit", "open_world_step"]), None],
        "method": [StrOptions({"sigmoid", "isotonic"})],
        "cv": ["cv_object", StrOptions({"prefit"})],
        "known_query_share": [Interval(Real, 0, 0.5, closed="right")],
        "random_state": ["random_state"],
    }

    def __init__(self, estimator=None, *, method="sigmoid", cv=3,
                 known_query_share=0.25, random_state=None):
        self.estimator = estimator
        self.method = method
        self.cv = cv
        self.known_query_share = known_query_share
        self.random_state = random_state

    # ------------------------------------------------------------------ fitting
    def fit(self, X, y):
        """Fit the estimator (unless prefit) and the novelty map.

        Parameters
        ----------
        X : array-like of shape (n_samples, ...)
            Inputs as ``estimator.fit`` takes them.
        y : array-like of shape (n_samples,)
            Labels. With ``cv="prefit"``: rows of classes the estimator knows
            (not rows it trained on) and of classes it does not.

        Returns
        -------
        self : NoveltyCalibratedClassifier
        """
        self._validate_params()
        y = check_rows(X, y)
        estimator = self._estimator()
        check_scoring(estimator, type(self).__name__)
        rng = check_random_state(self.random_state)
        if isinstance(self.cv, str):
            check_is_fitted(estimator)
            scores, first = _stream_scores(copy.deepcopy(estimator), X, y)
            fitted = copy.deepcopy(estimator)
        else:
            folds = class_disjoint_folds(self.cv, X, y, name="cv")
            scores, first = [], []
            for train, held in folds:
                fit_rows, known_rows = _split_known(y, train, self.known_query_share,
                                                    rng)
                stream = rng.permutation(np.concatenate([known_rows, held]))
                fold_est = clone(estimator).fit(_safe_indexing(X, fit_rows),
                                                y[fit_rows])
                fold_scores, fold_first = _stream_scores(
                    fold_est, _safe_indexing(X, stream), y[stream])
                scores.append(fold_scores)
                first.append(fold_first)
            scores, first = np.concatenate(scores), np.concatenate(first)
        if first.all() or not first.any():
            raise ValueError(
                "The calibration stream needs rows of classes the estimator "
                "knows and first sightings of classes it does not; got "
                f"{int(first.sum())} first sightings among {first.shape[0]} "
                "rows.")
        if self.method == "sigmoid":
            slope, intercept = platt_fit(scores, first)
            calibrator = None
        else:
            slope = intercept = float("nan")
            calibrator = IsotonicRegression(y_min=0.0, y_max=1.0,
                                            out_of_bounds="clip").fit(scores, first)
        if not isinstance(self.cv, str):
            fitted = clone(estimator).fit(X, y)
        self.estimator_ = fitted
        self.slope_, self.intercept_, self.calibrator_ = slope, intercept, calibrator
        self.calibration_rows_ = Bunch(score=scores, is_first_sighting=first)
        return self

    # --------------------------------------------------------------- predicting
    def _map(self, score):
        """Calibrated log-odds of novel against known, from the raw score
        (log-odds clipped to +-30 for a probabilistic estimator; a baseline's
        distance as it is)."""
        score = np.asarray(score, dtype=np.float64)
        if self.calibrator_ is None:
            mapped = self.slope_ * score + self.intercept_
        else:
            with np.errstate(divide="ignore"):
                mapped = logit(self.calibrator_.predict(score))
        return np.clip(mapped, -LOG_ODDS_CLIP, LOG_ODDS_CLIP)

    def _calibrated_log_proba(self, X):
        log_proba = np.asarray(self.estimator_.predict_log_proba(X),
                               dtype=np.float64)
        log_odds = np.clip(novel_log_odds(log_proba), -LOG_ODDS_CLIP, LOG_ODDS_CLIP)
        mapped = with_novel_log_odds(log_proba, self._map(log_odds))
        return mapped - logsumexp(mapped, axis=1)[:, None]

    def predict_novelty_proba(self, X):
        """Calibrated probability that each row is of a class not yet known.

        Parameters
        ----------
        X : array-like of shape (n_samples, ...)

        Returns
        -------
        p_novel : ndarray of shape (n_samples,)
        """
        check_is_fitted(self)
        if has_log_proba(self.estimator_):
            return np.exp(self._calibrated_log_proba(X)[:, -1])
        return expit(self._map(self.estimator_.novelty_score(X)))

    @available_if(_estimator_has_proba)
    def predict_log_proba(self, X):
        """Log of :meth:`predict_proba` (computed in log space).

        Parameters
        ----------
        X : array-like of shape (n_samples, ...)

        Returns
        -------
        log_proba : OpenWorldProba of shape (n_samples, n_classes + 1)
        """
        check_is_fitted(self)
        return OpenWorldProba(self._calibrated_log_proba(X), self.classes_,
                              is_log_proba=True)

    @available_if(_estimator_has_proba)
    def predict_proba(self, X):
        """Known-class probabilities and, last, the calibrated P(novel).

        Parameters
        ----------
        X : array-like of shape (n_samples, ...)

        Returns
        -------
        proba : OpenWorldProba of shape (n_samples, n_classes + 1)
            Rows sum to 1; the known classes keep the estimator's ratios.
        """
        check_is_fitted(self)
        return OpenWorldProba(np.exp(self._calibrated_log_proba(X)), self.classes_)

    def predict(self, X):
        """Best class, or ``novel_label_`` where the calibrated decision says novel.

        Parameters
        ----------
        X : array-like of shape (n_samples, ...)

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
        """
        check_is_fitted(self)
        if has_log_proba(self.estimator_):
            return labels_of_columns(self._calibrated_log_proba(X).argmax(axis=1),
                           self.classes_, self.novel_label_)
        novel = self.predict_novelty_proba(X) >= 0.5
        return with_novel(self.estimator_.predict_known(X), novel,
                           self.classes_, self.novel_label_)

    # ------------------------------------------------------------------- online
    def partial_fit(self, X, y, classes=None):
        """Learn labelled rows with ``estimator_.partial_fit``; the map stays.

        Parameters
        ----------
        X : array-like of shape (n_samples, ...)
        y : array-like of shape (n_samples,)
        classes : ignored
            For the scikit-learn signature.

        Returns
        -------
        self : NoveltyCalibratedClassifier
        """
        check_is_fitted(self)
        self.estimator_.partial_fit(X, y)
        return self

    def open_world_step(self, X, y):
        """Predict each row with the calibrated model before it, then learn it.

        As the estimator's ``open_world_step``, with ``p_novel`` the
        calibrated P(novel), ``novelty_score`` its log-odds and ``y_pred``
        the calibrated decision. A probabilistic estimator is stepped one row
        at a time (its decision needs every class's probability); on an
        error or interrupt the model is left as it was.

        Parameters
        ----------
        X : array-like of shape (n_samples, ...)
            Rows in stream order.
        y : array-like of shape (n_samples,)
            Their labels, revealed after each prediction.

        Returns
        -------
        result : Bunch
            ``y_pred``, ``y_known``, ``p_novel``, ``novelty_score`` and
            ``is_novel`` (the label was unseen at that moment), each of shape
            (n_samples,).
        """
        check_is_fitted(self)
        y = check_rows(X, y)
        if not has_log_proba(self.estimator_):
            return self._baseline_step(self.estimator_.open_world_step(X, y))
        work = copy.deepcopy(self)  # the model changes only on success
        rows = [work._proba_step(_safe_indexing(X, [i]), y[i : i + 1])
                for i in range(y.shape[0])]
        self.estimator_ = work.estimator_
        columns = {name: np.concatenate([row[name] for row in rows])
                   for name in rows[0]} if rows else {}
        return Bunch(**columns)

    def _proba_step(self, x, label):
        log_proba = self._calibrated_log_proba(x)
        is_new = not np.isin(label, self.classes_)[0]
        known = log_proba[:, :-1]
        classes = self.classes_
        y_known = (labels_of_columns(known.argmax(axis=1), classes, self.novel_label_)
                   if known.shape[1] else labels_of_columns(np.array([0]), classes,
                                                  self.novel_label_))
        y_pred = labels_of_columns(log_proba.argmax(axis=1), classes, self.novel_label_)
        self.estimator_.partial_fit(x, label)
        return {"y_pred": y_pred, "y_known": y_known,
                "p_novel": np.exp(log_proba[:, -1]),
                "novelty_score": novel_log_odds(log_proba),
                "is_novel": np.array([is_new])}

    def _baseline_step(self, out):
        mapped = self._map(out["p_novel"])
        y_pred = with_novel(out["y_known"], expit(mapped) >= 0.5, self.classes_,
                             self.novel_label_)
        return Bunch(y_pred=y_pred, y_known=out["y_known"],
                     p_novel=expit(mapped), novelty_score=mapped,
                     is_novel=np.asarray(out["is_novel"], dtype=bool))

    @property
    def n_features_in_(self):
        return self.estimator_.n_features_in_


def _stream_scores(estimator, X, y):
    """Raw novelty score and first-sighting flag of each row of a stream."""
    out = estimator.open_world_step(X, y)
    is_first = np.asarray(out["is_novel"], dtype=bool)
    if not has_log_proba(estimator):  # a distance or score, used as it is
        return np.asarray(out["p_novel"], dtype=np.float64), is_first
    if "novelty_score" in out:
        score = np.asarray(out["novelty_score"], dtype=np.float64)
    else:
        with np.errstate(divide="ignore"):
            score = logit(np.asarray(out["p_novel"], dtype=np.float64))
    return np.clip(score, -LOG_ODDS_CLIP, LOG_ODDS_CLIP), is_first


def _split_known(y, train, share, rng):
    """Training rows of a fold, less ``share`` of each class kept as queries
    (none from a class with a single row)."""
    fit_rows, known_rows = [], []
    for label in np.unique(y[train]):
        rows = rng.permutation(train[y[train] == label])
        n_query = int(round(share * rows.shape[0])) if rows.shape[0] > 1 else 0
        n_query = min(max(n_query, 1 if rows.shape[0] > 1 else 0),
                      rows.shape[0] - 1)
        known_rows.append(rows[:n_query])
        fit_rows.append(rows[n_query:])
    return np.concatenate(fit_rows), np.concatenate(known_rows)
