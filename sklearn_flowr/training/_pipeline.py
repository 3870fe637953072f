"""FLOWR's training as one pipeline of stages.

``pre-train -> match the noise scale -> meta-train -> build the head``
(docs/design.rst, section 5). :func:`check_training_plan` runs every check
the stages would make on the labels before any of them starts;
:func:`train_flowr` runs them and returns the fitted attributes of
:class:`~sklearn_flowr.FLOWRClassifier`, setting nothing on it.
"""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import torch

from ..protocol._cross_fit import cross_fit_plan
from ._config import FLOWRConfig
from ._device import to_device_if_fits
from ._head_building import build_head
from ._meta_training import check_meta_training_plan, meta_train
from ._pretraining import build_encoder, embed_rows, match_noise_scale, pretrain
from ._runner import StageRunner

__all__ = ["check_calibration_plan", "check_fold_training", "check_training_plan",
           "train_flowr"]


def check_training_plan(config: FLOWRConfig, y_index, n_classes: int,
                        seed: int) -> None:
    """Fail before any training on labels the stages would reject.

    Parameters
    ----------
    config : FLOWRConfig
        Already checked on its own (building it checks it).
    y_index : ndarray of shape (n_samples,)
    n_classes : int
    seed : int

    Raises
    ------
    ValueError
        Fewer than 2 classes, a class of one row with ``calibrate_novelty``,
        or what meta-training's episodes would refuse.

    Examples
    --------
    >>> import numpy as np
    >>> check_training_plan(FLOWRConfig(), np.zeros(10, int), 1, seed=0)
    Traceback (most recent call last):
    ...
    ValueError: fit needs at least 2 classes; got 1 class.
    """
    if n_classes < 2:
        raise ValueError(f"fit needs at least 2 classes; got {n_classes} class.")
    if config.calibrate_novelty:
        smallest = int(np.bincount(y_index, minlength=n_classes).min())
        if smallest < 2:
            raise ValueError(
                "calibrate_novelty=True draws open-world tasks from the training "
                "classes and needs at least 2 rows in every class; the smallest "
                f"has {smallest}. Give more rows or set calibrate_novelty=False.")
    check_meta_training_plan(config, y_index, n_classes, seed)


def check_calibration_plan(config: FLOWRConfig, X, y, seed: int):
    """The folds of ``config.calibration_cv``, each checked as ``fit`` checks
    its data, before any training; ``None`` without cross-fitting.

    Parameters
    ----------
    config : FLOWRConfig
    X : ndarray of shape (n_samples, ...)
    y : ndarray of shape (n_samples,)
        Class labels.
    seed : int
        The fit's seed (the folds' models and rows are drawn from it).

    Returns
    -------
    plan : list of Bunch or None
        :func:`~sklearn_flowr.protocol._cross_fit.cross_fit_plan`'s folds.

    Raises
    ------
    ValueError
        A fold that does not split whole classes, or whose training classes
        the training stages would refuse (e.g. fewer than ``n_unknown + 1``).

    Examples
    --------
    >>> import numpy as np
    >>> config = FLOWRConfig(calibration_cv=2, n_unknown=1)
    >>> plan = check_calibration_plan(config, np.zeros((40, 1)),
    ...                               np.repeat(np.arange(4), 10), seed=0)
    >>> [p.n_held_classes for p in plan]
    [2, 2]
    """
    if config.calibration_cv is None:
        return None
    plan = cross_fit_plan(config.calibration_cv, X, y, setting=config.setting,
                          random_state=seed)
    check_fold_training(config, y, plan)
    return plan


def fold_overrides(config) -> dict:
    """Parameters of the fold models that differ from the calibrated model's
    beside its map and folds: with ``noise_shrinkage="auto"`` each fold's
    head is rebuilt for every candidate, so its own is the plain estimate."""
    return ({"noise_shrinkage": 0.0} if isinstance(config.noise_shrinkage, str)
            else {})


