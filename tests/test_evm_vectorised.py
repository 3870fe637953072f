"""EVM's vectorised stream against the per-row, per-point loop it replaces.

``EVMClassifier.open_world_step`` learns a chunk of rows at once: it finds
every (point, step) at which a point's tail changes and fits all those tails
in one :func:`~sklearn_flowr.baselines._weibull.fit_weibull` call. The oracle
here is the former implementation written out from scratch: for each row,
score it with the current Weibulls, then learn it, recompute every tail by
brute force and refit each changed one on its own (``_reference_stream``).

Tolerances. The oracle computes each distance one pair at a time
(``scipy.spatial.distance.cdist``) where the estimator takes a matrix
product: distances (at most 2) differ by rounding, ~1e-16. The Newton solve
of the Weibull shape stops at a relative step of 1e-14, and the fit's
sensitivity to its samples amplifies the distances' rounding: measured
differences of the parameters stay below ~2e-13 relative, so
``PARAMETER_RTOL = 1e-9`` leaves about four orders of magnitude of head-room while
any logical difference (a wrong tail, a missed refit) moves a parameter by
far more. Inclusion probabilities are smooth in the parameters and the
distances, hence ``SCORE_ATOL = 1e-9`` (measured: ~3e-14). A label could only
differ where two classes' scores (or a score and the threshold) tie within
that, so labels must agree on at least ``MIN_LABEL_AGREEMENT`` of the rows
(all of them in every case here). Margins of near-duplicate rows are the
exception, with a tolerance of their own (see
``test_tiny_and_huge_margins_match_the_row_loop``).
"""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy import optimize, stats
from scipy.spatial.distance import cdist
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA

from sklearn_flowr.baselines import EVMClassifier, _evm
from sklearn_flowr.baselines._weibull import fit_weibull

PARAMETER_RTOL = 1e-9
SCORE_ATOL = 1e-9
MIN_LABEL_AGREEMENT = 0.995


# ------------------------------------------------------------------- oracle
def _tails(units, point_class, k):
    """Each point's ``k`` smallest margins to the other classes, by brute force."""
    n = units.shape[0]
    if n == 0:
        return np.zeros((0, k))
    with np.errstate(invalid="ignore"):
        distance = np.nan_to_num(cdist(units, units, "cosine"), nan=1.0)
    margin = np.maximum(np.clip(distance, 0.0, 2.0) / 2.0, 1e-12)
    margin[point_class[:, None] == point_class[None, :]] = np.inf
    padded = np.hstack([margin, np.full((n, k), np.inf)])
    return np.sort(padded, axis=1)[:, :k]


def _unit(X):
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    return X / np.where(norms > 0, norms, 1.0)


def _reference_stream(X_fit, y_fit, X, y, k, threshold=0.5):
    """The former per-row loop, one Weibull fit per changed point.

    Returns the labels, novelty scores and best known labels of the stream,
    the final Weibull shapes and scales, and the number of fits the stream
    made.
    """
    units = _unit(np.asarray(X_fit, dtype=float))
    point_class = np.asarray(y_fit)
    tails = _tails(units, point_class, k)
    params = [fit_weibull(tail[None]) for tail in tails]
    y_pred, score, y_known = [], [], []
    n_fits = 0
    for x, label in zip(_unit(X), y, strict=True):
        if units.shape[0] == 0:
            best_score, known = 0.0, None
        else:
            with np.errstate(invalid="ignore"):
                distance = np.nan_to_num(cdist(x[None], units, "cosine")[0], nan=1.0)
            distance = np.clip(distance, 0.0, 2.0)
            with np.errstate(over="ignore"):
                psi = np.array([np.exp(-((d / scale[0]) ** shape[0]))
                                for d, (shape, scale) in zip(distance, params,
                                                             strict=True)])
            classes = np.unique(point_class)
            class_score = [psi[point_class == c].max() for c in classes]
            best = int(np.argmax(class_score))
            best_score = class_score[best]
            known = (classes[best] if best_score > 0
                     else point_class[np.argmin(distance)])
        score.append(1.0 - best_score)
        y_known.append(known)
        y_pred.append(-1 if known is None or 1.0 - best_score >= threshold
                      else known)
        units = np.vstack([units, x])
        point_class = np.r_[point_class, label]
        new_tails = _tails(units, point_class, k)
        params = [params[i] if np.array_equal(new_tails[i], tails[i])
                  else fit_weibull(new_tails[i][None])  # one point at a time
                  for i in range(tails.shape[0])]
        params.append(fit_weibull(new_tails[-1][None]))
        n_fits += 1 + int(np.sum(np.any(new_tails[:-1] != tails, axis=1)))
        tails = new_tails
    shape = np.array([p[0][0] for p in params])
    scale = np.array([p[1][0] for p in params])
    return np.array(y_pred), np.array(score), y_known, shape, scale, n_fits


