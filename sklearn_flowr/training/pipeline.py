"""FLOWR's training as one pipeline of stages (pre-train, match the noise scale,
meta-train, embed) and what :class:`~sklearn_flowr.FLOWRClassifier` calls around
it; nothing here sets an attribute of the estimator."""

from __future__ import annotations

import copy
import os
import warnings
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.base import clone
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions

from .._core import novel_log_odds
from ..calibration import split_known_queries
from ..encoders import BACKBONE_NAMES
from ..model_selection import class_disjoint_folds
from ..protocol import (
    calibrate_novelty,
    cross_fit_novelty_calibration,
    cross_fit_plan,
)
from ..validation import caller_stacklevel
from ._checkpoints import check_fingerprint
from ._device import (
    deterministic_cuda,
    place_modules,
    resolve_device,
    to_device_if_fits,
)
from ._fine_tune import embed, fine_tune_last_layer
from ._head_building import (
    build_heads,
    check_head_template,
    head_params,
    set_head_params,
)
from ._memo import ENCODER_MEMO
from ._meta_training import check_meta_training_plan, meta_train
from ._persistence import restore_modules, store_modules
from ._pretraining import (
    build_encoder,
    embed_rows,
    match_noise_scale,
    pretrain_encoder,
)
from ._runner import StageRunner
from ._stages import (
    BATCH_SIZE,
    MAX_COUNT,
    MetaTraining,
    check_stages,
    meta_encoder_lr,
    pretraining_lr,
)

__all__ = ["BATCH_SIZE", "MAX_COUNT", "PARAMETER_CONSTRAINTS", "RUNTIME_PARAMS",
           "check_calibration_plan", "check_parts",
           "check_training_plan", "embed_finite", "fit_encoder", "learn_novelty_map",
           "fit_parts",
           "place_fitted_modules", "plan_fit", "resolve_device", "restore_modules",
           "store_modules", "task_encoder", "train_encoder", "training_params"]

# Steps of adapt(fine_tune=True).
FINE_TUNE_STEPS = 20
# Parameters a fitted model reads when it runs, so set_params may change them
# after fit; any other change needs a refit.
RUNTIME_PARAMS = frozenset({"device", "verbose", "fine_tune_steps", "fine_tune_lr",
                            "accelerator", "checkpoint_dir", "reuse_encoder",
                            "pretrain__batch_size", "n_jobs"})
# FLOWRClassifier's parameter constraints (scikit-learn's); the stages and the
# head validate their own settings (check_parts).
PARAMETER_CONSTRAINTS: dict = {
    "backbone": [StrOptions(set(BACKBONE_NAMES)), torch.nn.Module],
    "setting": [StrOptions({"small", "large"})],
    "head": [HasMethods(["fit", "partial_fit", "predict_proba", "open_world_step"])],
    "pretrain": [HasMethods(["validate"]), None],
    "meta": [HasMethods(["validate"]), None],
    "calibration": [StrOptions({"train"}), "cv_object", None],
    "embedding_dim": [Interval(Integral, 1, 65536, closed="both"), None],
    "fine_tune_steps": [Interval(Integral, 0, MAX_COUNT, closed="both")],
    "fine_tune_lr": [Interval(Real, 0, None, closed="neither"), None],
    "update_known": ["boolean"],
    "reuse_encoder": ["boolean"],
    "device": [str, torch.device],
    # Read as scikit-learn reads n_jobs; 0 (meaningless to joblib) fails here.
    "n_jobs": [Interval(Integral, None, -1, closed="right"),
               Interval(Integral, 1, None, closed="left"), None],
    "accelerator": [HasMethods(["prepare", "backward"]), None],
    "random_state": ["random_state"],
    "verbose": ["verbose"],
    "checkpoint_dir": [str, os.PathLike, None],
}

# Share of each class's rows fit keeps out of the encoder's training: their
# scores calibrate predict's conformal decision (as MLPClassifier's
# validation_fraction keeps rows out for early stopping).
CONFORMAL_SHARE = 0.1
# With no training stage, holding rows out costs only their scoring: the share
# that makes about this many is held (each class's count rounded, at most half
# of it), so that small fits reach the scores novelty_alpha needs (19 at 0.05).
FROZEN_SCORES = 150
# Folds of those rows: each is scored by the head fitted without its fold.
CONFORMAL_FOLDS = 5
# A head's warning that its own fit gave too few calibration scores: heads
# fitted on held-out folds, and the deciding head before the held-out scores
# replace its own, do not say it (set_conformal_scores warns of the scores used).
_OWN_FEW_SCORES = r"fit's \d+ rows gave \d+ calibration scores"
# FLOWRClassifier's parameters that shape the trained encoder.
_PARTS = ("backbone", "setting", "embedding_dim", "pretrain", "meta")

