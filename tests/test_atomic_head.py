"""All-or-nothing learning of the head and the baselines, by fault injection.

Each case interrupts one learning call (``open_world_step``, ``partial_fit``,
``fit``, ``fit_class_embeddings``, ``freeze_classes``) with a
KeyboardInterrupt at its k-th *interrupt point*, for every k until the call
completes. Two kinds of points:

- ``line``: the k-th line the package's own code executes (``sys.settrace``);
  a Ctrl-C is delivered between bytecodes, so this is where it can land;
- ``numpy``: the k-th NumPy call made by the package's modules (their ``np``
  replaced by a counting proxy).

After each interrupted call the estimator is compared with a snapshot taken
*before* the call (copies of ``classes_``, of every fitted array, of the
internal buffers, and of the predictions on fixed rows), and the same call,
repeated, must then give what it gives on an untouched copy.
"""

import copy
import sys
import types
from pathlib import Path

import numpy as np
import pytest

import sklearn_flowr
from sklearn_flowr import CRPGaussianClassifier
from sklearn_flowr.baselines import (
    EVMClassifier,
    FeCAMClassifier,
    KNNClassifier,
    MahalanobisPlusPlusClassifier,
    NCMClassifier,
    PEELERClassifier,
    ProtoNetClassifier,
    RanPACClassifier,
    SimpleShotClassifier,
)

PACKAGE_DIR = str(Path(sklearn_flowr.__file__).parent)
# Modules whose ``np`` the numpy points go through.
NUMPY_MODULES = [
    "sklearn_flowr.base", "sklearn_flowr.head._state", "sklearn_flowr.head._buffers",
    "sklearn_flowr._core._streaming", "sklearn_flowr.head._classifier",
    "sklearn_flowr.head._decision",
    "sklearn_flowr.baselines._base", "sklearn_flowr.baselines._prototypes",
    "sklearn_flowr.baselines._ncm", "sklearn_flowr.baselines._protonet",
    "sklearn_flowr.baselines._peeler", "sklearn_flowr.baselines._evm",
    "sklearn_flowr.baselines._weibull", "sklearn_flowr.baselines._simpleshot",
    "sklearn_flowr.baselines._mahalanobis", "sklearn_flowr.baselines._ranpac",
    "sklearn_flowr.baselines._knn", "sklearn_flowr.baselines._fecam",
]
# At most this many points per case: the first and last ones and an even
# spread in between (every point when there are fewer).
MAX_POINTS_PER_CASE = 120
MIN_TOTAL_POINTS = 1000


class Interrupt:
    """Raise KeyboardInterrupt at the k-th interrupt point (0: never); count
    the points passed."""

    def __init__(self, kind, k):
        self.kind, self.k, self.count = kind, k, 0

    def _tick(self):
        self.count += 1
        if self.count == self.k:
            raise KeyboardInterrupt(f"injected at {self.kind} point {self.k}")

    # --------------------------------------------------------------- lines
    def _global_trace(self, frame, event, arg):
        if frame.f_code.co_filename.startswith(PACKAGE_DIR):
            return self._local_trace
        return None

    def _local_trace(self, frame, event, arg):
        if event == "line":
            self._tick()
        return self._local_trace

    # --------------------------------------------------------------- numpy
    def _proxy(self):
        counter = self

        def counted(function):
            def call(*args, **kwargs):
                counter._tick()
                return function(*args, **kwargs)
            return call

        class UfuncProxy:
            def __init__(self, ufunc):
                self._ufunc = ufunc

            def __call__(self, *args, **kwargs):
                counter._tick()
                return self._ufunc(*args, **kwargs)

            def __getattr__(self, name):
                attr = getattr(self._ufunc, name)
                return counted(attr) if callable(attr) else attr

        class NumpyProxy(types.ModuleType):
            def __getattr__(self, name):
                attr = getattr(np, name)
                if isinstance(attr, np.ufunc):
                    return UfuncProxy(attr)
                if isinstance(attr, (types.FunctionType, types.BuiltinFunctionType)):
                    return counted(attr)
                return attr  # types, dtypes, constants, np.r_, submodules

        return NumpyProxy("numpy")

    def run(self, call, monkeypatch):
        """``call()`` under the injection; returns its result."""
        if self.kind == "line":
            sys.settrace(self._global_trace)
            try:
                return call()
            finally:
                sys.settrace(None)
        with monkeypatch.context() as patch:
            proxy = self._proxy()
            for name in NUMPY_MODULES:
                patch.setattr(f"{name}.np", proxy)
            return call()


