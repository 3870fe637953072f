"""Sup-E pre-training loss, in torch: each training class a Gaussian
``N(mu_n, s_n I)`` in the embedding, on :mod:`sklearn_flowr._core`'s densities.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from .._core import log_density_coef, log_density_features

__all__ = ["SupELoss", "sup_e_logits", "sup_e_loss", "sup_e_penalty"]


def sup_e_logits(z: torch.Tensor, class_means: torch.Tensor,
                 class_log_var: torch.Tensor) -> torch.Tensor:
    """Sup-E logits ``log N(z; mu_n, s_n I)``, shape (n_samples, n_classes), of
    ``z`` (n_samples, d) under class means (n_classes, d) and log-variances
    (n_classes,).

    Examples
    --------
    With unit variances in two dimensions the logits are
    ``-log(2 pi) - ||z - mu_n||^2 / 2``:

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
                  beta: float = 0.1, l2: float = 1e-4) -> torch.Tensor:
    """Sup-E regulariser ``beta * sum_n tr(Sigma_n^-1) + l2 * sum_n ||mu_n||^2``
    (``tr(Sigma_n^-1) = d / s_n`` keeps the variances from collapsing; ``l2`` is
    a weak Gaussian prior on the means).

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
               class_log_var: torch.Tensor, *, beta: float = 0.1,
               l2: float = 1e-4) -> torch.Tensor:
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
    beta : float, default=0.1
        Weight of ``sum_n tr(Sigma_n^-1)``.
    l2 : float, default=1e-4
        Weight of the Gaussian prior ``sum_n ||mu_n||^2`` on the class means.

    Examples
    --------
    The criterion of :class:`SupENet`, on the logits of :func:`sup_e_logits`:

    >>> import torch
    >>> z, y = torch.tensor([[0.0, 0.0], [2.0, 2.0]]), torch.tensor([0, 1])
    >>> means, log_var = z.clone(), torch.zeros(2)
    >>> loss = SupELoss(beta=0.1)(sup_e_logits(z, means, log_var), y, means, log_var)
    >>> loss.shape
    torch.Size([])
    """

    def __init__(self, beta: float = 0.1, l2: float = 1e-4):
        super().__init__()
        self.beta = beta
        self.l2 = l2

    def forward(self, logits, y, class_means, class_log_var):
        """Loss of Sup-E ``logits`` (n, n_classes) for class indices ``y``."""
        return F.cross_entropy(logits, y.long()) + sup_e_penalty(
            class_means, class_log_var, beta=self.beta, l2=self.l2)