def training_params(**parts) -> dict:
    """The settings of :func:`train_encoder`'s parts, the stages' flattened.

    Examples
    --------
    >>> from sklearn_flowr.training import SupE
    >>> training_params(backbone="mlp", pretrain=SupE(), meta=None)["pretrain__lr"]
    """
    params = {}
    for name, value in parts.items():
        if hasattr(value, "get_params"):
            params[name] = type(value).__name__
            params.update({f"{name}__{key}": setting for key, setting
                           in value.get_params(deep=False).items()})
        else:
            params[name] = value
    return params


def check_training_plan(setting: str, meta, y_index, n_classes: int,
                        seed: int) -> None:
    """Fail before any training on labels the stages would reject (fewer than
    2 classes, or what meta-training's episodes would refuse).

    Examples
    --------
    >>> import numpy as np
    >>> check_training_plan("small", None, np.zeros(10, int), 1, seed=0)
    Traceback (most recent call last):
    ...
    ValueError: fit needs at least 2 classes; got 1 class.
    """
    if n_classes < 2:
        raise ValueError(f"fit needs at least 2 classes; got {n_classes} class.")
    check_meta_training_plan(setting, meta, y_index, n_classes, seed)


def check_calibration_plan(cv, X, y, *, setting: str, meta, seed: int):
    """:func:`~sklearn_flowr.protocol.cross_fit_plan` of a cross-fitted map, each
    fold's classes checked as ``fit`` checks its data, before any training.

    Examples
    --------
    >>> import numpy as np
    >>> plan = check_calibration_plan(2, np.zeros((40, 1)),
    ...                               np.repeat(np.arange(4), 10), setting="small",
    ...                               meta=MetaTraining(n_unknown=1), seed=0)
    >>> [p.n_held_classes for p in plan]
    [2, 2]
    """
    plan = cross_fit_plan(cv, X, y, setting=setting, random_state=seed)
    for number, fold in enumerate(plan):
        labels, y_index = np.unique(y[fold.fit_rows], return_inverse=True)
        try:
            check_training_plan(setting, meta, y_index, labels.shape[0], fold.seed)
        except ValueError as exc:
            raise ValueError(f"Fold {number} of calibration trains on "
                             f"{labels.shape[0]} classes: {exc}") from exc
    return plan


def train_encoder(X, y_index, n_classes: int, *, backbone, setting: str,
                  embedding_dim: int, pretrain, meta,
                  runner: StageRunner) -> dict:
    """Pre-train, match the scale, meta-train and embed the training data:
    ``history_``, ``pretrained_encoder_``, ``meta_module_``, ``noise_scale_``
    and ``embeddings``.

    Examples
    --------
    >>> import numpy as np, torch
    >>> from sklearn.datasets import load_digits
    >>> from sklearn_flowr.training import SupE
    >>> X, y = load_digits(return_X_y=True)
    >>> X, y = (X[y < 4] / 16).astype("f4"), y[y < 4]
    >>> meta = MetaTraining(epochs=1, episodes_per_epoch=2, n_way=2, n_unknown=1)
    >>> trained = train_encoder(X, y, 4, backbone="mlp", setting="large",
    ...                         embedding_dim=4, pretrain=SupE(epochs=1),
    ...                         meta=meta, runner=StageRunner(torch.device("cpu"),
    ...                                                       seed=0))
    >>> trained["embeddings"].shape, sorted(trained["history_"])
    ((720, 4), ['meta', 'pretrain'])
    """
    torch.manual_seed(runner.seed)
    if runner.verbose and getattr(runner.accelerator, "is_main_process", True):
        # torch's first optimiser loads torch._dynamo first: seconds of silence.
        stages = [type(part).__name__ for part in (pretrain, meta) if part is not None]
        print(f"{'Training' if stages else 'Embedding with'} the "
              f"{backbone if isinstance(backbone, str) else 'given'} encoder on "
              f"{X.shape[0]} rows of {n_classes} classes "
              f"({', '.join(stages) or 'no training stage'}) ...", flush=True)
    stage = MetaTraining() if meta is None else meta
    batch_size = getattr(pretrain, "batch_size", BATCH_SIZE)
    lr = pretraining_lr(pretrain, backbone)
    # On a GPU the training images live there when they fit, so batches and
    # episodes are gathered on the device.
    X_train = (X if runner.accelerator is not None
               else to_device_if_fits(X, runner.device))
    encoder = build_encoder(backbone, embedding_dim, X)
    # The class table's embedding is the one scale matching reads (same
    # weights): the training rows pass through each encoder state once.
    encoder, means, variances, Z = pretrain_encoder(
        encoder, X_train, y_index, n_classes, pretrain, runner, lr=lr,
        learned_stats=stage.class_stats == "learned", return_embedding=True)
    noise_scale = 1.0
    if stage.match_episode_noise:
        means, variances, noise_scale = match_noise_scale(
            encoder, X_train, y_index, means, variances, noise=stage.episode_noise,
            batch_size=batch_size, verbose=runner.verbose, embedding=Z,
            n_jobs=runner.n_jobs)
    del Z
    # Baselines are compared on the pre-trained encoder, before FLOWR's
    # meta-training changes it (same object when there is none).
    pretrained = encoder if meta is None else copy.deepcopy(encoder)
    module = meta_train(encoder, X_train, y_index, means, variances,
                        setting=setting, meta=meta,
                        encoder_lr=meta_encoder_lr(meta, pretrain, backbone),
                        runner=runner)
    module.eval()
    # A frozen backbone's cached features through the trained last layer:
    # the network does not run again.
    trainee, data = runner.trainable(module.encoder, X_train, batch_size)
    Z = embed_rows(trainee, data, batch_size, n_jobs=runner.n_jobs,
                   desc="embedding the training rows" if runner.verbose else None)
    return dict(history_=runner.history, pretrained_encoder_=pretrained.eval(),
                meta_module_=module, noise_scale_=noise_scale, embeddings=Z)


