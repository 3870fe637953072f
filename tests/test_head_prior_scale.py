"""Tests of the head's ``prior_scale``: a factor on the estimated prior ``s0``."""

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.utils._param_validation import InvalidParameterError

from sklearn_flowr import CRPGaussianClassifier
from sklearn_flowr.head import empirical_bayes_head


@pytest.fixture
def anisotropic(rng):
    """Six classes in 4-d with an oblique within-class scatter, 12 rows each."""
    mixing = rng.normal(size=(4, 4))
    centres = rng.normal(scale=3.0, size=(6, 4))
    y = np.repeat(np.arange(6), 12)
    X = centres[y] + rng.normal(size=(72, 4)) @ np.diag([3.0, 0.5, 0.1, 0.05]) @ mixing
    return X, y


def two_fit_route(X, y, prior_scale, **params):
    """The route before prior_scale was the head's: fit with everything "auto",
    then refit with every estimate given and the prior covariance scaled."""
    first = CRPGaussianClassifier(**params).fit(X, y)
    return clone(first).set_params(
        prior_mean=first.prior_mean_,
        prior_var=prior_scale * np.asarray(first.prior_var_),
        sigma=first.sigma_, b=first.b_).fit(X, y)


@pytest.mark.parametrize("covariance", ["isotropic", "full"])
def test_prior_scale_scales_only_the_prior_variance(anisotropic, covariance):
    """Check that prior_scale=2 doubles prior_var_ and leaves prior_mean_,
    sigma_ and b_ at their estimates."""
    X, y = anisotropic
    plain = CRPGaussianClassifier(covariance=covariance).fit(X, y)
    wide = CRPGaussianClassifier(covariance=covariance, prior_scale=2.0).fit(X, y)
    np.testing.assert_allclose(wide.prior_var_, 2.0 * plain.prior_var_, rtol=1e-14)
    np.testing.assert_array_equal(wide.prior_mean_, plain.prior_mean_)
    np.testing.assert_array_equal(wide.sigma_, plain.sigma_)
    assert wide.b_ == plain.b_


@pytest.mark.parametrize("covariance", ["isotropic", "full"])
@pytest.mark.parametrize("prior_scale", [0.5, 2.0])
def test_prior_scale_equals_the_two_fit_route(anisotropic, rng, covariance,
                                              prior_scale):
    """Check that the head with prior_scale predicts as the old two-fit route
    (estimate, then refit with the prior covariance scaled)."""
    X, y = anisotropic
    queries = np.vstack([X[::5], rng.normal(scale=5.0, size=(10, 4))])
    head = CRPGaussianClassifier(covariance=covariance,
                                 prior_scale=prior_scale).fit(X, y)
    old = two_fit_route(X, y, prior_scale, covariance=covariance)
    np.testing.assert_allclose(head.predict_proba(queries),
                               old.predict_proba(queries), rtol=0, atol=1e-10)
    np.testing.assert_allclose(head.prior_var_, old.prior_var_, rtol=1e-14)


def test_prior_scale_with_a_given_prior_var_raises(anisotropic):
    """Check that prior_scale != 1 with a given prior_var fails naming both,
    and leaves the head unfitted."""
    X, y = anisotropic
    clf = CRPGaussianClassifier(prior_var=4.0, prior_scale=2.0)
    with pytest.raises(ValueError, match="prior_scale=2.0 .* prior_var is given"):
        clf.fit(X, y)
    assert not hasattr(clf, "n_features_in_")
    clf.set_params(prior_scale=1.0).fit(X, y)
    np.testing.assert_array_equal(clf.prior_var_, [4.0])


@pytest.mark.parametrize("prior_scale", [0.0, -1.0, np.nan, "auto"])
def test_bad_prior_scale_raises_before_fitting(anisotropic, prior_scale):
    """Check that a prior_scale that is not a positive number is refused."""
    X, y = anisotropic
    clf = CRPGaussianClassifier(prior_scale=prior_scale)
    with pytest.raises(InvalidParameterError, match="'prior_scale' parameter"):
        clf.fit(X, y)


def test_prior_scale_changed_after_fit_is_refused(anisotropic):
    """Check that partial_fit refuses a prior_scale changed since fit (the
    state was built with the old prior)."""
    X, y = anisotropic
    clf = CRPGaussianClassifier(prior_scale=2.0).fit(X, y)
    clf.set_params(prior_scale=3.0)
    with pytest.raises(ValueError, match=r"prior_scale: 2.0 -> 3.0"):
        clf.partial_fit(X[:2], y[:2])


@pytest.mark.parametrize("covariance", ["isotropic", "full"])
def test_empirical_bayes_head_passes_prior_scale_to_the_head(anisotropic, rng,
                                                             covariance):
    """Check that empirical_bayes_head's prior_scale overrides the template's:
    the large-context head carries it as a parameter, the small-context head
    has it baked into prior_var, and both predict as the two-fit route."""
    X, y = anisotropic
    template = CRPGaussianClassifier(covariance=covariance, prior_scale=3.0)
    queries = rng.normal(scale=4.0, size=(15, 4))
    old = two_fit_route(X, y, 2.0, covariance=covariance)
    large = empirical_bayes_head(template, X, y, setting="large", prior_scale=2.0)
    assert large.prior_scale == 2.0 and template.prior_scale == 3.0
    np.testing.assert_allclose(large.predict_proba(queries),
                               old.predict_proba(queries), rtol=0, atol=1e-10)
    small = empirical_bayes_head(template, X, y, setting="small", prior_scale=2.0)
    assert small.prior_scale == 1.0
    np.testing.assert_allclose(small.prior_var, old.prior_var_, rtol=1e-14)
    small.fit(X, y)
    np.testing.assert_allclose(small.predict_proba(queries),
                               old.predict_proba(queries), rtol=0, atol=1e-10)


def test_empirical_bayes_head_keeps_the_template_prior_scale(anisotropic):
    """Check that without prior_scale empirical_bayes_head uses the template's."""
    X, y = anisotropic
    template = CRPGaussianClassifier(prior_scale=2.0)
    head = empirical_bayes_head(template, X, y, setting="large")
    plain = CRPGaussianClassifier().fit(X, y)
    assert head.prior_scale == 2.0
    np.testing.assert_allclose(head.prior_var_, 2.0 * plain.prior_var_, rtol=1e-14)
