"""Residual encoders: the few-shot ResNet-12 and ResNet-18."""

from collections.abc import Sequence
from typing import Literal

import torch
from torch import nn

from ._conv4 import _as_pair, _check_positive, _HalvingMaxPool2d


def _conv3x3(in_channels: int, out_channels: int, stride: int = 1) -> nn.Conv2d:
    # BatchNorm follows every convolution, so a bias would be redundant.
    return nn.Conv2d(
        in_channels, out_channels, kernel_size=3, stride=stride, padding=1, bias=False
    )


def _projection(in_channels: int, out_channels: int, stride: int) -> nn.Sequential:
    """1x1 convolution and BatchNorm matching a shortcut to its residual branch."""
    return nn.Sequential(
        nn.Conv2d(in_channels, out_channels, kernel_size=1, stride=stride, bias=False),
        nn.BatchNorm2d(out_channels),
    )


def _init_weights(module: nn.Module, nonlinearity: str) -> None:
    # He initialisation keeps activations at a stable scale through the depth.
    for layer in module.modules():
        if isinstance(layer, nn.Conv2d):
            nn.init.kaiming_normal_(
                layer.weight, mode="fan_out", nonlinearity=nonlinearity
            )
        elif isinstance(layer, nn.BatchNorm2d):
            nn.init.ones_(layer.weight)
            nn.init.zeros_(layer.bias)


