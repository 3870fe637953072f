"""The novelty wrappers' refits and online steps are all-or-nothing under Ctrl-C.

Each case runs one call on a fitted wrapper with ``sys.settrace`` raising
KeyboardInterrupt at the k-th line the package's own code executes (where a
Ctrl-C can land), for every one of the last lines and an even spread of the
others. The wrapper, compared with deep snapshots, must be as before the call
(and the same call then gives what it gives on an untouched copy) or, when
the interrupt lands after the update, as the whole call leaves it.
"""

import copy
import sys
from pathlib import Path

import numpy as np
import pytest

import sklearn_flowr
from sklearn_flowr import CRPGaussianClassifier
from sklearn_flowr.baselines import NCMClassifier
from sklearn_flowr.calibration import NoveltyCalibratedClassifier
from sklearn_flowr.conformal import ConformalNoveltyClassifier

PACKAGE_DIR = str(Path(sklearn_flowr.__file__).parent)
# Every one of a call's last LAST_POINTS lines, and SPREAD_POINTS others.
LAST_POINTS, SPREAD_POINTS = 30, 40


class Interrupted(KeyboardInterrupt):
    """The injected Ctrl-C."""


def run_traced(call, k=0):
    """``call()`` with a KeyboardInterrupt at its k-th package line (0: never);
    the number of package lines it ran."""
    count = 0

    def local(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
            if count == k:
                raise Interrupted
        return local

    def trace(frame, event, arg):
        return local if frame.f_code.co_filename.startswith(PACKAGE_DIR) else None

    sys.settrace(trace)
    try:
        call()
    finally:
        sys.settrace(None)
    return count


def deep_state(value, seen=None):
    """A comparable copy of everything ``value`` holds, followed through
    containers, arrays and objects' attributes (as pickling keeps them)."""
    seen = {} if seen is None else seen
    if isinstance(value, str | bytes | bool | int | float | complex | type(None)):
        return (type(value).__name__, repr(value))
    if isinstance(value, np.generic):
        return ("scalar", value.dtype.str, repr(value.item()))
    if isinstance(value, type) or callable(value) and not hasattr(value, "__dict__"):
        return ("ref", getattr(value, "__qualname__", repr(value)))
    if id(value) in seen:
        return ("seen", seen[id(value)][0])
    seen[id(value)] = (len(seen), value)  # kept alive: its id stays its own
    if isinstance(value, np.ndarray):
        if value.dtype.kind == "O":
            return ("objects", value.shape, deep_state(value.tolist(), seen))
        return ("array", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, dict):
        return ("dict", type(value).__name__, tuple(sorted(
            ((repr(key), deep_state(item, seen)) for key, item in value.items()),
            key=lambda pair: pair[0])))
    if isinstance(value, list | tuple | set | frozenset):
        items = sorted(value, key=repr) if isinstance(value, set | frozenset) else value
        return (type(value).__name__, tuple(deep_state(item, seen) for item in items))
    if hasattr(type(value), "_BUFFERS"):
        # The head's growth buffers: used rows and every buffer's capacity, read
        # without __getstate__ (which must not, but might, change them).
        attributes = dict(vars(value))
        growing = attributes.pop("_next", None)
        used = {name: (attributes[name].shape, attributes.pop(name)[
            : value.n_classes + (name == "joint_coef")].tobytes())
            for name in value._BUFFERS}
        return ("buffers", deep_state(used, seen), deep_state(attributes, seen),
                None if growing is None else sorted(
                    (name, array.shape) for name, array in growing.items()))
    state = value.__getstate__() if hasattr(value, "__getstate__") else vars(value)
    return ("object", type(value).__qualname__, deep_state(state, seen))


def _data(seed=0):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(6), 8)
    X = rng.normal(scale=4.0, size=(6, 3))[y] + rng.normal(size=(48, 3))
    return X, y


def _cases():
    X, y = _data()
    X_new, y_new = X[:3] + 6.0, np.array([7, 7, 1])
    head = CRPGaussianClassifier
    calibrated = NoveltyCalibratedClassifier(head(), cv=3, random_state=0).fit(X, y)
    prefit = NoveltyCalibratedClassifier(head().fit(X[y < 4], y[y < 4]),
                                         cv="prefit").fit(X, y)
    baseline = NoveltyCalibratedClassifier(NCMClassifier(), cv=3,
                                           random_state=0).fit(X, y)
    conformal = ConformalNoveltyClassifier(head(), cv=2, random_state=0).fit(X, y)
    split = ConformalNoveltyClassifier(head().fit(X[::2], y[::2])).fit(X[1::2],
                                                                      y[1::2])
    return {
        "calibrated refit": (calibrated, lambda m: m.fit(X[::-1], y[::-1])),
        "calibrated prefit refit": (prefit, lambda m: m.fit(X[::-1], y[::-1])),
        "calibrated partial_fit": (calibrated, lambda m: m.partial_fit(X_new, y_new)),
        "calibrated open_world_step": (
            calibrated, lambda m: m.open_world_step(X_new, y_new)),
        "calibrated baseline open_world_step": (
            baseline, lambda m: m.open_world_step(X_new, y_new)),
        "conformal refit": (conformal, lambda m: m.fit(X[::-1], y[::-1])),
        "conformal prefit refit": (split, lambda m: m.fit(X[::-2], y[::-2])),
        "conformal partial_fit": (conformal, lambda m: m.partial_fit(X_new, y_new)),
        "conformal open_world_step": (
            conformal, lambda m: m.open_world_step(X_new, y_new)),
        "conformal add_calibration": (
            split, lambda m: m.add_calibration(X[:6], y[:6])),
    }


CASES = _cases()


def _points(n_lines):
    last = range(max(1, n_lines - LAST_POINTS + 1), n_lines + 1)
    spread = np.linspace(1, n_lines, SPREAD_POINTS).astype(int)
    return sorted(set(last) | set(spread.tolist()))


def _result(model, call):
    out = call(model)
    return deep_state(model if out is model else (out, model))


@pytest.mark.parametrize("name", list(CASES))
def test_an_interrupted_call_leaves_the_wrapper_as_it_was(name):
    """Check that a KeyboardInterrupt at any of the sampled lines of the call
    leaves the wrapper equal to its deep snapshot before it, and that the
    call then gives what it gives on an untouched copy."""
    fitted, call = CASES[name]
    untouched = copy.deepcopy(fitted)
    n_lines = run_traced(lambda: call(untouched))
    done = deep_state(untouched)
    expected = _result(copy.deepcopy(fitted), call)
    half_updated, unchanged, completed = [], 0, 0
    for k in _points(n_lines):
        model = copy.deepcopy(fitted)
        before = deep_state(model)
        with pytest.raises(Interrupted):
            run_traced(lambda model=model: call(model), k)
        after = deep_state(model)
        # As before the call (which then gives what it gives untouched), or,
        # on its very last lines, as after it.
        if after == before and _result(model, call) == expected:
            unchanged += 1
        elif after == done:
            completed += 1
        else:
            half_updated.append(k)
    print(f"{name}: {n_lines} lines, unchanged {unchanged}, completed "
          f"{completed}, half-updated {len(half_updated)}")
    assert half_updated == [], f"{name}: {len(half_updated)} of {n_lines} lines"
