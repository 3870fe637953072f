"""Training FLOWR encoders: Sup-E / Sup-FC pre-training, meta-training, fine-tuning.

The stages of :class:`~sklearn_flowr.FLOWRClassifier` (:class:`SupE`,
:class:`SupFC`, :class:`MetaTraining`), the torch losses, modules, episodes and
skorch nets that train them, and the test-time helpers (:func:`embed`,
:func:`fine_tune_last_layer`); :mod:`sklearn_flowr.training.pipeline` chains them.

References
----------
.. [1] J. Willes, J. Harrison, A. Harakeh, C. Finn, M. Pavone, S. Waslander,
   "Bayesian Embeddings for Few-Shot Open World Recognition", IEEE TPAMI, 2022.

Examples
--------
Pre-train with Sup-E, meta-train in the small context, then hand the
embeddings to the head:

>>> import numpy as np
>>> from sklearn.datasets import load_digits
>>> from sklearn_flowr import CRPGaussianClassifier
>>> from sklearn_flowr.encoders import MLPEncoder
>>> from sklearn_flowr.training import (EpisodeDataset, EpisodicMetaNet,
...     FLOWRMetaModule, SupENet, embed, fine_tune_last_layer)
>>> X, y = load_digits(return_X_y=True)
>>> X = (X / 16.0).astype(np.float32)
>>> train = y < 7
>>> encoder = MLPEncoder(64, hidden=(32,), embedding_dim=8)
>>> sup_e = SupENet(module__encoder=encoder, module__n_classes=7,
...                 max_epochs=2, verbose=0, random_state=0).fit(X[train], y[train])
>>> meta = FLOWRMetaModule.from_sup_e(sup_e.module_, setting="small")
>>> episodes = EpisodeDataset(X[train], y[train], n_way=5, n_unknown=2,
...                           n_episodes=10, random_state=0)
>>> net = EpisodicMetaNet(module=meta, max_epochs=2, verbose=0).fit(episodes)
>>> support = np.flatnonzero(y == 7)[:3].tolist() + np.flatnonzero(y == 8)[:3].tolist()
>>> tuned = fine_tune_last_layer(net.module_.encoder, net.module_, X[support],
...                              y[support], steps=5)
>>> head = CRPGaussianClassifier(**net.module_.head_kwargs(), known_count="observed")
>>> head = head.fit(embed(tuned, X[support]), y[support])
>>> head.predict_proba(embed(tuned, X[y == 9][:4])).shape
(4, 3)
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
