"""FLOWR's losses in torch, on the ``_core`` maths the NumPy head runs: Sup-E's
(each training class a Gaussian ``N(mu_n, s_n I)`` in the embedding) and
meta-training's (columns: known-known classes, support classes, novel last)."""

from typing import NamedTuple

import torch
from torch import nn
from torch.nn import functional as F

from .._core import (
    concentration_from_raw,
    condition_on,
    crp_log_numerators,
    crp_log_prior,
    log_density_coef,
    log_density_features,
)
from ._device import to_device

__all__ = ["FLOWRMetaLoss", "SupELoss", "flowr_episode_logits", "meta_training_loss",
           "sup_e_logits", "sup_e_loss", "sup_e_penalty"]


# The paper's weights, the defaults of every entry point that takes them.
SUP_E_BETA, SUP_E_L2, LAMBDA_ADAPT = 0.1, 1e-4, 0.1


def _as_tensor(value, like: torch.Tensor) -> torch.Tensor:
    """A tensor on ``like``'s device and dtype (tensors keep their graph)."""
    return torch.as_tensor(value, device=like.device, dtype=like.dtype)


def on_host(labels, dtype=torch.long) -> torch.Tensor:
    """Episode labels or masks as a CPU tensor (a GPU copy synchronises once)."""
    return torch.as_tensor(labels).detach().to("cpu", dtype)


def _episode_coefficients(
    z_support, y_support, n_way, *, prior_mean, prior_log_var, sigma,
    known_nat_mean=None, known_precision=None, known_counts=None,
):
    """Density coefficients of every column (novel last), the classes' CRP
    counts, and the prior's ``q0``, ``lam0``."""
    dtype_like = z_support
    # A scalar mean stands for the same value in every dimension.
    prior_mean = torch.broadcast_to(_as_tensor(prior_mean, dtype_like),
                                    z_support.shape[-1:])
    prior_log_var = _as_tensor(prior_log_var, dtype_like).reshape(-1)
    # q0 = mu0 / s0, lam0 = 1 / s0, through exp(-log s0) so s0 stays positive.
    prior_precision = torch.exp(-prior_log_var)
    prior_nat_mean = prior_mean * prior_precision
    n_known = 0 if known_nat_mean is None else known_nat_mean.shape[0]
    # A support class without a row has count 0 < a: no prior mass, NaN logs.
    # Checked on the host copy of the labels (no GPU synchronisation when the
    # labels come from the host, as the episode sampler gives them).
    columns_host = on_host(y_support) - n_known
    host_counts = torch.bincount(
        columns_host[(columns_host >= 0) & (columns_host < n_way)], minlength=n_way)
    if n_way and bool((host_counts == 0).any()):
        raise ValueError(
            f"Every one of the n_way={n_way} support classes needs at least one "
            f"support row; got counts {host_counts.tolist()}."
        )
    # Comparison rather than F.one_hot, which rejects an empty support set.
    columns = torch.arange(n_known, n_known + n_way, device=z_support.device)
    y_support = to_device(y_support, z_support.device).long()
    onehot = (y_support[:, None] == columns).to(z_support.dtype)
    nat_mean, precision = condition_on(
        prior_nat_mean, prior_precision, z_support, onehot, sigma
    )
    counts = onehot.sum(dim=0)
    if n_known:
        known_precision = _as_tensor(known_precision, dtype_like)
        # An isotropic table next to a diagonal prior (or the reverse) broadcasts.
        width = max(known_precision.shape[-1], precision.shape[-1])
        nat_mean = torch.cat([_as_tensor(known_nat_mean, dtype_like), nat_mean])
        precision = torch.cat([
            known_precision.expand(n_known, width),
            precision.expand(n_way, width),
        ])
        if known_counts is None:
            raise ValueError("known_counts must be given with known_nat_mean.")
        counts = torch.cat([_as_tensor(known_counts, dtype_like), counts])
    prior_row_mean = prior_nat_mean[None]
    prior_row_precision = prior_precision[None].expand(1, precision.shape[-1])
    coef = log_density_coef(
        torch.cat([nat_mean, prior_row_mean]),
        torch.cat([precision, prior_row_precision]),
        sigma,
    )
    return coef, counts, prior_nat_mean, prior_precision


