"""Tests for the torch encoders in ``sklearn_flowr.encoders``."""

import copy
import io
import pickle

import pytest
import torch
from torch import nn

from sklearn_flowr.encoders import (
    Conv4,
    MLPEncoder,
    ResNet12,
    ResNet18,
    last_linear_layer,
    make_backbone,
)

BACKBONES = ["conv4", "resnet12", "resnet18", "mlp"]
# (in_channels, height, width): Omniglot/MNIST-like grayscale and CIFAR-like RGB.
IMAGE_SHAPES = [(1, 28, 28), (3, 32, 32)]


@pytest.fixture(autouse=True)
def seed():
    """Seed torch so that every test builds the same weights."""
    torch.manual_seed(0)


def build(name, in_channels=1, size=28, embedding_dim=64):
    """Build a backbone by name for square images of side ``size``."""
    return make_backbone(
        name,
        in_channels=in_channels,
        input_size=(size, size),
        embedding_dim=embedding_dim,
    )


def images(n, in_channels=1, size=28):
    return torch.randn(n, in_channels, size, size)


@pytest.mark.parametrize("shape", IMAGE_SHAPES)
@pytest.mark.parametrize("name", BACKBONES)
def test_output_shape(name, shape):
    """Check that each backbone maps (n, C, H, W) images to (n, embedding_dim)."""
    in_channels, height, _ = shape
    encoder = build(name, in_channels, height, embedding_dim=16)
    out = encoder(images(3, in_channels, height))
    assert out.shape == (3, 16)
    assert out.dtype == torch.float32


@pytest.mark.parametrize("name", ["resnet12", "resnet18"])
def test_output_shape_miniimagenet_size(name):
    """Check that the ResNets embed 84x84 RGB images."""
    encoder = build(name, in_channels=3, size=84).eval()
    with torch.no_grad():
        assert encoder(images(2, 3, 84)).shape == (2, 64)


def test_conv4_linear_size_follows_input_size():
    """Check that Conv4 sizes its final layer from input_size (84 -> 64*5*5)."""
    assert Conv4(in_channels=3, input_size=(84, 84)).fc.in_features == 64 * 5 * 5
    assert Conv4(input_size=(16, 32)).fc.in_features == 64 * 1 * 2


def test_conv4_small_input_does_not_vanish():
    """Check that Conv4 embeds 8x8 images, smaller than its four pools."""
    encoder = Conv4(input_size=8)
    assert encoder.fc.in_features == 64
    assert encoder(images(2, 1, 8)).shape == (2, 64)


def test_resnet12_small_input_does_not_vanish():
    """Check that ResNet12 embeds 8x8 images, smaller than its four pools."""
    encoder = ResNet12(in_channels=1, channels=(4, 4, 4, 4), embedding_dim=3)
    assert encoder(images(2, 1, 8)).shape == (2, 3)


def test_resnet12_keeps_the_standard_5x5_map_at_84px():
    """Check that ResNet12 pools 84x84 images to the usual 5x5 final map."""
    encoder = ResNet12(channels=(4, 4, 4, 4))
    assert encoder.blocks(images(2, 3, 84)).shape == (2, 4, 5, 5)


def test_conv4_lazy_input_size():
    """Check that Conv4(input_size=None) sizes its last layer on the first batch."""
    encoder = Conv4(input_size=None)
    assert encoder(images(2, 1, 32)).shape == (2, 64)
    assert last_linear_layer(encoder).in_features == 64 * 2 * 2


def test_conv4_wrong_image_size_raises():
    """Check that Conv4 names the size mismatch instead of a matmul error."""
    encoder = Conv4(input_size=(28, 28))
    with pytest.raises(ValueError, match=r"input_size=\(28, 28\).*\(32, 32\)"):
        encoder(images(2, 1, 32))


@pytest.mark.parametrize("bad", [0, (28,), (28, -1), (2.5, 3)])
def test_conv4_invalid_input_size_raises(bad):
    """Check that a malformed input_size is rejected at construction."""
    with pytest.raises(ValueError, match="input_size must be"):
        Conv4(input_size=bad)


@pytest.mark.parametrize(
    ("input_size", "expected"), [((32, 32), "small"), ((84, 84), "imagenet")]
)
def test_resnet18_auto_stem(input_size, expected):
    """Check that ResNet18 uses the small stem below 64 px, else ImageNet's."""
    assert ResNet18(input_size=input_size).stem_type == expected


def test_resnet18_invalid_stem_raises():
    """Check that an unknown stem is rejected with the valid choices."""
    with pytest.raises(ValueError, match="'auto', 'small' or 'imagenet'"):
        ResNet18(stem="cifar")


