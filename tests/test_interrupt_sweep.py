"""A KeyboardInterrupt at every line the package runs during one of the
head's calls leaves the head unchanged or fully updated.

For each call -- the mixed labelled/unlabelled ``open_world_step`` (good and
bad input), ``partial_fit`` with bad labels, the unlabelled step,
``correct``, ``merge``, ``forget_classes``, ``save``/``load``, ``pickle`` and
``copy.deepcopy``
-- a first run lists the line events inside
``sklearn_flowr``; then the call is repeated on fresh copies with a
KeyboardInterrupt raised at the k-th of them (``sys.settrace``), for every
distinct line and an even spread of the others. Each outcome is compared with
a deep snapshot of everything the call may touch (every array, byte for byte)
taken before it and with that of a reference run that completed, and the head
must then learn as the matching reference does. Outcomes:

- rejected cleanly: the interrupt (or, for bad input, the ValueError) came
  out and the state is the one before, or the one the call completes;
- silent: the call returned although it was interrupted;
- corrupting: any other state, or later learning that differs;
- crash: any other exception.
"""

import copy
import pickle
import sys
from pathlib import Path

import numpy as np
import pytest

import sklearn_flowr
from sklearn_flowr import CRPGaussianClassifier
from sklearn_flowr.head import _buffers

PACKAGE_DIR = str(Path(sklearn_flowr.__file__).parent)
# Interrupts per call besides the first event of each distinct line.
SPREAD = 40
PARAMS = dict(covariance="isotropic", b=1.0, sigma=0.5, prior_mean=4.0,
              prior_var=30.0, unlabelled_threshold=0.0)
RNG = np.random.default_rng(0)
CENTRES = np.array([[0.0, 0.0], [9.0, 9.0], [-9.0, 9.0]])
X_FIT = np.repeat(CENTRES, 3, axis=0) + RNG.normal(scale=0.3, size=(9, 2))
Y_FIT = np.repeat([0, 1, 2], 3)
NEW_ROWS = np.array([[40.0, -40.0], [40.2, -40.0], [0.1, 0.2], [9.1, 9.2]])
MIXED_X = np.array([[0.2, 0.1], [-60.0, -60.0], [-60.1, -60.0], [20.0, -20.0],
                    [9.2, 8.9], [-60.2, -60.1]])
MIXED_LABELLED = np.array([True, False, False, True, False, True])
MIXED_Y = np.array([0, 0, 0, 5, 0, 6])
MIXED_BAD_Y = np.array([0, 0, 0, 5, 0, -1])  # the novel label, last run


class Interrupt:
    """Raise KeyboardInterrupt at the k-th line event inside the package (0:
    never); ``lines`` lists the events passed."""

    def __init__(self, k=0):
        self.k, self.lines = k, []

    def _global(self, frame, event, arg):
        return self._local if frame.f_code.co_filename.startswith(PACKAGE_DIR) else None

    def _local(self, frame, event, arg):
        if event == "line":
            self.lines.append((frame.f_code.co_filename, frame.f_lineno))
            if len(self.lines) == self.k:
                raise KeyboardInterrupt("injected")
        return self._local

    def run(self, call):
        previous = sys.gettrace()
        sys.settrace(self._global)
        try:
            return call()
        finally:
            sys.settrace(previous)


