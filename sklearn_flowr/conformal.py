"""A novelty decision with a guarantee: conformal p-values and Benjamini-Hochberg
(Bates et al., 2023)."""

from __future__ import annotations

import copy
from numbers import Integral, Real

import numpy as np
from scipy.stats import false_discovery_control
from sklearn.base import clone
from sklearn.model_selection import StratifiedKFold
from sklearn.utils import _safe_indexing, check_random_state
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.validation import _num_samples, check_is_fitted

from ._novelty_wrapper import (
    NoveltyWrapper,
    best_known,
    check_rows,
    fill_doc,
    novelty_scores,
)

__all__ = ["ConformalNoveltyClassifier", "conformal_pvalues",
           "leave_group_out_pvalues"]


class _Calibrator:
    """One model and labelled rows it never learned from, scored lazily."""

    def __init__(self, model, X, y):
        self.model, self.X, self.y = model, X, y
        self._scores = None

    def scores(self):
        if self._scores is None:
            self._scores = novelty_scores(self.model, self.X)
        return self._scores

    def learned(self):
        self._scores = None


@fill_doc
class ConformalNoveltyClassifier(NoveltyWrapper):
    """Open-world classifier whose novelty decision has a stated error rate.

    A row is novel when its conformal p-value ``(1 + #{i : s_i >= s(x)}) /
    (n + 1)`` against the novelty scores ``s_i`` of ``n`` calibration rows of
    known classes is at most ``alpha``; otherwise it gets the best known class.

    Parameters
    ----------
    %(estimator)s
    alpha : float in (0, 1), default=0.05
        Largest share of known-class rows :meth:`predict` may call novel.
        Smaller is safer and finds fewer new classes.
    cv : "prefit" or int, default="prefit"
        ``"prefit"``: ``fit(X, y)`` takes calibration rows of known classes
        the fitted ``estimator`` did not train on (exact validity). ``k >= 2``:
        cross-conformal over ``k`` stratified folds (valid to about ``2 alpha``).
    mondrian : bool, default=False
        Class-conditional p-values: at most ``alpha`` within every class
        (needs calibration rows of every class).
    random_state : int, RandomState instance or None, default=None
        Seeds the folds of an int ``cv``.

    Attributes
    ----------
    estimator_ : estimator
        The fitted estimator that gives the labels (a copy with
        ``cv="prefit"``); online calls update it.
    n_calibration_ : int
        Calibration rows.
    %(attributes)s

    Notes
    -----
    The guarantee covers the classes of the calibration rows; give a class
    learned online its own with :meth:`add_calibration`.

    References
    ----------
    .. [1] S. Bates, E. Candes, L. Lei, Y. Romano, M. Sesia, "Testing for
       outliers with conformal p-values", Annals of Statistics, 51(1), 2023.
    .. [2] V. Vovk, "Cross-conformal predictors", Annals of Mathematics and
       Artificial Intelligence, 74, 2015.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_flowr import CRPGaussianClassifier
    >>> from sklearn_flowr.conformal import ConformalNoveltyClassifier
    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat(np.arange(6), 60)
    >>> X = rng.normal(scale=3.0, size=(6, 4))[y] + rng.normal(size=(360, 4))
    >>> head = CRPGaussianClassifier().fit(X[::2], y[::2])
    >>> clf = ConformalNoveltyClassifier(head, alpha=0.1).fit(X[1::2], y[1::2])
    >>> p = clf.novelty_pvalues(np.r_[X[:1], X[:1] + 30.0])
    >>> bool(p[0] > 0.1), bool(p[1] <= 0.1)  # a known row, a far-away one
    (True, True)
    """

    _parameter_constraints: dict = {
        "estimator": [HasMethods(["fit", "partial_fit"]), None],
        "alpha": [Interval(Real, 0, 1, closed="neither")],
        "cv": [StrOptions({"prefit"}), Interval(Integral, 2, None, closed="left")],
        "mondrian": ["boolean"],
        "random_state": ["random_state"],
    }

    def __init__(self, estimator=None, *, alpha=0.05, cv="prefit", mondrian=False,
                 random_state=None):
        self.estimator = estimator
        self.alpha = alpha
        self.cv = cv
        self.mondrian = mondrian
        self.random_state = random_state

    def fit(self, X, y):
        """Calibrate (and with an int ``cv``, fit) on labelled known-class rows.

        Parameters
        ----------
        X : array-like of shape (n_samples, ...)
            Inputs as the estimator takes them.
        y : array-like of shape (n_samples,)
            Labels; with ``cv="prefit"`` every label must be a class the
            estimator knows.

        Returns
        -------
        self : ConformalNoveltyClassifier
        """
        X, y, estimator = self._start_fit(X, y)
        if self.cv == "prefit":
            if self.estimator is None:
                raise ValueError(
                    "cv='prefit' calibrates an estimator fitted already: pass "
                    "one (ConformalNoveltyClassifier(fitted_head)), or cv=k to "
                    "fit the default head here on k folds.")
            check_is_fitted(estimator)
            unknown = np.setdiff1d(np.unique(y), np.asarray(estimator.classes_))
            if unknown.size:
                raise ValueError(
                    "With cv='prefit' the calibration rows must be of classes the "
                    f"estimator knows; got rows of {unknown.tolist()[:5]} (they "
                    "would be novel). Calibrate on held-out rows of its classes.")
            fitted = copy.deepcopy(estimator)
            calibrators = [_Calibrator(fitted, X, y)]
        else:
            seed = check_random_state(self.random_state).randint(2**31 - 1)
            folds = StratifiedKFold(self.cv, shuffle=True, random_state=seed)
            smallest = int(np.unique(y, return_counts=True)[1].min())
            if smallest < self.cv:
                raise ValueError(
                    f"cv={self.cv} stratified folds need at least {self.cv} rows "
                    f"in every class; the smallest has {smallest}.")
            calibrators = []
            for train, held in folds.split(np.zeros(y.shape[0]), y):
                model = clone(estimator).fit(_safe_indexing(X, train), y[train])
                calibrators.append(_Calibrator(model, _safe_indexing(X, held), y[held]))
            fitted = clone(estimator).fit(X, y)
        if self.mondrian:
            missing = np.setdiff1d(np.asarray(fitted.classes_), y)
            if missing.size:
                raise ValueError(
                    "mondrian=True needs calibration rows of every known class; "
                    f"none of {missing.tolist()[:5]}.")
        for calibrator in calibrators:
            calibrator.scores()  # scored now: a bad row fails fit, not predict
        # One update: an interrupt leaves the old fit or the new one, whole.
        vars(self).update(estimator_=fitted, _calibrators=calibrators)
        return self

    @property
    def n_calibration_(self):
        check_is_fitted(self)
        return int(sum(c.y.shape[0] for c in self._calibrators))

    def novelty_pvalues(self, X):
        """Conformal p-value of "this row belongs to a known class".

        %(X)s
        Returns
        -------
        pvalues : ndarray of shape (n_samples,)
            In ``[1 / (n + 1), 1]``; small means novel.
        """
        check_is_fitted(self)
        # Mondrian: one calibration set per known class, the largest p-value.
        groups = (np.unique(np.concatenate([c.y for c in self._calibrators]))
                  if self.mondrian else [None])
        exceed = np.zeros((len(groups), _num_samples(X)))
        total = np.zeros(len(groups))
        for calibrator in self._calibrators:
            test = novelty_scores(calibrator.model, X)
            scores = calibrator.scores()
            for k, label in enumerate(groups):
                of_class = scores if label is None else scores[calibrator.y == label]
                exceed[k] += _n_at_least(of_class, test)
                total[k] += of_class.shape[0]
        return ((1.0 + exceed) / (1.0 + total[:, None])).max(axis=0)

    def predict(self, X):
        """The best known class, or ``novel_label_`` where the p-value <= alpha.

        %(X)s
        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
        """
        check_is_fitted(self)
        return self._with_novel(best_known(self.estimator_, X),
                                self.novelty_pvalues(X) <= self.alpha)

    def select_novel(self, X, fdr=0.1):
        """Rows to call novel in a batch, false discovery rate at most ``fdr``
        (Benjamini-Hochberg on the conformal p-values).

        Parameters
        ----------
        X : array-like of shape (n_samples, ...)
            The batch, decided together.
        fdr : float in (0, 1), default=0.1
            Target false discovery rate.

        Returns
        -------
        selected : ndarray of bool, shape (n_samples,)
        """
        if isinstance(fdr, bool) or not isinstance(fdr, Real) or not 0 < fdr < 1:
            raise ValueError(f"fdr must be a float in (0, 1); got {fdr!r}.")
        pvalues = self.novelty_pvalues(X)
        if pvalues.shape[0] == 0:
            return np.zeros(0, dtype=bool)
        return false_discovery_control(pvalues, method="bh") <= fdr

    def _models(self):
        models = [self.estimator_]
        models += [c.model for c in self._calibrators if c.model is not self.estimator_]
        return models

    def _learn(self, X, y):
        super()._learn(X, y)
        for calibrator in self._calibrators:
            calibrator.learned()

    def _decide_one(self, x):
        # ``p_novel`` is the conformal p-value: small means novel.
        pvalue = self.novelty_pvalues(x)
        y_known = best_known(self.estimator_, x)
        return {"y_pred": self._with_novel(y_known, pvalue <= self.alpha),
                "y_known": y_known, "p_novel": pvalue}

    def add_calibration(self, X, y):
        """Add labelled rows of known classes the models never learned from
        (rows of a class learned online, held back from learning).

        Parameters
        ----------
        X : array-like of shape (n_samples, ...)
        y : array-like of shape (n_samples,)
            Classes the estimator knows.

        Returns
        -------
        self : ConformalNoveltyClassifier
        """
        check_is_fitted(self)
        y = check_rows(X, y)
        unknown = np.setdiff1d(np.unique(y), np.asarray(self.classes_))
        if unknown.size:
            raise ValueError("Calibration rows must be of known classes; "
                             f"{unknown.tolist()[:5]} are not.")
        rng = check_random_state(self.random_state)
        target = rng.randint(len(self._calibrators), size=y.shape[0])
        # Shallow copies: each keeps its model, the one the estimator learns in.
        work = [copy.copy(calibrator) for calibrator in self._calibrators]
        for k, calibrator in enumerate(work):
            rows = np.flatnonzero(target == k)
            if rows.size == 0:
                continue
            X_new = _safe_indexing(X, rows)
            calibrator.X = _concat(calibrator.X, X_new)
            calibrator.y = np.concatenate([calibrator.y, y[rows]])
            calibrator.learned()
            calibrator.scores()
        self._calibrators = work
        return self


