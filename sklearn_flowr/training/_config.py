"""One validated configuration of FLOWR's training.

:class:`~sklearn_flowr.FLOWRClassifier` turns its parameters into a
:class:`FLOWRConfig` before any training starts; the training stages
(:mod:`._stages`), the meta-module (:class:`~._heads.FLOWRMetaModule`) and the
head read their hyper-parameters from it. Every check that involves more than
one parameter lives here, so a bad combination fails in ``fit`` before
pre-training, whatever the context (docs/design.rst, section 5).
"""

from __future__ import annotations

import dataclasses
import os
from numbers import Integral
from typing import Any

import torch
from sklearn.utils._param_validation import (
    HasMethods,
    Interval,
    StrOptions,
)

from ..encoders import BACKBONE_NAMES
from ._stages import MAX_COUNT

__all__ = ["PARAMETER_CONSTRAINTS", "FLOWRConfig", "check_head_hyperparameters"]

# The constraint of each FLOWRClassifier parameter on its own (scikit-learn's
# ``_parameter_constraints``); the stages validate their own settings and
# FLOWRConfig the combination.
PARAMETER_CONSTRAINTS: dict = {
    "backbone": [StrOptions(set(BACKBONE_NAMES)), torch.nn.Module],
    "setting": [StrOptions({"small", "large"})],
    "head": [HasMethods(["fit", "partial_fit", "predict_proba", "open_world_step"])],
    "pretrain": [HasMethods(["config_fields"]), None],
    "meta": [HasMethods(["config_fields"]), None],
    "calibration": [StrOptions({"train"}), "cv_object", None],
    "embedding_dim": [Interval(Integral, 1, 65536, closed="both")],
    "fine_tune_steps": [Interval(Integral, 0, MAX_COUNT, closed="both")],
    "update_known": ["boolean"],
    "reuse_encoder": ["boolean"],
    "device": [str, torch.device],
    "accelerator": [HasMethods(["prepare", "backward"]), None],
    "random_state": ["random_state"],
    "verbose": ["verbose"],
    "checkpoint_dir": [str, os.PathLike, None],
}


def check_head_hyperparameters(*, a: float, sigma: float, class_prior: str,
                               known_count: float | None = None) -> None:
    """Fail on head hyper-parameters the CRP-Gaussian model cannot take.

    Shared by :class:`FLOWRConfig` and :class:`~._heads.FLOWRMetaModule`, so
    the estimator and a meta-module built by hand refuse the same values with
    the same messages.

    Parameters
    ----------
    a : float
        CRP discount, in [0, 1).
    sigma : float
        Class-noise variance, positive.
    class_prior : {"crp", "uniform"}
    known_count : float or None, default=None
        CRP pseudo-count of the known-known classes; it must exceed ``a``
        (``c_n - a`` is a class's prior mass). ``None``: not checked.

    Raises
    ------
    ValueError
        Naming the parameter, its value and the bound.

    Examples
    --------
    >>> check_head_hyperparameters(a=0.5, sigma=0.5, class_prior="crp",
    ...                            known_count=1.0)
    >>> check_head_hyperparameters(a=0.9, sigma=0.5, class_prior="crp",
    ...                            known_count=0.5)
    Traceback (most recent call last):
    ...
    ValueError: known_count=0.5 must exceed a=0.9: a class needs a CRP count ...
    """
    if not 0.0 <= a < 1.0:
        raise ValueError(f"a={a} must lie in [0, 1).")
    if not sigma > 0:
        raise ValueError(f"sigma={sigma} must be positive.")
    if class_prior not in ("crp", "uniform"):
        raise ValueError(
            f"class_prior must be 'crp' or 'uniform'; got {class_prior!r}.")
    if known_count is not None and not known_count > a:
        raise ValueError(
            f"known_count={known_count} must exceed a={a}: a class needs a CRP "
            "count c_n > a to have prior mass.")