def assert_matches_reference(X_fit, y_fit, X, y, k=10, *, rtol=PARAMETER_RTOL,
                             atol=SCORE_ATOL):
    """The vectorised stream gives the oracle's labels, scores and Weibulls."""
    evm = EVMClassifier(tail_size=k)
    if len(y_fit):
        evm.fit(X_fit, y_fit)
    out = evm.open_world_step(X, y)
    y_pred, score, y_known, shape, scale, _ = _reference_stream(X_fit, y_fit, X,
                                                                y, k)
    assert np.mean(out.y_pred == y_pred) >= MIN_LABEL_AGREEMENT
    has_known = np.array([known is not None for known in y_known])
    assert_array_equal(out.y_known[has_known], np.array(y_known)[has_known])
    assert_allclose(out.p_novel, score, rtol=0, atol=atol)
    assert_array_equal(np.isinf(evm.weibull_shape_), np.isinf(shape))
    assert_allclose(evm.weibull_shape_, shape, rtol=rtol)
    assert_allclose(evm.weibull_scale_, scale, rtol=rtol)
    return evm, out


# --------------------------------------------------------------------- data
@pytest.fixture(scope="module")
def digits_stream():
    """Digits, PCA to 16-d: classes 0-4 known (8 rows each), then a stream of
    60 rows of all ten classes, shuffled."""
    X, y = load_digits(return_X_y=True)
    rng = np.random.default_rng(0)
    fit_rows = np.concatenate([rng.choice(np.flatnonzero(y == c), 8, replace=False)
                               for c in range(5)])
    rest = np.setdiff1d(np.arange(y.shape[0]), fit_rows)
    stream = rng.choice(rest, 60, replace=False)
    Z = PCA(16, random_state=0).fit(X[fit_rows]).transform(X)
    return Z[fit_rows], y[fit_rows], Z[stream], y[stream]


def _blobs(rng, n_classes=8, d=16, per_class=12, noise=0.8):
    centres = rng.normal(scale=2.0, size=(n_classes, d))
    y = np.repeat(np.arange(n_classes), per_class)
    order = rng.permutation(y.shape[0])
    return centres[y[order]] + rng.normal(scale=noise, size=(y.shape[0], d)), y[order]


# ------------------------------------------------- (a) Weibull parameters
def _tight(func, x0, args=(), disp=0):
    """scipy's default optimizer for ``fit``, run to convergence."""
    return optimize.fmin(func, x0, args=args, xtol=1e-10, ftol=1e-13, disp=0,
                         maxiter=20_000, maxfun=40_000)


def test_weibulls_after_a_stream_match_scipy_per_point(rng):
    """Check every point's Weibull after a vectorised stream against
    ``scipy.stats.weibull_min.fit(floc=0)`` on its brute-force tail.

    rtol 1e-6: scipy's Nelder-Mead stops at ``xtol=1e-10`` on a likelihood
    that is flat to second order at its maximum (as in test_baselines)."""
    X, y = _blobs(rng, n_classes=4, per_class=8)
    evm = EVMClassifier(tail_size=5).fit(X[:8], y[:8])
    evm.open_world_step(X[8:], y[8:])
    tails = _tails(_unit(X), y, 5)
    assert_allclose(evm._tails, tails, rtol=1e-12)
    for point, tail in enumerate(tails):
        shape, _, scale = stats.weibull_min.fit(tail, floc=0, optimizer=_tight)
        assert_allclose(evm.weibull_shape_[point], shape, rtol=1e-6)
        assert_allclose(evm.weibull_scale_[point], scale, rtol=1e-6)