def _n_at_least(calibration, test):
    """For each test score, how many calibration scores are >= it."""
    ordered = np.sort(calibration)
    return ordered.shape[0] - np.searchsorted(ordered, test, side="left")


def conformal_pvalues(calibration_scores, scores):
    """Split-conformal p-values: ``(1 + #{i : c_i >= s}) / (n + 1)``.

    Parameters
    ----------
    calibration_scores : array-like of shape (n_calibration,)
        Novelty scores (higher = more novel) of known-class rows never learned.
    scores : array-like of shape (n_samples,)
        Novelty scores of the rows to test.

    Returns
    -------
    pvalues : ndarray of shape (n_samples,)
        In ``[1 / (n + 1), 1]``; small means novel.

    Examples
    --------
    >>> conformal_pvalues([0.1, 0.2, 0.3, 0.4], [0.05, 0.25, 0.5])
    array([1. , 0.6, 0.2])
    """
    calibration = np.asarray(calibration_scores, dtype=np.float64).ravel()
    scores = np.asarray(scores, dtype=np.float64).ravel()
    if calibration.shape[0] == 0:
        raise ValueError("conformal_pvalues needs at least one calibration score.")
    if np.isnan(calibration).any() or np.isnan(scores).any():
        raise ValueError("conformal_pvalues got NaN scores.")
    return (1.0 + _n_at_least(calibration, scores)) / (1.0 + calibration.shape[0])


