"""scikit-learn's estimator checks over every estimator of the package."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from sklearn_flowr import CRPGaussianClassifier

# The only conflict with scikit-learn's classifier contract is deliberate:
# DESIGN.md section 3 gives predict_proba one column per known class *plus*
# the novel class.
EXPECTED_FAILED_CHECKS = {
    "CRPGaussianClassifier": {
        "check_classifiers_train": (
            "predict_proba has n_classes + 1 columns: the last is the novel "
            "class (open-world contract), so the shape assertion "
            "(n_samples, n_classes) cannot hold."
        ),
    }
}


@parametrize_with_checks(
    [CRPGaussianClassifier()],
    expected_failed_checks=lambda est: EXPECTED_FAILED_CHECKS.get(
        type(est).__name__, {}
    ),
)
def test_sklearn_compatible_estimator(estimator, check):
    """Check that the estimator passes scikit-learn's common checks."""
    check(estimator)
