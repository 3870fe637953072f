"""Hyper-parameters changed after ``fit``: validated, and refused when the
fitted state was built from the old values.

scikit-learn validates parameters in ``fit`` and in the first ``partial_fit``
only. A fitted open-world model keeps learning (``partial_fit``,
``open_world_step``), so ``set_params(a=1.5)`` after ``fit`` would otherwise
run on silently with the old value. Each estimator records the parameters its
fitted state was built from (:func:`snapshot_params`) and checks them on every
later call (:func:`check_params_unchanged`): an invalid new value fails with
scikit-learn's parameter error; a valid one that the fitted state cannot take
fails with the names, the old and new values and the fix (refit, or set it
back). Parameters read at call time (``device``, ``verbose``, ...) may change.
"""

from __future__ import annotations

import inspect

import numpy as np

__all__ = ["check_novelty_map", "check_params_unchanged", "fill_new_params",
           "snapshot_params"]


def fill_new_params(estimator) -> None:
    """Give parameters added since ``estimator`` was pickled their defaults.

    Called from ``__setstate__``: a model saved by an older version lacks the
    newer ``__init__`` parameters, and ``get_params``, ``clone`` and ``repr``
    would fail. Every new parameter's default reproduces the old behaviour.
    """
    signature = inspect.signature(type(estimator).__init__)
    for name, parameter in signature.parameters.items():
        if (name != "self" and parameter.default is not parameter.empty
                and name not in estimator.__dict__):
            setattr(estimator, name, parameter.default)


def snapshot_params(estimator, *, deep: bool = False) -> dict:
    """The estimator's parameters as its fitted state uses them.

    ``deep=True`` takes the settings of its parts too (``head__sigma``, ...)
    in place of the part objects, so a part changed in place is seen.
    """
    params = estimator.get_params(deep=deep)
    if not deep:
        return dict(params)
    return {name: value for name, value in params.items()
            if not hasattr(value, "get_params")}


def _same(old, new) -> bool:
    if old is new:
        return True
    if isinstance(old, str) or isinstance(new, str):
        return isinstance(old, str) and isinstance(new, str) and old == new
    if hasattr(old, "get_n_splits") and hasattr(new, "get_n_splits"):
        # Cross-validation splitters: equal when their parameters are (their
        # repr lists them all), e.g. a copy restored by skops.
        return type(old) is type(new) and repr(old) == repr(new)
    try:
        return bool(np.array_equal(np.asarray(old), np.asarray(new)))
    except (TypeError, ValueError):
        return False


def check_params_unchanged(estimator, snapshot: dict | None, *, runtime=(),
                           deep: bool = False):
    """Fail if a parameter changed since ``snapshot`` was taken.

    Parameters
    ----------
    estimator : BaseEstimator
        A fitted estimator with scikit-learn's ``_validate_params``.
    snapshot : dict or None
        :func:`snapshot_params` of the fit; ``None`` (a model pickled before
        snapshots existed) checks nothing.
    runtime : collection of str, default=()
        Parameters read at call time: a valid new value is used as it is.
    deep : bool, default=False
        Compare the parts' settings too (a snapshot taken with ``deep=True``).

    Raises
    ------
    sklearn.utils._param_validation.InvalidParameterError
        A changed parameter has an invalid value.
    ValueError
        A valid new value of a parameter the fitted state was built from.
    """
    if snapshot is None:
        return
    current = snapshot_params(estimator, deep=deep) if deep else None

    def now(name, default):
        return (current.get(name, default) if deep
                else getattr(estimator, name, default))

    # Identity first: the common case costs a dict walk, no comparisons (and,
    # without ``deep``, no call per parameter: a one-row online step pays it).
    if deep:
        changed = [name for name, old in snapshot.items()
                   if (new := now(name, old)) is not old and not _same(old, new)]
    else:
        changed = [name for name, old in snapshot.items()
                   if (new := getattr(estimator, name, old)) is not old
                   and not _same(old, new)]
    if not changed:
        return
    estimator._validate_params()
    if deep:
        # The parts (head, training stages) validate their own settings.
        for part in estimator.get_params(deep=False).values():
            if hasattr(part, "get_params") and hasattr(part, "_validate_params"):
                part._validate_params()
    fixed = [name for name in changed if name not in runtime]
    if fixed:
        what = ", ".join(f"{name}: {snapshot[name]!r} -> {now(name, None)!r}"
                         for name in fixed)
        raise ValueError(
            f"{type(estimator).__name__}'s parameters changed after fitting "
            f"({what}), but the fitted state was built from the old values: call "
            "fit again to use the new ones, or set them back."
        )


def check_novelty_map(value):
    """``novelty_calibration`` as ``(slope, intercept)`` floats, or None.

    Raises
    ------
    ValueError
        Not two finite numbers, or a slope that is not positive (a map that
        does not keep the order of P(novel)).
    """
    if value is None:
        return None
    pair = np.asarray(value, dtype=object).ravel()
    try:
        slope, intercept = (float(v) for v in pair)
    except (TypeError, ValueError):
        raise ValueError(
            "novelty_calibration must be None or (slope, intercept), two "
            f"numbers; got {value!r}.") from None
    if not (np.isfinite(slope) and np.isfinite(intercept) and slope > 0):
        raise ValueError(
            "novelty_calibration needs a finite slope > 0 and a finite "
            f"intercept (a map that keeps the order of P(novel)); got {value!r}.")
    return slope, intercept
