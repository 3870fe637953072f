"""Hand's H-measure of binary classification performance, computed exactly, and
the open-world cross-validation scorer built on it."""

from numbers import Real

import numpy as np
from scipy.special import betainc
from sklearn.metrics import roc_curve
from sklearn.utils import check_array, check_consistent_length, column_or_1d
from sklearn.utils._param_validation import Interval, StrOptions, validate_params
from sklearn.utils.multiclass import type_of_target

from ..validation import novel_rows
from ._checks import fill_doc


def _binary_target(y_true, pos_label):
    """``y_true == pos_label`` of a binary ``y_true``; ``pos_label=None`` means 1
    for labels {0, 1} or {-1, 1}, as in ``roc_auc_score``."""
    target_type = type_of_target(y_true, input_name="y_true")
    if target_type != "binary":
        raise ValueError(
            "h_measure only supports binary y_true (two classes); got a "
            f"{target_type!r} target. To score an open-world classifier's "
            "novelty, pass its whole predict_proba output: in a scorer, "
            "make_scorer(h_measure, response_method=\"predict_proba\") (the "
            "default response_method passes predict's labels), or use "
            "novelty_scorer."
        )
    classes = np.unique(y_true)
    if classes.shape[0] != 2:
        raise ValueError(
            "y_true contains only one class "
            f"({classes.tolist()!r}); the H-measure needs both classes."
        )
    if pos_label is None:
        numeric = classes.dtype.kind in "biuf"
        if not numeric or not (
            np.array_equal(classes, [0, 1]) or np.array_equal(classes, [-1, 1])
        ):
            raise ValueError(
                f"y_true takes values in {classes.tolist()!r}; pos_label must be "
                "given unless the labels are {0, 1} or {-1, 1}."
            )
        pos_label = 1
    elif pos_label not in classes.tolist():
        raise ValueError(
            f"pos_label={pos_label!r} is not a label of y_true ({classes.tolist()!r})."
        )
    return y_true == pos_label


def _novelty_problem(y_true, y_score, pos_label):
    """The binary problem "is the row novel?" of an ``OpenWorldProba``."""
    if pos_label is not None:
        raise ValueError(
            f"pos_label={pos_label!r} does not apply to an open-world "
            "predict_proba output: the positive class is 'novel' (a label "
            "the estimator did not train on)."
        )
    is_novel = novel_rows(y_true, y_score.known_classes)
    p_novel = np.asarray(y_score)[:, -1]
    if y_score.is_log_proba:
        # exp keeps the ranking of predict_proba's column, ties included.
        p_novel = np.exp(p_novel)
    return is_novel.astype(np.int8), p_novel


def _cost_beta_shapes(cost_beta, severity_ratio, n_pos, n_neg):
    """Return the (alpha, beta) shapes of the cost density ``u(c)``."""
    if severity_ratio is not None:
        # R hmeasure (Hand & Anagnostopoulos 2014): Beta(2, 1 + 1/SR), with
        # SR = pi1/pi0 by default.
        ratio = n_pos / n_neg if severity_ratio == "auto" else float(severity_ratio)
        return 2.0, 1.0 + 1.0 / ratio
    shapes = np.asarray(cost_beta, dtype=float)
    if shapes.shape != (2,) or not np.all(np.isfinite(shapes)) or np.any(shapes <= 0):
        raise ValueError(
            "cost_beta must be a pair (alpha, beta) of positive finite numbers; "
            f"got {cost_beta!r}."
        )
    return float(shapes[0]), float(shapes[1])


def _roc_upper_hull(y_bool, y_score):
    """False- and true-positive counts ``(fps, tps)`` of the ROC's upper hull,
    left to right; integer counts keep the orientation tests exact."""
    fpr, tpr, _ = roc_curve(y_bool, y_score, drop_intermediate=False)
    n_pos = int(np.count_nonzero(y_bool))
    n_neg = y_bool.shape[0] - n_pos
    # roc_curve divides integer counts by the class sizes; rint undoes it exactly.
    fps = np.rint(fpr * n_neg).astype(np.int64)
    tps = np.rint(tpr * n_pos).astype(np.int64)
    # Both arrays are non-decreasing: for equal fps only the last (highest) point
    # can lie on the upper hull.
    last_of_run = np.r_[fps[1:] != fps[:-1], True]
    hull = []
    for x, y in zip(fps[last_of_run].tolist(), tps[last_of_run].tolist(), strict=True):
        # Andrew's monotone chain: drop the previous vertex while it does not make
        # a strict clockwise turn (collinear points do not change the hull loss).
        while len(hull) >= 2:
            (ox, oy), (ax, ay) = hull[-2], hull[-1]
            if (ax - ox) * (y - oy) - (ay - oy) * (x - ox) < 0:
                break
            hull.pop()
        hull.append((x, y))
    counts = np.asarray(hull, dtype=np.int64)
    return counts[:, 0], counts[:, 1]