def deep_state(value):
    """Everything a value holds, comparable with ``==`` (arrays by bytes)."""
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            return ("array", value.shape, deep_state(value.tolist()))
        return ("array", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, np.generic):
        return ("scalar", value.dtype.str, value.tobytes())
    if isinstance(value, dict):
        return ("dict", sorted((repr(k), deep_state(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return (type(value).__name__, [deep_state(v) for v in value])
    if isinstance(value, float):
        return ("float", repr(value))
    if value is None or isinstance(value, int | str | bytes | bool | Path):
        return value
    if hasattr(value, "_BUFFERS"):  # the head's per-class state: used rows
        # (read here, not through __getstate__, which must not be trusted
        # to leave the live object alone)
        held = dict(vars(value))
        for name in value._BUFFERS:
            held[name] = held[name][: value.n_classes + (name == "joint_coef")]
        held.pop("_next", None)
        held.pop("_moved", None)
        return (type(value).__name__, deep_state(held))
    return (type(value).__name__, deep_state(value.__getstate__()))


def _base():
    head = CRPGaussianClassifier(**PARAMS).fit(X_FIT, Y_FIT)
    head.partial_fit(np.array([[30.0, 0.0]]), [3])  # 4 of 4 classes: grown to 8
    head.open_world_step(NEW_ROWS)  # a provisional class, rows into 0 and 1
    head.partial_fit(np.array([[0.0, 30.0]]), [4])  # 6 of 8: a growth under way
    assert head._state._next is not None
    return head


def _corrected(head):
    return head.correct(NEW_ROWS[:3], [-2, -2, 0], [7, 7, 1])


def _follow(head):
    """Learning after the call: new classes (the next buffers take over), a
    mixed step, predictions."""
    rows = np.arange(20.0).reshape(10, 2) * 3 - 70
    head.partial_fit(rows[:1], [100])  # one class: within the buffers' room
    head.partial_fit(rows[1:], np.arange(101, 110))
    out = head.open_world_step(rows[:4] + 0.1, [100, 0, 0, 200],
                               labelled=[True, False, False, True])
    return deep_state(head), deep_state(dict(out)), deep_state(
        head.predict_joint_log_proba(rows))


def _save_load_cases(tmp):
    saved = tmp / "saved.skops"
    sklearn_flowr.save(_base(), saved)

    def save(subject):
        head, path = subject
        sklearn_flowr.save(head, path)

    def save_state(subject):
        head, path = subject
        written = (deep_state(sklearn_flowr.load(path)) if path.exists()
                   else "absent")
        return deep_state(head), written, sorted(p.name for p in path.parent.iterdir()
                                                 if p.name.startswith(".saved"))
    return {
        "save": (lambda: (_base(), tmp / f"out{RNG.integers(1 << 40)}.skops"), save,
                 save_state, lambda subject: subject[0]),
        "load": (lambda: saved, sklearn_flowr.load,
                 lambda path: path.read_bytes(), None),
    }


def _cases(tmp):
    cases = {
        "mixed_step": (_base, lambda head: head.open_world_step(
            MIXED_X, MIXED_Y, labelled=MIXED_LABELLED), deep_state, lambda h: h),
        "mixed_step_bad_input": (_base, lambda head: head.open_world_step(
            MIXED_X, MIXED_BAD_Y, labelled=MIXED_LABELLED), deep_state, lambda h: h),
        "partial_fit_bad_input": (_base, lambda head: head.partial_fit(
            MIXED_X[:2], ["a", "b"]), deep_state, lambda h: h),
        "unlabelled_step": (_base, lambda head: head.open_world_step(MIXED_X),
                            deep_state, lambda h: h),
        "correct": (_base, _corrected, deep_state, lambda h: h),
        "merge": (lambda: (_corrected(_base()), CRPGaussianClassifier(**PARAMS).fit(
            X_FIT + 0.5, Y_FIT + 1)), lambda pair: pair[0].merge(pair[1]),
            deep_state, lambda pair: pair[0]),
        "pickle": (_base, pickle.dumps, deep_state, lambda h: h),
        "unpickle": (lambda: pickle.dumps(_base()), pickle.loads, deep_state, None),
        "deepcopy": (_base, copy.deepcopy, deep_state, lambda h: h),
        "forget_classes": (_base, lambda head: head.forget_classes(), deep_state,
                           lambda h: h),
    }
    cases.update(_save_load_cases(tmp))
    return cases


def _interrupt_points(lines):
    """The first event of each distinct line and an even spread of the rest."""
    first = {}
    for k, line in enumerate(lines, start=1):
        first.setdefault(line, k)
    spread = np.linspace(1, len(lines), min(SPREAD, len(lines))).round()
    return sorted(set(first.values()) | set(spread.astype(int).tolist()))


def sweep(make, call, state, learner):
    """Counts of outcomes of ``call`` interrupted at every point."""
    recorder = Interrupt()
    reference = make()
    before = state(reference)
    try:
        recorder.run(lambda: call(reference))
        error = None
    except ValueError as exc:  # bad input: refused, state unchanged
        error = type(exc)
    completed = state(reference)
    if error is not None:
        assert completed == before
    if learner is not None:  # how each of the two states goes on learning
        goes_on = [(before, _follow(learner(make()))),
                   (completed, _follow(learner(reference)))]
    counts = dict(rejected_cleanly=0, silent=0, corrupting=0, crash=0)
    points = _interrupt_points(recorder.lines)
    for k in points:
        subject = make()
        try:
            Interrupt(k).run(lambda subject=subject: call(subject))
        except KeyboardInterrupt:
            pass
        except BaseException as exc:  # noqa: BLE001 (the sweep counts crashes)
            if error is None or not isinstance(exc, error):
                counts["crash"] += 1
                continue
        else:
            counts["silent"] += 1
            continue
        after = state(subject)
        if after not in (before, completed):
            counts["corrupting"] += 1
            continue
        if learner is not None:
            try:
                expected = next(then for now, then in goes_on if now == after)
                same = _follow(learner(subject)) == expected
            except Exception:  # noqa: BLE001
                same = False
            if not same:
                counts["corrupting"] += 1
                continue
        counts["rejected_cleanly"] += 1
    return counts, len(recorder.lines), len(points)


@pytest.fixture
def incremental_growth(monkeypatch):
    """Buffers grow incrementally however small (the growth under way is
    what saving used to cut short)."""
    monkeypatch.setattr(_buffers, "_INCREMENTAL_ELEMENTS", 0)


CASE_NAMES = ["mixed_step", "mixed_step_bad_input", "partial_fit_bad_input",
              "unlabelled_step", "correct", "merge", "pickle", "unpickle",
              "deepcopy", "save", "load", "forget_classes"]


@pytest.mark.parametrize("name", CASE_NAMES)
def test_interrupt_at_every_line_leaves_the_head_whole(name, tmp_path,
                                                       incremental_growth):
    """Check that no interrupt point leaves a half-updated head, swallows the
    interrupt or raises something else."""
    counts, n_events, n_points = sweep(*_cases(tmp_path)[name])
    print(f"{name}: {n_events} line events, {n_points} interrupted: {counts}")
    assert n_points > 10
    assert counts["rejected_cleanly"] == n_points, counts
