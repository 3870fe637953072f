"""The head's cached scores: one (N, d) product plus ``-1/(2 v)`` once per
distinct class variance equal the full ``[u, u**2, 1]`` coefficients."""

import copy

import numpy as np
import pytest

from sklearn_flowr import CRPGaussianClassifier, WhitenedCRPClassifier
from sklearn_flowr._core import log_density_coef, log_density_features


def full_coefficient_scores(state, Z):
    """``[u, u**2, 1] @ coef.T``: the scores before classes shared ``-1/(2 v)``."""
    n = state.n_classes
    coef = log_density_coef(state.nat_mean[:n], state.precision[:n], state.sigma)
    log_known, log_novel = state._log_numerators(state.crp_counts(), n)
    coef[:, -1] += log_known
    novel = state.prior_coef.copy()
    novel[-1] += log_novel
    features = log_density_features(state.to_basis(Z), isotropic=state.isotropic)
    return features @ np.vstack([coef, novel]).T


def heads(rng):
    y = np.repeat(np.arange(12), [1, 2, 3] * 4)
    X = rng.normal(scale=3.0, size=(12, 6))[y] + rng.normal(size=(y.shape[0], 6))
    for head in (CRPGaussianClassifier(), CRPGaussianClassifier(covariance="full"),
                 WhitenedCRPClassifier()):
        fitted = head.fit(X, y)
        yield getattr(fitted, "head_", fitted), X


@pytest.mark.parametrize("case", [0, 1, 2])
def test_grouped_scores_equal_the_full_coefficients(rng, case):
    head, X = list(heads(rng))[case]
    state = head._state
    queries = rng.normal(scale=3.0, size=(40, X.shape[1]))
    np.testing.assert_allclose(state.joint_log_numerators(queries),
                               full_coefficient_scores(state, queries), rtol=1e-10)
    # Three row counts (1, 2, 3) and the prior: four variances for 13 rows
    # (isotropic: a column of the coefficients, the table unused).
    assert state.n_quad == (0 if state.isotropic else 4)
    for t in range(60):  # one-row steps, a new class now and then
        row = rng.normal(scale=3.0, size=(1, X.shape[1]))
        head.open_world_step(row, [t % 5 if t % 7 else 100 + t])
    np.testing.assert_allclose(state.joint_log_numerators(queries),
                               full_coefficient_scores(state, queries), rtol=1e-10)


def test_one_class_stream_keeps_the_variance_table_small(rng):
    # Every row of class 0 gives it a new variance: unused ones are dropped.
    head = CRPGaussianClassifier(covariance="full").fit(rng.normal(size=(6, 3)),
                                                        [0, 0, 1, 1, 2, 2])
    state = head._state
    for _ in range(200):
        head.partial_fit(rng.normal(size=(1, 3)), [0])
    assert state.n_quad <= state.quad.shape[0] <= 32
    queries = rng.normal(size=(5, 3))
    np.testing.assert_allclose(state.joint_log_numerators(queries),
                               full_coefficient_scores(state, queries), rtol=1e-10)


def test_undo_restores_the_variance_table(rng):
    head = CRPGaussianClassifier(covariance="full").fit(rng.normal(size=(6, 3)),
                                                        [0, 0, 1, 1, 2, 2])
    for _ in range(20):  # fill the table up to a compaction
        head.partial_fit(rng.normal(size=(1, 3)), [0])
    state = head._state
    before = copy.deepcopy(state)
    undo = state.checkpoint(np.zeros(40, dtype=np.intp))
    state.learn(rng.normal(size=(40, 3)), np.zeros(40, dtype=np.intp), 3)
    for _ in range(30):
        state.step(rng.normal(size=3), 0, False)
    undo()
    assert state.n_quad == before.n_quad
    np.testing.assert_array_equal(state.quad, before.quad)
    np.testing.assert_array_equal(state.group[:4], before.group[:4])
    queries = rng.normal(size=(5, 3))
    np.testing.assert_array_equal(state.joint_log_numerators(queries),
                                  before.joint_log_numerators(queries))
