"""Pluggable torch encoders ``phi`` mapping inputs to FLOWR's embedding space.

Every encoder ends in an ``nn.Linear`` to ``embedding_dim``, the layer that
test-time fine-tuning updates (:func:`last_linear_layer`); :func:`make_backbone`
turns a name (one of ``BACKBONE_NAMES``), a module class or an instance into
an encoder.
"""

from ._conv4 import Conv4
from ._efficientnet import EfficientNetLite0, EfficientNetLite0Encoder
from ._factory import BACKBONE_NAMES, last_linear_layer, make_backbone
from ._mlp import MLPEncoder
from ._pretrained import PretrainedEncoder
from ._resnet import ResNet12, ResNet18

__all__ = [
    "BACKBONE_NAMES",
    "Conv4",
    "EfficientNetLite0",
    "EfficientNetLite0Encoder",
    "MLPEncoder",
    "PretrainedEncoder",
    "ResNet12",
    "ResNet18",
    "last_linear_layer",
    "make_backbone",
]