def test_weibulls_after_a_stream_match_the_row_loop(rng):
    """Check the Weibulls after a stream against the per-point loop."""
    X, y = _blobs(rng)
    assert_matches_reference(X[:20], y[:20], X[20:], y[20:])


# ----------------------------------------------------------- (b) predictions
def test_digits_stream_matches_the_row_loop(digits_stream):
    """Check labels, novelty scores and Weibulls on a digits PCA stream."""
    evm, out = assert_matches_reference(*digits_stream)
    assert out.is_novel.sum() == 5  # classes 5-9 arrive in the stream


@pytest.mark.parametrize("k", [1, 3, 10])
def test_blob_stream_matches_the_row_loop(k, rng):
    """Check a stream with new classes against the loop for several tail sizes."""
    X, y = _blobs(rng)
    assert_matches_reference(X[:24], y[:24], X[24:], y[24:], k=k)


def test_stream_refits_exactly_the_changed_tails(rng, monkeypatch):
    """Check that the stream fits as many tails as the loop refits: every
    change of a tail, every new row, and no unchanged tail."""
    X, y = _blobs(rng)
    n_fitted = []

    def counted(samples):
        n_fitted.append(samples.shape[0])
        return fit_weibull(samples)

    evm = EVMClassifier(tail_size=4).fit(X[:24], y[:24])
    monkeypatch.setattr(_evm, "fit_weibull", counted)
    evm.open_world_step(X[24:], y[24:])
    n_fits = _reference_stream(X[:24], y[:24], X[24:], y[24:], 4)[-1]
    assert len(n_fitted) == 1
    assert n_fitted[0] == n_fits


def test_stream_from_scratch_matches_the_row_loop(rng):
    """Check a stream on an unfitted estimator (first tails all ``inf``)."""
    X, y = _blobs(rng, n_classes=5, per_class=6)
    _, out = assert_matches_reference(X[:0], y[:0], X, y, k=4)
    assert out.p_novel[0] == 1.0


def test_predictions_after_the_stream_match_the_row_loop(digits_stream, rng):
    """Check predict and novelty_score after a stream against a model learned
    one row at a time with partial_fit (the batch path)."""
    X_fit, y_fit, X, y = digits_stream
    streamed = EVMClassifier().fit(X_fit, y_fit)
    streamed.open_world_step(X, y)
    looped = EVMClassifier().fit(X_fit, y_fit)
    for row in range(X.shape[0]):
        looped.partial_fit(X[row : row + 1], y[row : row + 1])
    queries = rng.normal(size=(50, X.shape[1])) * X.std(axis=0) + X.mean(axis=0)
    queries = np.vstack([queries, X_fit, X])
    assert np.mean(streamed.predict(queries) == looped.predict(queries)) >= (
        MIN_LABEL_AGREEMENT)
    assert_allclose(streamed.novelty_score(queries), looped.novelty_score(queries),
                    rtol=0, atol=SCORE_ATOL)


@pytest.mark.parametrize("elements", [200, 3_000])
def test_chunked_stream_equals_whole(elements, digits_stream, monkeypatch):
    """Check that a stream cut into chunks of a few rows gives the same
    results (the chunks follow ``_CHUNK_ELEMENTS``)."""
    X_fit, y_fit, X, y = digits_stream
    whole_model = EVMClassifier().fit(X_fit, y_fit)
    whole = whole_model.open_world_step(X, y)
    monkeypatch.setattr(_evm, "_CHUNK_ELEMENTS", elements)
    chunked_model = EVMClassifier().fit(X_fit, y_fit)
    assert chunked_model._chunk_rows() < X.shape[0]
    chunked = chunked_model.open_world_step(X, y)
    assert_array_equal(chunked.y_pred, whole.y_pred)
    assert_allclose(chunked.p_novel, whole.p_novel, rtol=0, atol=SCORE_ATOL)
    assert_allclose(chunked_model._tails, whole_model._tails, rtol=1e-12)
    assert_allclose(chunked_model.weibull_shape_, whole_model.weibull_shape_,
                    rtol=PARAMETER_RTOL)