def leave_group_out_pvalues(scores, is_calibration, groups):
    """Conformal p-values of every row against the calibration rows of the
    other groups (cross-conformal over groups drawn from one pool, such as
    an evaluation's tasks).

    Parameters
    ----------
    scores : array-like of shape (n_samples,)
        Novelty scores, higher = more novel.
    is_calibration : array-like of bool, shape (n_samples,)
        Rows of known classes, which calibrate the other groups.
    groups : array-like of shape (n_samples,)
        The group of each row; 2+ groups must hold calibration rows.

    Returns
    -------
    pvalues : ndarray of shape (n_samples,)
        Small means novel.

    Examples
    --------
    >>> leave_group_out_pvalues([0.1, 0.2, 0.3, 0.9], [True, True, True, False],
    ...                         [0, 0, 1, 1])
    array([1.        , 1.        , 0.33333333, 0.33333333])
    """
    scores = np.asarray(scores, dtype=np.float64).ravel()
    is_calibration = np.asarray(is_calibration, dtype=bool).ravel()
    groups = np.asarray(groups).ravel()
    if not scores.shape == is_calibration.shape == groups.shape:
        raise ValueError("scores, is_calibration and groups need one value per "
                         f"row; got {scores.shape[0]}, {is_calibration.shape[0]} "
                         f"and {groups.shape[0]}.")
    if np.isnan(scores).any():
        raise ValueError("leave_group_out_pvalues got NaN scores.")
    group_ids, group = np.unique(groups, return_inverse=True)
    n_cal_groups = np.unique(group[is_calibration]).shape[0]
    if n_cal_groups < 2:
        raise ValueError("leave_group_out_pvalues needs calibration rows in at "
                         f"least two groups; got {n_cal_groups}.")
    calibration = scores[is_calibration]
    n_ge = _n_at_least(calibration, scores)
    n_ref = np.full(scores.shape[0], calibration.shape[0])
    order = np.argsort(group, kind="stable")
    bounds = np.cumsum(np.bincount(group, minlength=group_ids.shape[0]))[:-1]
    for rows in np.split(order, bounds):
        own = scores[rows][is_calibration[rows]]
        if own.shape[0]:
            n_ge[rows] -= _n_at_least(own, scores[rows])
            n_ref[rows] -= own.shape[0]
    return (1.0 + n_ge) / (1.0 + n_ref)


def _concat(X, X_new):
    """Rows ``X_new`` after ``X``, in ``X``'s kind; rows of another shape are
    refused by name."""
    have, given = np.shape(X)[1:], np.shape(X_new)[1:]
    if given != have:
        raise ValueError(
            f"add_calibration: X has {given[0]} columns, but the calibration "
            f"rows have {have[0]} columns." if len(have) == len(given) == 1 else
            f"add_calibration: X has rows of shape {given}, but the calibration "
            f"rows have shape {have}.")
    if not hasattr(X, "iloc"):
        return np.concatenate([np.asarray(X), np.asarray(X_new)])
    import pandas as pd

    if not hasattr(X_new, "iloc"):
        X_new = pd.DataFrame(np.asarray(X_new), columns=X.columns)
    return pd.concat([X, X_new])
