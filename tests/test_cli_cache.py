"""Tests of flowr-benchmark's cache: only rendered data, as plain arrays.

Trained models are not cached (a file handed to the command is never
unpickled); the rendered glyphs and kanji are, as ``.npz`` arrays read back
with ``allow_pickle=False``.
"""

import warnings
from pathlib import Path

import numpy as np
import pytest


class _Canary:
    """Unpickling one creates the file ``_Canary.path``."""

    path = None

    def __reduce__(self):
        return (Path.touch, (Path(_Canary.path),))


def test_data_cache_never_unpickles(tmp_path):
    """Check a rendered-glyphs cache file replaced by pickled object arrays is
    not unpickled: a warning names it, the data are rendered again (the same
    arrays) and re-cached."""
    from sklearn_flowr.cli._benchmark_setup import load_benchmark_data

    cache = tmp_path / "data"
    first = load_benchmark_data("glyphs", max_fonts=5, cache_dir=cache)
    (path,) = cache.glob("glyphs-*.npz")
    with np.load(path, allow_pickle=False) as cached:
        keys = list(cached.files)
    _Canary.path = str(tmp_path / "unpickled")
    objects = np.empty(3, dtype=object)
    objects[:] = [_Canary()] * 3
    np.savez(path, **{key: objects for key in keys})
    with pytest.warns(UserWarning, match=rf"{path.name}.*is unreadable"):
        again = load_benchmark_data("glyphs", max_fonts=5, cache_dir=cache)
    assert not Path(_Canary.path).exists()
    np.testing.assert_array_equal(again.X_train, first.X_train)
    np.testing.assert_array_equal(again.y_test, first.y_test)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_benchmark_data("glyphs", max_fonts=5, cache_dir=cache)


def test_model_cache_is_gone():
    """Check the joblib model cache and the features cache keyed by it are
    gone from the command line."""
    from sklearn_flowr.cli import _benchmark as _benchmark_run
    from sklearn_flowr.cli import _benchmark_setup

    for name in ("fit_or_load_model", "features_or_load", "model_key",
                 "_read_model"):
        assert not hasattr(_benchmark_setup, name)
        assert not hasattr(_benchmark_run, name)
