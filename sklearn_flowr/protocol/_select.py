"""Choose parameters on validation classes the encoder has not seen: the head's
(docs/user_guide.rst, "The noise covariance of new classes") and those of
class discovery."""

from __future__ import annotations

import copy
import warnings
from numbers import Integral, Real

import numpy as np
from sklearn.model_selection import ParameterGrid
from sklearn.utils import Bunch, column_or_1d
from sklearn.utils._param_validation import Interval, StrOptions, validate_params

from ..head import empirical_bayes_head
from ._calibrate import small_context_sizes
from ._discovery import evaluate_discovery
from ._evaluate import evaluate_online
from .sampling import LargeContextTasks, SmallContextTasks, resolve_seed

__all__ = ["select_discovery_params", "select_head_params"]

# Figures of discovery_report a selection may maximise (higher is better).
SCORINGS = ("balanced", "accuracy_all", "accuracy_new", "nmi_new", "ari_new",
            "nmi_all", "ari_all", "known_accuracy")


def _labelled(X, y, name):
    y = column_or_1d(y)
    X = np.asarray(X)
    if X.ndim != 2 or X.shape[0] != y.shape[0]:
        raise ValueError(f"{name}: X must be 2-d with one row per label; got "
                         f"shapes {X.shape} and {y.shape}.")
    return X, y


def _small_context_tasks(y_val, n_tasks, random_state, **kwargs):
    """Small-context tasks of the validation classes, sized by their number."""
    n_classes = np.unique(y_val).shape[0]
    if n_classes < 2:
        raise ValueError("Small-context tasks need at least 2 validation "
                         f"classes; got {n_classes}.")
    n_support, n_novel = small_context_sizes(n_classes)
    return SmallContextTasks(y_val, n_support_classes=n_support,
                             n_novel_classes=n_novel, n_tasks=n_tasks,
                             random_state=random_state, **kwargs)


def _grid_candidates(estimator, param_grid):
    """The candidates of ``param_grid``: at least one, of parameters
    ``estimator`` has."""
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
    noise, or the full head's given ``sigma``)."""
    if "noise_shrinkage" not in params:
        return
    covariance = params.get("covariance", head.get_params()["covariance"])
    sigma = params.get("sigma", "auto")
    if covariance == "isotropic" or (covariance == "full" and not (
            isinstance(sigma, str) and sigma == "auto")):
        raise ValueError(
            "noise_shrinkage only acts on an estimated noise covariance (the "
            "whitened head's, or the full head's with sigma='auto'); this "
            f"candidate has covariance={covariance!r} and "
            f"sigma={'a given value' if not isinstance(sigma, str) else sigma!r}. "
            "Use covariance='whitened' or 'full' and leave sigma out of the grid.")


@validate_params({"prior_scale": [Interval(Real, 0, None, closed="neither")]},
                 prefer_skip_nested_validation=True)
