"""Tests of the head's hot paths (issue 28): torch-free imports, the one-row
step, in-place and chunked maths, incremental buffer growth and the memory of
a full-covariance ``fit``. Speed itself lives in benchmarks/bench_head.py."""

import copy
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import sklearn_flowr.head._buffers as class_buffers
import sklearn_flowr.head._cross_fit as cross_fit
import sklearn_flowr.head._state as online_state
from sklearn_flowr import CRPGaussianClassifier
from sklearn_flowr._core import add_observations, log_density_coef
from sklearn_flowr.head._whitened import model_params


def _run_python(code):
    """Run ``code`` in a fresh interpreter; its stdout."""
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)],
                         capture_output=True, text=True, check=True)
    return out.stdout


def _data(rng, n_classes=6, d=5, per_class=4):
    centres = rng.normal(scale=4.0, size=(n_classes, d))
    y = np.repeat(np.arange(n_classes), per_class)
    return centres[y] + rng.normal(size=(y.shape[0], d)), y


def test_head_never_imports_torch():
    """Check that importing the package and fitting, updating and predicting
    with heads (isotropic and full) leave torch unimported."""
    out = _run_python("""
        import sys
        import numpy as np
        import sklearn_flowr
        from sklearn_flowr import CRPGaussianClassifier
        rng = np.random.default_rng(0)
        X, y = rng.normal(size=(40, 3)), np.repeat(np.arange(4), 10)
        for covariance in ("isotropic", "full"):
            clf = CRPGaussianClassifier(covariance=covariance).fit(X, y)
            clf.predict(X); clf.predict_proba(X[:1]); clf.predict_log_proba(X)
            clf.predict_joint_log_proba(X)
            clf.open_world_step(X[:1], y[:1]); clf.open_world_step(X, y + 2)
            clf.partial_fit(X[:5], y[:5])
        print("torch" in sys.modules)
    """)
    assert out.strip() == "False"


