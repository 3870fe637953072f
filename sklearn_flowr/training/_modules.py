"""Torch modules of the training stages: an encoder plus what its stage learns."""

from __future__ import annotations

import copy

import numpy as np
import torch
from torch import nn

from .._core import concentration_from_raw, raw_from_concentration
from ..encoders import last_linear_layer
from ._class_stats import initial_prior
from ._losses import sup_e_logits
from ._stages import MetaTraining

__all__ = ["FLOWRMetaModule", "SupEModule", "SupFCModule"]


def _embedding_dim(encoder: nn.Module, embedding_dim: int | None) -> int:
    """The given dimension, or the width of the encoder's last linear layer."""
    return int(embedding_dim or last_linear_layer(encoder).out_features)


def _check_settings(a, sigma, class_prior, known_count) -> None:
    if not 0.0 <= a < 1.0:
        raise ValueError(f"a={a} must lie in [0, 1).")
    if not sigma > 0:
        raise ValueError(f"sigma={sigma} must be positive.")
    if class_prior not in ("crp", "uniform"):
        raise ValueError(
            f"class_prior must be 'crp' or 'uniform'; got {class_prior!r}.")
    if known_count is not None and not known_count > a:
        raise ValueError(f"known_count={known_count} must exceed a={a}: a class "
                         "needs a CRP count c_n > a to have prior mass.")


