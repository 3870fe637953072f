"""Tests of SciPy's BLAS held to one thread while the whitener runs LAPACK
(``sklearn_flowr.head._blas``): the two OpenBLAS pools of pip's NumPy and SciPy
wheels otherwise take the cores from each other."""

import json
import subprocess
import sys

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from sklearn_flowr.head import TwoCovarianceWhitener
from sklearn_flowr.head import _plda as plda
from sklearn_flowr.head._blas import scipy_blas_on_one_thread

_LOADED_BLAS = """import json, sys
import numpy
if sys.argv[1] == "scipy":
    import scipy.linalg
from threadpoolctl import threadpool_info
print(json.dumps([i["filepath"] for i in threadpool_info() if i["user_api"] == "blas"]))
"""


def blas_loaded_by(what):
    """The BLAS files a fresh interpreter has loaded after importing NumPy
    (``"numpy"``) or NumPy and ``scipy.linalg`` (``"scipy"``)."""
    out = subprocess.run([sys.executable, "-c", _LOADED_BLAS, what], check=True,
                         capture_output=True, text=True).stdout
    return set(json.loads(out))


def blas_threads():
    """``{filepath: num_threads}`` of every BLAS loaded here."""
    return {info["filepath"]: info["num_threads"] for info in threadpool_info()
            if info["user_api"] == "blas"}


@pytest.fixture(scope="module")
def scipy_own():
    """The BLAS files SciPy loads beyond NumPy's, found apart from the
    package's own test of their folder; skips where SciPy shares NumPy's."""
    own = blas_loaded_by("scipy") - blas_loaded_by("numpy")
    if not own:
        pytest.skip("SciPy shares NumPy's BLAS here: nothing to hold apart")
    return own


@pytest.fixture
def two_pools(scipy_own):
    """Every BLAS on two threads (whatever OMP_NUM_THREADS set), so that one
    thread is a change."""
    with threadpool_limits(limits=2, user_api="blas"):
        blas = blas_threads()
        if set(blas.values()) != {2}:
            pytest.skip("a loaded BLAS cannot be set to two threads here")
        own = scipy_own & set(blas)
        assert own, "SciPy's BLAS is not among the libraries loaded here"
        yield blas, own


def test_scipy_pool_on_one_thread_inside_and_restored_after(two_pools):
    """Check that inside the block SciPy's own BLAS runs one thread and
    NumPy's keeps its two, and that both are as before after it, also after
    an error."""
    before, own = two_pools
    with scipy_blas_on_one_thread():
        inside = blas_threads()
    assert all(inside[path] == 1 for path in own)
    assert all(inside[path] == before[path] for path in before if path not in own)
    assert blas_threads() == before
    with pytest.raises(RuntimeError, match="inside"), scipy_blas_on_one_thread():
        raise RuntimeError("inside")
    assert blas_threads() == before


def test_whitener_lapack_runs_with_scipy_on_one_thread(monkeypatch, two_pools):
    """Check that the whitener's Cholesky (fit) and triangular solves (fit and
    a batch transform by the factored map) run with SciPy's pool on one
    thread, and that the whitened rows are those of an unlimited run."""
    before, own = two_pools
    seen = []
    real_cholesky, real_solve = (plda.linalg.cholesky,
                                 plda.linalg.solve_triangular)

    def spy(real):
        def call(*args, **kwargs):
            seen.append(max(blas_threads()[path] for path in own))
            return real(*args, **kwargs)
        return call

    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(6), 3)
    X = rng.normal(size=(6, 40))[y] + 0.5 * rng.normal(size=(18, 40)) + 3.0
    expected = TwoCovarianceWhitener(solver="gram").fit(X, y).transform(X)
    monkeypatch.setattr(plda.linalg, "cholesky", spy(real_cholesky))
    monkeypatch.setattr(plda.linalg, "solve_triangular", spy(real_solve))
    whitener = TwoCovarianceWhitener(solver="gram").fit(X, y)
    n_fit_calls = len(seen)
    U = whitener.transform(X)
    assert n_fit_calls >= 2 and len(seen) > n_fit_calls
    assert seen == [1] * len(seen)  # (2 outside the whitener)
    np.testing.assert_allclose(U, expected, rtol=1e-12, atol=1e-12)
    assert blas_threads() == before