def flowr_episode_logits(z_support: torch.Tensor, y_support: torch.Tensor,
                         z_query: torch.Tensor, n_way: int, **head) -> torch.Tensor:
    """Log-joint scores ``log p(z, n)`` of one episode's query embeddings: the
    support set conditions ``n_way`` classes on the prior ``N(mu0, diag(s0))``.

    Parameters
    ----------
    z_support : tensor of shape (n_support, d)
    y_support : tensor of shape (n_support,)
        Column of each support row, in ``[n_known, n_known + n_way)``; every
        support class needs a row.
    z_query : tensor of shape (n_query, d)
    n_way : int
    prior_mean, prior_log_var, beta_raw, a, sigma, class_prior
        ``mu0``, ``log s0`` (one entry: isotropic), ``b = -a +
        softplus(beta_raw)``, discount, noise variance and class prior, as
        :meth:`FLOWRMetaModule.episode_params` gives them.
    known_nat_mean, known_precision, known_counts : tensor or None, default=None
        ``q_n`` (n_known, d), ``lam_n`` (n_known, 1 or d) and CRP counts of
        the known-known classes (large context).

    Returns
    -------
    logits : tensor of shape (n_query, n_known + n_way + 1)
        Novel last; a row's ``log_softmax`` is the head's ``predict_log_proba``.

    Examples
    --------
    >>> import torch
    >>> z_s = torch.tensor([[0.0, 0.0], [3.0, 3.0]])
    >>> logits = flowr_episode_logits(
    ...     z_s, torch.tensor([0, 1]), torch.tensor([[0.1, 0.0]]), 2,
    ...     prior_mean=0.0, prior_log_var=2.0, beta_raw=0.0, a=0.5, sigma=0.5,
    ...     class_prior="crp")
    >>> logits.shape, int(logits.argmax())
    (torch.Size([1, 3]), 0)
    """
    return _score_episode(z_support, y_support, z_query, n_way, **head).logits


class _EpisodeScores(NamedTuple):
    """An episode's query scores and what the adaptation loss reuses of them."""

    logits: torch.Tensor  # (n_query, n_classes + 1): log N(z; m_n, v_n) + log p(n)
    log_lik: torch.Tensor  # (n_query, n_classes + 1): log N(z; m_n, v_n)
    counts: torch.Tensor  # (n_classes,): CRP counts of the instantiated classes
    b: torch.Tensor  # CRP concentration
    prior_nat_mean: torch.Tensor  # q0, (d,)
    prior_precision: torch.Tensor  # lam0, (p,)


def _score_episode(z_support, y_support, z_query, n_way, *, beta_raw, a,
                   class_prior, **head) -> _EpisodeScores:
    """The query scores of one episode (see :func:`flowr_episode_logits`)."""
    coef, counts, prior_nat_mean, prior_precision = _episode_coefficients(
        z_support, y_support, n_way, **head
    )
    # log N(z; m_n, v_n) for every row and column, one matrix product: coef
    # rows are [m/v (d), -1/(2v) (p), const (1)], p == 1 when isotropic.
    isotropic = coef.shape[-1] == z_query.shape[-1] + 2
    log_lik = log_density_features(z_query, isotropic=isotropic) @ coef.T
    b = concentration_from_raw(_as_tensor(beta_raw, z_query), a)
    log_known, log_novel = crp_log_prior(counts, counts.sum(), counts.shape[0],
                                         a=a, b=b, class_prior=class_prior)
    logits = log_lik + torch.cat([log_known, log_novel.reshape(1)])
    return _EpisodeScores(logits, log_lik, counts, b, prior_nat_mean,
                          prior_precision)


def meta_training_loss(
    z_support: torch.Tensor,
    y_support: torch.Tensor,
    z_query: torch.Tensor,
    y_query: torch.Tensor,
    n_way: int,
    *,
    lambda_adapt: float = LAMBDA_ADAPT,
    **head,
) -> torch.Tensor:
    """FLOWR's meta-training loss ``NLL + lambda_adapt * L_adapt``: the NLL of
    the ``(n_known + n_way + 1)``-way query predictions (``y_query`` columns
    ``>= n_known + n_way``: unknown-unknown classes, labelled novel) and the NLL
    of recognising each unknown-unknown class from its first query row.
    ``head``: the keyword arguments of :func:`flowr_episode_logits`.

    References
    ----------
    .. [1] J. Willes et al., "Bayesian Embeddings for Few-Shot Open World
       Recognition", IEEE TPAMI, 2022, sec. 4.

    Examples
    --------
    >>> import torch
    >>> z = torch.tensor([[0.0, 0.0], [3.0, 3.0], [0.1, 0.0], [-4.0, 5.0],
    ...                   [-4.1, 5.0]])
    >>> loss = meta_training_loss(
    ...     z[:2], torch.tensor([0, 1]), z[2:], torch.tensor([0, 2, 2]), 2,
    ...     prior_mean=0.0, prior_log_var=1.0, beta_raw=0.0, a=0.5, sigma=0.5,
    ...     class_prior="crp")
    >>> loss.ndim, bool(loss > 0)
    (0, True)
    """
    scores = _score_episode(z_support, y_support, z_query, n_way, **head)
    y_host = on_host(y_query)
    # Every unknown-unknown query row is labelled novel, the last column.
    target = y_host.clamp(max=scores.counts.shape[0])
    loss = F.cross_entropy(scores.logits,
                           to_device(target, z_query.device))
    if lambda_adapt == 0:
        return loss
    adapt = _adaptation_nll(z_query, y_host, scores, sigma=head["sigma"],
                            class_prior=head["class_prior"], a=head["a"])
    return loss + lambda_adapt * adapt


