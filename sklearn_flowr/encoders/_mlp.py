"""A multi-layer perceptron encoder for feature vectors."""

from collections.abc import Sequence

import torch
from torch import nn


class MLPEncoder(nn.Module):
    """Fully connected ReLU layers and a linear projection to the embedding, for
    inputs that are feature vectors (tabular data, a frozen network's features).

    Parameters
    ----------
    in_features : int
        Number of input features (``C * H * W`` for images, which are
        flattened).
    hidden : sequence of int, default=(256, 256)
        Widths of the hidden layers, each followed by a ReLU (and dropout when
        ``dropout > 0``). An empty sequence gives a single linear layer.
    embedding_dim : int, default=64
        Dimension ``d`` of the embedding.
    dropout : float, default=0.0
        Dropout probability after every hidden activation, in ``[0, 1)``.

    Examples
    --------
    >>> import torch
    >>> from sklearn_flowr.encoders import MLPEncoder
    >>> encoder = MLPEncoder(in_features=20, hidden=(32,), embedding_dim=8)
    >>> encoder(torch.zeros(5, 20)).shape
    torch.Size([5, 8])
    """

    def __init__(
        self,
        in_features: int,
        hidden: Sequence[int] = (256, 256),
        embedding_dim: int = 64,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        if in_features < 1 or embedding_dim < 1 or any(w < 1 for w in hidden):
            raise ValueError(
                "in_features, embedding_dim and every hidden width must be positive "
                f"ints; got in_features={in_features!r}, hidden={hidden!r}, "
                f"embedding_dim={embedding_dim!r}."
            )
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1); got {dropout!r}.")
        self.in_features = in_features
        self.hidden = tuple(hidden)
        self.embedding_dim = embedding_dim
        self.dropout = dropout
        layers: list[nn.Module] = []
        width = in_features
        for out_features in self.hidden:
            layers += [nn.Linear(width, out_features), nn.ReLU()]
            if dropout > 0:
                layers.append(nn.Dropout(dropout))
            width = out_features
        layers.append(nn.Linear(width, embedding_dim))
        self.layers = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Embed features ``(n, in_features)`` (or ``(n, ...)``, flattened)."""
        return self.layers(x.flatten(1))
