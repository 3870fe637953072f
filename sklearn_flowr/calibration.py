"""Calibrate an open-world classifier's P(novel) on classes it never trained on;
what the novelty wrappers share (:class:`NoveltyWrapper`), and the Platt fit."""

from __future__ import annotations

import copy
from numbers import Real

import numpy as np
from scipy.special import expit, logit
from sklearn.base import BaseEstimator, ClassifierMixin, MetaEstimatorMixin, clone
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LogisticRegression
from sklearn.utils import Bunch, _safe_indexing, check_random_state, column_or_1d
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import _num_samples, check_is_fitted

from ._core._novelty_odds import novel_log_odds, with_novel_log_odds
from ._core._softmax import logsumexp
from .head import CRPGaussianClassifier, OpenWorldProba
from .model_selection import class_disjoint_folds
from .validation import label_result_dtype

__all__ = ["NoveltyCalibratedClassifier"]

# Log-odds are clipped here: a row before any class exists has P(novel) = 1
# (infinite odds), and fits and ranks need finite values.
LOG_ODDS_CLIP = 30.0
# Smallest Platt slope: a map must stay increasing to keep the order of P(novel).
_MIN_SLOPE = 1e-3


def clip_log_odds(log_odds):
    """Log-odds clipped to +-:data:`LOG_ODDS_CLIP`."""
    return np.clip(log_odds, -LOG_ODDS_CLIP, LOG_ODDS_CLIP)


def clipped_logit(p):
    """``logit(p)`` clipped to +-:data:`LOG_ODDS_CLIP`."""
    with np.errstate(divide="ignore"):
        return clip_log_odds(logit(np.asarray(p, dtype=np.float64)))


def platt_fit(log_odds, first, targets="platt"):
    """``(slope, intercept)`` of the logistic regression of ``first`` on
    ``log_odds``; Platt's soft targets ``t`` as rows weighted ``t`` and ``1 - t``."""
    fit = LogisticRegression(C=1e6, tol=1e-8, max_iter=1000)  # ~unpenalised, tight
    if targets == "hard":
        fit.fit(log_odds[:, None], first)
    else:
        n_first, n_known = int(first.sum()), int((~first).sum())
        soft = np.where(first, (n_first + 1) / (n_first + 2), 1 / (n_known + 2))
        fit.fit(np.concatenate([log_odds, log_odds])[:, None],
                np.concatenate([np.ones_like(first), np.zeros_like(first)]),
                sample_weight=np.concatenate([soft, 1 - soft]))
    return max(float(fit.coef_[0, 0]), _MIN_SLOPE), float(fit.intercept_[0])


# ------------------------------------------------- what the wrappers share
def has_log_proba(estimator):
    """Whether ``estimator`` gives open-world log-probabilities."""
    return callable(getattr(estimator, "predict_log_proba", None))


def check_scoring(estimator, wrapper):
    """Fail unless ``estimator`` exposes a novelty score ``wrapper`` can read."""
    if not (has_log_proba(estimator) or (
            callable(getattr(estimator, "novelty_score", None))
            and callable(getattr(estimator, "predict_known", None)))):
        raise TypeError(
            f"{type(estimator).__name__} has neither predict_log_proba nor "
            f"novelty_score and predict_known: {wrapper} needs a novelty score.")


def labels_of_columns(index, classes, novel_label):
    """Column indices to labels; an index past the known classes is novel."""
    classes = np.asarray(classes)
    is_novel = index >= classes.shape[0]
    out = np.empty(index.shape[0], dtype=label_result_dtype(classes, novel_label))
    out[~is_novel] = classes[index[~is_novel]]
    out[is_novel] = novel_label
    return out


def with_novel(y_known, novel, classes, novel_label):
    """``y_known`` with ``novel_label`` where ``novel``, in the labels' dtype."""
    out = np.empty(novel.shape[0], dtype=label_result_dtype(np.asarray(classes),
                                                            novel_label))
    out[:] = y_known
    out[novel] = novel_label
    return out


def check_rows(X, y):
    """``y`` as a 1-d array of labels of one kind, as many as the rows of ``X``."""
    y = column_or_1d(y)
    if _num_samples(X) != y.shape[0]:
        raise ValueError(f"X and y have different numbers of rows: "
                         f"{_num_samples(X)} and {y.shape[0]}.")
    try:
        np.unique(y)
    except TypeError as exc:  # e.g. strings and numbers in one object array
        kinds = sorted({type(label).__name__ for label in y.tolist()})
        raise ValueError(f"y mixes labels of types {kinds} that cannot be "
                         "sorted together: give labels of one kind (all "
                         "strings or all numbers).") from exc
    return y


