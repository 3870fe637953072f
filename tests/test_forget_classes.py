"""forget_classes: the head a new task starts from keeps fit's prior."""

import copy

import numpy as np
import pytest
from numpy.testing import assert_allclose

from sklearn_flowr import CRPGaussianClassifier


@pytest.mark.parametrize("covariance", ["whitened", "isotropic", "full"])
def test_forget_classes_keeps_the_prior_and_whitener(covariance):
    """Check that a head without classes keeps fit's prior, sigma, b and
    whitener as given values, streams a new task from them, and equals
    partial_fit on the same rows; the fitted head it was copied from stays."""
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(8), 4)
    X = rng.normal(size=(8, 12))[y] + 0.3 * rng.normal(size=(32, 12))
    fitted = CRPGaussianClassifier(covariance=covariance).fit(X[:20], y[:20])
    before = fitted.predict_proba(X)
    prior = copy.deepcopy(fitted).forget_classes()
    assert not prior.__sklearn_is_fitted__()
    assert (covariance == "whitened") == hasattr(prior, "whitener_")
    assert_allclose(prior.prior_var, fitted.prior_var_)
    assert prior.b == fitted.b_ and prior.prior_scale == 1.0
    out = prior.open_world_step(X[20:], y[20:])
    assert prior.classes_.tolist() == [5, 6, 7]
    assert out.is_novel[[0, 4, 8]].all() and not out.is_novel[[1, 5, 9]].any()
    batch = copy.deepcopy(fitted).forget_classes().partial_fit(X[20:], y[20:])
    assert_allclose(batch.predict_proba(X), prior.predict_proba(X), rtol=1e-10)
    assert_allclose(fitted.predict_proba(X), before)


def test_forget_classes_needs_a_fitted_head():
    with pytest.raises(Exception, match="forget_classes"):
        CRPGaussianClassifier().forget_classes()