@dataclasses.dataclass(frozen=True)
class FLOWRConfig:
    """FLOWR's training hyper-parameters, checked together.

    The internal form of a :class:`~sklearn_flowr.FLOWRClassifier`'s encoder
    side: its ``backbone``, ``setting`` and ``embedding_dim`` and the settings
    of its stages (:class:`~._stages.SupE` / :class:`~._stages.SupFC`,
    :class:`~._stages.MetaTraining`; ``pretrain_epochs``, ``meta_epochs`` and
    ``meta_lr`` are their ``epochs`` and ``lr``), built by
    :meth:`from_parts`. The online head's parameters are not here: the head
    is built after training from ``FLOWRClassifier(head=...)``, so changing
    them never changes what training computes. Building one runs every
    cross-parameter check.

    Examples
    --------
    >>> FLOWRConfig(a=0.9, known_count=0.5)
    Traceback (most recent call last):
    ...
    ValueError: known_count=0.5 must exceed a=0.9: a class needs a CRP count ...
    """

    backbone: Any = "conv4"
    setting: str = "small"
    pretrain: str | None = "sup-e"
    class_stats: str = "empirical"
    a: float = 0.5
    sigma: float = 0.5
    match_sigma: bool = True
    class_prior: str = "crp"
    known_count: float = 1.0
    embedding_dim: int = 64
    pretrain_epochs: int = 20
    meta_epochs: int = 10
    episodes_per_epoch: int = 100
    n_way: int = 10
    n_query: int = 5
    n_unknown: int = 2
    lr: float = 1e-3
    meta_lr: float = 1e-4
    head_lr: float | None = 1e-2
    learn_sigma: bool = False
    batch_size: int = 64
    beta: float = 0.1
    lambda_adapt: float = 0.1
    known_table: str = "refit"
    autocast: str | None = None
    verbose: int = 1
    checkpoint_dir: str | os.PathLike | None = None

    def __post_init__(self):
        check_head_hyperparameters(a=self.a, sigma=self.sigma,
                                   class_prior=self.class_prior,
                                   known_count=self.known_count)
        if self.class_stats == "learned" and self.pretrain != "sup-e":
            raise ValueError("class_stats='learned' takes Sup-E's learned class "
                             f"parameters and needs pretrain='sup-e'; got "
                             f"pretrain={self.pretrain!r}.")

    @classmethod
    def from_parts(cls, *, backbone="conv4", setting="small", embedding_dim=64,
                   pretrain=None, meta=None, verbose=1,
                   checkpoint_dir=None) -> FLOWRConfig:
        """The configuration of a ``FLOWRClassifier``'s parts.

        Each stage validates its own settings (scikit-learn's
        ``InvalidParameterError``), then the combination is checked. The
        learning rates are resolved here: ``lr`` is the pre-training rate
        (the paper's 1e-3 for Conv4/MLP, 1e-4 for ResNets when ``None``) and
        ``meta_lr`` the meta-training rate (a tenth of ``lr`` when ``None``).
        ``meta=None`` trains no episodes (the prior then comes from the class
        means); ``pretrain=None`` keeps the encoder as built.

        Examples
        --------
        >>> from sklearn_flowr.training import MetaTraining, SupE
        >>> config = FLOWRConfig.from_parts(backbone="resnet12", pretrain=SupE(),
        ...                                 meta=MetaTraining())
        >>> config.lr, config.meta_lr
        (0.0001, 1e-05)
        """
        values = dict(backbone=backbone, setting=setting,
                      embedding_dim=embedding_dim, verbose=verbose,
                      checkpoint_dir=checkpoint_dir)
        if pretrain is None:
            values.update(pretrain=None, pretrain_epochs=0)
        else:
            values.update(pretrain.config_fields())
        if meta is None:
            values["meta_epochs"] = 0
        else:
            values.update(meta.config_fields())
        lr = values.get("lr")
        if lr is None:
            resnet = isinstance(backbone, str) and backbone.startswith("resnet")
            lr = 1e-4 if resnet else 1e-3
        values["lr"] = lr
        # A pre-trained encoder is refined, not re-learned (MetaTraining.lr).
        meta_lr = values.get("meta_lr")
        values["meta_lr"] = lr / 10 if meta_lr is None else meta_lr
        return cls(**values)

    @property
    def takes_features(self) -> bool:
        """Whether the encoder reads feature vectors (an MLP or a user module)."""
        return not isinstance(self.backbone, str) or self.backbone == "mlp"

    def meta_module_params(self) -> dict:
        """:class:`~._heads.FLOWRMetaModule` hyper-parameters (its prior aside)."""
        return dict(a=self.a, sigma=self.sigma, learn_sigma=self.learn_sigma,
                    class_prior=self.class_prior, known_count=self.known_count)
