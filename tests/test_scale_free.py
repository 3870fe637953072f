"""Scale-free maths: the head and the class-mean baselines do not depend on
the units or the origin of the features (issue 26, item 4).

Real data: scikit-learn's digits, classes 0-5 known (every other row of them
trains), PCA to 16 dimensions fitted on the training rows, rows scaled to
unit length as embeddings usually are; the other rows of the known classes
and all rows of classes 6-9 are the test rows.
"""

import warnings

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.preprocessing import normalize

from sklearn_flowr import CRPGaussianClassifier
from sklearn_flowr.baselines import (
    NCMClassifier,
    PEELERClassifier,
    ProtoNetClassifier,
)

MIN_AGREEMENT = 0.99
MAX_MEDIAN_P_NOVEL_DIFFERENCE = 1e-3
MAX_ACCURACY_CHANGE = 0.01


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    order = np.random.default_rng(0).permutation(y.shape[0])
    X, y = X[order], y[order]
    train = (y < 6) & (np.arange(y.shape[0]) % 2 == 0)
    Z = normalize(PCA(16, random_state=0).fit(X[train]).transform(X))
    return Z[train], y[train], Z[~train], y[~train]


TRANSFORMS = {
    "times_1e-7": lambda Z: Z * 1e-7,
    "plus_1e7": lambda Z: Z + 1e7,
}


@pytest.mark.parametrize("covariance", ["isotropic", "full"])
@pytest.mark.parametrize("transform", list(TRANSFORMS))
def test_head_predictions_do_not_depend_on_units_or_origin(digits, covariance,
                                                            transform):
    """Check that the head on X * 1e-7 and X + 1e7 predicts as on X."""
    Z_train, y_train, Z_test, _ = digits
    f = TRANSFORMS[transform]
    ref = CRPGaussianClassifier(covariance=covariance).fit(Z_train, y_train)
    head = CRPGaussianClassifier(covariance=covariance).fit(f(Z_train), y_train)
    agreement = np.mean(head.predict(f(Z_test)) == ref.predict(Z_test))
    difference = np.abs(head.predict_proba(f(Z_test))[:, -1]
                        - ref.predict_proba(Z_test)[:, -1])
    assert agreement >= MIN_AGREEMENT
    assert np.median(difference) <= MAX_MEDIAN_P_NOVEL_DIFFERENCE
    # The stream too: predict-then-learn on the test rows.
    out = head.open_world_step(f(Z_test[:300]), digits[3][:300])
    out_ref = ref.open_world_step(Z_test[:300], digits[3][:300])
    assert np.mean(out.y_pred == out_ref.y_pred) >= MIN_AGREEMENT


@pytest.mark.parametrize("covariance", ["isotropic", "full"])
def test_head_estimates_scale_with_the_data(digits, covariance):
    """Check that the estimated sigma and prior variance scale as X**2: no
    absolute floor overrides them at small scales."""
    Z_train, y_train, _, _ = digits
    ref = CRPGaussianClassifier(covariance=covariance).fit(Z_train, y_train)
    small = CRPGaussianClassifier(covariance=covariance).fit(Z_train * 1e-7, y_train)
    np.testing.assert_allclose(small.sigma_, ref.sigma_ * 1e-14, rtol=1e-6)
    np.testing.assert_allclose(small.prior_var_, ref.prior_var_ * 1e-14, rtol=1e-6)


def test_full_covariance_on_huge_values_stays_finite(digits):
    """Check that full covariance on X * 1e90 (inside the accepted input
    range) fits and predicts finite probabilities, as on X."""
    Z_train, y_train, Z_test, _ = digits
    ref = CRPGaussianClassifier(covariance="full").fit(Z_train, y_train)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no overflow on the way
        head = CRPGaussianClassifier(covariance="full").fit(Z_train * 1e90, y_train)
        proba = head.predict_proba(Z_test * 1e90)
    assert np.all(np.isfinite(proba))
    assert np.mean(head.predict(Z_test * 1e90) == ref.predict(Z_test)) >= MIN_AGREEMENT


@pytest.mark.parametrize("prior_mean", [1e200, -1e200, [1e200] * 16])
def test_huge_prior_mean_is_refused_before_fitting(digits, prior_mean):
    """Check that a prior mean outside the input range is refused by the
    parameter check (it returned NaN), the estimator left unfitted."""
    Z_train, y_train, _, _ = digits
    head = CRPGaussianClassifier(prior_mean=prior_mean)
    with pytest.raises(ValueError, match="prior_mean"):
        head.fit(Z_train, y_train)
    assert not hasattr(head, "classes_") or not head.__sklearn_is_fitted__()


@pytest.mark.parametrize("name", ["sigma", "prior_var"])
@pytest.mark.parametrize("value", [1e-320, 1e300])
def test_variances_outside_float64_range_are_refused(digits, name, value):
    """Check that a variance whose reciprocal or square leaves float64 is
    refused by the parameter constraints."""
    Z_train, y_train, _, _ = digits
    with pytest.raises(ValueError, match=name):
        CRPGaussianClassifier(**{name: value}).fit(Z_train, y_train)


BASELINES = {
    "ncm": NCMClassifier,
    "protonet": ProtoNetClassifier,
    "peeler": PEELERClassifier,
}


@pytest.mark.parametrize("name", list(BASELINES))
def test_baseline_accuracy_does_not_depend_on_origin(digits, name):
    """Check that a shift of 1e7 changes the accuracy of the class-mean
    baselines by less than 0.01 (sums of squares cancelled: NCM fell from
    0.93 to 0.80 here, PEELER from 0.96 to 0.70), in ``predict_known`` and in
    the stream."""
    Z_train, y_train, Z_test, y_test = digits
    known = y_test < 6

    def accuracies(shift):
        model = BASELINES[name]().fit(Z_train + shift, y_train)
        batch = np.mean(model.predict_known(Z_test[known] + shift) == y_test[known])
        out = model.open_world_step(Z_test + shift, y_test)
        seen = ~out.is_novel
        return batch, np.mean(out.y_known[seen] == y_test[seen])

    batch, stream = accuracies(0.0)
    batch_shifted, stream_shifted = accuracies(1e7)
    assert batch > 0.85
    assert abs(batch_shifted - batch) < MAX_ACCURACY_CHANGE
    assert abs(stream_shifted - stream) < MAX_ACCURACY_CHANGE


@pytest.mark.parametrize("name", list(BASELINES))
def test_baseline_novelty_scores_do_not_depend_on_origin(digits, name):
    """Check that the baselines' novelty scores barely move under a shift of
    1e7 (they are functions of distances)."""
    Z_train, y_train, Z_test, _ = digits
    ref = BASELINES[name]().fit(Z_train, y_train).novelty_score(Z_test)
    shifted = BASELINES[name]().fit(Z_train + 1e7, y_train).novelty_score(
        Z_test + 1e7)
    np.testing.assert_allclose(shifted, ref, rtol=1e-4, atol=1e-6)