def _expected_minimum_loss(fpr, tpr, lower, upper, pi0, pi1, alpha, beta):
    """``sum_k int_{lower_k}^{upper_k} L_k(c) u(c) dc``, ``u = Beta(alpha, beta)``,
    for the vertex losses ``L_k(c) = c pi0 FPR_k + (1 - c) pi1 (1 - TPR_k)``."""
    # int_0^c t u(t) dt and int_0^c (1 - t) u(t) dt are incomplete beta
    # functions, so the integral is exact.
    def masses(cost):
        return (alpha / (alpha + beta) * betainc(alpha + 1.0, beta, cost),
                beta / (alpha + beta) * betainc(alpha, beta + 1.0, cost))

    (c_hi, one_minus_c_hi), (c_lo, one_minus_c_lo) = masses(upper), masses(lower)
    return float(np.sum(pi0 * fpr * (c_hi - c_lo)
                        + pi1 * (1.0 - tpr) * (one_minus_c_hi - one_minus_c_lo)))


@validate_params(
    {
        "y_true": ["array-like"],
        "y_score": ["array-like"],
        "cost_beta": ["array-like"],
        "severity_ratio": [
            Interval(Real, 0.0, None, closed="neither"),
            StrOptions({"auto"}),
            None,
        ],
        "pos_label": [Real, str, "boolean", None],
    },
    prefer_skip_nested_validation=True,
)
def h_measure(
    y_true,
    y_score,
    *,
    cost_beta=(2.0, 2.0),
    severity_ratio: float | str | None = None,
    pos_label=None,
) -> float:
    """Hand's H-measure of a binary scoring classifier [1]_, computed exactly
    on the ROC's upper convex hull (the R ``hmeasure`` package's value where
    the AUC is at least 0.5).

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True binary labels; other than {0, 1} or {-1, 1}, give ``pos_label``.
    y_score : array-like of shape (n_samples,) or (n_samples, n_classes + 1)
        Scores, higher meaning more likely positive; or an open-world
        ``predict_proba`` (or ``predict_log_proba``) output as returned: the
        score is then P(novel), the positives the rows of unknown classes
        (``make_scorer(h_measure, response_method="predict_proba")``).
    cost_beta : tuple of (float, float), default=(2.0, 2.0)
        Shapes ``(alpha, beta)`` > 0 of the Beta cost density (Hand's and the
        paper's Beta(2, 2)).
    severity_ratio : float > 0, "auto" or None, default=None
        If given, the R package's Beta(2, 1 + 1/SR) [2]_ instead of
        ``cost_beta``; "auto": its default ``SR = pi1 / pi0``.
    pos_label : int, float, bool or str, default=None
        The positive class's label; None for {0, 1}, {-1, 1} or an open-world
        ``y_score``.

    Returns
    -------
    h : float
        In [0, 1]; 1 for a perfect ranking, 0 when no threshold beats the
        trivial classifiers.

    References
    ----------
    .. [1] D. J. Hand, "Measuring classifier performance: a coherent alternative
       to the area under the ROC curve", Machine Learning 77:103-123, 2009.
    .. [2] D. J. Hand and C. Anagnostopoulos, "A better Beta for the H measure
       of classification performance", Pattern Recognition Letters 40:41-46,
       2014.

    Examples
    --------
    >>> from sklearn_flowr.metrics import h_measure
    >>> y_true = [0, 0, 0, 1, 1]
    >>> y_score = [0.1, 0.4, 0.6, 0.35, 0.8]
    >>> round(h_measure(y_true, y_score), 4)
    0.4524
    >>> round(h_measure(y_true, y_score, severity_ratio="auto"), 4)
    0.4431

    On an open-world classifier's ``predict_proba``, novel rows are those of
    classes it did not train on (here class 2):

    >>> import numpy as np
    >>> from sklearn_flowr import CRPGaussianClassifier
    >>> X = np.array([[0.0], [0.3], [5.0], [5.2], [9.0], [9.4]])
    >>> y = np.array([0, 0, 1, 1, 2, 2])
    >>> head = CRPGaussianClassifier(covariance="isotropic", sigma=0.1)
    >>> head = head.fit(X[y < 2], y[y < 2])
    >>> h_measure(y, head.predict_proba(X))
    1.0
    """
    if getattr(y_score, "known_classes", None) is not None:
        y_true, y_score = _novelty_problem(y_true, y_score, pos_label)
        pos_label = None
    y_true = column_or_1d(y_true)
    y_score = check_array(
        y_score, ensure_2d=False, dtype="numeric", input_name="y_score"
    )
    if y_score.ndim != 1:
        raise ValueError(
            f"y_score must be one-dimensional; got shape {y_score.shape}. For a "
            "binary predict_proba output pass the positive-class column. To "
            "score an open-world estimator's novelty, pass the array its "
            "predict_proba returned, unchanged (it carries the known classes; "
            "np.asarray drops them), or use scoring=novelty_scorer."
        )
    check_consistent_length(y_true, y_score)
    y_bool = _binary_target(y_true, pos_label)

    n = y_bool.shape[0]
    n_pos = int(np.count_nonzero(y_bool))
    n_neg = n - n_pos
    pi0, pi1 = n_neg / n, n_pos / n
    alpha, beta = _cost_beta_shapes(cost_beta, severity_ratio, n_pos, n_neg)

    fps, tps = _roc_upper_hull(y_bool, y_score)
    # Between hull vertices k and k+1 the optimal vertex switches at the cost
    # c_k = pi1 dTPR / (pi0 dFPR + pi1 dTPR) = dtps / (dfps + dtps) (counts).
    # Slopes fall along the hull, so c_k falls: vertex k is optimal on
    # [c_k, c_{k-1}], with c_{-1} = 1 and c_m = 0 at the two ends.
    d_fps, d_tps = np.diff(fps), np.diff(tps)
    breaks = d_tps / (d_fps + d_tps)
    upper = np.r_[1.0, breaks]
    lower = np.r_[breaks, 0.0]
    minimum_loss = _expected_minimum_loss(
        fps / n_neg, tps / n_pos, lower, upper, pi0, pi1, alpha, beta
    )
    # The trivial classifiers are the vertices (1, 1) and (0, 0) of the chance
    # diagonal; their break-point is c = pi1 (min(c pi0, (1 - c) pi1)).
    trivial = np.array([1.0, 0.0])
    maximum_loss = _expected_minimum_loss(trivial, trivial, np.array([0.0, pi1]),
                                          np.array([pi1, 1.0]), pi0, pi1, alpha, beta)
    # Rounding can push a chance-level result a few ulps outside [0, 1].
    return float(np.clip(1.0 - minimum_loss / maximum_loss, 0.0, 1.0))