# ------------------------------------------------------------------ snapshots
HEAD_ATTRIBUTES = ["class_count_", "crp_count_", "frozen_classes_", "class_mean_",
                   "class_var_", "prior_mean_", "prior_var_", "sigma_", "b_",
                   "n_features_in_", "novel_label_", "conformal_scores_"]
BASELINE_ATTRIBUTES = ["n_classes_", "class_count_", "class_mean_", "precision_",
                       "points_", "point_class_", "weibull_shape_",
                       "weibull_scale_", "n_features_in_", "novel_label_"]
INTERNALS = ["_sums", "_counts", "_points", "_point_class", "_tails", "_shape",
             "_scale", "precision_", "_rows", "_row_class", "_gram", "_grams",
             "projection_"]


def _copy(value):
    return np.array(value, copy=True) if not isinstance(value, dict) else dict(value)


def snapshot(est, rows):
    """Copies of everything observable about ``est`` (taken, not referenced)."""
    if not hasattr(est, "_registry"):
        return {"fitted": False, "keys": sorted(vars(est))}
    snap = {"fitted": True, "keys": sorted(vars(est)),
            "classes_": _copy(est.classes_),
            "registry_index": dict(est._registry._index),
            "n_labels": est._registry.n_labels}
    head = isinstance(est, CRPGaussianClassifier)
    for name in HEAD_ATTRIBUTES if head else BASELINE_ATTRIBUTES:
        if hasattr(est, name):
            snap[name] = _copy(getattr(est, name))
    if head:
        state = est._state
        n = state.n_classes
        snap["state"] = {
            "n_classes": n, "crp_total": state.crp_total,
            **{name: getattr(state, name)[: n + (name == "joint_coef")].copy()
               for name in state._BUFFERS},
        }
        snap["predict_proba"] = np.asarray(est.predict_proba(rows)).copy()
        snap["joint"] = est.predict_joint_log_proba(rows).copy()
    else:
        for name in INTERNALS:
            if name in vars(est):
                snap[name] = _copy(vars(est)[name])
        snap["novelty_score"] = est.novelty_score(rows).copy()
    snap["predict"] = est.predict(rows).copy()
    return snap


def assert_same(got, expected, where):
    assert type(got) is type(expected) or (
        isinstance(got, np.ndarray | np.generic | float | int)
        and isinstance(expected, np.ndarray | np.generic | float | int)), where
    if isinstance(expected, dict):
        assert sorted(got, key=repr) == sorted(expected, key=repr), where
        for key in expected:
            assert_same(got[key], expected[key], f"{where}.{key}")
    elif isinstance(expected, list):
        assert got == expected, where
    else:
        got, expected = np.asarray(got), np.asarray(expected)
        assert got.shape == expected.shape, where
        assert got.dtype == expected.dtype, where
        assert np.array_equal(got, expected,
                              equal_nan=expected.dtype.kind == "f"), where


def assert_result_equal(got, expected, where):
    if expected is None or not isinstance(expected, dict):
        return  # fit & co return the estimator itself
    assert sorted(got) == sorted(expected), where
    for key in expected:
        assert_same(np.asarray(got[key]), np.asarray(expected[key]),
                    f"{where}: result {key}")


# ---------------------------------------------------------------------- cases
def _data(seed=0, n_classes=5, d=4, per_class=6):
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=4.0, size=(n_classes, d))
    y = np.repeat(np.arange(n_classes), per_class)
    return centres[y] + rng.normal(size=(y.shape[0], d)), y, rng


X_FIT, Y_FIT, _RNG = _data()
ROWS = _RNG.normal(scale=4.0, size=(6, X_FIT.shape[1]))
# A step with known classes, three new ones, repeated labels.
STEP_X = _RNG.normal(scale=4.0, size=(9, X_FIT.shape[1]))
STEP_Y = np.array([1, 7, 7, 2, 8, 1, 9, 7, 3])
ONE_NEW = (STEP_X[:1], np.array([11]))
ONE_KNOWN = (STEP_X[1:2], np.array([2]))


def _fitted(make, *, full=False):
    return make().fit(X_FIT, Y_FIT)