def fit_encoder(X, y, y_index, n_classes: int, *, reuse: bool,
                random_state, runner: StageRunner, **parts) -> dict:
    """:func:`train_encoder`, or with ``reuse`` an identical earlier run's copy."""
    params = training_params(**parts)
    if runner.checkpoint_dir is not None:
        check_fingerprint(runner.checkpoint_dir, X, y, params)
    key = None
    if reuse and runner.accelerator is None:
        key = ENCODER_MEMO.key(X, y_index, params, random_state=random_state,
                               device=runner.device)
        reused = ENCODER_MEMO.get(key)
        if reused is not None:
            # Only at verbose >= 2: a grid over head settings would print it
            # once per candidate.
            if runner.verbose >= 2:
                print("Reusing the encoder trained on the same data and "
                      "settings in this process (reuse_encoder=True).")
            return reused
    with deterministic_cuda(runner.device.type == "cuda"):
        trained = train_encoder(X, y_index, n_classes, runner=runner, **parts)
    ENCODER_MEMO.put(key, trained)
    return trained


# ----------------------------------------------------- FLOWRClassifier's fit
def check_parts(estimator) -> None:
    """Validate a FLOWRClassifier's parts, alone and together, and its device.

    Examples
    --------
    >>> from sklearn_flowr import FLOWRClassifier
    >>> check_parts(FLOWRClassifier(meta=MetaTraining(n_way=0)))
    Traceback (most recent call last):
    ...
    sklearn.utils._param_validation.InvalidParameterError: The 'n_way' ...
    """
    check_stages(estimator.pretrain, estimator.meta)
    estimator.head._validate_params()
    check_head_template(estimator.head, estimator.meta)
    if estimator.accelerator is None:
        resolve_device(estimator.device)


def plan_fit(estimator, X, y, y_index, n_classes: int):
    """The fit's :class:`StageRunner` and calibration folds (or None), once
    the labels pass the checks of the episodes and of ``calibration``."""
    runner = StageRunner.for_fit(
        device=estimator.device, random_state=estimator.random_state,
        accelerator=estimator.accelerator,
        checkpoint_dir=estimator.checkpoint_dir, verbose=estimator.verbose,
        n_jobs=estimator.n_jobs)
    check_training_plan(estimator.setting, estimator.meta, y_index, n_classes,
                        runner.seed)
    calibration = estimator.calibration
    if calibration is None:
        return runner, None
    if isinstance(calibration, str):
        smallest = int(np.bincount(y_index).min())
        if smallest < 2:
            raise ValueError(
                "calibration='train' draws open-world tasks from the training "
                "classes and needs at least 2 rows in every class; the smallest "
                f"has {smallest}. Give more rows or set calibration=None.")
        return runner, None
    if estimator.accelerator is not None:
        raise ValueError(
            "A cross-fitted calibration trains one model per fold on this "
            "process; it does not run through an accelerator. Use "
            "calibration='train' or None.")
    # Listed once: a splitter or generator of folds may not give them again.
    folds = class_disjoint_folds(calibration, X, y)
    check_calibration_plan(folds, X, y, setting=estimator.setting,
                           meta=estimator.meta, seed=runner.seed)
    return runner, folds


