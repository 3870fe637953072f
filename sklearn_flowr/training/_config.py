"""One validated configuration of FLOWR's training and head.

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
from numbers import Integral, Real
from typing import Any

import torch
from sklearn.utils._param_validation import (
    HasMethods,
    Interval,
    StrOptions,
    validate_parameter_constraints,
)

from ..encoders._factory import BACKBONE_NAMES

__all__ = ["PARAMETER_CONSTRAINTS", "FLOWRConfig", "check_head_hyperparameters"]

# The constraint of each FLOWRClassifier parameter on its own (scikit-learn's
# ``_parameter_constraints``); FLOWRConfig adds those between parameters.
PARAMETER_CONSTRAINTS: dict = {
    "backbone": [StrOptions(set(BACKBONE_NAMES)),
                 torch.nn.Module],
    "setting": [StrOptions({"small", "large"})],
    "pretrain": [StrOptions({"sup-e", "sup-fc"}), None],
    "class_stats": [StrOptions({"empirical", "learned"})],
    "a": [Interval(Real, 0, 1, closed="left")],
    "sigma": [Interval(Real, 0, None, closed="neither")],
    "class_prior": [StrOptions({"crp", "uniform"})],
    "covariance": [StrOptions({"isotropic", "full"})],
    "prior_scale": [Interval(Real, 0, None, closed="neither")],
    "noise_shrinkage": [Interval(Real, 0, 1, closed="both"), StrOptions({"auto"})],
    "calibrate_novelty": ["boolean"],
    "calibration_cv": ["cv_object", None],
    "match_sigma": ["boolean"],
    "known_count": [Interval(Real, 0, None, closed="neither")],
    "novel_label": "no_validation",
    "embedding_dim": [Interval(Integral, 1, None, closed="left")],
    "pretrain_epochs": [Interval(Integral, 0, None, closed="left")],
    "meta_epochs": [Interval(Integral, 0, None, closed="left")],
    "episodes_per_epoch": [Interval(Integral, 1, None, closed="left")],
    "n_way": [Interval(Integral, 1, None, closed="left")],
    "n_query": [Interval(Integral, 1, None, closed="left")],
    "n_unknown": [Interval(Integral, 0, None, closed="left")],
    "lr": [Interval(Real, 0, None, closed="neither"), None],
    "meta_lr": [Interval(Real, 0, None, closed="neither"), None],
    "head_lr": [Interval(Real, 0, None, closed="neither"), None],
    "learn_sigma": ["boolean"],
    "batch_size": [Interval(Integral, 1, None, closed="left")],
    "beta": [Interval(Real, 0, None, closed="left")],
    "lambda_adapt": [Interval(Real, 0, None, closed="left")],
    "fine_tune_steps": [Interval(Integral, 0, None, closed="left")],
    "known_table": [StrOptions({"refit", "learned"})],
    "update_known": ["boolean"],
    "autocast": [StrOptions({"bf16"}), None],
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
    """FLOWR's training and head hyper-parameters, checked together.

    The fields are :class:`~sklearn_flowr.FLOWRClassifier`'s parameters of the
    same names (see there for their meaning), with the learning rates
    resolved: ``lr`` holds the pre-training rate (the paper's 1e-3 for
    Conv4/MLP, 1e-4 for ResNets when the estimator's is ``None``) and
    ``meta_lr`` the meta-training rate (a tenth of ``lr`` when ``None``).
    Building one runs every cross-parameter check; single values are checked
    by the estimator's ``_parameter_constraints`` first.

    Examples
    --------
    >>> config = FLOWRConfig.from_params(dict(backbone="resnet12", lr=None,
    ...                                       meta_lr=None))
    >>> config.lr, config.meta_lr
    (0.0001, 1e-05)
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
    covariance: str = "full"
    prior_scale: float = 1.0
    noise_shrinkage: float | str = 0.0
    calibrate_novelty: bool = True
    calibration_cv: Any = None
    known_count: float = 1.0
    novel_label: Any = "auto"
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
    update_known: bool = False
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
        if self.covariance == "isotropic" and self.prior_scale != 1.0:
            raise ValueError(
                f"prior_scale={self.prior_scale} scales the empirical-Bayes prior "
                "of the full head; the isotropic head's prior is meta-learned. "
                "Use covariance='full' or prior_scale=1.0.")
        if self.covariance == "isotropic" and self.noise_shrinkage != 0.0:
            raise ValueError(
                f"noise_shrinkage={self.noise_shrinkage} shrinks the full head's "
                "estimated noise covariance; the isotropic head's noise is "
                "sigma * I already. Use covariance='full' or noise_shrinkage=0.0.")
        if (isinstance(self.noise_shrinkage, str) and self.calibration_cv is None
                and self.covariance == "full"):
            raise ValueError(
                "noise_shrinkage='auto' is chosen on the held-out classes of "
                "calibration_cv's folds; set calibration_cv (e.g. 2) or give "
                "noise_shrinkage a number.")
        if self.calibration_cv is not None and not self.calibrate_novelty:
            raise ValueError(
                "calibration_cv sets how the novelty map is fitted, and "
                "calibrate_novelty=False fits none; set calibrate_novelty=True "
                "or calibration_cv=None.")
        if self.covariance == "full" and self.known_table == "learned":
            raise ValueError(
                "known_table='learned' keeps the meta-trained isotropic class "
                "table, which covariance='full' (the default) replaces by "
                "empirical Bayes; use known_table='refit', or "
                "covariance='isotropic' (the paper's head) to keep the table.")

    @classmethod
    def from_params(cls, params: dict) -> FLOWRConfig:
        """The configuration of an estimator's ``get_params(deep=False)``.

        Each value is checked against :data:`PARAMETER_CONSTRAINTS` first
        (scikit-learn's ``InvalidParameterError``), then the combination.
        Parameters the configuration does not hold (``device``,
        ``accelerator``, ``random_state``, ``fine_tune_steps``) are ignored:
        they say where and from which seed training runs, not what it trains.
        """
        validate_parameter_constraints(
            {name: PARAMETER_CONSTRAINTS[name] for name in params
             if name in PARAMETER_CONSTRAINTS},
            params, caller_name="FLOWRClassifier")
        fields = {field.name for field in dataclasses.fields(cls)}
        values = {name: value for name, value in params.items() if name in fields}
        lr = values.get("lr")
        if lr is None:
            backbone = values.get("backbone", cls.backbone)
            resnet = isinstance(backbone, str) and backbone.startswith("resnet")
            lr = 1e-4 if resnet else 1e-3
        values["lr"] = lr
        # A pre-trained encoder is refined, not re-learned (see ``meta_lr``).
        meta_lr = values.get("meta_lr")
        values["meta_lr"] = lr / 10 if meta_lr is None else meta_lr
        return cls(**values)

    @property
    def takes_features(self) -> bool:
        """Whether the encoder reads feature vectors (an MLP or a user module)."""
        return not isinstance(self.backbone, str) or self.backbone == "mlp"

    def head_params(self) -> dict:
        """:class:`~sklearn_flowr.CRPGaussianClassifier` parameters of the head."""
        return dict(a=self.a, sigma=self.sigma, class_prior=self.class_prior,
                    known_count=self.known_count, novel_label=self.novel_label)

    def meta_module_params(self) -> dict:
        """:class:`~._heads.FLOWRMetaModule` hyper-parameters (its prior aside)."""
        return dict(a=self.a, sigma=self.sigma, learn_sigma=self.learn_sigma,
                    class_prior=self.class_prior, known_count=self.known_count)