# Numpydoc text the wrappers' docstrings share (``%(name)s``).
WRAPPER_DOCS = {
    "estimator": """estimator : estimator or None, default=None
        An open-world classifier with ``fit`` and ``partial_fit`` and either
        ``predict_log_proba`` (N+1 columns, the novel class last) or
        ``novelty_score`` and ``predict_known``. ``None``:
        ``CRPGaussianClassifier()``.""",
    "attributes": """classes_ : ndarray of shape (n_classes,)
        Known classes of ``estimator_``.
    novel_label_ : object
        Label :meth:`predict` gives a row called novel.""",
}


def fill_doc(obj):
    """Fill the ``%(name)s`` fields of ``obj``'s docstring from :data:`WRAPPER_DOCS`."""
    obj.__doc__ = obj.__doc__ % WRAPPER_DOCS
    return obj


class NoveltyWrapper(MetaEstimatorMixin, ClassifierMixin, BaseEstimator):
    """Base of the novelty wrappers: a subclass learns with ``_learn`` and
    decides one row with ``_step_one`` (1-row arrays named by ``_STEP_KEYS``)."""

    _STEP_KEYS = ("y_pred", "y_known", "p_novel", "is_novel")

    def _estimator(self):
        return CRPGaussianClassifier() if self.estimator is None else self.estimator

    def _start_fit(self, X, y):
        """Checked ``y`` and the estimator to wrap, before any fitting."""
        self._validate_params()
        y = check_rows(X, y)
        estimator = self._estimator()
        check_scoring(estimator, type(self).__name__)
        return y, estimator

    @property
    def classes_(self):
        return self.estimator_.classes_

    @property
    def novel_label_(self):
        return self.estimator_.novel_label_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags = copy.deepcopy(self._estimator().__sklearn_tags__().input_tags)
        return tags

    def _models(self):
        return [self.estimator_]

    def _learn(self, X, y):
        for model in self._models():
            model.partial_fit(X, y)

    def partial_fit(self, X, y, classes=None):
        """Learn labelled rows with every wrapped model, all or none of them.

        Parameters
        ----------
        X : array-like of shape (n_samples, ...)
        y : array-like of shape (n_samples,)
        classes : ignored (for the scikit-learn signature)

        Returns
        -------
        self : object
        """
        check_is_fitted(self)
        y = check_rows(X, y)
        work = copy.deepcopy(self)
        work._learn(X, y)
        self.__dict__.update(work.__dict__)
        return self

    def open_world_step(self, X, y):
        """Decide each row with the model before it, then learn its label.

        On an error or interrupt the model is left as it was.

        Parameters
        ----------
        X : array-like of shape (n_samples, ...)
            Rows in stream order.
        y : array-like of shape (n_samples,)
            Their labels, revealed after each decision.

        Returns
        -------
        result : Bunch
            ``y_pred``, ``y_known``, ``p_novel`` and ``is_novel`` (the label
            was unseen at that moment), each of shape (n_samples,).
        """
        check_is_fitted(self)
        y = check_rows(X, y)
        work = copy.deepcopy(self)
        out = work._stream(X, y)
        self.__dict__.update(work.__dict__)
        return out

    def _stream(self, X, y):
        rows = [self._step_one(_safe_indexing(X, [i]), y[i : i + 1])
                for i in range(y.shape[0])]
        return Bunch(**{name: np.concatenate([row[name] for row in rows]) if rows
                        else np.zeros(0, dtype=bool if name == "is_novel" else float)
                        for name in self._STEP_KEYS})


def _estimator_has_proba(self):
    return has_log_proba(self.estimator_ if hasattr(self, "estimator_")
                         else self._estimator())