class _ResNet12Block(nn.Module):
    """Three 3x3 convolutions around a projected shortcut, then a 2x2 max-pool."""

    def __init__(
        self, in_channels: int, out_channels: int, negative_slope: float
    ) -> None:
        super().__init__()
        self.conv1 = _conv3x3(in_channels, out_channels)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.conv2 = _conv3x3(out_channels, out_channels)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.conv3 = _conv3x3(out_channels, out_channels)
        self.bn3 = nn.BatchNorm2d(out_channels)
        self.shortcut = _projection(in_channels, out_channels, stride=1)
        self.act = nn.LeakyReLU(negative_slope)
        self.pool = _HalvingMaxPool2d()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.act(self.bn1(self.conv1(x)))
        out = self.act(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.pool(self.act(out + self.shortcut(x)))


class ResNet12(nn.Module):
    """The ResNet-12 of few-shot learning (four blocks of three 3x3
    convolutions, a projected shortcut and a 2x2 max-pool; no DropBlock), global
    average pooling and a linear projection to the embedding.

    Parameters
    ----------
    in_channels : int, default=3
        Channels of the input images.
    embedding_dim : int, default=64
        Dimension ``d`` of the embedding.
    channels : sequence of int, default=(64, 160, 320, 640)
        Output channels of the residual blocks.
    negative_slope : float, default=0.1
        Slope of the leaky ReLU for negative inputs.

    References
    ----------
    .. [1] B. Oreshkin, P. Rodriguez and A. Lacoste, "TADAM: Task dependent
       adaptive metric for improved few-shot learning", NeurIPS 2018.
    .. [2] K. Lee, S. Maji, A. Ravichandran and S. Soatto, "Meta-Learning with
       Differentiable Convex Optimization", CVPR 2019.

    Examples
    --------
    >>> import torch
    >>> from sklearn_flowr.encoders import ResNet12
    >>> encoder = ResNet12(in_channels=3, embedding_dim=64)
    >>> encoder(torch.zeros(2, 3, 32, 32)).shape
    torch.Size([2, 64])
    """

    def __init__(
        self,
        in_channels: int = 3,
        embedding_dim: int = 64,
        channels: Sequence[int] = (64, 160, 320, 640),
        negative_slope: float = 0.1,
    ) -> None:
        super().__init__()
        _check_positive(in_channels=in_channels, embedding_dim=embedding_dim,
                        channels=tuple(channels))
        self.in_channels = in_channels
        self.embedding_dim = embedding_dim
        self.channels = tuple(channels)
        widths = (in_channels, *self.channels)
        self.blocks = nn.Sequential(
            *(
                _ResNet12Block(widths[i], widths[i + 1], negative_slope)
                for i in range(len(self.channels))
            )
        )
        self.fc = nn.Linear(self.channels[-1], embedding_dim)
        _init_weights(self, nonlinearity="leaky_relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Embed images ``(n, in_channels, H, W)`` as ``(n, embedding_dim)``."""
        return self.fc(self.blocks(x).mean(dim=(2, 3)))


class _BasicBlock(nn.Module):
    """Two 3x3 convolutions around an identity or projected shortcut."""

    def __init__(self, in_channels: int, out_channels: int, stride: int) -> None:
        super().__init__()
        self.conv1 = _conv3x3(in_channels, out_channels, stride=stride)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.conv2 = _conv3x3(out_channels, out_channels)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.act = nn.ReLU(inplace=True)
        if stride == 1 and in_channels == out_channels:
            self.shortcut: nn.Module = nn.Identity()
        else:
            self.shortcut = _projection(in_channels, out_channels, stride=stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.act(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.act(out + self.shortcut(x))


class ResNet18(nn.Module):
    """ResNet-18 with a linear projection to the embedding.

    Parameters
    ----------
    in_channels, embedding_dim : int, default=3 and 64
        As in :class:`ResNet12`.
    stem : {"auto", "small", "imagenet"}, default="auto"
        ``"imagenet"``: 7x7 convolution and 3x3 max-pool, both with stride 2;
        ``"small"``: one 3x3 convolution, keeping small images' resolution;
        ``"auto"``: ``"small"`` when ``input_size``'s smaller side is under 64.
    input_size : int or tuple of (int, int) or None, default=None
        ``(height, width)`` of the inputs; only used by ``stem="auto"``.
    channels : sequence of 4 int, default=(64, 128, 256, 512)
        Output channels of the four stages.

    References
    ----------
    .. [1] K. He, X. Zhang, S. Ren and J. Sun, "Deep Residual Learning for Image
       Recognition", CVPR 2016.

    Examples
    --------
    >>> import torch
    >>> from sklearn_flowr.encoders import ResNet18
    >>> encoder = ResNet18(in_channels=1, input_size=(28, 28))
    >>> encoder.stem_type
    'small'
    >>> encoder(torch.zeros(2, 1, 28, 28)).shape
    torch.Size([2, 64])
    """

    def __init__(
        self,
        in_channels: int = 3,
        embedding_dim: int = 64,
        stem: Literal["auto", "small", "imagenet"] = "auto",
        input_size: int | tuple[int, int] | None = None,
        channels: Sequence[int] = (64, 128, 256, 512),
    ) -> None:
        super().__init__()
        if stem not in ("auto", "small", "imagenet"):
            raise ValueError(
                f"stem must be 'auto', 'small' or 'imagenet'; got {stem!r}."
            )
        if len(channels) != 4:
            raise ValueError(f"channels must hold 4 ints; got {channels!r}.")
        _check_positive(in_channels=in_channels, embedding_dim=embedding_dim,
                        channels=tuple(channels))
        self.in_channels = in_channels
        self.embedding_dim = embedding_dim
        self.input_size = None if input_size is None else _as_pair(input_size)
        self.channels = tuple(channels)
        if stem == "auto":
            small = self.input_size is not None and min(self.input_size) < 64
            stem = "small" if small else "imagenet"
        self.stem_type = stem

        width = self.channels[0]
        if stem == "small":
            first = _conv3x3(in_channels, width)
        else:
            first = nn.Conv2d(in_channels, width, 7, stride=2, padding=3, bias=False)
        stem_layers = [first, nn.BatchNorm2d(width), nn.ReLU(inplace=True)]
        if stem == "imagenet":
            stem_layers.append(nn.MaxPool2d(kernel_size=3, stride=2, padding=1))
        self.stem = nn.Sequential(*stem_layers)
        stages = []
        for i, out_channels in enumerate(self.channels):
            first_block = _BasicBlock(width, out_channels, stride=1 if i == 0 else 2)
            second_block = _BasicBlock(out_channels, out_channels, stride=1)
            stages.append(nn.Sequential(first_block, second_block))
            width = out_channels
        self.stages = nn.Sequential(*stages)
        self.fc = nn.Linear(width, embedding_dim)
        _init_weights(self, nonlinearity="relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Embed images ``(n, in_channels, H, W)`` as ``(n, embedding_dim)``."""
        return self.fc(self.stages(self.stem(x)).mean(dim=(2, 3)))