ESTIMATORS = {
    # Given b and sigma: fit_class_embeddings needs them (no samples).
    "head": lambda: CRPGaussianClassifier(covariance="isotropic", b=1.0, sigma=0.5),
    "head_full": lambda: CRPGaussianClassifier(covariance="full"),
    "head_whitened": lambda: CRPGaussianClassifier(),
    "ncm": lambda: NCMClassifier(threshold=3.0),
    "protonet": lambda: ProtoNetClassifier(),
    "peeler": lambda: PEELERClassifier(),
    "evm": lambda: EVMClassifier(tail_size=3),
    "simpleshot": lambda: SimpleShotClassifier(),
    "mahalanobis++": lambda: MahalanobisPlusPlusClassifier(),
    "ranpac": lambda: RanPACClassifier(n_components=32, random_state=0),
    "knn": lambda: KNNClassifier(),
    "fecam": lambda: FeCAMClassifier(),
}


def _operations(name):
    ops = {
        "step_many": lambda est: est.open_world_step(STEP_X, STEP_Y),
        "step_one_new": lambda est: est.open_world_step(*ONE_NEW),
        "step_one_known": lambda est: est.open_world_step(*ONE_KNOWN),
        "partial_fit": lambda est: est.partial_fit(STEP_X, STEP_Y),
        "fit": lambda est: est.fit(STEP_X[:6] + 1.0, np.array([0, 0, 4, 4, 5, 5])),
    }
    if name.startswith("head"):
        ops["freeze"] = lambda est: est.freeze_classes()
    if name == "head":
        ops["fit_class_embeddings"] = lambda est: est.fit_class_embeddings(
            [20, 21], X_FIT[:2], [0.5, 0.7])
    return ops


CASES = [(name, op) for name in ESTIMATORS for op in _operations(name)]
# EVM's sweeps are the longest (a Weibull fit per step): CI's slow step runs
# them, the default run the other estimators'.
SWEEPS = [pytest.param(name, op, marks=pytest.mark.slow) if name == "evm"
          else (name, op) for name, op in CASES]


def _base(name):
    est = ESTIMATORS[name]().fit(X_FIT, Y_FIT)
    # One earlier step, so that a registry and buffers with spare room exist.
    est.open_world_step(ROWS[:2], np.array([0, 6]))
    return est


def _points(n):
    """The interrupt points tested among the ``n`` a call passes."""
    if n <= MAX_POINTS_PER_CASE:
        return list(range(1, n + 1))
    ends = list(range(1, 21)) + list(range(n - 19, n + 1))
    middle = np.linspace(21, n - 20, MAX_POINTS_PER_CASE - 40).round().astype(int)
    return sorted(set(ends) | set(middle.tolist()))


def _count_points(kind, call, est, monkeypatch):
    counter = Interrupt(kind, 0)
    counter.run(lambda: call(est), monkeypatch)
    return counter.count


def _sweep(name, op, kind, monkeypatch, base=None):
    """Interrupt ``op`` at each point; returns the number of points tested."""
    call = _operations(name)[op]
    base = _base(name) if base is None else base
    reference = copy.deepcopy(base)
    expected_result = call(reference)
    expected_after = snapshot(reference, ROWS)
    n_points = _count_points(kind, call, copy.deepcopy(base), monkeypatch)
    outcomes = {"unchanged": 0, "completed": 0}
    for k in _points(n_points):
        est = copy.deepcopy(base)
        before = snapshot(est, ROWS)  # copies, taken before the call
        with pytest.raises(KeyboardInterrupt, match="injected"):
            Interrupt(kind, k).run(lambda est=est: call(est), monkeypatch)
        where = f"{name}.{op} interrupted at {kind} point {k}/{n_points}"
        after = snapshot(est, ROWS)
        if _interrupted_after_commit(after, expected_after, before):
            outcomes["completed"] += 1
            continue
        assert_same(after, before, where)
        outcomes["unchanged"] += 1
        # The same call now gives what it gives on an untouched copy.
        assert_result_equal(call(est), expected_result, where)
        assert_same(snapshot(est, ROWS), expected_after, where + ", then repeated")
    return outcomes


def _interrupted_after_commit(after, expected_after, before):
    """The call had finished its change when interrupted (on its way out):
    the state is the completed one, which is not the one before."""
    try:
        assert_same(after, expected_after, "")
    except AssertionError:
        return False
    try:
        assert_same(after, before, "")
    except AssertionError:
        return True
    return False  # the call changes nothing observable (e.g. freeze twice)


# The NumPy-call points double the sweep's time: CI's slow step runs them.
@pytest.mark.parametrize("kind", ["line", pytest.param("numpy",
                                                       marks=pytest.mark.slow)])