@fill_doc
class NoveltyCalibratedClassifier(NoveltyWrapper):
    """Open-world classifier with a P(novel) calibrated on held-out classes.

    ``fit`` streams rows of known and of unseen classes through copies of
    ``estimator`` and fits a map from their novelty score to "this row is the
    first sighting of a new class". The map keeps the order of the scores
    (rank-based figures are the estimator's own); it moves P(novel) and the
    decision.

    Parameters
    ----------
    %(estimator)s It also needs ``open_world_step``. Give it without
        its own novelty map (``FLOWRClassifier(calibration=None)``) unless the
        maps should stack.
    method : {"sigmoid", "isotonic"}, default="sigmoid"
        ``"sigmoid"``: Platt's map of the score (the log-odds of P(novel) for
        a probabilistic estimator), with Platt's smoothed targets.
        ``"isotonic"``: a non-decreasing step function; it needs more
        calibration rows (hundreds of new-class first sightings).
    cv : int, cross-validation generator, iterable or "prefit", default=3
        Class-disjoint folds, as
        :func:`~sklearn_flowr.model_selection.class_disjoint_folds` takes them:
        each fold fits a clone on its training classes and streams the
        held-out ones as new; ``estimator_`` is then fitted on all rows.
        ``"prefit"``: ``estimator`` is fitted already and ``fit`` only
        streams the rows it is given (not rows it trained on).
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
    %(attributes)s

    See Also
    --------
    sklearn_flowr.protocol.calibrate_novelty : The map on few-shot tasks of the
        training classes.

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

    _STEP_KEYS = ("y_pred", "y_known", "p_novel", "novelty_score", "is_novel")
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
        y, estimator = self._start_fit(X, y)
        rng = check_random_state(self.random_state)
        if isinstance(self.cv, str):
            check_is_fitted(estimator)
            scores, first = _stream_scores(copy.deepcopy(estimator), X, y)
            fitted = copy.deepcopy(estimator)
        else:
            scores, first = [], []
            for train, held in class_disjoint_folds(self.cv, X, y, name="cv"):
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
        # One update: an interrupt leaves the old fit or the new one, whole.
        vars(self).update(estimator_=fitted, slope_=slope, intercept_=intercept,
                          calibrator_=calibrator, calibration_rows_=Bunch(
                              score=scores, is_first_sighting=first))
        return self

    def _map(self, score):
        """Calibrated log-odds of novel against known, from the raw score."""
        score = np.asarray(score, dtype=np.float64)
        if self.calibrator_ is None:
            mapped = self.slope_ * score + self.intercept_
        else:
            with np.errstate(divide="ignore"):
                mapped = logit(self.calibrator_.predict(score))
        return clip_log_odds(mapped)

    def _calibrated_log_proba(self, X):
        log_proba = np.asarray(self.estimator_.predict_log_proba(X),
                               dtype=np.float64)
        mapped = with_novel_log_odds(
            log_proba, self._map(clip_log_odds(novel_log_odds(log_proba))))
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
        """Known-class probabilities (the estimator's ratios), then calibrated P(novel).

        Parameters
        ----------
        X : array-like of shape (n_samples, ...)

        Returns
        -------
        proba : OpenWorldProba of shape (n_samples, n_classes + 1)
        """
        check_is_fitted(self)
        return OpenWorldProba(np.exp(self._calibrated_log_proba(X)), self.classes_)

    def predict(self, X):
        """Argmax of the calibrated probabilities, or for a baseline its best
        known class unless the calibrated P(novel) is at least 0.5.

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

    def _stream(self, X, y):
        # ``p_novel`` is the calibrated P(novel), ``novelty_score`` its
        # log-odds. A baseline's step runs whole; a probabilistic estimator's
        # row by row (its decision needs every class's calibrated probability).
        if has_log_proba(self.estimator_):
            return super()._stream(X, y)
        out = self.estimator_.open_world_step(X, y)
        mapped = self._map(out["p_novel"])
        y_pred = with_novel(out["y_known"], expit(mapped) >= 0.5, self.classes_,
                            self.novel_label_)
        return Bunch(y_pred=y_pred, y_known=out["y_known"],
                     p_novel=expit(mapped), novelty_score=mapped,
                     is_novel=np.asarray(out["is_novel"], dtype=bool))

    def _step_one(self, x, label):
        log_proba = self._calibrated_log_proba(x)
        is_new = not np.isin(label, self.classes_)[0]
        known = log_proba[:, :-1]
        classes = self.classes_
        y_known = labels_of_columns(known.argmax(axis=1) if known.shape[1]
                                    else np.array([0]), classes, self.novel_label_)
        y_pred = labels_of_columns(log_proba.argmax(axis=1), classes,
                                   self.novel_label_)
        self._learn(x, label)
        return {"y_pred": y_pred, "y_known": y_known,
                "p_novel": np.exp(log_proba[:, -1]),
                "novelty_score": novel_log_odds(log_proba),
                "is_novel": np.array([is_new])}

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
        return clip_log_odds(np.asarray(out["novelty_score"], float)), is_first
    return clipped_logit(out["p_novel"]), is_first


def _split_known(y, train, share, rng):
    """A fold's training rows, less ``share`` of each class kept as known queries."""
    fit_rows, known_rows = [], []
    for label in np.unique(y[train]):
        rows = rng.permutation(train[y[train] == label])
        n_query = int(round(share * rows.shape[0])) if rows.shape[0] > 1 else 0
        n_query = min(max(n_query, 1 if rows.shape[0] > 1 else 0),
                      rows.shape[0] - 1)
        known_rows.append(rows[:n_query])
        fit_rows.append(rows[n_query:])
    return np.concatenate(fit_rows), np.concatenate(known_rows)
