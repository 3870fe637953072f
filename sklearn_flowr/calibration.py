"""Calibrate an open-world classifier's P(novel) on classes it never trained on."""

from __future__ import annotations

import copy
import warnings
from numbers import Real

import numpy as np
from scipy.optimize import brentq
from scipy.special import expit, logit, logsumexp
from sklearn.base import clone
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LogisticRegression
from sklearn.utils import Bunch, _safe_indexing, check_random_state
from sklearn.utils._param_validation import (
    HasMethods,
    Interval,
    StrOptions,
    validate_params,
)
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_array, check_is_fitted

from ._core._novelty_odds import novel_log_odds, with_novel_log_odds
from ._novelty_wrapper import (
    SCORE_CLIP,
    NoveltyWrapper,
    best_known,
    clip_log_odds,
    clipped_logit,
    fill_doc,
    has_log_proba,
    known_of_log_proba,
    novelty_scores,
)
from ._novelty_wrapper import check_rows as check_rows  # for the protocol
from .head import OpenWorldProba
from .model_selection import class_disjoint_folds
from .validation import resolve_novel_label

__all__ = ["NoveltyCalibratedClassifier", "match_novel_share"]

# The least a Platt map spans, in nats, over its rows' scores: it must stay
# increasing to keep the order of P(novel), whatever the scores' units.
_MIN_SPAN = 1e-3
# A fold model's warning that its own predict lacks conformal scores: the
# fold models only score the calibration rows.
_FEW_SCORES = ".* calibration scores, fewer than the"


def platt_fit(log_odds, first, targets="platt", weight=None):
    """``(slope, intercept)`` of the logistic regression of ``first`` on ``log_odds``
    (Platt's soft targets ``t`` as rows weighted ``t`` and ``1 - t``), rows
    weighted ``weight``; the slope at least ``_MIN_SPAN`` over their range."""
    weight = np.ones(first.shape[0]) if weight is None else weight
    if targets == "hard":
        x, t, w = log_odds, first.astype(np.float64), weight
    else:
        n_first, n_known = int(first.sum()), int((~first).sum())
        soft = np.where(first, (n_first + 1) / (n_first + 2), 1 / (n_known + 2))
        x = np.concatenate([log_odds, log_odds])
        t = np.concatenate([np.ones(first.shape[0]), np.zeros(first.shape[0])])
        w = np.concatenate([soft * weight, (1 - soft) * weight])
    fit = LogisticRegression(C=1e6, tol=1e-8, max_iter=1000)  # ~unpenalised, tight
    fit.fit(x[:, None], t, sample_weight=w)
    slope, intercept = float(fit.coef_[0, 0]), float(fit.intercept_[0])
    least = _MIN_SPAN / max(float(np.ptp(log_odds)), np.finfo(float).tiny)
    if slope >= least:
        return slope, intercept
    # No increasing map beats a flat one: the least slope, and the intercept
    # that fits best with it (clamping the slope alone would move every row).
    offset = least * x

    def gradient(b):
        return float(np.dot(w, expit(offset + b) - t))

    bound = float(np.abs(offset).max()) + 50.0
    return least, brentq(gradient, -bound, bound)


def prior_weights(first, prior, weight):
    """``weight`` rescaled so that ``first``'s weighted share is ``prior``
    (None: ``weight`` as it is)."""
    if prior is None:
        return weight
    share = weight[first].sum() / weight.sum()
    return weight * np.where(first, prior / share, (1 - prior) / (1 - share))


def prior_shift(first, prior, weight):
    """Log-odds that Bayes' rule adds to a map fitted at ``first``'s weighted
    share to give the share ``prior`` (None: 0)."""
    if prior is None:
        return 0.0
    share = weight[first].sum() / weight.sum()
    return float(np.log(prior / (1 - prior)) - np.log(share / (1 - share)))


