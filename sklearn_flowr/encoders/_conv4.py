"""Conv4, the four-block convolutional encoder of few-shot learning."""

import torch
from torch import nn
from torch.nn import functional as F


def _check_positive(**sizes) -> None:
    """Raise a ValueError naming the first size (an int, or a non-empty tuple
    of ints) below 1."""
    for name, value in sizes.items():
        values = value if isinstance(value, tuple) else (value,)
        if not values or any(v < 1 for v in values):
            kind = "non-empty ints, each" if values is value else "an int"
            raise ValueError(f"{name} must be {kind} >= 1; got {value!r}.")


def _as_pair(size: int | tuple[int, int], name: str = "input_size") -> tuple[int, int]:
    """Return ``size`` as ``(height, width)``, rejecting non-positive sides."""
    pair = (size, size) if isinstance(size, int) else tuple(size)
    if len(pair) != 2 or any(int(side) != side or side < 1 for side in pair):
        raise ValueError(
            f"{name} must be a positive int or a pair (height, width) of positive "
            f"ints; got {size!r}."
        )
    return int(pair[0]), int(pair[1])


class _HalvingMaxPool2d(nn.Module):
    """2x2 max-pool that leaves a side of one pixel as it is (four plain ones
    would empty inputs under 16x16, such as the 8x8 digits)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        kernel = (2 if x.shape[-2] >= 2 else 1, 2 if x.shape[-1] >= 2 else 1)
        return F.max_pool2d(x, kernel_size=kernel)


def _conv_block(in_channels: int, out_channels: int) -> nn.Sequential:
    # BatchNorm's shift makes a bias in the convolution redundant.
    return nn.Sequential(
        nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1, bias=False),
        nn.BatchNorm2d(out_channels),
        nn.ReLU(inplace=True),
        _HalvingMaxPool2d(),
    )


class Conv4(nn.Module):
    """Four blocks (3x3 convolution, batch norm, ReLU, 2x2 max-pool) and a
    linear projection to the embedding.

    Parameters
    ----------
    in_channels : int, default=1
        Channels of the input images (1 for grayscale, 3 for RGB).
    embedding_dim : int, default=64
        Dimension ``d`` of the embedding (64 in the FLOWR paper).
    hidden_channels : int, default=64
        Channels of every convolution.
    input_size : int or tuple of (int, int) or None, default=(28, 28)
        ``(height, width)`` of the inputs, sizing the final layer; None: sized
        by the first batch (``nn.LazyLinear``).

    References
    ----------
    .. [1] O. Vinyals, C. Blundell, T. Lillicrap, K. Kavukcuoglu and D. Wierstra,
       "Matching Networks for One Shot Learning", NeurIPS 2016.
    .. [2] J. Snell, K. Swersky and R. Zemel, "Prototypical Networks for Few-shot
       Learning", NeurIPS 2017.

    Examples
    --------
    >>> import torch
    >>> from sklearn_flowr.encoders import Conv4
    >>> encoder = Conv4(in_channels=1, embedding_dim=64, input_size=(28, 28))
    >>> encoder(torch.zeros(5, 1, 28, 28)).shape
    torch.Size([5, 64])
    >>> encoder.fc.in_features
    64
    """

    def __init__(
        self,
        in_channels: int = 1,
        embedding_dim: int = 64,
        hidden_channels: int = 64,
        input_size: int | tuple[int, int] | None = (28, 28),
    ) -> None:
        super().__init__()
        _check_positive(in_channels=in_channels, embedding_dim=embedding_dim,
                        hidden_channels=hidden_channels)
        self.in_channels = in_channels
        self.embedding_dim = embedding_dim
        self.hidden_channels = hidden_channels
        self.input_size = None if input_size is None else _as_pair(input_size)
        # Channels-last layout (NHWC strides, same logical shapes and
        # values): PyTorch's CPU max-pool over NCHW maps is about ten times
        # slower, and a training step of the 64-channel blocks twice as slow.
        self.features = nn.Sequential(
            _conv_block(in_channels, hidden_channels),
            *(_conv_block(hidden_channels, hidden_channels) for _ in range(3)),
        ).to(memory_format=torch.channels_last)
        if self.input_size is None:
            self.fc: nn.Linear = nn.LazyLinear(embedding_dim)
        else:
            height, width = self.input_size
            for _ in range(len(self.features)):  # each block's pool
                height, width = max(height // 2, 1), max(width // 2, 1)
            self.fc = nn.Linear(hidden_channels * height * width, embedding_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Embed images ``(n, in_channels, H, W)`` as ``(n, embedding_dim)``."""
        # (flatten reads the logical NCHW order: the final layer's inputs
        # are the same whatever the layout)
        if x.dim() == 4:
            x = x.contiguous(memory_format=torch.channels_last)
        flat = self.features(x).flatten(1)
        if self.input_size is not None and flat.shape[1] != self.fc.in_features:
            raise ValueError(
                f"Conv4 was built for input_size={self.input_size} but got images "
                f"of size {tuple(x.shape[-2:])}; build it with that input_size or "
                "with input_size=None."
            )
        return self.fc(flat)