def test_resnet12_leaky_relu_slope():
    """Check that ResNet12 uses the few-shot standard leaky ReLU slope 0.1."""
    slopes = {
        m.negative_slope for m in ResNet12().modules() if isinstance(m, nn.LeakyReLU)
    }
    assert slopes == {0.1}


def test_mlp_flattens_images():
    """Check that MLPEncoder flattens (n, C, H, W) inputs to C*H*W features."""
    encoder = MLPEncoder(in_features=3 * 4 * 4, hidden=(8,), embedding_dim=5)
    assert encoder(torch.randn(2, 3, 4, 4)).shape == (2, 5)


def test_mlp_without_hidden_is_one_linear():
    """Check that hidden=() gives a single linear layer."""
    encoder = MLPEncoder(in_features=10, hidden=(), embedding_dim=4)
    assert [type(m) for m in encoder.layers] == [nn.Linear]


def test_mlp_invalid_dropout_raises():
    """Check that a dropout outside [0, 1) is rejected."""
    with pytest.raises(ValueError, match=r"dropout must be in \[0, 1\)"):
        MLPEncoder(in_features=10, dropout=1.0)


@pytest.mark.parametrize("cls", [Conv4, ResNet12, ResNet18])
def test_non_positive_embedding_dim_raises(cls):
    """Check that embedding_dim=0 is rejected at construction."""
    with pytest.raises(ValueError, match="embedding_dim"):
        cls(embedding_dim=0)


@pytest.mark.parametrize("name", BACKBONES)
def test_gradient_reaches_first_layer(name):
    """Check that the loss gradient flows back to the first layer's weights."""
    encoder = build(name, size=28)
    encoder(images(4)).pow(2).sum().backward()
    first = next(m for m in encoder.modules() if isinstance(m, nn.Conv2d | nn.Linear))
    assert first.weight.grad is not None
    assert first.weight.grad.abs().sum() > 0


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("conv4", Conv4),
        ("ResNet12", ResNet12),
        ("resnet18", ResNet18),
        ("mlp", MLPEncoder),
    ],
)
def test_make_backbone_names(name, cls):
    """Check that each name (any case) builds its encoder with embedding_dim."""
    encoder = make_backbone(name, in_channels=1, input_size=28, embedding_dim=8)
    assert type(encoder) is cls
    assert encoder.embedding_dim == 8


def test_make_backbone_mlp_uses_n_features():
    """Check that 'mlp' takes n_features without any image size."""
    encoder = make_backbone("mlp", in_channels=1, input_size=None, n_features=7)
    assert encoder.in_features == 7


def test_make_backbone_mlp_needs_a_size():
    """Check that 'mlp' without n_features or input_size raises."""
    with pytest.raises(ValueError, match="needs n_features"):
        make_backbone("mlp", in_channels=1, input_size=None)


def test_make_backbone_instance_returned_as_a_copy():
    """Check that an nn.Module instance is returned as a copy with the same
    weights (training the encoder never changes the module a user passed)."""
    module = nn.Sequential(nn.Flatten(), nn.Linear(4, 2))
    encoder = make_backbone(module, in_channels=1, input_size=2)
    assert encoder is not module and type(encoder) is type(module)
    assert encoder[1].weight is not module[1].weight
    assert torch.equal(encoder[1].weight, module[1].weight)


def test_make_backbone_instantiates_subclass():
    """Check that a module class gets the keyword arguments it names."""

    class Tiny(nn.Module):
        def __init__(self, in_features, embedding_dim=3):
            super().__init__()
            self.fc = nn.Linear(in_features, embedding_dim)

    encoder = make_backbone(
        Tiny, in_channels=1, input_size=None, n_features=6, embedding_dim=5
    )
    assert isinstance(encoder, Tiny)
    assert (encoder.fc.in_features, encoder.fc.out_features) == (6, 5)


def test_make_backbone_subclass_missing_argument_raises():
    """Check that a class needing an argument we cannot give says so."""

    class NeedsWidth(nn.Module):
        def __init__(self, width):
            super().__init__()

    with pytest.raises(TypeError, match="Could not instantiate backbone class"):
        make_backbone(NeedsWidth, in_channels=1, input_size=28)


def test_make_backbone_unknown_name_raises():
    """Check that an unknown name lists the valid choices."""
    with pytest.raises(ValueError, match="conv4, resnet12, resnet18, mlp"):
        make_backbone("vgg16", in_channels=1, input_size=28)


def test_make_backbone_wrong_type_raises():
    """Check that a backbone that is no name, module or class is rejected."""
    with pytest.raises(TypeError, match="backbone must be one of"):
        make_backbone(42, in_channels=1, input_size=28)


