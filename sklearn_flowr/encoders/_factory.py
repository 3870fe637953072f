"""Build an encoder from a name, a class or an instance; find its last layer."""

import copy
import inspect
import sys
from typing import Any

from torch import nn

from ._conv4 import Conv4, _as_pair
from ._efficientnet import EfficientNetLite0Encoder
from ._mlp import MLPEncoder
from ._pretrained import PretrainedEncoder, output_width
from ._resnet import ResNet12, ResNet18

BACKBONE_NAMES = ("conv4", "resnet12", "resnet18", "mlp", "efficientnet-lite0")


def make_backbone(
    backbone: str | nn.Module | type[nn.Module],
    *,
    in_channels: int = 1,
    input_size: int | tuple[int, int] | None = None,
    n_features: int | None = None,
    embedding_dim: int | None = 64,
) -> nn.Module:
    """Return the encoder ``phi`` that a backbone specification names.

    Parameters
    ----------
    backbone : {"conv4", "resnet12", "resnet18", "mlp", "efficientnet-lite0"}, \
            nn.Module or nn.Module subclass
        A name builds the package's encoder for the data the other arguments
        describe; a copy of an instance is used as it is (a torchvision
        ``ResNet`` is adapted; training never changes the module passed) and a
        subclass is called with the arguments it names (user
        guide, "Threads, frozen backbones and checkpoints").
    in_channels : int, default=1
        Channels of the input images.
    input_size : int or tuple of (int, int) or None, default=None
        ``(height, width)`` of the input images.
    n_features : int or None, default=None
        Input features of ``"mlp"`` or of a module reading vectors.
    embedding_dim : int or None, default=64
        Dimension ``d`` of the embedding; None keeps a pretrained backbone's
        own features (no random projection). A module instance (other than a
        torchvision ``ResNet``, whose last layer is replaced) keeps its own
        output dimension whatever the int given.

    Returns
    -------
    torch.nn.Module
        The encoder, mapping ``(n, in_channels, height, width)`` images (or
        ``(n, n_features)`` vectors for ``"mlp"``) to ``(n, embedding_dim)``.

    Examples
    --------
    >>> import torch
    >>> from sklearn_flowr.encoders import make_backbone
    >>> encoder = make_backbone("conv4", in_channels=1, input_size=(28, 28))
    >>> encoder(torch.zeros(3, 1, 28, 28)).shape
    torch.Size([3, 64])
    >>> make_backbone("mlp", in_channels=1, input_size=None, n_features=10)(
    ...     torch.zeros(3, 10)).shape
    torch.Size([3, 64])
    """
    if isinstance(backbone, nn.Module):
        if embedding_dim is None and not isinstance(backbone, PretrainedEncoder):
            return _own_features(backbone, in_channels, input_size, n_features)
        if _is_torchvision_resnet(backbone):
            return _adapt_torchvision_resnet(backbone, in_channels, embedding_dim)
        return copy.deepcopy(backbone)  # fit trains its own copy
    if isinstance(backbone, type) and issubclass(backbone, nn.Module):
        return _instantiate(
            backbone,
            in_channels=in_channels,
            input_size=input_size,
            n_features=n_features,
            in_features=n_features,
            embedding_dim=embedding_dim,
        )
    if not isinstance(backbone, str):
        raise TypeError(
            f"backbone must be one of {BACKBONE_NAMES}, an nn.Module instance or "
            f"an nn.Module subclass; got an object of type {type(backbone).__name__}."
        )
    name = backbone.lower()
    if embedding_dim is None and name != "efficientnet-lite0":
        raise ValueError(
            f"embedding_dim=None (the backbone's own features) needs a pretrained "
            f"backbone: 'efficientnet-lite0' or a module; {backbone!r} is trained "
            "from scratch and needs an int embedding_dim.")
    if name == "conv4":
        return Conv4(in_channels, embedding_dim, input_size=input_size)
    if name == "resnet12":
        return ResNet12(in_channels, embedding_dim)
    if name == "resnet18":
        return ResNet18(in_channels, embedding_dim, input_size=input_size)
    if name == "efficientnet-lite0":
        return EfficientNetLite0Encoder(in_channels, embedding_dim)
    if name == "mlp":
        if n_features is None:
            if input_size is None:
                raise ValueError(
                    "backbone='mlp' needs n_features, or input_size (and "
                    "in_channels) to flatten images."
                )
            height, width = _as_pair(input_size)
            n_features = in_channels * height * width
        return MLPEncoder(n_features, embedding_dim=embedding_dim)
    raise ValueError(
        f"Unknown backbone {backbone!r}; valid names are {', '.join(BACKBONE_NAMES)}, "
        "or pass an nn.Module instance or subclass."
    )