class SupEModule(nn.Module):
    """Encoder plus Sup-E class embeddings ``N(mu_n, s_n I)``: ``class_means``
    (n_classes, d) from ``N(0, I / d)``, ``class_log_var`` at ``init_log_var``.

    Examples
    --------
    >>> import torch
    >>> from sklearn_flowr.encoders import MLPEncoder
    >>> module = SupEModule(MLPEncoder(8, hidden=(16,), embedding_dim=4), 3)
    >>> module(torch.zeros(2, 8)).shape
    torch.Size([2, 3])
    """

    def __init__(self, encoder: nn.Module, n_classes: int,
                 embedding_dim: int | None = None, init_log_var: float = 0.0):
        super().__init__()
        self.encoder = encoder
        d = _embedding_dim(encoder, embedding_dim)
        self.class_means = nn.Parameter(torch.randn(n_classes, d) / d**0.5)
        self.class_log_var = nn.Parameter(torch.full((n_classes,), float(init_log_var)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Sup-E logits ``log N(phi(x); mu_n, s_n I)``, shape (n, n_classes)."""
        return sup_e_logits(self.encoder(x), self.class_means, self.class_log_var)


class SupFCModule(nn.Module):
    """Encoder plus a linear classification layer (the Sup-FC baseline).

    Examples
    --------
    >>> import torch
    >>> from sklearn_flowr.encoders import MLPEncoder
    >>> module = SupFCModule(MLPEncoder(8, hidden=(16,), embedding_dim=4), 3)
    >>> module(torch.zeros(2, 8)).shape
    torch.Size([2, 3])
    """

    def __init__(self, encoder: nn.Module, n_classes: int,
                 embedding_dim: int | None = None):
        super().__init__()
        self.encoder = encoder
        self.classifier = nn.Linear(_embedding_dim(encoder, embedding_dim), n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Class logits, shape (n, n_classes)."""
        return self.classifier(self.encoder(x))


class FLOWRMetaModule(nn.Module):
    """Encoder plus the learnable FLOWR head parameters, for meta-training.

    Parameters
    ----------
    encoder : torch.nn.Module
    embedding_dim : int or None, default=None
        None: the width of the encoder's last ``nn.Linear``.
    a, sigma, learn_sigma, class_prior, known_count
        The episodes' settings (None: :meth:`MetaTraining.module_params`).
    prior_mean, prior_var : float or array-like of shape (embedding_dim,)
        Initial ``mu0`` (0.0) and ``s0`` (1.0; a float: isotropic), learned.
    b : float, default=1.0
        Initial CRP concentration, ``> -a``; learned as ``beta_raw``.
    known_means, known_vars : array-like or None, default=None
        ``mu_n`` (n_known, d) and ``s_n`` (n_known,) of the large context's
        known-known classes, learned.
    freeze_batch_norm : bool, default=True
        Keep the encoder's batch norm in evaluation mode while meta-training.

    Examples
    --------
    >>> import torch
    >>> from sklearn_flowr.encoders import MLPEncoder
    >>> from sklearn_flowr.training import SupEModule, flowr_episode_logits
    >>> module = FLOWRMetaModule(MLPEncoder(8, hidden=(16,), embedding_dim=4),
    ...                          prior_var=2.0, b=1.5)
    >>> z = module(torch.zeros(5, 8))
    >>> flowr_episode_logits(z[:2], torch.tensor([0, 1]), z[2:], 2,
    ...                      **module.episode_params()).shape  # 2 + novel
    torch.Size([3, 3])
    >>> kwargs = module.head_kwargs()  # for CRPGaussianClassifier
    >>> round(kwargs["b"], 6), round(kwargs["prior_var"], 6)
    (1.5, 2.0)
    >>> sup_e = SupEModule(MLPEncoder(8, hidden=(16,), embedding_dim=4), 3)
    >>> FLOWRMetaModule.from_sup_e(sup_e, setting="large").n_known  # Sup-E's classes
    3
    """

    def __init__(self, encoder: nn.Module, embedding_dim: int | None = None, *,
                 a=None, sigma=None, learn_sigma=None, class_prior=None,
                 prior_mean=0.0, prior_var=1.0, b: float = 1.0,
                 known_means=None, known_vars=None, known_count=None,
                 freeze_batch_norm: bool = True):
        super().__init__()
        self.freeze_batch_norm = bool(freeze_batch_norm)
        given = dict(a=a, sigma=sigma, learn_sigma=learn_sigma,
                     class_prior=class_prior, known_count=known_count)
        settings = {**MetaTraining().module_params(),
                    **{k: v for k, v in given.items() if v is not None}}
        a, sigma, learn_sigma, class_prior, known_count = settings.values()
        _check_settings(a, sigma, class_prior,
                        None if known_means is None else known_count)
        self.encoder = encoder
        self.a = float(a)
        self.sigma = float(sigma)
        self.class_prior = class_prior
        d = _embedding_dim(encoder, embedding_dim)
        mean = np.broadcast_to(np.asarray(prior_mean, dtype=np.float32), (d,))
        var = np.atleast_1d(np.asarray(prior_var, dtype=np.float32))
        if var.shape not in ((1,), (d,)) or not np.all(var > 0):
            raise ValueError(
                f"prior_var must be positive, a float or of shape ({d},); got "
                f"{prior_var!r}."
            )
        self.prior_mean = nn.Parameter(torch.tensor(mean.copy()))
        self.prior_log_var = nn.Parameter(torch.log(torch.tensor(var.copy())))
        self.beta_raw = nn.Parameter(torch.tensor(raw_from_concentration(b, a)))
        self.log_sigma = (nn.Parameter(torch.tensor(float(np.log(sigma))))
                          if learn_sigma else None)
        if known_means is None:
            self.known_nat_mean = None
            self.known_log_precision = None
            self.register_buffer("known_counts", None)
            return
        if known_vars is None:
            raise ValueError("known_vars must be given with known_means.")
        means = torch.as_tensor(np.asarray(known_means), dtype=torch.float32)
        variances = torch.as_tensor(np.asarray(known_vars),
                                    dtype=torch.float32).reshape(-1, 1)
        if means.ndim != 2 or means.shape[1] != d or variances.shape[0] != len(means):
            raise ValueError(
                f"known_means must have shape (n_known, {d}) and known_vars shape "
                f"(n_known,); got {tuple(means.shape)} and "
                f"{tuple(variances.shape)}."
            )
        # (q_n, log lam_n) from Sup-E's (mu_n, s_n): q = mu / s, lam = 1 / s.
        self.known_nat_mean = nn.Parameter(means / variances)
        self.known_log_precision = nn.Parameter(-torch.log(variances))
        self.register_buffer(
            "known_counts", torch.full((len(means),), float(known_count))
        )

    #: The learned model parameters, in an optimizer group of their own.
    prior_parameter_names = ("prior_mean", "prior_log_var", "beta_raw", "log_sigma",
                            "known_nat_mean", "known_log_precision")

    def train(self, mode: bool = True):
        """Set training mode; batch norm stays in evaluation mode if frozen."""
        super().train(mode)
        if mode and self.freeze_batch_norm:
            for module in self.encoder.modules():
                if isinstance(module, nn.modules.batchnorm._BatchNorm):
                    module.eval()
        return self

    @property
    def n_known(self) -> int:
        """Number of known-known classes (0 in the small context)."""
        return 0 if self.known_nat_mean is None else self.known_nat_mean.shape[0]

    def forward(self, x: torch.Tensor, **_episode) -> torch.Tensor:
        """Embed ``x``, shape (n, embedding_dim) (the episode's mask is ignored)."""
        return self.encoder(x)

    def episode_params(self, *, include_known: bool = True) -> dict:
        """Keyword arguments of :func:`flowr_episode_logits` for this module (tensors
        keep their graph); ``include_known=False`` leaves the known-known table out."""
        params = {
            "prior_mean": self.prior_mean,
            "prior_log_var": self.prior_log_var,
            "beta_raw": self.beta_raw,
            "a": self.a,
            "sigma": self.sigma if self.log_sigma is None else self.log_sigma.exp(),
            "class_prior": self.class_prior,
        }
        if include_known and self.n_known:
            params.update(
                known_nat_mean=self.known_nat_mean,
                known_precision=torch.exp(self.known_log_precision),
                known_counts=self.known_counts,
            )
        return params

    def head_kwargs(self) -> dict:
        """The learned model as :class:`~sklearn_flowr.CRPGaussianClassifier` kwargs:
        ``a``, ``b``, ``sigma``, ``class_prior``, ``prior_mean``, ``prior_var``
        (a float when isotropic), in float64."""
        var = np.exp(self.prior_log_var.detach().cpu().double().numpy())
        b = concentration_from_raw(self.beta_raw.detach().cpu().double(), self.a)
        return {
            "a": self.a,
            "b": float(b),
            "sigma": (self.sigma if self.log_sigma is None
                      else float(self.log_sigma.detach().double().exp())),
            "class_prior": self.class_prior,
            "prior_mean": self.prior_mean.detach().cpu().double().numpy(),
            "prior_var": float(var[0]) if var.shape[0] == 1 else var,
        }

    @classmethod
    def from_sup_e(cls, sup_e: SupEModule, *, setting: str = "small",
                   copy_encoder: bool = True, **kwargs) -> FLOWRMetaModule:
        """Start meta-training from a Sup-E module: the prior at the empirical
        Bayes estimate of its class means and, in the large context, the
        known-known table at its classes. ``copy_encoder=False`` shares
        ``sup_e``'s encoder (default: a copy); ``kwargs``: other parameters."""
        if setting not in ("small", "large"):
            raise ValueError(f"setting must be 'small' or 'large'; got {setting!r}.")
        means = sup_e.class_means.detach().cpu().numpy()
        variances = np.exp(sup_e.class_log_var.detach().cpu().numpy())
        # The same empirical-Bayes start as FLOWRClassifier's meta-training.
        prior_mean, prior_var = initial_prior(means)
        kwargs.setdefault("prior_mean", prior_mean)
        kwargs.setdefault("prior_var", prior_var)
        if setting == "large":
            kwargs.setdefault("known_means", means)
            kwargs.setdefault("known_vars", variances)
        encoder = copy.deepcopy(sup_e.encoder) if copy_encoder else sup_e.encoder
        return cls(encoder, means.shape[1], **kwargs)
