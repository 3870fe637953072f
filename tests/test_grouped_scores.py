"""The head's cached scores: one (N, d) product plus ``-1/(2 v)`` once per
distinct class variance equal each class's Gaussian log density."""

import copy

import numpy as np
import pytest

from sklearn_flowr import CRPGaussianClassifier, WhitenedCRPClassifier


def full_coefficient_scores(state, Z):
    """``log N(u; m_n, diag(v_n)) + log numerator_n`` class by class, from
    ``q`` and ``lam`` (the prior's for the novel class)."""
    n = state.n_classes
    q = np.vstack([state.nat_means(slice(0, n)), state.prior_nat_mean])
    lam = np.broadcast_to(state.class_precision(np.arange(n + 1)), q.shape)
    mean, var = q / lam, 1.0 / lam + state.sigma
    log_known, log_novel = state._log_numerators(state.crp_counts(), n)
    U = state.to_basis(Z)[:, None, :]
    log_density = -0.5 * np.sum(np.log(2 * np.pi * var) + (U - mean) ** 2 / var,
                                axis=-1)
    return log_density + np.r_[log_known, log_novel]


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
    assert state.n_rows == (0 if state.isotropic else 4)
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
    assert state.n_rows <= state.quad.shape[0] <= 32
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
    assert state.n_rows == before.n_rows
    np.testing.assert_array_equal(state.quad, before.quad)
    np.testing.assert_array_equal(state.precision_rows, before.precision_rows)
    np.testing.assert_array_equal(state.group[:4], before.group[:4])
    queries = rng.normal(size=(5, 3))
    np.testing.assert_array_equal(state.joint_log_numerators(queries),
                                  before.joint_log_numerators(queries))


def test_one_row_steps_of_diagonal_classes_equal_a_batch_fit(rng):
    """Check one-row steps (known and new classes, the variance table shared
    and compacted) give the scores and means of one fit on every row."""
    params = dict(prior_mean=0.0, prior_var=rng.uniform(1.0, 4.0, size=4),
                  sigma=0.7, b=1.0, known_count="observed")
    X = rng.normal(scale=2.0, size=(90, 4))
    y = np.r_[np.repeat(np.arange(3), 2), rng.integers(0, 12, size=84)]
    online = CRPGaussianClassifier(covariance="isotropic", **params).fit(X[:6], y[:6])
    for t in range(6, 90):
        online.open_world_step(X[t : t + 1], y[t : t + 1])
    batch = CRPGaussianClassifier(covariance="isotropic", **params).fit(X, y)
    order = np.argsort(online.classes_)
    np.testing.assert_array_equal(online.classes_[order], batch.classes_)
    np.testing.assert_allclose(online.class_mean_[order], batch.class_mean_,
                               rtol=1e-10)
    queries = rng.normal(scale=2.0, size=(7, 4))
    joint = online.predict_joint_log_proba(queries)
    np.testing.assert_allclose(joint[:, np.r_[order, -1]],
                               batch.predict_joint_log_proba(queries), rtol=1e-10)


def test_table_rows_found_before_a_compaction_are_kept(rng):
    """Check a batch's precisions are all in the table after it makes room,
    the ones it found there and no class used yet included."""
    head = CRPGaussianClassifier(prior_mean=0.0, prior_var=[1.0, 2.0, 3.0],
                                 sigma=1.0, b=1.0).fit(rng.normal(size=(6, 3)),
                                                       [0, 0, 1, 1, 2, 2])
    state = head._state
    unused = state.prior_precision + 5.0
    state._add_rows(unused[None])
    while state.n_rows < state.precision_rows.shape[0]:  # full: the next compacts
        state._add_rows((state.prior_precision + 100.0 + state.n_rows)[None])
    wanted = np.vstack([unused, state.prior_precision + 7.0])
    ids = state._row_ids(wanted)  # (the table's arrays are new ones then)
    np.testing.assert_array_equal(state.precision_rows[ids], wanted)
