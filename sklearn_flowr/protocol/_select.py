"""Choose head hyper-parameters on classes the encoder has not seen
(docs/user_guide.rst, "The noise covariance of new classes")."""

from __future__ import annotations

from numbers import Real

import numpy as np
from sklearn.model_selection import ParameterGrid
from sklearn.utils import Bunch, column_or_1d

from ..head import empirical_bayes_head
from ._calibrate import small_context_sizes
from ._evaluate import evaluate_online
from ._tasks import SmallContextTasks

__all__ = ["select_head_params"]


def _labelled(X, y, name):
    y = column_or_1d(y)
    X = np.asarray(X)
    if X.ndim != 2 or X.shape[0] != y.shape[0]:
        raise ValueError(f"{name}: X must be 2-d with one row per label; got "
                         f"shapes {X.shape} and {y.shape}.")
    return X, y


def grid_candidates(estimator, param_grid) -> list:
    """The candidates of ``param_grid`` (as :class:`ParameterGrid` gives
    them), checked: at least one, and only parameters ``estimator`` has."""
    candidates = list(ParameterGrid(param_grid))
    if not candidates:
        raise ValueError("param_grid holds no candidate.")
    unknown = {name for params in candidates for name in params} - set(
        estimator.get_params())
    if unknown:
        raise ValueError(f"param_grid names parameters {sorted(unknown)} that "
                         f"{type(estimator).__name__} does not have.")
    return candidates


def _check_shrinkage_acts(head, params):
    """Refuse a ``noise_shrinkage`` grid that cannot move the head (isotropic
    noise or a given ``sigma``)."""
    if "noise_shrinkage" not in params:
        return
    covariance = params.get("covariance", head.get_params()["covariance"])
    sigma = params.get("sigma", "auto")
    if covariance != "full" or not (isinstance(sigma, str) and sigma == "auto"):
        raise ValueError(
            "noise_shrinkage only acts on the full head's estimated noise "
            f"covariance; this candidate has covariance={covariance!r} and "
            f"sigma={'a given value' if not isinstance(sigma, str) else sigma!r}. "
            "Use covariance='full' and leave sigma out of the grid.")


def select_head_params(head, X_train, y_train, X_val, y_val, param_grid, *,
                       prior_scale: float = 1.0, n_tasks: int = 200,
                       shots: tuple[int, int] = (1, 10), n_query: int = 10,
                       n_jobs: int | None = None, random_state=None) -> Bunch:
    """Pick the head's parameters with the best novelty H-measure on
    small-context tasks of validation classes.

    Each candidate head is built as ``FLOWRClassifier`` builds its
    small-context head (prior and noise by empirical Bayes on ``X_train``,
    without a calibration map) and run by :func:`evaluate_online` through the
    same :class:`SmallContextTasks` of the validation classes.

    Parameters
    ----------
    head : CRPGaussianClassifier
        The template, e.g. a fitted ``FLOWRClassifier``'s ``head_``; not
        modified.
    X_train, y_train : array-like of shape (n_samples, n_features), (n_samples,)
        Embeddings and labels of the classes the encoder was trained on.
    X_val, y_val : array-like of shape (n_val, n_features), (n_val,)
        Embeddings and labels of validation classes the encoder has not seen
        (none may be a training class).
    param_grid : dict or list of dicts
        Candidates, as :class:`~sklearn.model_selection.GridSearchCV` takes
        them, e.g. ``{"noise_shrinkage": [0.0, 0.05, 0.1, 0.2]}``.
    prior_scale : float, default=1.0
        ``FLOWRClassifier``'s ``prior_scale`` of the model to tune.
    n_tasks : int, default=200
    shots : (int, int), default=(1, 10)
        Range of shots per support class (:class:`SmallContextTasks`).
    n_query : int, default=10
        Query rows per class; every validation class needs ``shots[1] +
        n_query`` rows.
    n_jobs : int, default=None
        Parallel workers of :func:`evaluate_online`.
    random_state : int, Generator, RandomState or None, default=None
        Seeds the tasks.

    Returns
    -------
    result : :class:`~sklearn.utils.Bunch`
        ``best_params`` (the first best H-measure in grid order),
        ``best_head`` (unfitted, without a calibration map) and ``results``
        (per candidate: ``params``, ``h_measure``, ``accuracy``, ``ece``).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_flowr import CRPGaussianClassifier
    >>> from sklearn_flowr.protocol import select_head_params
    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat(np.arange(40), 20)
    >>> X = rng.normal(scale=3.0, size=(40, 3))[y] + rng.normal(size=(800, 3))
    >>> found = select_head_params(
    ...     CRPGaussianClassifier(covariance="full", b=1.0), X[y < 20], y[y < 20],
    ...     X[y >= 20], y[y >= 20], {"noise_shrinkage": [0.0, 0.5]}, n_tasks=20,
    ...     random_state=0)
    >>> sorted(found.best_params), len(found.results)
    (['noise_shrinkage'], 2)
    """
    X_train, y_train = _labelled(X_train, y_train, "training classes")
    X_val, y_val = _labelled(X_val, y_val, "validation classes")
    if X_train.shape[1] != X_val.shape[1]:
        raise ValueError(f"X_train has {X_train.shape[1]} features and X_val "
                         f"{X_val.shape[1]}.")
    shared = np.intersect1d(np.unique(y_train), np.unique(y_val))
    if shared.size:
        raise ValueError("The validation classes must be new to the encoder; "
                         f"{shared.size} are training classes too, e.g. "
                         f"{shared.tolist()[0]!r}.")
    n_classes = np.unique(y_val).shape[0]
    if n_classes < 2:
        raise ValueError("Small-context tasks need at least 2 validation "
                         f"classes; got {n_classes}.")
    if (isinstance(prior_scale, bool) or not isinstance(prior_scale, Real)
            or not np.isfinite(prior_scale) or prior_scale <= 0):
        raise ValueError(f"prior_scale must be a finite number > 0; got "
                         f"{prior_scale!r}.")
    candidates = grid_candidates(head, param_grid)
    for params in candidates:
        _check_shrinkage_acts(head, params)
    n_support, n_novel = small_context_sizes(n_classes)
    tasks = SmallContextTasks(y_val, n_support_classes=n_support, shots=shots,
                              n_novel_classes=n_novel, n_query=n_query,
                              n_tasks=n_tasks, random_state=random_state)
    results, heads = [], []
    for params in candidates:
        built = empirical_bayes_head(head, X_train, y_train, setting="small",
                                     prior_scale=prior_scale,
                                     **{"novelty_calibration": None, **params})
        report = evaluate_online(built, X_val, y_val, tasks, setting="small",
                                 n_jobs=n_jobs, verbose=0)
        heads.append(built)
        results.append({"params": params, "h_measure": float(report.h_measure),
                        "accuracy": float(report.accuracy),
                        "ece": None if report["ece"] is None
                        else float(report["ece"])})
    best = int(np.argmax([r["h_measure"] for r in results]))
    return Bunch(best_params=candidates[best], best_head=heads[best],
                 results=results)