def _instantiate(cls: type[nn.Module], **candidates: Any) -> nn.Module:
    """Call ``cls`` with the candidate keyword arguments its signature names."""
    accepted = inspect.signature(cls).parameters
    kwargs = {key: value for key, value in candidates.items()
              if key in accepted and value is not None}
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise TypeError(
            f"Could not instantiate backbone class {cls.__name__} with {kwargs}: "
            f"{exc}. Pass an instance instead."
        ) from exc


def _own_features(module, in_channels, input_size, n_features) -> PretrainedEncoder:
    """A copy of ``module``'s own features in a frozen :class:`PretrainedEncoder`."""
    module = (_adapt_torchvision_resnet(module, in_channels, None)
              if _is_torchvision_resnet(module) else copy.deepcopy(module))
    if input_size is not None:
        shape = (in_channels, *_as_pair(input_size))
    elif n_features is not None:
        shape = (n_features,)
    else:
        raise ValueError("embedding_dim=None needs input_size or n_features to "
                         "measure the backbone's output width.")
    return PretrainedEncoder(module, output_width(module, shape))


def _is_torchvision_resnet(module: nn.Module) -> bool:
    # An instance can only exist once torchvision is imported, so never import it.
    models = sys.modules.get("torchvision.models")
    return models is not None and isinstance(module, models.ResNet)


def _adapt_torchvision_resnet(
    model: nn.Module, in_channels: int, embedding_dim: int | None
) -> nn.Module:
    """Copy a torchvision ResNet, with a new ``fc`` (none for ``embedding_dim``
    None; a removed one stays removed) and, if needed, ``conv1``."""
    model = copy.deepcopy(model)
    first = model.conv1
    if first.in_channels != in_channels:
        if in_channels != 1:
            raise ValueError(
                f"A torchvision ResNet with {first.in_channels} input channels can "
                f"be adapted to in_channels=1 only; got in_channels={in_channels}."
            )
        # conv(w, [x, x, x]) == conv(w_r + w_g + w_b, x): same response as RGB.
        first.weight = nn.Parameter(first.weight.detach().sum(dim=1, keepdim=True),
                                    requires_grad=first.weight.requires_grad)
        first.in_channels = 1
    old_fc = model.fc
    if embedding_dim is None:  # the pooled features themselves
        model.fc = nn.Identity()
    elif isinstance(old_fc, nn.Linear):
        model.fc = nn.Linear(old_fc.in_features, embedding_dim).to(
            device=old_fc.weight.device, dtype=old_fc.weight.dtype)
    return model


def last_linear_layer(module: nn.Module) -> nn.Linear:
    """The last ``nn.Linear`` of an encoder in registration order, the layer
    FLOWR's test-time fine-tuning updates.

    Examples
    --------
    >>> from sklearn_flowr.encoders import MLPEncoder, last_linear_layer
    >>> encoder = MLPEncoder(in_features=20, hidden=(32,), embedding_dim=8)
    >>> last_linear_layer(encoder)
    Linear(in_features=32, out_features=8, bias=True)
    """
    if not isinstance(module, nn.Module):
        raise TypeError(f"module must be a torch.nn.Module; got "
                        f"{type(module).__name__}.")
    linears = [layer for layer in module.modules() if isinstance(layer, nn.Linear)]
    if not linears:
        raise ValueError(
            f"{type(module).__name__} has no nn.Linear layer; last-layer "
            "fine-tuning needs an encoder that ends in one.")
    return linears[-1]