def fit_parts(estimator, X, y, labels, y_index, runner: StageRunner, folds):
    """Train (or reuse) the encoder, fit the novelty map and build the heads
    with it: the fitted attributes, and the training rows' final embeddings.
    With the head's ``novelty_alpha``, the rows of :func:`conformal_split` stay
    out of the encoder's training and calibrate ``predict``'s decision."""
    split = conformal_split(estimator, y_index, labels.shape[0], runner)
    rows = slice(None) if split is None else split[0]
    trained = fit_encoder(
        X[rows], y[rows], y_index[rows], labels.shape[0],
        reuse=estimator.reuse_encoder, random_state=estimator.random_state,
        runner=runner, **{name: getattr(estimator, name) for name in _PARTS})
    embeddings = trained.pop("embeddings")
    known_table = getattr(estimator.meta, "known_table", "refit")

    def heads(template, Z, index):
        with warnings.catch_warnings():
            if split is not None:  # their own fit's scores are not the ones used
                warnings.filterwarnings("ignore", category=UserWarning,
                                        message=_OWN_FEW_SCORES)
            return build_heads(template, trained["meta_module_"], Z, index,
                               labels, update_known=estimator.update_known,
                               known_table=known_table)

    if split is not None:
        held = split[1]
        Z = np.empty((X.shape[0], embeddings.shape[1]), dtype=embeddings.dtype)
        Z[rows] = embeddings
        Z[held] = _embed_rows(estimator, trained["meta_module_"].encoder, X[held])
        embeddings = Z
        template = set_head_params(clone(estimator.head), novelty_calibration=None)
        scores = _held_out_scores(lambda Z, index: heads(template, Z, index)[1],
                                  embeddings, y_index, held)
    prior_head, head = heads(estimator.head, embeddings, y_index)
    fitted_map = learn_novelty_map(
        estimator, X, y, folds, prior_head if estimator.setting == "small"
        else head, embeddings, seed=runner.seed)
    novelty_map = None
    if fitted_map is not None:  # the heads are built with their map
        novelty_map = (fitted_map.slope, fitted_map.intercept)
        prior_head, head = heads(set_head_params(
            clone(estimator.head), novelty_calibration=novelty_map), embeddings,
            y_index)
    if split is not None:
        head.set_conformal_scores(scores)
    return dict(trained, head_=head, prior_head_=prior_head,
                encoder_=trained["meta_module_"].encoder, train_classes_=labels,
                input_shape_=X.shape[1:], n_features_in_=int(np.prod(X.shape[1:])),
                novelty_calibration_=novelty_map,
                calibration_results_=None if folds is None else fitted_map), embeddings


def _held_out_scores(fit_head, Z, y_index, held) -> np.ndarray:
    """Novel log-odds of the ``held`` rows (listed class by class), each under
    ``fit_head(Z, y_index)`` fitted on every row but its fold of them."""
    # The head that decides learns the held rows too. Embedded by an encoder
    # that did not train on them, they spread wider than its training rows: a
    # head fitted without any of them scores them more novel than the deciding
    # head scores new rows of known classes (fewer new rows caught).
    # Folds of the held rows: class by class, each class spread over them.
    fold = np.arange(held.shape[0]) % CONFORMAL_FOLDS
    scores = np.empty(held.shape[0])
    for k in range(min(CONFORMAL_FOLDS, held.shape[0])):
        keep = np.ones(Z.shape[0], dtype=bool)
        keep[held[fold == k]] = False
        log_proba = fit_head(Z[keep], y_index[keep]).predict_log_proba(
            Z[held[fold == k]])
        scores[fold == k] = novel_log_odds(np.asarray(log_proba))
    return scores