@fill_doc
def novelty_scorer(estimator, X, y) -> float:
    """H-measure of an open-world classifier's P(novel) on ``(X, y)``, a row
    being novel when its label is not in ``estimator.classes_``; a ``scoring``
    for ``GridSearchCV`` with :class:`~sklearn_flowr.model_selection.OpenWorldSplit`.

    Parameters
    ----------
    %(scorer)s

    Returns
    -------
    score : float
        The H-measure with the Beta(2, 2) cost distribution.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_flowr import CRPGaussianClassifier
    >>> from sklearn_flowr.metrics import novelty_scorer
    >>> rng = np.random.default_rng(0)
    >>> centres = np.array([[0.0, 0.0], [6.0, 0.0], [0.0, 6.0]])
    >>> y = np.repeat([0, 1, 2], 30)
    >>> X = centres[y] + rng.normal(size=(90, 2))
    >>> head = CRPGaussianClassifier().fit(X[y < 2], y[y < 2])
    >>> 0.0 <= novelty_scorer(head, X, y) <= 1.0
    True
    """
    is_novel, p_novel = novel_column(estimator, X, y, "novelty_scorer")
    return h_measure(is_novel.astype(np.int8), p_novel)


def novel_column(estimator, X, y, scorer):
    """``(is_novel, p_novel)`` of a fitted open-world classifier on ``(X, y)``:
    novel rows are those whose label is not in ``estimator.classes_``; P(novel)
    from ``predict_proba``'s last column, or from ``predict_novelty_proba``
    where there is no ``predict_proba`` (``NoveltyCalibratedClassifier``
    around a distance baseline)."""
    classes = getattr(estimator, "classes_", None)
    if classes is None:
        raise ValueError(
            f"{type(estimator).__name__} has no classes_; {scorer} needs a "
            "fitted classifier to tell known labels from novel ones."
        )
    is_novel = novel_rows(y, classes)
    if not hasattr(estimator, "predict_proba") and hasattr(
            estimator, "predict_novelty_proba"):  # a calibrated distance baseline
        return is_novel, np.asarray(estimator.predict_novelty_proba(X), dtype=float)
    proba = np.asarray(estimator.predict_proba(X))
    n_columns = len(classes) + 1
    if proba.ndim != 2 or proba.shape[1] != n_columns:
        raise ValueError(
            f"predict_proba returned shape {proba.shape}; {scorer} expects "
            f"{n_columns} columns (len(classes_) known classes, then the novel "
            "class last)."
        )
    return is_novel, proba[:, -1]