@pytest.mark.parametrize("params", [
    {},
    {"covariance": "full"},
    {"class_prior": "uniform"},
    {"novelty_calibration": (0.5, -1.0)},
])
def test_one_row_steps_equal_one_batch_step(rng, params):
    """Check that one-row steps (the fused path) give the batch step's
    outputs, log-odds included, and the same state, new classes included."""
    X, y = _data(rng)
    stream_X = rng.normal(scale=4.0, size=(30, X.shape[1]))
    stream_y = rng.integers(0, 9, size=30)  # classes 6, 7, 8 are new
    head = CRPGaussianClassifier(**params).fit(X, y)
    rows, batch = copy.deepcopy(head), copy.deepcopy(head)
    steps = [rows.open_world_step(stream_X[t : t + 1], stream_y[t : t + 1])
             for t in range(30)]
    whole = batch.open_world_step(stream_X, stream_y)
    for key in ("y_pred", "y_known", "is_novel"):
        np.testing.assert_array_equal(np.concatenate([s[key] for s in steps]),
                                      whole[key])
    for key in ("p_novel", "novelty_score"):
        np.testing.assert_allclose(np.concatenate([s[key] for s in steps]),
                                   whole[key], rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(rows.predict_joint_log_proba(X),
                               batch.predict_joint_log_proba(X), rtol=1e-11)


def test_one_row_step_far_from_every_class(rng):
    """Check P(novel) and its log-odds for a row far beyond every class: the
    probability rounds to 1, the log-odds stay finite and ordered."""
    X, y = _data(rng)
    head = CRPGaussianClassifier(covariance="isotropic").fit(X, y)
    near = copy.deepcopy(head).open_world_step(np.full((1, 5), 60.0), np.array([7]))
    far = copy.deepcopy(head).open_world_step(np.full((1, 5), 90.0), np.array([7]))
    assert near.p_novel[0] == far.p_novel[0] == 1.0
    assert 0 < near.novelty_score[0] < far.novelty_score[0] < 1e300


@pytest.mark.parametrize("shape", [(1, 7), (5, 7)])
def test_in_place_coefficients_equal_the_array_api_ones(rng, shape):
    """Check ``log_density_coef(out=...)`` (one class and a block, isotropic and
    diagonal) against the array-API formula."""
    nat_mean = rng.normal(size=shape)
    for precision in (rng.uniform(0.5, 2.0, size=(shape[0], 1)),
                      rng.uniform(0.5, 2.0, size=shape)):
        expected = log_density_coef(nat_mean, precision, 0.3)
        out = np.empty_like(expected)
        if shape[0] == 1:  # one class: 1-d arrays, as the online step has them
            log_density_coef(nat_mean[0], precision[0], 0.3, out=out[0])
        else:
            log_density_coef(nat_mean, precision, 0.3, out=out)
        np.testing.assert_allclose(out, expected, rtol=1e-14, atol=1e-14)


def test_in_place_update_equals_the_array_api_one(rng):
    """Check ``add_observations(out=...)`` (a block, and one isotropic class as
    the online step has it) against its array-API result."""
    Z = rng.normal(size=(4, 3))
    q, lam = rng.normal(size=(2, 3)), rng.uniform(size=(2, 1))
    for rows in (slice(0, 2), 0):
        expected = add_observations(q[rows], lam[rows], Z[rows], 1.0, 0.5)
        add_observations(q[rows], lam[rows], Z[rows], 1.0, 0.5,
                         out=(q[rows], lam[rows]))
        np.testing.assert_array_equal(q[rows], expected[0])
        np.testing.assert_array_equal(lam[rows], expected[1])


@pytest.mark.parametrize("covariance", ["isotropic", "full"])
def test_chunked_fit_equals_whole_fit(rng, monkeypatch, covariance):
    """Check that ``fit`` in chunks of a few rows and classes (learning and the
    coefficient refresh) gives the state of ``fit`` in one piece."""
    X, y = _data(rng, n_classes=9, d=4, per_class=5)
    whole = CRPGaussianClassifier(covariance=covariance).fit(X, y)
    monkeypatch.setattr(online_state, "_CHUNK_ELEMENTS", 12)
    chunked = CRPGaussianClassifier(covariance=covariance).fit(X, y)
    np.testing.assert_allclose(chunked.class_mean_, whole.class_mean_, rtol=1e-12)
    np.testing.assert_allclose(chunked.predict_joint_log_proba(X),
                               whole.predict_joint_log_proba(X), rtol=1e-12)


@pytest.fixture
def incremental_growth(monkeypatch):
    """Make even small buffers grow incrementally, a row per call."""
    monkeypatch.setattr(class_buffers, "_INCREMENTAL_ELEMENTS", 0)
    monkeypatch.setattr(class_buffers, "_ROWS_PER_CALL", 1)


def test_incremental_growth_keeps_the_state(rng, incremental_growth):
    """Check that buffers filled row by row while the stream updates copied
    rows (and takes over at capacity) give the same model as a batch step."""
    X, y = _data(rng, n_classes=5, d=3)
    head = CRPGaussianClassifier().fit(X, y)
    labels = np.r_[np.arange(5, 60), rng.integers(0, 60, size=80)]
    rows = rng.normal(scale=4.0, size=(labels.shape[0], 3))
    stepped, batch = copy.deepcopy(head), copy.deepcopy(head)
    moved = []
    for t in range(labels.shape[0]):
        stepped.open_world_step(rows[t : t + 1], labels[t : t + 1])
        moved.append(stepped._state._moved)
    batch.open_world_step(rows, labels)
    assert max(moved) > 0  # a growth went through the incremental path
    np.testing.assert_allclose(stepped.predict_joint_log_proba(rows),
                               batch.predict_joint_log_proba(rows), rtol=1e-11)
    np.testing.assert_array_equal(stepped.class_count_, batch.class_count_)


def test_interrupted_step_during_incremental_growth(rng, incremental_growth):
    """Check that a KeyboardInterrupt at any line of a step taken while the
    buffers grow incrementally leaves the head as it was."""
    X, y = _data(rng, n_classes=5, d=3)
    head = CRPGaussianClassifier().fit(X, y)
    for label in range(5, 12):  # into a growth under way
        head.open_world_step(rng.normal(size=(1, 3)), np.array([label]))
    assert head._state._next is not None
    queries = rng.normal(scale=4.0, size=(4, 3))
    step = (rng.normal(size=(1, 3)), np.array([3]))
    expected = copy.deepcopy(head)
    expected.open_world_step(*step)

    points = {"passed": 0, "target": -1}

    def trace(frame, event, arg):
        if "sklearn_flowr" in frame.f_code.co_filename:
            return local
        return None

    def local(frame, event, arg):
        if event == "line":
            points["passed"] += 1
            if points["passed"] == points["target"]:
                raise KeyboardInterrupt
        return local

    def interrupted_step(est, target):
        points.update(passed=0, target=target)
        sys.settrace(trace)
        try:
            est.open_world_step(*step)
        except KeyboardInterrupt:
            pass
        finally:
            sys.settrace(None)
        return points["passed"]

    n_lines = interrupted_step(copy.deepcopy(head), -1)
    assert n_lines > 20
    for target in range(1, n_lines + 1):
        est = copy.deepcopy(head)
        interrupted_step(est, target)
        if est.class_count_.sum() != head.class_count_.sum():
            continue  # interrupted on its way out, the step done
        np.testing.assert_array_equal(est.predict_joint_log_proba(queries),
                                      head.predict_joint_log_proba(queries))
        est.open_world_step(*step)  # and the step then runs as on a copy
        np.testing.assert_array_equal(est.predict_joint_log_proba(queries),
                                      expected.predict_joint_log_proba(queries))


@pytest.mark.parametrize(("row", "message"), [
    ([np.nan, 0.0], "Input X contains NaN"),
    ([np.inf, 0.0], "Input X contains infinity"),
    ([1e200, 0.0], "X holds values up to 1e\\+200"),
    ([0.0, 0.0, 0.0], "X has 3 features, but CRPGaussianClassifier is expecting 2"),
])
def test_one_row_fast_validation_keeps_messages(row, message):
    """Check the one-row checks raise scikit-learn's (or the package's)
    messages and change nothing."""
    head = CRPGaussianClassifier(covariance="isotropic").fit(
        [[0, 0], [0.2, 0], [4, 4], [4, 4.2]], [0, 0, 1, 1])
    before = head.predict_joint_log_proba(np.array([[1.0, 1.0]]))
    with pytest.raises(ValueError, match=message):
        head.open_world_step(np.array([row]), np.array([0]))
    with pytest.raises(ValueError, match=message):
        head.predict_proba(np.array([row]))
    np.testing.assert_array_equal(head.predict_joint_log_proba(np.array([[1.0, 1.0]])),
                                  before)


def test_calibration_reads_a_fold_and_its_held_rows_a_block_at_a_time(rng):
    """Check that fit's calibration scores held-out rows given by their
    indices without a copy of them or of the fold's rows (few classes, many
    rows and features: a block is bounded by both), to the scores of the
    copies."""
    import tracemalloc

    X = rng.normal(size=(20_000, 256))
    y = np.repeat([0, 1], 10_000)
    rows, held = np.arange(0, 20_000, 2), np.arange(1, 20_000, 2)
    params = model_params(CRPGaussianClassifier(covariance="isotropic"))
    tracemalloc.start()
    try:
        scores = cross_fit.held_log_odds(
            cross_fit.fold_state(X, y[rows], params, rows), X, held)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < X[held].nbytes / 2, peak  # a copy of either half: 20 MB
    np.testing.assert_allclose(
        scores, cross_fit.fold_log_odds(X[rows], y[rows], X[held], params),
        rtol=1e-12, atol=1e-9)


def test_full_covariance_fit_peaks_within_twice_its_state():
    """Check that ``fit`` of a full-covariance head allocates at most twice the
    size of the state it builds (tracemalloc, in a fresh interpreter): its
    pickle, which holds the scores' coefficients."""
    out = _run_python("""
        import pickle, tracemalloc
        import numpy as np
        from sklearn_flowr import CRPGaussianClassifier
        rng = np.random.default_rng(0)
        y = np.repeat(np.arange(2000), 2)
        X = rng.normal(scale=3.0, size=(2000, 256))[y] + rng.normal(size=(4000, 256))
        clf = CRPGaussianClassifier(covariance="full")
        tracemalloc.start()
        clf.fit(X, y)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        print(peak / len(pickle.dumps(clf)))
    """)
    assert float(out) <= 2.0