def conformal_split(estimator, y_index, n_classes: int, runner: StageRunner):
    """``(fit_rows, held_rows)``: ``CONFORMAL_SHARE`` of each class's rows held
    out of the encoder's training (the held ones class by class; with no
    training stage, the share that makes about ``FROZEN_SCORES`` rows if
    larger, at most half of each class's); None for a head without
    ``novelty_alpha``, too few rows to train without them, or no row held
    (every class of one row)."""
    template = estimator.head
    if (head_params(template).get("novelty_alpha") is None
            or not callable(getattr(template, "set_conformal_scores", None))):
        return None
    # The same rows whatever the seed: a checkpoint_dir resumes unseeded fits
    # and names a changed seed, not changed training rows.
    rng = np.random.default_rng(0)
    share = CONFORMAL_SHARE
    if estimator.pretrain is None and estimator.meta is None:
        share = max(share, min(0.5, FROZEN_SCORES / y_index.shape[0]))
    fit_rows, held = split_known_queries(y_index, np.arange(y_index.shape[0]),
                                         share, rng, single="fit")
    if held.size == 0:  # every class of one row: the head's own fit decides
        return None
    try:
        check_training_plan(estimator.setting, estimator.meta, y_index[fit_rows],
                            n_classes, runner.seed)
    except ValueError as exc:
        warnings.warn("predict's novel decision is calibrated on rows the encoder "
                      "trained on (its false-novel rate may exceed "
                      f"head__novelty_alpha): without {CONFORMAL_SHARE:.0%} of "
                      f"each class's rows, {exc}", UserWarning,
                      stacklevel=caller_stacklevel())
        return None
    return np.sort(fit_rows), held


def _embed_rows(estimator, encoder, X):
    batch_size = getattr(estimator.pretrain, "batch_size", BATCH_SIZE)
    return embed_finite(encoder, X, 4 * batch_size, estimator.n_jobs)


def learn_novelty_map(estimator, X, y, folds, head, Z, *, seed: int):
    """FLOWRClassifier's map of P(novel) as ``calibration`` says (None: none)."""
    if estimator.calibration is None:
        return None
    if folds is None:
        if estimator.verbose:
            print("Calibrating P(novel) on open-world tasks of the training "
                  "classes (calibration='train') ...", flush=True)
        return calibrate_novelty(head, Z, y, setting=estimator.setting,
                                 random_state=seed, verbose=estimator.verbose)
    if estimator.verbose:
        print(f"Cross-fitting the novelty map: {len(folds)} models trained "
              "on class-disjoint folds.")
    return cross_fit_novelty_calibration(estimator, X, y, cv=folds,
                                         random_state=seed)


def embed_finite(encoder, X, batch_size: int, n_jobs=None) -> np.ndarray:
    """float64 :func:`embed` of ``X`` (``n_jobs``: torch's CPU threads); a
    ValueError when a row is not finite."""
    Z = embed(encoder, X, batch_size=batch_size, n_jobs=n_jobs).astype(np.float64)
    finite = np.isfinite(Z).all(axis=1)
    if not finite.all():
        # Say so here: the head would report NaN in data that had none.
        raise ValueError(
            f"The encoder gave non-finite embeddings for {int((~finite).sum())} "
            f"of {Z.shape[0]} rows (inputs up to {float(np.abs(X).max()):.3g} "
            "in magnitude): rescale the inputs to the range the model was "
            "trained on.")
    return Z


def task_encoder(estimator, X_support, y_support, fine_tune):
    """The encoder :meth:`FLOWRClassifier.adapt` starts a task with."""
    if fine_tune is None:
        steps = estimator.fine_tune_steps
    elif isinstance(fine_tune, (bool, np.bool_)):
        steps = FINE_TUNE_STEPS if fine_tune else 0
    elif isinstance(fine_tune, Integral) and fine_tune >= 0:
        steps = int(fine_tune)
    else:
        raise ValueError("fine_tune must be None, a bool or an int >= 0; got "
                         f"{fine_tune!r}.")
    device = place_fitted_modules(estimator)
    module = estimator.meta_module_
    if not steps:
        return module.encoder
    lr = estimator.fine_tune_lr
    if lr is None:
        lr = pretraining_lr(estimator.pretrain, estimator.backbone)
    return fine_tune_last_layer(module.encoder, module, X_support, y_support,
                                steps=steps, lr=lr, device=device,
                                verbose=estimator.verbose, n_jobs=estimator.n_jobs)


def place_fitted_modules(estimator) -> torch.device:
    """Put a fitted FLOWRClassifier's modules where its ``device`` says."""
    device = resolve_device(estimator.device)
    place_modules(device, estimator.meta_module_, estimator.encoder_,
                  estimator.pretrained_encoder_)
    return device
