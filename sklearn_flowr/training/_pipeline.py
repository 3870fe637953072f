"""FLOWR's training as one pipeline of stages.

``pre-train -> match the noise scale -> meta-train -> embed`` (docs/design.rst,
section 5); the heads are built from its result afterwards
(:mod:`._head_building`). :func:`check_training_plan` runs every check the
stages would make on the labels before any of them starts;
:func:`train_encoder` runs them and returns what they trained, setting nothing
on the estimator.
"""

from __future__ import annotations

import copy

import numpy as np
import torch

from ..protocol import cross_fit_plan
from ._config import FLOWRConfig
from ._device import to_device_if_fits
from ._meta_training import check_meta_training_plan, meta_train
from ._pretraining import build_encoder, embed_rows, match_noise_scale, pretrain
from ._runner import StageRunner

__all__ = ["check_calibration_plan", "check_training_plan", "train_encoder"]


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
        Fewer than 2 classes, or what meta-training's episodes would refuse.

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
    check_meta_training_plan(config, y_index, n_classes, seed)


def check_calibration_plan(cv, config: FLOWRConfig, X, y, seed: int):
    """The folds of a cross-fitted novelty map, each checked as ``fit`` checks
    its data, before any training.

    Parameters
    ----------
    cv : int, cross-validation generator or iterable
        ``FLOWRClassifier(calibration=...)``: folds of whole classes.
    config : FLOWRConfig
    X : ndarray of shape (n_samples, ...)
    y : ndarray of shape (n_samples,)
        Class labels.
    seed : int
        The fit's seed (the folds' models and rows are drawn from it).

    Returns
    -------
    plan : list of Bunch
        :func:`~sklearn_flowr.protocol.cross_fit_plan`'s folds.

    Raises
    ------
    ValueError
        A fold that does not split whole classes, or whose training classes
        the training stages would refuse (e.g. fewer than ``n_unknown + 1``).

    Examples
    --------
    >>> import numpy as np
    >>> config = FLOWRConfig(n_unknown=1)
    >>> plan = check_calibration_plan(2, config, np.zeros((40, 1)),
    ...                               np.repeat(np.arange(4), 10), seed=0)
    >>> [p.n_held_classes for p in plan]
    [2, 2]
    """
    plan = cross_fit_plan(cv, X, y, setting=config.setting, random_state=seed)
    for number, fold in enumerate(plan):
        labels, y_index = np.unique(y[fold.fit_rows], return_inverse=True)
        try:
            check_training_plan(config, y_index, labels.shape[0], fold.seed)
        except ValueError as exc:
            raise ValueError(f"Fold {number} of calibration trains on "
                             f"{labels.shape[0]} classes: {exc}") from exc
    return plan


def train_encoder(X, labels, y_index, config: FLOWRConfig,
                  runner: StageRunner) -> dict:
    """Pre-train, match the scale, meta-train and embed the training data.

    Everything of a fit that the head's parameters do not change; what
    :func:`~._head_building.build_heads` then builds the heads from.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features) or (n_samples, C, H, W)
        Model input (see :func:`sklearn_flowr._inputs.as_model_input`).
    labels : ndarray of shape (n_classes,)
    y_index : ndarray of shape (n_samples,)
        Class index of each row.
    config : FLOWRConfig
    runner : StageRunner

    Returns
    -------
    dict
        ``history_``, ``pretrained_encoder_``, ``meta_module_``,
        ``noise_scale_``, and ``embeddings``: the training rows under the final
        encoder, ndarray of shape (n_samples, embedding_dim).

    Examples
    --------
    >>> import numpy as np, torch
    >>> from sklearn.datasets import load_digits
    >>> X, y = load_digits(return_X_y=True)
    >>> X, y = (X[y < 4] / 16).astype("f4"), y[y < 4]
    >>> config = FLOWRConfig(backbone="mlp", setting="large", embedding_dim=4,
    ...                      pretrain_epochs=1, meta_epochs=1,
    ...                      episodes_per_epoch=2, n_way=2, n_unknown=1,
    ...                      verbose=0)
    >>> trained = train_encoder(X, np.arange(4), y, config,
    ...                         StageRunner(torch.device("cpu"), seed=0))
    >>> trained["embeddings"].shape, sorted(trained["history_"])
    ((720, 4), ['meta', 'pretrain'])
    """
    torch.manual_seed(runner.seed)
    # On a GPU the training images live there when they fit, so batches and
    # episodes are gathered on the device.
    X_train = (X if runner.accelerator is not None
               else to_device_if_fits(X, runner.device))
    encoder = build_encoder(config, X)
    # The class table's embedding is the one scale matching reads (same
    # weights): the training rows pass through each encoder state once.
    encoder, means, variances, Z = pretrain(
        encoder, X_train, y_index, len(labels), config, runner,
        return_embedding=True)
    noise_scale = 1.0
    if config.match_sigma:
        means, variances, noise_scale = match_noise_scale(
            encoder, X_train, y_index, means, variances, sigma=config.sigma,
            batch_size=config.batch_size, verbose=config.verbose, embedding=Z)
    del Z
    # Baselines are compared on the pre-trained encoder, before FLOWR's
    # meta-training changes it (same object when there is none).
    pretrained = encoder if config.meta_epochs == 0 else copy.deepcopy(encoder)
    meta = meta_train(encoder, X_train, y_index, means, variances, config, runner)
    meta.eval()
    Z = embed_rows(meta.encoder, X_train, config.batch_size,
                   desc="embedding the training rows" if config.verbose else None)
    return dict(history_=runner.history, pretrained_encoder_=pretrained.eval(),
                meta_module_=meta, noise_scale_=noise_scale, embeddings=Z)