def _adaptation_nll(z_query, y_host, scores: _EpisodeScores, *, a, sigma,
                    class_prior):
    """Mean NLL of recognising each unknown-unknown class from one example."""
    log_lik, counts, b = scores.log_lik, scores.counts, scores.b
    n_classes = counts.shape[0]
    positions = torch.nonzero(y_host >= n_classes).reshape(-1)
    if positions.numel() < 2:
        return z_query.new_zeros(())
    _, group = torch.unique(y_host[positions], return_inverse=True)
    n_groups = int(group.max()) + 1
    # The first query row of each unknown-unknown class instantiates it.
    first = torch.full((n_groups,), y_host.shape[0], dtype=positions.dtype)
    first = first.scatter_reduce(0, group, positions, reduce="amin")
    rest = first[group] != positions
    if not bool(rest.any()):
        return z_query.new_zeros(())
    device = z_query.device
    rows = to_device(positions[rest], device)
    row_group = to_device(group[rest], device)
    first = to_device(first, device)
    one = torch.ones(n_groups, 1, dtype=z_query.dtype, device=z_query.device)
    new_nat_mean, new_precision = condition_on(
        scores.prior_nat_mean, scores.prior_precision, z_query[first],
        torch.diag(one[:, 0]), sigma,
    )
    new_coef = log_density_coef(new_nat_mean, new_precision, sigma)
    features = log_density_features(
        z_query[rows], isotropic=new_precision.shape[-1] == 1
    )
    new_log_lik = (features * new_coef[row_group]).sum(dim=-1, keepdim=True)
    # The prior now holds one more class, of count 1; the shared normaliser
    # -log(k + 1 + b) is a row constant and drops out of the cross-entropy.
    log_known, log_novel = crp_log_numerators(
        torch.cat([counts, one[0]]), n_classes + 1, a=a, b=b,
        class_prior=class_prior,
    )
    logits = torch.cat([
        log_lik[rows, :n_classes] + log_known[:n_classes],
        new_log_lik + log_known[n_classes],
        log_lik[rows, n_classes:] + log_novel,
    ], dim=1)
    target = torch.full_like(rows, n_classes)
    return F.cross_entropy(logits, target)


class FLOWRMetaLoss(nn.Module):
    """Meta-training criterion: :func:`meta_training_loss` with a fixed lambda.

    Parameters
    ----------
    lambda_adapt : float, default=0.1
        Weight of the adaptation loss.

    Examples
    --------
    >>> import torch
    >>> from sklearn_flowr.encoders import MLPEncoder
    >>> from sklearn_flowr.training import FLOWRMetaModule
    >>> module = FLOWRMetaModule(MLPEncoder(8, hidden=(16,), embedding_dim=4))
    >>> z = module(torch.randn(7, 8))  # 2 support rows, then 5 query rows
    >>> y_support = torch.tensor([0, 1])
    >>> y_query = torch.tensor([0, 1, 2, 2, 0])  # 2: an unknown-unknown class
    >>> loss = FLOWRMetaLoss(lambda_adapt=0.1)(z[:2], y_support, z[2:], y_query,
    ...                                        2, **module.episode_params())
    >>> loss.shape
    torch.Size([])
    >>> loss.backward()  # gradients reach the learned head parameters
    >>> module.beta_raw.grad is not None
    True
    """

    def __init__(self, lambda_adapt: float = LAMBDA_ADAPT):
        super().__init__()
        self.lambda_adapt = lambda_adapt

    def forward(self, z_support, y_support, z_query, y_query, n_way, **head):
        """Loss of one episode; ``head`` from ``FLOWRMetaModule.episode_params``."""
        return meta_training_loss(z_support, y_support, z_query, y_query, n_way,
                                  lambda_adapt=self.lambda_adapt, **head)


