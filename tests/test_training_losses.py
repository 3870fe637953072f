"""Tests of the training losses (``sklearn_flowr.training._losses`` and
its Sup-E part): against the head, textbook densities and hand
computations, and where their gradients go."""


import numpy as np
import pytest
import torch
from scipy.special import log_softmax as scipy_log_softmax
from scipy.stats import multivariate_normal

from sklearn_flowr import CRPGaussianClassifier
from sklearn_flowr._core import concentration_from_raw
from sklearn_flowr.encoders import MLPEncoder
from sklearn_flowr.training import (
    FLOWRMetaModule,
    SupEModule,
    flowr_episode_logits,
    meta_training_loss,
    sup_e_loss,
)

A, SIGMA = 0.5, 0.5


@pytest.fixture
def episode64(rng):
    """A float64 episode: 3 support classes, 2 unknown-unknown query classes."""
    d = 3
    z_s = torch.tensor(rng.normal(scale=2.0, size=(7, d)))
    y_s = torch.tensor([0, 0, 1, 2, 2, 2, 1])
    z_q = torch.tensor(rng.normal(scale=2.0, size=(9, d)))
    y_q = torch.tensor([0, 3, 1, 4, 3, 2, 4, 3, 1])
    head = dict(prior_mean=torch.tensor(rng.normal(size=d)),
                prior_log_var=torch.tensor([0.4], dtype=torch.float64),
                beta_raw=torch.tensor(0.3, dtype=torch.float64), a=A, sigma=SIGMA,
                class_prior="crp")
    return z_s, y_s, z_q, y_q, head


def textbook_log_joint(z_support, y_support, z_query, *, mu0, s0, b, known=()):
    """``log N(z; m_n, v_n I) + log p(n)`` per column, from conjugate formulas.

    ``known`` holds ``(mean, var, count)`` of known-known classes (columns first).
    """
    d = z_query.shape[1]
    columns = [(m, v, c) for m, v, c in known]
    for label in np.unique(y_support):
        rows = z_support[y_support == label]
        post_var = 1.0 / (1.0 / s0 + rows.shape[0] / SIGMA)
        post_mean = post_var * (mu0 / s0 + rows.sum(0) / SIGMA)
        columns.append((post_mean, post_var + SIGMA, rows.shape[0]))
    k = sum(c for _, _, c in columns)
    n = len(columns)
    out = [np.atleast_1d(multivariate_normal(m, v * np.eye(d)).logpdf(z_query))
           + np.log((c - A) / (k + b)) for m, v, c in columns]
    out.append(np.atleast_1d(multivariate_normal(mu0, (s0 + SIGMA) * np.eye(d))
                             .logpdf(z_query))
               + np.log((b + A * n) / (k + b)))
    return np.stack(out, axis=1).reshape(len(z_query), n + 1)


@pytest.mark.parametrize("class_prior", ["crp", "uniform"])
def test_episode_logits_match_head(episode64, class_prior):
    """Check that torch episode logits equal the NumPy head's log-posterior."""
    z_s, y_s, z_q, _, head = episode64
    logits = flowr_episode_logits(z_s, y_s, z_q, 3,
                                  **{**head, "class_prior": class_prior})
    b = float(concentration_from_raw(head["beta_raw"], A))
    clf = CRPGaussianClassifier(
        covariance="isotropic", a=A, b=b, sigma=SIGMA,
        prior_mean=head["prior_mean"].numpy(),
        prior_var=float(head["prior_log_var"].exp()), class_prior=class_prior,
        known_count="observed",
    ).fit(z_s.numpy(), y_s.numpy())
    np.testing.assert_allclose(torch.log_softmax(logits, 1).numpy(),
                               clf.predict_log_proba(z_q.numpy()), atol=1e-10)


def test_episode_logits_match_textbook_with_known_classes(episode64):
    """Check large-context logits (known table + support) against loops."""
    z_s, y_s, z_q, _, head = episode64
    known_means = np.array([[1.0, -1.0, 0.5], [-2.0, 0.0, 1.0]])
    known_vars = np.array([0.7, 1.9])
    known_counts = np.array([1.0, 3.0])
    logits = flowr_episode_logits(
        z_s, y_s + 2, z_q, 3, **head,
        known_nat_mean=torch.tensor(known_means / known_vars[:, None]),
        known_precision=torch.tensor(1.0 / known_vars[:, None]),
        known_counts=torch.tensor(known_counts))
    b = float(concentration_from_raw(head["beta_raw"], A))
    # The known table gives lam_n = 1/s_n; its predictive adds sigma.
    known = [(m, v + SIGMA, c) for m, v, c in
             zip(known_means, known_vars, known_counts, strict=True)]
    expected = textbook_log_joint(
        z_s.numpy(), y_s.numpy(), z_q.numpy(), mu0=head["prior_mean"].numpy(),
        s0=float(head["prior_log_var"].exp()), b=b, known=known)
    np.testing.assert_allclose(logits.numpy(), expected, atol=1e-10)