# ------------------------------------------------------------ (c) edge cases
def test_single_row_classes_match_the_row_loop(rng):
    """Check classes of one row, in fit and arriving in the stream (their
    points' tails start empty or with a step)."""
    X = rng.normal(size=(9, 6))
    assert_matches_reference(X[:2], [0, 1], X[2:], np.array([2, 0, 3, 3, 4, 1, 5]),
                             k=3)


def test_tied_distances_match_the_row_loop():
    """Check exactly tied margins (axis rows: all cosines 0 or -1, so tails
    of equal margins and step Weibulls) and duplicated rows across classes
    (margins at the 1e-12 floor)."""
    eye = np.eye(4)
    X_fit = np.vstack([eye, -eye])
    y_fit = np.array([0, 1, 2, 3, 0, 1, 2, 3])
    X = np.vstack([eye[[0, 1]], -eye[[2]], eye[[3]], eye[[0]] * 3.0,
                   [[1.0, 1.0, 0.0, 0.0]]])
    y = np.array([1, 0, 4, 3, 2, 4])
    evm, _ = assert_matches_reference(X_fit, y_fit, X, y, k=3)
    assert np.isinf(evm.weibull_shape_).any()
    assert np.any(evm._tails == 1e-12)


@pytest.mark.parametrize("factor", [1e-100, 1e95])
def test_rescaled_rows_give_the_same_stream(factor, digits_stream):
    """Check that rows scaled by a huge or tiny factor stream exactly alike
    (cosine margins do not depend on the rows' scale)."""
    X_fit, y_fit, X, y = digits_stream
    ref = EVMClassifier().fit(X_fit, y_fit).open_world_step(X, y)
    scaled = EVMClassifier().fit(X_fit * factor, y_fit).open_world_step(X * factor, y)
    assert_array_equal(scaled.y_pred, ref.y_pred)
    assert_allclose(scaled.p_novel, ref.p_novel, rtol=1e-12, atol=1e-14)


def test_tiny_and_huge_margins_match_the_row_loop(rng):
    """Check Weibulls on margins spanning ten orders of magnitude:
    near-duplicate rows across classes (margins ~1e-11) next to far ones.

    A margin ``m = (1 - u.v) / 2`` carries a rounding error of ~1e-16 in any
    implementation (the old loop's one-row products differ from the chunk's
    matrix product by that much), i.e. ~1e-16 / m relative, and the Weibulls
    fitted to such tails inherit it: the tolerance is ten times that."""
    base = rng.normal(size=(3, 8))
    X = np.vstack([base, base + 1e-5 * rng.normal(size=(3, 8)), -base,
                   rng.normal(size=(4, 8))])
    y = np.array([0, 1, 2, 1, 2, 0, 2, 0, 1, 3, 3, 4, 0])
    smallest = _tails(_unit(X), y, 4).min()
    assert smallest < 1e-10
    tolerance = 1e-15 / smallest
    assert_matches_reference(X[:3], y[:3], X[3:], y[3:], k=4, rtol=tolerance,
                             atol=tolerance)


@pytest.mark.parametrize("spread", [0.05, 1.0, 20.0])
def test_pruned_inclusion_decides_as_the_full_matrix(spread, rng):
    """Only the exponentials that can be a row's largest are taken
    (``_evm._leading_inclusion``); the decision -- best class, novelty
    score -- is the full matrix's to the bit, with steps (shape inf),
    everything-including points (scale inf), rows no point reaches and
    points a row may not use."""
    n_rows, n_points = 40, 300
    distance = rng.uniform(0.0, 2.0, size=(n_rows, n_points))
    shape = rng.uniform(0.5, 12.0, size=n_points)
    scale = spread * rng.uniform(0.01, 0.2, size=n_points)
    shape[:5], scale[5:8] = np.inf, np.inf
    distance[0, 0] = scale[0]  # exactly on a step
    distance[1:4] *= 1e3       # rows far from every point
    point_class = rng.integers(0, 12, size=n_points)
    exists = rng.random((n_rows, n_points)) < 0.8
    exists[4] = False
    for allowed in (None, exists):
        full = _evm.weibull_inclusion(distance, shape, scale)
        far = distance
        if allowed is not None:
            full = np.where(allowed, full, 0.0)
            far = np.where(allowed, distance, np.inf)
        pruned = _evm._leading_inclusion(distance, shape, scale, allowed)
        expected = _evm._decide(far, full, point_class)
        got = _evm._decide(far, pruned, point_class)
        assert_array_equal(got[0], expected[0])
        assert_array_equal(got[1], expected[1])
        # Pruning happened wherever a point reaches the row.
        assert (pruned == 0).sum() > (full == 0).sum() or spread == 20.0


