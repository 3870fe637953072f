import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture(scope="session")
def load_benchmark_script():
    """Import a script of benchmarks/ (not a package) by its file name."""
    def load(filename):
        path = BENCHMARKS / filename
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    return load


@pytest.fixture
def rng():
    """A seeded generator, so every test sees the same draws."""
    return np.random.default_rng(20260101)


@pytest.fixture
def seed():
    """Seeds torch's global generator (for module initialisation); the seed."""
    torch.manual_seed(0)
    return 0


@pytest.fixture
def blobs(rng):
    """Four well separated Gaussian classes in 5-d, 15 rows each."""
    centres = rng.normal(scale=4.0, size=(4, 5))
    y = np.repeat(np.arange(4), 15)
    X = centres[y] + rng.normal(scale=0.7, size=(60, 5))
    return X, y


@pytest.fixture(scope="session")
def digits():
    """scikit-learn's digits as 8 x 8 float32 images in [0, 1], and labels
    (the images FLOWRClassifier's tests train on)."""
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    return (X.reshape(-1, 8, 8) / 16.0).astype(np.float32), y


@pytest.fixture
def no_training(monkeypatch):
    """Make any pre-training fail, so a test can show a check ran before it."""
    from sklearn_flowr.training import pipeline

    def refuse(*args, **kwargs):
        raise AssertionError("trained before the check")

    monkeypatch.setattr(pipeline, "pretrain_encoder", refuse)