def select_head_params(head, X_train, y_train, X_val, y_val, param_grid, *,
                       prior_scale: float = 1.0, n_tasks: int = 200,
                       shots: tuple[int, int] = (1, 10), n_query: int = 10,
                       n_jobs: int | None = None, random_state=None) -> Bunch:
    """Pick the head's parameters with the best novelty H-measure on
    small-context tasks of validation classes, each candidate head built as
    ``FLOWRClassifier`` builds its small-context head (no calibration map).

    Parameters
    ----------
    head : CRPGaussianClassifier
        The template, e.g. a fitted ``FLOWRClassifier``'s ``head_``; not modified.
    X_train, y_train : array-like of shape (n_samples, n_features), (n_samples,)
        Embeddings and labels of the classes the encoder was trained on.
    X_val, y_val : array-like of shape (n_val, n_features), (n_val,)
        Embeddings and labels of validation classes new to the encoder.
    param_grid : dict or list of dicts
        Candidates, e.g. ``{"noise_shrinkage": [0.0, 0.05, 0.1, 0.2]}``.
    prior_scale : float > 0, default=1.0
        ``FLOWRClassifier``'s ``prior_scale`` of the model to tune.
    n_tasks : int >= 1, default=200
    shots : (int, int), default=(1, 10)
        Range of shots per support class.
    n_query : int >= 1, default=10
        Query rows per class (a class needs ``shots[1] + n_query`` rows).
    n_jobs : int, default=None
        joblib workers of :func:`evaluate_online`.
    random_state : int, Generator, RandomState or None, default=None
        Seeds the tasks.

    Returns
    -------
    result : :class:`~sklearn.utils.Bunch`
        ``best_params`` (the first best in grid order), ``best_head``
        (unfitted) and ``results`` (per candidate: ``params``, ``h_measure``,
        ``accuracy``, ``ece``).

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
    candidates = _grid_candidates(head, param_grid)
    for params in candidates:
        _check_shrinkage_acts(head, params)
    tasks = _small_context_tasks(y_val, n_tasks, random_state, shots=shots,
                                 n_query=n_query)
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


def _discovery_score(mean, scoring="balanced"):
    """``"balanced"``: the mean of ``accuracy_new`` and ``known_accuracy``;
    else one figure of ``mean`` by name."""
    if scoring not in SCORINGS:
        raise ValueError(f"scoring must be one of {SCORINGS}; got {scoring!r}.")
    if scoring == "balanced":
        return float((mean["accuracy_new"] + mean["known_accuracy"]) / 2.0)
    return float(mean[scoring])


def _validation_tasks(estimator, y_val, setting, n_tasks, random_state):
    """Default validation tasks: small context, or all known and <= 5 new classes."""
    if setting == "small":
        return _small_context_tasks(y_val, n_tasks, random_state)
    known = getattr(estimator, "classes_", None)
    if known is None:
        raise ValueError("setting='large' needs a fitted estimator: its classes "
                         "are the known classes of the validation tasks.")
    n_new = np.setdiff1d(np.unique(y_val), known).shape[0]
    if n_new < 1:
        raise ValueError("setting='large' needs validation classes outside the "
                         "estimator's known classes in y_val; got none.")
    return LargeContextTasks(y_val, known, n_novel_classes=min(5, n_new),
                             n_tasks=n_tasks, random_state=random_state)


@validate_params(
    {"setting": [StrOptions({"small", "large"})],
     "n_tasks": [Interval(Integral, 1, None, closed="left")],
     "scoring": [StrOptions(set(SCORINGS))]},
    prefer_skip_nested_validation=True)
def select_discovery_params(estimator, X_val, y_val, param_grid, *,
                            setting: str = "small", tasks=None,
                            n_tasks: int = 200, label_fraction: float = 0.0,
                            label_delay: int = 0, scoring: str = "balanced",
                            n_jobs: int | None = None, random_state=None,
                            verbose: int = 0) -> Bunch:
    """Pick the parameters of class discovery with the best score on tasks of
    validation classes, every candidate run through the same tasks and labels.

    Parameters
    ----------
    estimator : estimator
        The template, as :func:`evaluate_discovery` takes it; not modified.
    X_val, y_val : array-like of shape (n_val, ...), (n_val,)
        Rows and labels of validation classes, not those evaluated on.
    param_grid : dict or list of dicts
        Candidates, e.g. ``{"threshold_scale": [0.5, 2.0]}``; ``{}``: as is.
    setting : {"small", "large"}, default="small"
    tasks : SmallContextTasks, LargeContextTasks or iterable of Task, default=None
        Tasks over ``y_val``; None draws ``n_tasks`` (small: 10 support + 5
        novel classes, fewer below 15; large: all known and up to 5 new).
    n_tasks : int >= 1, default=200
        Tasks drawn when ``tasks`` is None.
    label_fraction : float in [0, 1], default=0.0
    label_delay : int >= 0, default=0
        The label budget of :func:`evaluate_discovery`.
    scoring : str, default="balanced"
        "balanced" (mean ``accuracy_new`` and ``known_accuracy``) or a figure.
    n_jobs : int or None, default=None
        joblib workers over tasks.
    random_state : int, Generator, RandomState or None, default=None
        Seeds the tasks and the labels that arrive.
    verbose : int, default=0
        Above 0, a progress bar over each candidate's tasks.

    Returns
    -------
    result : :class:`~sklearn.utils.Bunch`
        ``best_params`` (the first best in grid order; if every score is NaN
        the first, with a warning), ``best_index``, ``best_score``,
        ``best_estimator``, ``scoring`` and ``results`` (per candidate:
        ``params``, ``score``, ``report``).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_flowr.baselines import DPMeansClassifier
    >>> from sklearn_flowr.protocol import select_discovery_params
    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat(np.arange(12), 20)
    >>> X = rng.normal(scale=8.0, size=(12, 3))[y] + rng.normal(size=(240, 3))
    >>> found = select_discovery_params(
    ...     DPMeansClassifier(), X, y, {"threshold_scale": [0.25, 1.0]},
    ...     n_tasks=5, random_state=0)
    >>> found.best_params, len(found.results)
    ({'threshold_scale': 1.0}, 2)
    """
    candidates = _grid_candidates(estimator, param_grid)
    built = [copy.deepcopy(estimator).set_params(**params)
             for params in candidates]
    for candidate in built:
        if callable(getattr(candidate, "_validate_params", None)):
            candidate._validate_params()
    y_val = column_or_1d(y_val)
    seed = resolve_seed(random_state)
    if tasks is None:
        tasks = _validation_tasks(estimator, y_val, setting, n_tasks, seed)
    results = []
    for params, candidate in zip(candidates, built, strict=True):
        report = evaluate_discovery(candidate, X_val, y_val, tasks,
                                    setting=setting,
                                    label_fraction=label_fraction,
                                    label_delay=label_delay, n_jobs=n_jobs,
                                    random_state=seed, verbose=verbose)
        results.append({"params": params,
                        "score": _discovery_score(report.mean, scoring),
                        "report": report})
    scores = np.array([result["score"] for result in results])
    if np.isnan(scores).all():
        best = 0
        if len(candidates) > 1:
            warnings.warn(
                f"No candidate has a {scoring!r} score (no unlabelled row of "
                "the kind it scores in the validation tasks, e.g. "
                "label_fraction=1 with label_delay=0): the first candidate "
                "is returned.", UserWarning, stacklevel=2)
    else:
        best = int(np.nanargmax(scores))
    return Bunch(best_params=candidates[best], best_index=best,
                 best_score=float(scores[best]), best_estimator=built[best],
                 scoring=scoring, results=results)
