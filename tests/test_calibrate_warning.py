"""The warnings a user's call raises point at that call, not inside the package."""

import numpy as np
import pytest
import torch

from sklearn_flowr import CRPGaussianClassifier, FLOWRClassifier
from sklearn_flowr.protocol import calibrate_novelty

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
