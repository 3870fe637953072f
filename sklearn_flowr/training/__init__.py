"""Training FLOWR encoders: Sup-E / Sup-FC pre-training, meta-training, fine-tuning.

The stages of :class:`~sklearn_flowr.FLOWRClassifier` (:class:`SupE`,
:class:`SupFC`, :class:`MetaTraining`), the torch losses, modules, episodes and
skorch nets that train them, and the test-time helpers (:func:`embed`,
:func:`fine_tune_last_layer`); :mod:`sklearn_flowr.training.pipeline` chains them.
"""

from ._accelerate import (
    AcceleratedEpisodicMetaNet,
    AcceleratedSupENet,
    AcceleratedSupFCNet,
    accelerated,
)
from ._device import torch_threads
from ._episodes import EpisodeDataset
from ._fine_tune import embed, fine_tune_last_layer
from ._losses import (
    FLOWRMetaLoss,
    SupELoss,
    flowr_episode_logits,
    meta_training_loss,
    sup_e_logits,
    sup_e_loss,
    sup_e_penalty,
)
from ._modules import FLOWRMetaModule, SupEModule, SupFCModule
from ._nets import EpisodicMetaNet, SupENet, SupFCNet
from ._stages import MetaTraining, SupE, SupFC

__all__ = [
    "AcceleratedEpisodicMetaNet",
    "AcceleratedSupENet",
    "AcceleratedSupFCNet",
    "EpisodeDataset",
    "EpisodicMetaNet",
    "FLOWRMetaLoss",
    "FLOWRMetaModule",
    "MetaTraining",
    "SupE",
    "SupELoss",
    "SupEModule",
    "SupENet",
    "SupFC",
    "SupFCModule",
    "SupFCNet",
    "accelerated",
    "embed",
    "flowr_episode_logits",
    "fine_tune_last_layer",
    "meta_training_loss",
    "sup_e_logits",
    "sup_e_loss",
    "sup_e_penalty",
    "torch_threads",
]
