"""select_head_params: candidates scored exactly as evaluate_online scores
the head built by hand, the right choice where new classes are wider than the
training classes in some directions, and clear errors on bad input."""

import numpy as np
import pytest
from sklearn.base import clone

from sklearn_flowr import CRPGaussianClassifier
from sklearn_flowr.protocol import (
    SmallContextTasks,
    evaluate_online,
    select_head_params,
)


@pytest.fixture
def squeezed(rng):
    """4-d classes whose within-class noise the 'encoder' squeezed in two
    directions for the 30 training classes, but not for the 20 new ones."""
    def classes(n, noise_sd, first_label):
        y = np.repeat(np.arange(first_label, first_label + n), 20)
        means = rng.normal(scale=3.0, size=(n, 4))
        X = means[y - first_label] + rng.normal(size=(20 * n, 4)) * noise_sd
        return X, y
    X_train, y_train = classes(30, np.array([1.0, 1.0, 0.05, 0.05]), 0)
    X_val, y_val = classes(20, np.array([1.0, 1.0, 1.0, 1.0]), 100)
    return X_train, y_train, X_val, y_val


def test_scores_equal_evaluate_online_of_the_head_built_by_hand(squeezed):
    X_train, y_train, X_val, y_val = squeezed
    template = CRPGaussianClassifier(covariance="full", b=1.0)
    found = select_head_params(template, X_train, y_train, X_val, y_val,
                               {"noise_shrinkage": [0.0, 0.3]}, n_tasks=15,
                               random_state=3)
    tasks = SmallContextTasks(y_val, n_support_classes=10, n_novel_classes=5,
                              n_tasks=15, random_state=3)
    for result in found.results:
        fitted = clone(template).set_params(**result["params"]).fit(X_train, y_train)
        by_hand = clone(fitted).set_params(prior_mean=fitted.prior_mean_,
                                           prior_var=fitted.prior_var_,
                                           sigma=fitted.sigma_)
        report = evaluate_online(by_hand, X_val, y_val, tasks, setting="small")
        assert result["h_measure"] == pytest.approx(report.h_measure)
        assert result["accuracy"] == pytest.approx(report.accuracy)
        assert result["ece"] == pytest.approx(report.ece)
    assert template.get_params()["noise_shrinkage"] == "auto"  # not modified


def test_prefers_shrinkage_when_new_classes_are_not_squeezed(squeezed):
    X_train, y_train, X_val, y_val = squeezed
    found = select_head_params(CRPGaussianClassifier(covariance="full", b=1.0),
                               X_train, y_train, X_val, y_val,
                               {"noise_shrinkage": [0.0, 0.5, 1.0]}, n_tasks=20,
                               random_state=0)
    h = {r["params"]["noise_shrinkage"]: r["h_measure"] for r in found.results}
    assert found.best_params["noise_shrinkage"] > 0.0
    assert max(h[0.5], h[1.0]) > h[0.0] + 0.05
    best = found.best_head
    assert not hasattr(best, "classes_")  # unfitted, the prior fixed
    assert best.noise_shrinkage == found.best_params["noise_shrinkage"]
    W = CRPGaussianClassifier(covariance="full").fit(X_train, y_train).sigma_
    eig = np.linalg.eigvalsh(best.sigma)
    assert eig.min() / eig.max() > np.linalg.eigvalsh(W).min() / np.linalg.eigvalsh(
        W).max()


@pytest.mark.parametrize("change, message", [
    (lambda a: {**a, "y_val": a["y_val"] - 100}, "must be new to the encoder"),
    (lambda a: {**a, "X_val": a["X_val"][:, :3]}, "X_train has 4 features"),
    (lambda a: {**a, "y_val": a["y_val"][:-1]}, "one row per label"),
    (lambda a: {**a, "param_grid": {"shrink": [0.1]}}, r"\['shrink'\]"),
    (lambda a: {**a, "y_val": np.full_like(a["y_val"], 100)}, "at least 2"),
    (lambda a: {**a, "param_grid": []}, "no candidate"),
    (lambda a: {**a, "param_grid": {"noise_shrinkage": [0.0, 0.5],
                                    "covariance": ["isotropic"]}},
     "covariance='isotropic'"),
    (lambda a: {**a, "param_grid": {"noise_shrinkage": [0.0, 0.5],
                                    "sigma": [np.eye(4)]}}, "a given value"),
    (lambda a: {**a, "prior_scale": 0.0},
     r"'prior_scale' parameter .* must be a float in the range \(0\.0, inf\)"),
])
def test_bad_input_fails_clearly(squeezed, change, message):
    X_train, y_train, X_val, y_val = squeezed
    arguments = change(dict(X_train=X_train, y_train=y_train, X_val=X_val,
                            y_val=y_val, param_grid={"noise_shrinkage": [0.0]}))
    with pytest.raises(ValueError, match=message):
        select_head_params(CRPGaussianClassifier(covariance="full"), **arguments,
                           n_tasks=2)


def test_head_is_built_like_flowr_before_calibration(squeezed):
    """Check the template's estimates and calibration map are not used, and
    prior_scale scales the empirical-Bayes prior covariance as in
    FLOWRClassifier."""
    X_train, y_train, X_val, y_val = squeezed
    deployed = CRPGaussianClassifier(covariance="full", b=1.0,
                                     novelty_calibration=(0.5, -1.0),
                                     prior_var=np.eye(4), sigma=np.eye(4))
    found = select_head_params(deployed, X_train, y_train, X_val, y_val,
                               {"noise_shrinkage": [0.2]}, prior_scale=2.0,
                               n_tasks=3, random_state=0)
    plain = CRPGaussianClassifier(covariance="full", b=1.0,
                                  noise_shrinkage=0.2).fit(X_train, y_train)
    best = found.best_head
    assert best.novelty_calibration is None
    np.testing.assert_allclose(best.sigma, plain.sigma_)
    np.testing.assert_allclose(best.prior_var, 2.0 * plain.prior_var_)
    np.testing.assert_allclose(best.prior_mean, plain.prior_mean_)