@pytest.mark.parametrize("name", BACKBONES)
def test_last_linear_layer_is_the_final_projection(name):
    """Check that the last Linear maps to embedding_dim and owns the last params."""
    encoder = build(name, embedding_dim=12)
    layer = last_linear_layer(encoder)
    assert isinstance(layer, nn.Linear)
    assert layer.out_features == 12
    last_params = list(encoder.parameters())[-2:]
    assert last_params[0] is layer.weight
    assert last_params[1] is layer.bias


def test_last_linear_layer_without_linear_raises():
    """Check that a module without any Linear gets a clear error."""
    with pytest.raises(ValueError, match="has no nn.Linear layer"):
        last_linear_layer(nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU()))


def _same_output(a, b, x):
    a.eval()
    b.eval()
    with torch.no_grad():
        return torch.equal(a(x), b(x))


@pytest.mark.parametrize("name", BACKBONES)
def test_state_dict_round_trip(name):
    """Check that torch.save/load of the state_dict restores the same function."""
    encoder = build(name)
    encoder(images(2))  # move the BatchNorm running statistics off their init
    buffer = io.BytesIO()
    torch.save(encoder.state_dict(), buffer)
    buffer.seek(0)
    torch.manual_seed(1)
    restored = build(name)
    restored.load_state_dict(torch.load(buffer, weights_only=True))
    assert _same_output(encoder, restored, images(2))


@pytest.mark.parametrize("name", BACKBONES)
def test_pickle_round_trip(name):
    """Check that a pickled and unpickled encoder computes the same function."""
    encoder = build(name)
    restored = pickle.loads(pickle.dumps(encoder))
    assert _same_output(encoder, restored, images(2))


def test_lazy_conv4_pickle_round_trip():
    """Check that a lazy Conv4 pickles once its last layer is sized."""
    encoder = Conv4(input_size=None)
    encoder(images(2))
    restored = pickle.loads(pickle.dumps(encoder))
    assert _same_output(encoder, restored, images(2))


@pytest.mark.parametrize("name", BACKBONES)
def test_seeded_construction_is_deterministic(name):
    """Check that the same torch seed builds the same weights and outputs."""
    torch.manual_seed(123)
    first = build(name)
    torch.manual_seed(123)
    second = build(name)
    for p, q in zip(first.parameters(), second.parameters(), strict=True):
        assert torch.equal(p, q)
    assert _same_output(first, second, images(2))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("name", BACKBONES)
def test_cuda_forward_matches_cpu(name):
    """Check that an encoder on CUDA embeds like the same encoder on CPU."""
    encoder = build(name).eval()
    x = images(2)
    with torch.no_grad():
        expected = encoder(x)
        out = encoder.to("cuda")(x.to("cuda"))
    assert out.device.type == "cuda"
    torch.testing.assert_close(out.cpu(), expected, rtol=1e-3, atol=1e-3)


def test_torchvision_resnet_is_adapted():
    """Check that a torchvision ResNet gets a new fc and a grayscale conv1."""
    torchvision = pytest.importorskip("torchvision")
    original = torchvision.models.resnet18(weights=None)
    encoder = make_backbone(original, in_channels=1, input_size=28, embedding_dim=8)
    assert encoder is not original
    assert original.fc.out_features == 1000
    assert encoder.fc.out_features == 8
    assert last_linear_layer(encoder) is encoder.fc
    assert encoder.eval()(images(2)).shape == (2, 8)
    gray = images(2)
    with torch.no_grad():
        expected = original.conv1(gray.expand(-1, 3, -1, -1))
        out = encoder.conv1(gray)
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-4)


def test_conv4_computes_channels_last_like_the_row_major_layout():
    """Check Conv4's blocks are channels-last (its speed on the CPU) and that
    the layout changes no result beyond float32 rounding: the same weights
    in the row-major layout give the same embeddings and gradients."""
    torch.manual_seed(0)
    encoder = Conv4(embedding_dim=8, hidden_channels=16)
    weight = encoder.features[1][0].weight
    assert weight.is_contiguous(memory_format=torch.channels_last)
    assert not weight.is_contiguous()
    row_major = copy.deepcopy(encoder)
    row_major.features.to(memory_format=torch.contiguous_format)
    X = torch.randn(6, 1, 28, 28)
    out, expected = encoder(X), row_major(X)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-6)
    out.sum().backward()
    expected.sum().backward()
    torch.testing.assert_close(encoder.fc.weight.grad, row_major.fc.weight.grad,
                               rtol=1e-4, atol=1e-5)