def check_fold_training(config: FLOWRConfig, y, plan) -> None:
    """Fail before any training if a cross-fitting fold's training classes
    are ones the training stages would refuse.

    Parameters
    ----------
    config : FLOWRConfig
        The configuration of the model being calibrated.
    y : ndarray of shape (n_samples,)
    plan : list of Bunch
        :func:`~sklearn_flowr.protocol._cross_fit.cross_fit_plan`'s folds.

    Raises
    ------
    ValueError
        Naming the fold and the number of classes it trains on.
    """
    fold_config = dataclasses.replace(config, calibrate_novelty=False,
                                      calibration_cv=None, **fold_overrides(config))
    for number, fold in enumerate(plan):
        labels, y_index = np.unique(y[fold.fit_rows], return_inverse=True)
        try:
            check_training_plan(fold_config, y_index, labels.shape[0], fold.seed)
        except ValueError as exc:
            raise ValueError(f"Fold {number} of calibration_cv trains on "
                             f"{labels.shape[0]} classes: {exc}") from exc


def train_flowr(X, labels, y_index, config: FLOWRConfig, runner: StageRunner,
                head_template) -> dict:
    """Pre-train, match the scale, meta-train and build the head.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features) or (n_samples, C, H, W)
        Model input (see :func:`sklearn_flowr._inputs.as_model_input`).
    labels : ndarray of shape (n_classes,)
    y_index : ndarray of shape (n_samples,)
        Class index of each row.
    config : FLOWRConfig
    runner : StageRunner
    head_template : CRPGaussianClassifier
        Unfitted head with the configuration's hyper-parameters.

    Returns
    -------
    dict
        The fitted attributes: ``history_``, ``pretrained_encoder_``,
        ``meta_module_``, ``encoder_``, ``train_classes_``, ``input_shape_``,
        ``n_features_in_``, ``noise_scale_``, ``head_``.

    Examples
    --------
    >>> import numpy as np, torch
    >>> from sklearn.datasets import load_digits
    >>> from sklearn_flowr import CRPGaussianClassifier
    >>> X, y = load_digits(return_X_y=True)
    >>> X, y = (X[y < 4] / 16).astype("f4"), y[y < 4]
    >>> config = FLOWRConfig(backbone="mlp", setting="large", embedding_dim=4,
    ...                      pretrain_epochs=1, meta_epochs=1,
    ...                      episodes_per_epoch=2, n_way=2, n_unknown=1,
    ...                      verbose=0)
    >>> fitted = train_flowr(X, np.arange(4), y, config,
    ...                      StageRunner(torch.device("cpu"), seed=0),
    ...                      CRPGaussianClassifier(**config.head_params()))
    >>> fitted["head_"].classes_, sorted(fitted["history_"])
    (array([0, 1, 2, 3]), ['meta', 'pretrain'])
    """
    torch.manual_seed(runner.seed)
    # On a GPU the training images live there when they fit, so batches and
    # episodes are gathered on the device.
    X_train = (X if runner.accelerator is not None
               else to_device_if_fits(X, runner.device))
    encoder = build_encoder(config, X)
    encoder, means, variances = pretrain(encoder, X_train, y_index, len(labels),
                                         config, runner)
    noise_scale = 1.0
    if config.match_sigma:
        means, variances, noise_scale = match_noise_scale(
            encoder, X_train, y_index, means, variances, sigma=config.sigma,
            batch_size=config.batch_size)
    # Baselines are compared on the pre-trained encoder, before FLOWR's
    # meta-training changes it (same object when there is none).
    pretrained = encoder if config.meta_epochs == 0 else copy.deepcopy(encoder)
    meta = meta_train(encoder, X_train, y_index, means, variances, config, runner)
    meta.eval()
    needs_embeddings = (config.covariance == "full" or config.setting == "large"
                        or (config.calibrate_novelty
                            and config.calibration_cv is None))
    Z = (embed_rows(meta.encoder, X_train, config.batch_size) if needs_embeddings
         else None)
    head = build_head(head_template, meta, Z, y_index, labels, config,
                      random_state=runner.seed)
    return dict(history_=runner.history, pretrained_encoder_=pretrained.eval(),
                meta_module_=meta, encoder_=meta.encoder, train_classes_=labels,
                input_shape_=X.shape[1:], n_features_in_=int(np.prod(X.shape[1:])),
                noise_scale_=noise_scale, head_=head)