@pytest.mark.parametrize(("name", "op"), SWEEPS)
def test_interrupted_call_leaves_estimator_unchanged(name, op, kind, monkeypatch):
    """Check that a KeyboardInterrupt at every point of a learning call leaves
    the estimator as the snapshot taken before the call."""
    outcomes = _sweep(name, op, kind, monkeypatch)
    assert outcomes["unchanged"] >= (5 if kind == "line" else 0)
    # Only the last lines, once the new state is in place, may see it: the
    # return of the public method and the exit of the guard.
    assert outcomes["completed"] <= 3, outcomes


@pytest.mark.parametrize("name", ["head", "ncm"])
def test_interrupted_large_step_in_chunks(name, monkeypatch):
    """Check a step cut in many chunks that grows the buffers half-way (the
    issue's 5,020 labels vs 5,015 means): every interrupt restores it."""
    import sklearn_flowr._core._streaming as streaming

    monkeypatch.setattr(streaming, "_CHUNK_ELEMENTS", 60)
    rng = np.random.default_rng(3)
    base = _base(name)
    step_x = rng.normal(scale=4.0, size=(24, X_FIT.shape[1]))
    step_y = np.r_[np.arange(100, 112), np.arange(100, 112)]

    def call(est):
        return est.open_world_step(step_x, step_y)

    reference = copy.deepcopy(base)
    expected = call(reference)
    expected_after = snapshot(reference, ROWS)
    n_points = _count_points("line", call, copy.deepcopy(base), monkeypatch)
    assert n_points > 1000  # many chunks
    completed = 0
    for k in _points(n_points):
        est = copy.deepcopy(base)
        before = snapshot(est, ROWS)
        with pytest.raises(KeyboardInterrupt):
            Interrupt("line", k).run(lambda est=est: call(est), monkeypatch)
        after = snapshot(est, ROWS)
        if _interrupted_after_commit(after, expected_after, before):
            completed += 1
            continue
        assert_same(after, before, f"{name} point {k}")
        assert len(est.classes_) == len(before["classes_"])
    assert completed <= 3
    est = copy.deepcopy(base)
    assert_result_equal(call(est), expected, name)


def test_first_step_of_unfitted_head_is_all_or_nothing(monkeypatch):
    """Check that an interrupted first ``open_world_step`` leaves the head
    unfitted, with no attribute added."""
    def make():
        return CRPGaussianClassifier(covariance="isotropic", prior_mean=0.0,
                                     prior_var=10.0, b=1.0, sigma=0.5)
    call = _operations("head")["step_many"]
    n_points = _count_points("line", call, make(), monkeypatch)
    assert n_points > 50
    completed = 0
    for k in _points(n_points):
        est = make()
        keys = sorted(vars(est))
        with pytest.raises(KeyboardInterrupt):
            Interrupt("line", k).run(lambda est=est: call(est), monkeypatch)
        if hasattr(est, "_registry"):  # interrupted on its way out
            assert len(est.classes_) == len(np.unique(STEP_Y))
            assert est._state.n_classes == len(est.classes_)
            completed += 1
            continue
        assert sorted(vars(est)) == keys
    assert completed <= 3


def test_at_least_a_thousand_interrupt_points(monkeypatch):
    """Check the number of interrupt points the sweeps above test."""
    total = 0
    for name, op in CASES:
        base = _base(name)
        for kind in ("line", "numpy"):
            n = _count_points(kind, _operations(name)[op], copy.deepcopy(base),
                              monkeypatch)
            total += len(_points(n))
    print(f"interrupt points tested: {total}")
    assert total >= MIN_TOTAL_POINTS, total


def test_the_sweep_catches_a_step_that_is_not_atomic(monkeypatch):
    """Check that the sweep fails on the bug of the issue: learning outside
    the guard (the registry registers a label before an interrupt)."""
    from sklearn_flowr.base import LabelRegistry

    monkeypatch.setattr(LabelRegistry, "checkpoint",
                        lambda self: (lambda: None))
    # The torn state is caught by the comparison, or is so torn that the
    # snapshot's own predictions refuse it.
    with pytest.raises((AssertionError, ValueError)):
        _sweep("ncm", "step_one_new", "line", monkeypatch)
    with pytest.raises((AssertionError, ValueError)):
        _sweep("head", "step_one_new", "numpy", monkeypatch)