def split_known_queries(y, rows, share, rng, *, single="error"):
    """``rows`` split per class into fit rows and ``share`` (1 to half) to query;
    a class of one row is only fitted (``single="fit"``) or refused."""
    fit, query = [], []
    for label in np.unique(y[rows]):
        mine = rng.permutation(rows[y[rows] == label])
        if mine.shape[0] < 2 and single == "error":
            raise ValueError("calibration in the large context needs at "
                             "least 2 rows in every class (one to fit, one to "
                             f"query); class {label!r} has {mine.shape[0]}.")
        n_query = min(max(1, round(share * mine.shape[0])), mine.shape[0] // 2)
        query.append(mine[:n_query])
        fit.append(mine[n_query:])
    return np.concatenate(fit), np.concatenate(query)


def calibration_folds(cv, X, y, share, rng):
    """The calibration's folds: for each class-disjoint fold, yield the rows
    its model fits, its known queries, the stream of known queries and
    held-out rows (shuffled) and the weight of a known query.

    The known queries are ``share`` of the rows of the next fold's classes
    (:func:`split_known_queries`; the other classes keep every row, as in the
    deployed estimator), weighted to stand for the queries of every training
    class.
    """
    folds = class_disjoint_folds(cv, X, y, name="cv")
    for k, (train, held) in enumerate(folds):
        partner = np.intersect1d(folds[(k + 1) % len(folds)][1], train)
        source = partner if partner.size else train
        _, known_rows = split_known_queries(y, source, share, rng, single="fit")
        stream = rng.permutation(np.concatenate([known_rows, held]))
        yield (np.setdiff1d(train, known_rows), known_rows, stream,
               train.size / source.size)


def _estimator_has_proba(self):
    return has_log_proba(self.estimator_ if hasattr(self, "estimator_")
                         else self._estimator())


@fill_doc
class NoveltyCalibratedClassifier(NoveltyWrapper):
    """Open-world classifier with a P(novel) calibrated on held-out classes.

    ``fit`` streams rows of known and unseen classes through copies of
    ``estimator`` (or scores them at once, ``stream=False``) and maps their
    novelty score to "first sighting of a new class" (to "of a new class"),
    keeping the scores' order. :meth:`predict` says novel where the
    calibrated P(novel) is at least 0.5.

    Parameters
    ----------
    %(estimator)s It also needs ``open_world_step``. Give it without
        its own novelty map (``FLOWRClassifier(calibration=None)``) unless the
        maps should stack.
    method : {"sigmoid", "isotonic"}, default="sigmoid"
        Platt's map of the score (with smoothed targets), or a non-decreasing
        step function (needs hundreds of first sightings).
    cv : int, cross-validation generator, iterable, "prefit" or None, default=3
        Folds over whole classes (``class_disjoint_folds``; an int from 2 to
        the number of classes, None: 3), each giving its held-out classes as
        new (more folds: fold models closer to the deployed one);
        ``"prefit"``: the given rows through the fitted ``estimator``.
    known_query_share : float in (0, 0.5], default=0.25
        With folds: share of the rows streamed as known, taken from the
        classes of the next fold (the others keep every row).
    novel_prior : float in (0, 1) or None, default=None
        Share of rows of classes not yet known expected among the rows the
        model will predict, as ``priors`` in
        :class:`~sklearn.naive_bayes.GaussianNB`: the sigmoid map is moved by
        Bayes' rule from the stream's share to it (its slope unchanged), the
        isotonic map's rows are weighted to it. None
        keeps the calibration stream's own share, which its folds set, not the
        deployment. Give it when the share is known (a protocol's design); the
        mean P(novel) can still land below it where the fold models score
        rows as more novel than the deployed model does.
    stream : bool, default=True
        Score the calibration rows as a stream that learns each new class
        from its first sighting, as :meth:`open_world_step` does (new = first
        sighting); False scores them at once, as :meth:`predict_proba` does
        (new = every row of a class the fold's model lacks). Use False when
        the model will mostly predict batches.
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
        ``score``, ``is_first_sighting`` (with ``stream=False``: of a new
        class) and ``weight`` of the calibration rows: known queries stand
        for every training class's, and ``novel_prior`` is applied. The
        isotonic map is fitted with these weights; the sigmoid map with the
        weights before ``novel_prior``, then moved to it.
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
    >>> clf = NoveltyCalibratedClassifier(CRPGaussianClassifier(covariance="isotropic"),
    ...                                   cv=3, random_state=0).fit(X, y)
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
        "novel_prior": [Interval(Real, 0, 1, closed="neither"), None],
        "stream": ["boolean"],
        "random_state": ["random_state"],
    }

    def __init__(self, estimator=None, *, method="sigmoid", cv=3,
                 known_query_share=0.25, novel_prior=None, stream=True,
                 random_state=None):
        self.estimator = estimator
        self.method = method
        self.cv = cv
        self.known_query_share = known_query_share
        self.novel_prior = novel_prior
        self.stream = stream
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
        X, y, estimator = self._start_fit(X, y)
        rng = check_random_state(self.random_state)
        if isinstance(self.cv, str):
            check_is_fitted(estimator)
            scores, first = self._held_out_scores(copy.deepcopy(estimator), X, y)
            weight = np.ones(first.shape[0])
            fitted = copy.deepcopy(estimator)
        else:
            scores, first, weight = [], [], []
            template = _with_novel_label_of(estimator, y)
            for fit_rows, known_rows, stream, known_weight in calibration_folds(
                    3 if self.cv is None else self.cv, X, y,
                    self.known_query_share, rng):
                with warnings.catch_warnings():  # its own predict is not used
                    warnings.filterwarnings("ignore", category=UserWarning,
                                            message=_FEW_SCORES)
                    fold_est = clone(template).fit(_safe_indexing(X, fit_rows),
                                                   y[fit_rows])
                fold_scores, fold_first = self._held_out_scores(
                    fold_est, _safe_indexing(X, stream), y[stream])
                scores.append(fold_scores)
                first.append(fold_first)
                weight.append(np.where(np.isin(stream, known_rows),
                                       known_weight, 1.0))
            scores, first, weight = map(np.concatenate, (scores, first, weight))
        if first.all() or not first.any():
            raise ValueError(
                "The calibration stream needs rows of classes the estimator "
                "knows and first sightings of classes it does not; got "
                f"{int(first.sum())} first sightings among {first.shape[0]} "
                "rows.")
        if self.method == "sigmoid":
            # Platt's smoothing is sized by the rows it has, so the map is
            # fitted at the stream's share and moved to the prior after.
            slope, intercept = platt_fit(scores, first, weight=weight)
            intercept += prior_shift(first, self.novel_prior, weight)
            calibrator = None
        weight = prior_weights(first, self.novel_prior, weight)
        if self.method == "isotonic":
            slope = intercept = float("nan")
            calibrator = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip")
            calibrator.fit(scores, first, sample_weight=weight)
        if not isinstance(self.cv, str):
            fitted = clone(estimator).fit(X, y)
        # One update: an interrupt leaves the old fit or the new one, whole.
        vars(self).update(estimator_=fitted, slope_=slope, intercept_=intercept,
                          calibrator_=calibrator, calibration_rows_=Bunch(
                              score=scores, is_first_sighting=first, weight=weight))
        return self

    def _held_out_scores(self, estimator, X, y):
        """Novelty scores of rows and whether each is new: streamed (new = first
        sighting) or scored at once (new = of a class ``estimator`` lacks)."""
        if self.stream:
            return _stream_scores(estimator, X, y)
        return novelty_scores(estimator, X), ~np.isin(y, estimator.classes_)

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
            log_proba, self._map(clip_log_odds(novel_log_odds(log_proba), SCORE_CLIP)))
        return mapped - logsumexp(mapped, axis=1)[:, None]

    def predict_novelty_proba(self, X):
        """Calibrated probability that each row is of a class not yet known.

        %(X)s
        Returns
        -------
        p_novel : ndarray of shape (n_samples,)
        """
        check_is_fitted(self)
        if has_log_proba(self.estimator_):
            return np.exp(self._calibrated_log_proba(X)[:, -1])
        return expit(self._map(novelty_scores(self.estimator_, X)))

    @available_if(_estimator_has_proba)
    def predict_log_proba(self, X):
        """Log of :meth:`predict_proba` (computed in log space).

        %(X)s
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

        %(X)s
        Returns
        -------
        proba : OpenWorldProba of shape (n_samples, n_classes + 1)
        """
        check_is_fitted(self)
        return OpenWorldProba(np.exp(self._calibrated_log_proba(X)), self.classes_)

    def predict(self, X):
        """``novel_label_`` where the calibrated P(novel) is at least 0.5 (novel
        is then at least as likely as known), else the best known class.

        %(X)s
        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
        """
        check_is_fitted(self)
        return self._with_novel(best_known(self.estimator_, X),
                                self.predict_novelty_proba(X) >= 0.5)

    def _stream(self, X, y):
        # ``p_novel`` is the calibrated P(novel), ``novelty_score`` its
        # log-odds. A baseline's step runs whole; a probabilistic estimator's
        # row by row (its decision needs every class's calibrated probability).
        if has_log_proba(self.estimator_):
            return super()._stream(X, y)
        out = self.estimator_.open_world_step(X, y)
        mapped = self._map(out["p_novel"])
        y_pred = self._with_novel(out["y_known"], expit(mapped) >= 0.5)
        return Bunch(y_pred=y_pred, y_known=out["y_known"],
                     p_novel=expit(mapped), novelty_score=mapped,
                     is_novel=np.asarray(out["is_novel"], dtype=bool))

    def _decide_one(self, x):
        log_proba = self._calibrated_log_proba(x)
        y_known = known_of_log_proba(log_proba, self.classes_, self.novel_label_)
        p_novel = np.exp(log_proba[:, -1])
        return {"y_pred": self._with_novel(y_known, p_novel >= 0.5),
                "y_known": y_known, "p_novel": p_novel,
                "novelty_score": novel_log_odds(log_proba)}


def _with_novel_label_of(estimator, y):
    """``estimator``, or a clone with the novel label ``"auto"`` resolves to
    on all the labels ``y``: a fold's model, which lacks some classes, would
    otherwise take the label of a class its stream holds (-1, say)."""
    params = estimator.get_params(deep=False)
    if not (isinstance(params.get("novel_label"), str)
            and params["novel_label"] == "auto"):
        return estimator
    return clone(estimator).set_params(
        novel_label=resolve_novel_label("auto", np.unique(y)))


def _stream_scores(estimator, X, y):
    """Raw novelty score and first-sighting flag of each row of a stream."""
    out = estimator.open_world_step(X, y)
    is_first = np.asarray(out["is_novel"], dtype=bool)
    if not has_log_proba(estimator):  # a distance or score, used as it is
        return np.asarray(out["p_novel"], dtype=np.float64), is_first
    return novelty_log_odds(out), is_first


def novelty_log_odds(rows):
    """Log-odds of novel of streamed rows (an ``open_world_step`` result): their
    ``novelty_score`` (from log-probabilities) clipped at ``SCORE_CLIP``, else
    ``logit(p_novel)``."""
    if "novelty_score" in rows:
        return clip_log_odds(np.asarray(rows["novelty_score"], float), SCORE_CLIP)
    return clipped_logit(rows["p_novel"])


# The least share match_novel_share takes: below it expit underflows to 0.
_TINY = float(np.finfo(np.float64).tiny)


@validate_params({"p_novel": ["array-like"],
                  "share": [Interval(Real, _TINY, 1, closed="neither")]},
                 prefer_skip_nested_validation=True)
def match_novel_share(p_novel, share):
    """P(novel) of one batch moved by one log-odds offset so that its mean is
    ``share``.

    Where the share of rows of new classes in a batch is known (a protocol's
    design, a count), the rows themselves, unlabelled, fix the offset that
    a map learned on the fitting rows gets wrong when its fold models score
    rows more novel than the deployed model does. The order of the rows, and
    so AUROC and H, is kept (up to float rounding); a wrong slope is not
    mended. Each row's result depends on the whole batch: call it once per
    batch, not per row.

    Parameters
    ----------
    p_novel : array-like of shape (n_samples,)
        P(novel) of every row of the batch, in [0, 1], as
        :meth:`NoveltyCalibratedClassifier.predict_novelty_proba` gives it.
        Its log-odds are taken within +-30 nats (``p`` from about 1e-13 to
        1 - 1e-13), the bound that method clips them to.
    share : float in (0, 1)
        The share of the batch's rows of classes not yet known.

    Returns
    -------
    p_matched : ndarray of shape (n_samples,)
        ``logit(p_matched) = clip(logit(p_novel), -30, 30) + c``, the one
        ``c`` that makes the mean of ``p_matched`` equal ``share``.

    Examples
    --------
    >>> from sklearn_flowr.calibration import match_novel_share
    >>> p = match_novel_share([0.1, 0.2, 0.9, 0.05], 0.5)
    >>> round(float(p.mean()), 6), bool((p[[2, 1, 0]] > p[[1, 0, 3]]).all())
    (0.5, True)
    """
    if np.ndim(p_novel) != 1:
        raise ValueError(f"p_novel must be 1-D (one P(novel) a row); got "
                         f"{np.ndim(p_novel)} dimension(s).")
    if np.shape(p_novel)[0] == 0:
        raise ValueError("p_novel is empty: give the P(novel) of every row of "
                         "the batch.")
    p_novel = check_array(p_novel, ensure_2d=False, dtype="numeric",
                          input_name="p_novel").astype(np.float64, copy=False)
    if p_novel.min() < 0.0 or p_novel.max() > 1.0:
        raise ValueError(f"p_novel must lie in [0, 1]; got values from "
                         f"{p_novel.min():g} to {p_novel.max():g}.")
    log_odds = clipped_logit(p_novel)
    target = float(logit(share))
    # The mean grows with c from 0 to 1: below share at low, above at high.
    low, high = target - log_odds.max() - 1.0, target - log_odds.min() + 1.0
    offset = brentq(lambda c: expit(log_odds + c).mean() - share, low, high,
                    xtol=1e-12)
    return expit(log_odds + offset)
