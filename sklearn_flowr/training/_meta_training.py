"""Stage 3 of FLOWR's training: episodic meta-training (a :class:`MetaTraining`)."""

import numpy as np
import torch

from ._class_stats import initial_prior
from ._episodes import EpisodeDataset
from ._modules import FLOWRMetaModule
from ._nets import EpisodicMetaNet
from ._runner import StageRunner
from ._stages import BATCH_SIZE, MetaTraining

__all__ = ["check_meta_training_plan", "episode_dataset", "known_classes",
           "meta_train"]

# Share of the training classes that play the unknown-unknowns while the
# large-context head is meta-trained (the others form its known-class table).
LARGE_CONTEXT_HELD_OUT = 0.2


def known_classes(setting: str, meta: MetaTraining, n_classes: int,
                  seed: int) -> np.ndarray:
    """Training classes meta-training treats as known: all in the small context;
    in the large one all but ``max(n_unknown, ceil(0.2 * n_classes))`` drawn by
    ``seed`` (sorted)."""
    if setting == "small":
        return np.arange(n_classes)
    held_out = max(meta.n_unknown,
                   int(np.ceil(LARGE_CONTEXT_HELD_OUT * n_classes)))
    rng = np.random.default_rng(seed)
    return np.sort(rng.permutation(n_classes)[: max(n_classes - held_out, 0)])


def episode_dataset(setting: str, meta: MetaTraining, X, y_index, known,
                    seed: int):
    """The :class:`EpisodeDataset` of meta-training over the classes ``known``;
    a ValueError when a class has fewer than ``n_query + 1`` rows."""
    sizes = np.bincount(y_index)
    max_shots = int(min(10, sizes.min() - meta.n_query))
    if max_shots < 1:
        raise ValueError(
            f"The smallest class has {sizes.min()} rows: episodes need at least "
            f"n_query + 1 = {meta.n_query + 1} rows per class: give more rows or "
            "lower MetaTraining's n_query (meta__n_query of FLOWRClassifier).")
    common = dict(n_query=meta.n_query, n_unknown=meta.n_unknown,
                  n_episodes=meta.episodes_per_epoch, random_state=seed)
    if setting == "small":
        n_way = min(meta.n_way, len(sizes) - meta.n_unknown)
        return EpisodeDataset(X, y_index, n_way=n_way, shots=(1, max_shots), **common)
    return EpisodeDataset(X, y_index, setting="large", known_classes=known,
                          n_way=min(meta.n_way, len(known)), **common)


def check_meta_training_plan(setting: str, meta: MetaTraining | None, y_index,
                             n_classes: int, seed: int) -> None:
    """Fail on what meta-training would reject, from the labels alone (``meta``
    None: nothing to check)."""
    if meta is None:
        return
    known = known_classes(setting, meta, n_classes, seed)
    n_support = n_classes - meta.n_unknown if setting == "small" else len(known)
    if n_support < 1:
        raise ValueError(
            f"n_unknown={meta.n_unknown} leaves no support class among the "
            f"{n_classes} training classes ({setting} context): lower "
            "MetaTraining's n_unknown (meta__n_unknown of FLOWRClassifier) or "
            "give more classes.")
    # The sampler's own checks need the labels only: no images.
    episode_dataset(setting, meta, np.empty((len(y_index), 0), np.float32),
                    y_index, known, seed)


def meta_train(encoder, X, y_index, means, variances, *, setting: str,
               meta: MetaTraining | None, encoder_lr: float,
               runner: StageRunner) -> FLOWRMetaModule:
    """The FLOWR meta-module (``known_classes_``: its known-known table's), its
    prior from ``means``, meta-trained in place (``meta=None``: built only)."""
    n_classes = means.shape[0]
    prior_mean, prior_var = initial_prior(means)
    stage = MetaTraining() if meta is None else meta
    known = known_classes(setting, stage, n_classes, runner.seed)
    table = (dict(known_means=means[known], known_vars=variances[known])
             if setting == "large" else {})
    trainee, X = (encoder, X) if meta is None else runner.trainable(encoder, X,
                                                                    BATCH_SIZE)
    module = FLOWRMetaModule(trainee, means.shape[1], **stage.module_params(),
                             prior_mean=prior_mean, prior_var=prior_var,
                             **table).to(runner.device)
    module.known_classes_ = known
    if meta is None:
        return module
    episodes = episode_dataset(setting, meta, X, y_index, known, runner.seed)
    net = runner.net(
        EpisodicMetaNet, module=module, lr=encoder_lr, device=runner.device,
        verbose=runner.verbose, random_state=None,
        criterion__lambda_adapt=meta.lambda_adapt,
        optimizer__param_groups=[
            (name, {"lr": meta.prior_lr})
            for name in FLOWRMetaModule.prior_parameter_names
        ] if meta.prior_lr is not None else [],
        autocast=torch.bfloat16 if meta.autocast == "bf16" else None,
        # One episode per step: the bar counts episodes.
        callbacks=runner.progress(batches_per_epoch=len(episodes)))
    module = runner.fit(net, "meta", meta.epochs, episodes).module_
    module.encoder = encoder  # trainee is its last layer, trained in place
    return module