def sup_e_logits(z: torch.Tensor, class_means: torch.Tensor,
                 class_log_var: torch.Tensor) -> torch.Tensor:
    """Sup-E logits ``log N(z; mu_n, s_n I)``, shape (n_samples, n_classes), of
    ``z`` (n_samples, d) under class means (n_classes, d) and log-variances
    (n_classes,).

    Examples
    --------
    >>> import torch
    >>> means = torch.tensor([[0.0, 0.0], [2.0, 2.0]])
    >>> sup_e_logits(torch.tensor([[0.0, 0.0]]), means, torch.zeros(2))
    tensor([[-1.8379, -5.8379]])
    """
    # A Gaussian with natural parameters (mu/s, 1/s) and no extra noise
    # (sigma = 0) has predictive N(mu, s I): the same density code as the head.
    precision = torch.exp(-class_log_var)[:, None]
    coef = log_density_coef(class_means * precision, precision, 0.0)
    return log_density_features(z, isotropic=True) @ coef.T


def sup_e_penalty(class_means: torch.Tensor, class_log_var: torch.Tensor, *,
                  beta: float = SUP_E_BETA, l2: float = SUP_E_L2) -> torch.Tensor:
    """Sup-E regulariser ``beta * sum_n tr(Sigma_n^-1) + l2 * sum_n ||mu_n||^2``,
    with ``tr(Sigma_n^-1) = d / s_n``.

    Examples
    --------
    >>> import torch
    >>> means, log_var = torch.tensor([[1.0, 0.0], [0.0, 2.0]]), torch.zeros(2)
    >>> # beta * sum_n d / s_n = 0.1 * (2 / 1 + 2 / 1)
    >>> round(float(sup_e_penalty(means, log_var, beta=0.1, l2=0.0)), 6)
    0.4
    >>> # l2 * sum_n ||mu_n||^2 = 1 + 4
    >>> float(sup_e_penalty(means, log_var, beta=0.0, l2=1.0))
    5.0
    """
    d = class_means.shape[-1]
    trace = d * torch.exp(-class_log_var).sum()
    return beta * trace + l2 * (class_means * class_means).sum()


def sup_e_loss(z: torch.Tensor, y: torch.Tensor, class_means: torch.Tensor,
               class_log_var: torch.Tensor, *, beta: float = SUP_E_BETA,
               l2: float = SUP_E_L2) -> torch.Tensor:
    """Sup-E pre-training loss: mean cross-entropy of the Gaussian logits of ``z``
    for class indices ``y``, plus :func:`sup_e_penalty` (not averaged).

    References
    ----------
    .. [1] J. Willes et al., "Bayesian Embeddings for Few-Shot Open World
       Recognition", IEEE TPAMI, 2022, sec. 4.

    Examples
    --------
    >>> import torch
    >>> z = torch.tensor([[0.0, 0.0], [2.0, 2.0]])
    >>> means = torch.tensor([[0.0, 0.0], [2.0, 2.0]])
    >>> float(sup_e_loss(z, torch.tensor([0, 1]), means, torch.zeros(2),
    ...                  beta=0.0, l2=0.0)) < 0.1
    True
    """
    return SupELoss(beta=beta, l2=l2)(sup_e_logits(z, class_means, class_log_var),
                                      y, class_means, class_log_var)


class SupELoss(nn.Module):
    """Sup-E criterion: cross-entropy plus :func:`sup_e_penalty`.

    Parameters
    ----------
    beta, l2 : float, default=0.1, 1e-4
        The weights of :func:`sup_e_penalty`, >= 0.

    Examples
    --------
    >>> import torch
    >>> z, y = torch.tensor([[0.0, 0.0], [2.0, 2.0]]), torch.tensor([0, 1])
    >>> means, log_var = z.clone(), torch.zeros(2)
    >>> loss = SupELoss(beta=0.1)(sup_e_logits(z, means, log_var), y, means, log_var)
    >>> loss.shape
    torch.Size([])
    """

    def __init__(self, beta: float = SUP_E_BETA, l2: float = SUP_E_L2):
        super().__init__()
        self.beta = beta
        self.l2 = l2

    def forward(self, logits, y, class_means, class_log_var):
        """Loss of Sup-E ``logits`` (n, n_classes) for class indices ``y``."""
        return F.cross_entropy(logits, y.long()) + sup_e_penalty(
            class_means, class_log_var, beta=self.beta, l2=self.l2)
