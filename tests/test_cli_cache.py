"""Tests of flowr-benchmark's caches: models and features keyed by every
parameter, and unreadable cache files rebuilt."""

import numpy as np
import pytest


def test_model_cache_key_covers_every_parameter():
    """Check that the model cache key reads every FLOWRClassifier parameter
    but verbose: spelling out a default keeps the key, changing any parameter
    that shapes the model changes it."""
    from sklearn_flowr.cli._benchmark_setup import model_key

    assert model_key({}, "data") == model_key({"known_table": "refit"}, "data")
    assert model_key({}, "data") != model_key({"known_table": "learned"}, "data")
    assert model_key({}, "data") != model_key({}, "other data")
    # verbose changes what training prints, not the model: -v 0 and -v 1
    # share the cached model.
    assert model_key({"verbose": 0}, "data") == model_key({"verbose": 1}, "data")


@pytest.fixture(scope="module")
def cached_mlp_model(tmp_path_factory):
    """A tiny mlp FLOWR fitted through the benchmark's model cache, with its
    cached features: (params, X, y, cache folder, model, features)."""
    from sklearn_flowr.cli._benchmark_setup import features_or_load, fit_or_load_model

    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 5)).astype(np.float32)
    y = np.repeat(np.arange(4), 10)
    params = dict(backbone="mlp", setting="large", pretrain_epochs=1,
                  meta_epochs=0, embedding_dim=4, verbose=0, random_state=0)
    cache = tmp_path_factory.mktemp("cache")
    model = fit_or_load_model(params, X, y, data_key="d", cache_dir=cache,
                              log=lambda *a: None)
    features = features_or_load("k", model, {"fit": X}, cache_dir=cache,
                                log=lambda *a: None)
    return params, X, y, cache, model, features


def _truncate(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _garbage(path):
    path.write_bytes(b"\x80\x04not a pickle nor a zip")


@pytest.mark.parametrize("damage", [_truncate, _garbage])
def test_unreadable_cached_model_is_retrained(cached_mlp_model, damage):
    """Check that a damaged cached model gives a warning naming the file, is
    trained again to the same model and re-cached."""
    import warnings

    from sklearn_flowr.cli._benchmark_setup import fit_or_load_model, model_key

    params, X, y, cache, model, _ = cached_mlp_model
    path = cache / "models" / f"{model_key(params, 'd')}.joblib"
    damage(path)
    with pytest.warns(UserWarning, match=rf"{path.name}.*is unreadable"):
        again = fit_or_load_model(params, X, y, data_key="d", cache_dir=cache,
                                  log=lambda *a: None)
    np.testing.assert_allclose(again.predict_proba(X), model.predict_proba(X))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit_or_load_model(params, X, y, data_key="d", cache_dir=cache,
                          log=lambda *a: None)


@pytest.mark.parametrize("damage", [_truncate, _garbage, "other arrays"])
def test_unreadable_cached_features_are_recomputed(cached_mlp_model, damage):
    """Check that damaged cached features, or features of other arrays, give a
    warning naming the file and are extracted again and re-cached."""
    import warnings

    from sklearn_flowr.cli._benchmark_setup import features_or_load

    _, X, _, cache, model, features = cached_mlp_model
    path = cache / "features" / "k.npz"
    if damage == "other arrays":
        np.savez(path, **{"flowr/fit": features["flowr/fit"][:3],
                          "base/fit": features["base/fit"][:3]})
    else:
        damage(path)
    with pytest.warns(UserWarning, match=rf"{path.name}.*is unreadable"):
        again = features_or_load("k", model, {"fit": X}, cache_dir=cache,
                                 log=lambda *a: None)
    for key, Z in features.items():
        np.testing.assert_array_equal(again[key], Z)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        features_or_load("k", model, {"fit": X}, cache_dir=cache,
                         log=lambda *a: None)
