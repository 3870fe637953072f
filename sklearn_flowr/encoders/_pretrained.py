"""A pretrained network's features through the last layer FLOWR trains."""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["PretrainedEncoder", "output_width"]


class PretrainedEncoder(nn.Module):
    """A pretrained network (frozen or fine-tuned) and the last linear layer
    FLOWR trains: with ``embedding_dim=None`` it starts as the identity (the
    network's own features, no random projection), so training learns a
    projection from there.

    Parameters
    ----------
    network : torch.nn.Module
        Maps inputs to ``(n, n_features)``: a timm or torchvision model with its
        classifier removed (``nn.Identity``), a text encoder's pooled output.
    n_features : int
        Width of the network's output (:func:`output_width` measures it).
    embedding_dim : int or None, default=None
        Dimension of the embedding; None keeps ``n_features``.
    freeze : bool, default=True
        Keep the network fixed (no gradient, batch norm in evaluation mode):
        only the last layer learns. False fine-tunes the whole network.

    Examples
    --------
    >>> import torch
    >>> from torch import nn
    >>> from sklearn_flowr.encoders import PretrainedEncoder
    >>> network = nn.Sequential(nn.Linear(6, 5), nn.ReLU())
    >>> encoder = PretrainedEncoder(network, 5)
    >>> x = torch.ones(2, 6)
    >>> bool(torch.equal(encoder(x), network(x)))  # the network's own features
    True
    >>> encoder = PretrainedEncoder(network, 5, embedding_dim=3)
    >>> encoder(x).shape, encoder.features(x).shape
    (torch.Size([2, 3]), torch.Size([2, 5]))
    """

    def __init__(self, network: nn.Module, n_features: int,
                 embedding_dim: int | None = None, *, freeze: bool = True):
        super().__init__()
        for name, value in (("n_features", n_features),
                            ("embedding_dim", embedding_dim)):
            if value is not None and (isinstance(value, bool)
                                      or not isinstance(value, int) or value < 1):
                raise ValueError(f"{name} must be a positive int; got {value!r}.")
        self.network = network
        self.freeze = bool(freeze)
        self.fc = nn.Linear(n_features, embedding_dim or n_features)
        if embedding_dim is None:
            with torch.no_grad():
                self.fc.weight.copy_(torch.eye(n_features))
                self.fc.bias.zero_()
        if self.freeze:
            self.network.requires_grad_(False)
            self.network.eval()

    def train(self, mode: bool = True) -> PretrainedEncoder:
        super().train(mode)
        if self.freeze:  # batch norm would re-estimate its statistics
            self.network.eval()
        return self

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """The network's features, ``(n, n_features)``."""
        return self.network(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.features(x))


def output_width(network: nn.Module, sample_shape: tuple) -> int:
    """Width of ``network``'s 2-d output for inputs of ``sample_shape`` (one
    forward pass of zeros in evaluation mode; the mode is restored)."""
    parameter = next(network.parameters(), None)
    x = torch.zeros(2, *sample_shape, device=None if parameter is None
                    else parameter.device)
    mode = network.training
    try:
        with torch.no_grad():
            out = network.eval()(x)
    finally:
        network.train(mode)
    if not isinstance(out, torch.Tensor) or out.ndim != 2:
        raise ValueError(
            f"The backbone must map inputs of shape (n, *{tuple(sample_shape)}) "
            "to feature vectors (n, n_features); got "
            f"{getattr(out, 'shape', type(out).__name__)}. Remove its "
            "classifier or pool its output.")
    return int(out.shape[1])
