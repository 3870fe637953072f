"""The warnings a user's call raises point at that call, not inside the package."""

import numpy as np
import pytest
import torch

from sklearn_flowr import CRPGaussianClassifier, FLOWRClassifier
from sklearn_flowr.protocol import calibrate_novelty
from sklearn_flowr.training import MetaTraining

# Eight classes far apart: first sightings always look more novel than
# known-class queries, which the Platt map's warning is about.
Y = np.repeat(np.arange(8), 10)
X = 100.0 * np.eye(8)[Y] + np.random.default_rng(0).normal(scale=0.01, size=(80, 8))


@pytest.mark.parametrize("call", [
    lambda: calibrate_novelty(CRPGaussianClassifier(), X, Y, n_tasks=5,
                              random_state=0),
    lambda: FLOWRClassifier(backbone=torch.nn.Identity(), pretrain=None, meta=None,
                            embedding_dim=None, calibration="train",
                            verbose=0).fit(X, Y),
], ids=["calibrate_novelty", "FLOWRClassifier.fit"])
def test_separated_calibration_warning_points_at_the_users_call(call):
    """Check the warning on perfectly separated calibration rows names the
    file of the user's call (this one), not a module of the package."""
    with pytest.warns(UserWarning, match="separate first sightings") as record:
        call()
    warning = next(w for w in record if "separate first sightings" in str(w.message))
    assert warning.filename == __file__


@pytest.mark.parametrize("method", ["fit", "fit_transform"])
def test_uncalibrated_decision_warning_points_at_the_users_call(method):
    """Check the warning that predict's decision is calibrated on rows the
    encoder trained on (too few rows a class to hold 10% out of
    meta-training) names the file of the user's call."""
    y = np.repeat(np.arange(4), 3)
    X = np.random.default_rng(0).normal(size=(12, 6)).astype(np.float32)
    clf = FLOWRClassifier(backbone="mlp", pretrain=None, embedding_dim=4, verbose=0,
                          meta=MetaTraining(epochs=1, episodes_per_epoch=1,
                                            n_way=4, n_query=2, n_unknown=1))
    with pytest.warns(UserWarning, match="calibrated on rows the encoder") as record:
        getattr(clf, method)(X, y)
    assert {w.filename for w in record
            if "calibrated on rows the encoder" in str(w.message)} == {__file__}