def hand_meta_loss(z_s, y_s, z_q, y_q, head, lambda_adapt):
    """Query NLL + lambda * L_adapt with explicit loops and scipy densities."""
    mu0 = head["prior_mean"].numpy()
    s0 = float(head["prior_log_var"].exp())
    b = float(concentration_from_raw(head["beta_raw"], A))
    z_s, y_s, z_q, y_q = (t.numpy() for t in (z_s, y_s, z_q, y_q))
    n_way = len(np.unique(y_s))
    log_post = scipy_log_softmax(
        textbook_log_joint(z_s, y_s, z_q, mu0=mu0, s0=s0, b=b), axis=1)
    target = np.minimum(y_q, n_way)
    nll = -np.mean(log_post[np.arange(len(y_q)), target])
    adapt_terms = []
    for u in np.unique(y_q[y_q >= n_way]):
        rows = np.flatnonzero(y_q == u)
        first, rest = rows[0], rows[1:]
        # The new class joins the support with one example, label n_way.
        z_new = np.vstack([z_s, z_q[first]])
        y_new = np.append(y_s, n_way)
        joint = textbook_log_joint(z_new, y_new, z_q[rest], mu0=mu0, s0=s0, b=b)
        adapt_terms.extend(-scipy_log_softmax(joint, axis=1)[:, n_way])
    adapt = np.mean(adapt_terms) if adapt_terms else 0.0
    return nll + lambda_adapt * adapt


@pytest.mark.parametrize("lambda_adapt", [0.0, 0.1, 2.0])
def test_meta_training_loss_matches_hand_computation(episode64, lambda_adapt):
    """Check the NLL + adaptation loss against explicit loops."""
    z_s, y_s, z_q, y_q, head = episode64
    loss = meta_training_loss(z_s, y_s, z_q, y_q, 3, lambda_adapt=lambda_adapt,
                              **head)
    expected = hand_meta_loss(z_s, y_s, z_q, y_q, head, lambda_adapt)
    assert float(loss) == pytest.approx(expected, rel=1e-10)


def test_adaptation_loss_needs_two_rows_of_an_unknown_class(episode64):
    """Check that unknown classes with a single query row add no adaptation."""
    z_s, y_s, z_q, _, head = episode64
    y_q = torch.tensor([0, 3, 1, 4, 5, 2, 6, 7, 1])
    with_adapt = meta_training_loss(z_s, y_s, z_q, y_q, 3, lambda_adapt=5.0, **head)
    without = meta_training_loss(z_s, y_s, z_q, y_q, 3, lambda_adapt=0.0, **head)
    assert float(with_adapt) == float(without)


def test_support_class_without_rows_is_an_error(episode64):
    """Check that a support class with no support row raises."""
    z_s, y_s, z_q, y_q, head = episode64
    with pytest.raises(ValueError, match="at least one support row"):
        flowr_episode_logits(z_s, y_s, z_q, 4, **head)


def test_sup_e_loss_matches_hand_computation(rng):
    """Check Sup-E loss = CE of Gaussian logits + beta sum d/s_n + l2 sum|mu|^2."""
    z = rng.normal(size=(6, 3))
    y = np.array([0, 1, 2, 1, 0, 2])
    means = rng.normal(size=(3, 3))
    log_var = np.array([0.1, -0.4, 0.7])
    loss = sup_e_loss(torch.tensor(z), torch.tensor(y), torch.tensor(means),
                      torch.tensor(log_var), beta=0.1, l2=1e-2)
    logits = np.stack([multivariate_normal(m, np.exp(lv) * np.eye(3)).logpdf(z)
                       for m, lv in zip(means, log_var, strict=True)], axis=1)
    ce = -np.mean(scipy_log_softmax(logits, axis=1)[np.arange(6), y])
    expected = ce + 0.1 * np.sum(3 / np.exp(log_var)) + 1e-2 * np.sum(means**2)
    assert float(loss) == pytest.approx(expected, rel=1e-10)


def test_meta_loss_gradients_reach_encoder_and_head(seed):
    """Check gradients flow to the encoder, mu0, log s0 and beta_raw."""
    module = FLOWRMetaModule(MLPEncoder(8, hidden=(32,), embedding_dim=4))
    x = torch.randn(16, 8)
    z = module(x)
    y_q = torch.tensor([0, 1, 2, 3, 3, 4, 4, 0])
    loss = meta_training_loss(z[:8], torch.arange(8) % 3, z[8:], y_q, 3,
                              **module.episode_params())
    loss.backward()
    for name in ["prior_mean", "prior_log_var", "beta_raw"]:
        grad = getattr(module, name).grad
        assert grad is not None and torch.all(torch.isfinite(grad)), name
        assert grad.abs().sum() > 0, name
    assert all(p.grad is not None and p.grad.abs().sum() > 0
               for p in module.encoder.parameters())


def test_large_context_gradients_reach_known_table(seed):
    """Check gradients flow to the known-known (q_n, log lam_n) parameters."""
    module = FLOWRMetaModule(MLPEncoder(8, hidden=(32,), embedding_dim=4),
                             known_means=np.zeros((3, 4)), known_vars=np.ones(3))
    z = module(torch.randn(9, 8))
    loss = meta_training_loss(z[:0], torch.zeros(0, dtype=torch.long), z,
                              torch.tensor([0, 1, 2, 0, 3, 3, 4, 4, 1]), 0,
                              **module.episode_params())
    loss.backward()
    assert module.known_nat_mean.grad.abs().sum() > 0
    assert module.known_log_precision.grad.abs().sum() > 0
    assert module.beta_raw.grad.abs() > 0


def test_sup_e_gradients_reach_encoder_means_and_variances(seed):
    """Check Sup-E gradients reach the encoder, class means and variances."""
    module = SupEModule(MLPEncoder(8, hidden=(32,), embedding_dim=4), n_classes=3)
    logits_loss = sup_e_loss(module.encoder(torch.randn(6, 8)),
                             torch.tensor([0, 1, 2, 0, 1, 2]),
                             module.class_means, module.class_log_var)
    logits_loss.backward()
    for parameter in [module.class_means, module.class_log_var,
                      *module.encoder.parameters()]:
        assert parameter.grad is not None and parameter.grad.abs().sum() > 0