def test_pruned_inclusion_with_weibulls_changing_by_row(rng):
    """Check the Weibulls in force per row (``in_force``: the points that
    change within a chunk) decide as the full matrix of those Weibulls."""
    n_rows, n_points, n_extra = 30, 200, 40
    distance = rng.uniform(0.0, 2.0, size=(n_rows, n_points))
    distance[::3] *= 50.0  # rows that no point reaches
    shape = rng.uniform(0.5, 12.0, size=n_points + n_extra)
    scale = rng.uniform(0.01, 0.3, size=n_points + n_extra)
    shape[n_points] = np.inf
    moved = np.sort(rng.choice(n_points, size=25, replace=False))
    weibull = np.where(rng.random((n_rows, moved.shape[0])) < 0.5, moved,
                       rng.integers(n_points, n_points + n_extra,
                                    size=(n_rows, moved.shape[0])))
    which = np.tile(np.arange(n_points), (n_rows, 1))
    which[:, moved] = weibull
    point_class = rng.integers(0, 9, size=n_points)
    exists = rng.random((n_rows, n_points)) < 0.9
    full = np.where(exists, _evm.weibull_inclusion(distance, shape[which],
                                                   scale[which]), 0.0)
    far = np.where(exists, distance, np.inf)
    pruned = _evm._leading_inclusion(distance, shape, scale, exists,
                                     (moved, weibull))
    expected, got = _evm._decide(far, full, point_class), _evm._decide(far, pruned,
                                                                    point_class)
    assert_array_equal(got[0], expected[0])
    assert_array_equal(got[1], expected[1])
    assert (pruned == 0).sum() > (full == 0).sum()


def test_inclusion_is_exactly_zero_beyond_the_reach(rng):
    """Check ``Psi`` is exactly 0 at and beyond ``scale * 750^(1/shape)`` (what
    lets far rows skip those points), steps and tiny shapes included."""
    shape = np.r_[rng.uniform(0.3, 50.0, size=2000), np.inf, 1e-3]
    scale = np.r_[rng.uniform(1e-6, 2.0, size=2000), 0.5, 0.5]
    with np.errstate(divide="ignore", over="ignore"):
        reach = scale * _evm._PSI_ZERO ** (1.0 / shape)
    beyond = reach * np.array([[1.0], [1.0 + 1e-12], [3.0]])
    psi = _evm.weibull_inclusion(np.where(np.isfinite(beyond), beyond, 2.0),
                                 shape, scale)
    finite = np.isfinite(reach) & (shape < np.inf)
    assert (psi[:, finite] == 0.0).all()
    assert psi[0, -2] == np.exp(-1.0)  # a step's edge stays within reach


@pytest.mark.parametrize("elements", [50, 4_000_000])
def test_margins_held_counts_earlier_and_tail_margins(elements, rng, monkeypatch):
    """Check ``_margins_held`` against a loop, in one block and in many."""
    monkeypatch.setattr(_evm, "_CHUNK_ELEMENTS", elements)
    value = rng.integers(0, 6, size=(12, 7)).astype(float)
    value[rng.random(value.shape) < 0.3] = np.inf
    tails = np.sort(rng.integers(0, 6, size=(12, 3)).astype(float), axis=1)
    expected = np.array([[np.sum(value[p, :i] <= value[p, i])
                          + np.sum(tails[p] <= value[p, i])
                          for i in range(value.shape[1])]
                         for p in range(value.shape[0])])
    assert_array_equal(_evm._margins_held(value, tails), expected)
