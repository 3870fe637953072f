"""Tests of the image data set loaders (MiniImageNet, TieredImageNet, Omniglot,
image folders) on miniature files in each format."""

import io
import os
import pickle

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from PIL import Image

from sklearn_flowr.datasets import (
    load_image_folder,
    load_mini_imagenet,
    load_omniglot,
    load_tiered_imagenet,
)

# --------------------------------------------------------------------- helpers

def _save_image(path, array, mode=None):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    image = Image.fromarray(np.asarray(array, dtype=np.uint8))
    if mode is not None:
        image = image.convert(mode)
    image.save(path)
    return path


def _png_bytes(array):
    buffer = io.BytesIO()
    Image.fromarray(np.asarray(array, dtype=np.uint8)).save(buffer, format="PNG")
    return buffer.getvalue()


def _dump(path, obj):
    with open(path, "wb") as f:
        pickle.dump(obj, f)
    return path


def _rgb(rng, n, height=5, width=4):
    return rng.integers(0, 256, size=(n, height, width, 3), dtype=np.uint8)


def _write_ravi(root, split, rng, classes=("n02", "n01"), per_class=2, size=(5, 4)):
    """A Ravi-Larochelle csv with PNG images; returns the rows and pixels."""
    rows, pixels = [], []
    for name in classes:
        for k in range(per_class):
            filename = f"{name}{split}{k:04d}.png"
            image = _rgb(rng, 1, *size)[0]
            _save_image(os.path.join(root, "images", filename), image)
            rows.append((filename, name))
            pixels.append(image)
    lines = ["filename,label"] + [f"{f},{c}" for f, c in rows]
    with open(os.path.join(root, f"{split}.csv"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return rows, np.stack(pixels)


def _write_tiered_labels(root, split, specific, general=None):
    labels = {
        "label_specific": np.asarray(specific),
        "label_specific_str": [f"n{k:02d}" for k in range(max(specific) + 1)],
    }
    if general is not None:
        labels["label_general"] = np.asarray(general)
        labels["label_general_str"] = [f"g{k}" for k in range(max(general) + 1)]
    return _dump(os.path.join(root, f"{split}_labels.pkl"), labels)


# ---------------------------------------------------------------- MiniImageNet


def test_load_mini_imagenet_ravi_layout(tmp_path, rng):
    """Check that the csv layout gives the images and names of each row."""
    rows, pixels = _write_ravi(tmp_path, "train", rng)
    bunch = load_mini_imagenet(tmp_path, split="train")
    assert bunch.data.shape == (4, 5, 4, 3) and bunch.data.dtype == np.uint8
    assert_array_equal(bunch.data, pixels)
    assert_array_equal(bunch.target_names, ["n01", "n02"])
    assert_array_equal(bunch.target_names[bunch.target], [c for _, c in rows])
    assert bunch.target.dtype == np.int64
    assert os.path.basename(bunch.filenames[0]) == rows[0][0]


def test_load_mini_imagenet_selects_split(tmp_path, rng):
    """Check that each split reads its own csv and classes."""
    _write_ravi(tmp_path, "train", rng, classes=("n01", "n02"))
    _write_ravi(tmp_path, "test", rng, classes=("n07",), per_class=3)
    test = load_mini_imagenet(tmp_path, split="test")
    assert test.split == "test" and test.data.shape[0] == 3
    assert_array_equal(test.target_names, ["n07"])


def test_load_mini_imagenet_resizes_mismatched_images(tmp_path, rng):
    """Check that mixed sizes raise without image_size and stack with it."""
    _write_ravi(tmp_path, "val", rng, size=(5, 4))
    _save_image(tmp_path / "images" / "n02val0000.png", _rgb(rng, 1, 7, 9)[0])
    with pytest.raises(ValueError, match="pass image_size"):
        load_mini_imagenet(tmp_path, split="val")
    bunch = load_mini_imagenet(tmp_path, split="val", image_size=(3, 6))
    assert bunch.data.shape == (4, 3, 6, 3)


def test_load_mini_imagenet_pickle_cache(tmp_path, rng):
    """Check that the pickle cache maps class_dict rows to target."""
    images = _rgb(rng, 5)
    cache = {"image_data": images, "class_dict": {"b": [0, 3], "a": [1, 2, 4]}}
    _dump(tmp_path / "mini-imagenet-cache-test.pkl", cache)
    bunch = load_mini_imagenet(tmp_path, split="test")
    assert_array_equal(bunch.data, images)
    assert_array_equal(bunch.target_names[bunch.target], ["b", "a", "a", "b", "a"])
    assert bunch.split == "test"
    resized = load_mini_imagenet(tmp_path, split="test", image_size=2)
    assert resized.data.shape == (5, 2, 2, 3)


@pytest.mark.parametrize(
    "cache, message",
    [
        ({"class_dict": {"a": [0]}}, "does not hold a pickled dict"),
        ({"image_data": np.zeros((2, 3, 3), np.uint8), "class_dict": {}}, "shape"),
        (
            {"image_data": np.zeros((2, 3, 3, 3), np.uint8), "class_dict": {"a": [0]}},
            "1 rows of 'image_data' .* belong to no class",
        ),
        (
            {
                "image_data": np.zeros((2, 3, 3, 3), np.uint8),
                "class_dict": {"a": [0, 1], "b": [1]},
            },
            "overlap",
        ),
        (
            {"image_data": np.zeros((2, 3, 3, 3), np.uint8), "class_dict": {"a": [5]}},
            "rows outside",
        ),
    ],
    ids=["no-image-data", "not-rgb", "uncovered-row", "overlap", "out-of-range"],
)
def test_load_mini_imagenet_rejects_malformed_cache(tmp_path, cache, message):
    """Check that a cache with missing keys or inconsistent rows is a ValueError."""
    _dump(tmp_path / "mini-imagenet-cache-train.pkl", cache)
    with pytest.raises(ValueError, match=message):
        load_mini_imagenet(tmp_path)


def test_load_mini_imagenet_rejects_truncated_pickle(tmp_path, rng):
    """Check that a truncated pickle is a ValueError naming the expected format."""
    payload = pickle.dumps({"image_data": _rgb(rng, 2), "class_dict": {"a": [0, 1]}})
    (tmp_path / "mini-imagenet-cache-train.pkl").write_bytes(payload[:40])
    with pytest.raises(ValueError, match="Cannot unpickle .*'image_data'"):
        load_mini_imagenet(tmp_path)


def test_load_mini_imagenet_missing_files(tmp_path):
    """Check that a missing root or split is a FileNotFoundError naming layouts."""
    with pytest.raises(FileNotFoundError, match="Data folder not found"):
        load_mini_imagenet(tmp_path / "absent")
    with pytest.raises(FileNotFoundError, match="Neither .*val.csv.*Ravi-Larochelle"):
        load_mini_imagenet(tmp_path, split="val")


def test_load_mini_imagenet_rejects_bad_csv_header(tmp_path):
    """Check that a csv without the filename,label header is a ValueError."""
    (tmp_path / "train.csv").write_text("file,class\na.jpg,n01\n")
    with pytest.raises(ValueError, match="expected the header 'filename,label'"):
        load_mini_imagenet(tmp_path)


def test_load_mini_imagenet_missing_image(tmp_path, rng):
    """Check that a csv row whose image is absent is a FileNotFoundError."""
    rows, _ = _write_ravi(tmp_path, "train", rng)
    os.remove(tmp_path / "images" / rows[1][0])
    with pytest.raises(FileNotFoundError, match=f"Image file not found.*{rows[1][0]}"):
        load_mini_imagenet(tmp_path)


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_load_mini_imagenet_unreadable_image(tmp_path, rng, damage):
    """Check that a garbage or truncated image file is a ValueError naming it."""
    rows, _ = _write_ravi(tmp_path, "train", rng, size=(40, 40))
    path = tmp_path / "images" / rows[2][0]
    payload = path.read_bytes()
    path.write_bytes(b"not an image" if damage == "garbage" else payload[:80])
    with pytest.raises(ValueError, match=f"Cannot decode image .*{rows[2][0]}"):
        load_mini_imagenet(tmp_path)


@pytest.mark.parametrize(
    "loader", [load_mini_imagenet, load_tiered_imagenet, load_omniglot]
)
def test_loaders_reject_unknown_split(tmp_path, loader):
    """Check that an unknown split is a ValueError listing the allowed ones."""
    with pytest.raises(ValueError, match=r"'split' parameter .* must be a str among "
                       r"\{.*\}.* Got 'validation'"):
        loader(tmp_path, split="validation")


@pytest.mark.parametrize("image_size", [0, (3,), "big", (2.5, 3), True, (4, -1)])
def test_loaders_reject_bad_image_size(tmp_path, image_size):
    """Check that image_size must be a positive int or (height, width) pair."""
    with pytest.raises(ValueError, match="image_size must be"):
        load_mini_imagenet(tmp_path, image_size=image_size)


# -------------------------------------------------------------- TieredImageNet


@pytest.mark.parametrize("encoding", ["bytes", "uint8-array", "latin1-str"])
def test_load_tiered_imagenet_png_pickle(tmp_path, rng, encoding):
    """Check that PNG byte strings, however pickled, decode to the stored pixels."""
    images = _rgb(rng, 4)
    encoded = [_png_bytes(image) for image in images]
    if encoding == "uint8-array":  # what cv2.imencode returns
        encoded = [np.frombuffer(b, dtype=np.uint8) for b in encoded]
    elif encoding == "latin1-str":  # how a Python 2 str arrives under latin1
        encoded = [b.decode("latin1") for b in encoded]
    _dump(tmp_path / "train_images_png.pkl", encoded)
    _write_tiered_labels(tmp_path, "train", [2, 0, 2, 1])
    bunch = load_tiered_imagenet(tmp_path)
    assert_array_equal(bunch.data, images)
    assert_array_equal(bunch.target, [2, 0, 2, 1])
    assert_array_equal(bunch.target_names[bunch.target], ["n02", "n00", "n02", "n01"])


def test_load_tiered_imagenet_general_labels(tmp_path, rng):
    """Check that label_level='general' classifies by high-level category."""
    _dump(tmp_path / "val_images_png.pkl", [_png_bytes(i) for i in _rgb(rng, 3)])
    _write_tiered_labels(tmp_path, "val", [0, 1, 2], general=[3, 3, 5])
    bunch = load_tiered_imagenet(tmp_path, split="val", label_level="general")
    assert_array_equal(bunch.target, [0, 0, 1])
    assert_array_equal(bunch.target_names, ["g3", "g5"])


def test_load_tiered_imagenet_npz_channel_order(tmp_path, rng):
    """Check that the npz is preferred, BGR is flipped to RGB and 'rgb' is kept."""
    images = _rgb(rng, 3)
    np.savez(tmp_path / "test_images.npz", images=images)
    _dump(tmp_path / "test_images_png.pkl", [b"ignored"] * 3)
    _write_tiered_labels(tmp_path, "test", [0, 1, 1])
    bgr = load_tiered_imagenet(tmp_path, split="test")
    rgb = load_tiered_imagenet(tmp_path, split="test", npz_channel_order="rgb")
    assert_array_equal(bgr.data, images[..., ::-1])
    assert_array_equal(rgb.data, images)
    resized = load_tiered_imagenet(tmp_path, split="test", image_size=(2, 3))
    assert resized.data.shape == (3, 2, 3, 3)


def test_load_tiered_imagenet_labels_only_variant(tmp_path, rng):
    """Check that a labels dict with only a 'labels' key is read as specific."""
    np.savez(tmp_path / "train_images.npz", images=_rgb(rng, 2))
    _dump(tmp_path / "train_labels.pkl", {"labels": [4, 9]})
    bunch = load_tiered_imagenet(tmp_path)
    assert_array_equal(bunch.target_names[bunch.target], ["4", "9"])


def test_load_tiered_imagenet_label_count_mismatch(tmp_path, rng):
    """Check that a label count unlike the image count is a ValueError."""
    np.savez(tmp_path / "train_images.npz", images=_rgb(rng, 3))
    _write_tiered_labels(tmp_path, "train", [0, 1])
    with pytest.raises(ValueError, match="2 labels for 3 images"):
        load_tiered_imagenet(tmp_path)


def test_load_tiered_imagenet_corrupt_png(tmp_path, rng):
    """Check that an undecodable PNG item is a ValueError naming its index."""
    encoded = [_png_bytes(_rgb(rng, 1)[0]), b"\x89PNG broken"]
    _dump(tmp_path / "train_images_png.pkl", encoded)
    _write_tiered_labels(tmp_path, "train", [0, 1])
    with pytest.raises(ValueError, match="Cannot decode image 1 of .*png.pkl"):
        load_tiered_imagenet(tmp_path)


def test_load_tiered_imagenet_missing_files(tmp_path, rng):
    """Check that missing images or labels are FileNotFoundErrors naming them."""
    with pytest.raises(FileNotFoundError, match="Neither .*train_images.npz"):
        load_tiered_imagenet(tmp_path)
    np.savez(tmp_path / "train_images.npz", images=_rgb(rng, 2))
    with pytest.raises(FileNotFoundError, match="train_labels.pkl.*label_specific"):
        load_tiered_imagenet(tmp_path)


def test_load_tiered_imagenet_corrupt_npz(tmp_path, rng):
    """Check that a corrupt npz or one without 'images' is a ValueError."""
    _write_tiered_labels(tmp_path, "train", [0, 1])
    np.savez(tmp_path / "train_images.npz", pictures=_rgb(rng, 2))
    with pytest.raises(ValueError, match="has no 'images' array"):
        load_tiered_imagenet(tmp_path)
    (tmp_path / "train_images.npz").write_bytes(b"PK\x03\x04 broken zip")
    with pytest.raises(ValueError, match="Cannot read .*train_images.npz"):
        load_tiered_imagenet(tmp_path)


def test_load_tiered_imagenet_rejects_bad_label_level(tmp_path):
    """Check that an unknown label_level is a ValueError."""
    with pytest.raises(ValueError, match=r"'label_level' parameter .* str among "
                       r"\{.*'general'.*\}\. Got 'fine'"):
        load_tiered_imagenet(tmp_path, label_level="fine")


# -------------------------------------------------------------------- Omniglot


def _write_omniglot(root, rng, alphabets=("Latin", "Greek"), characters=2, n=2):
    for alphabet in alphabets:
        for c in range(1, characters + 1):
            for k in range(n):
                strokes = rng.integers(0, 2, size=(6, 6)) * 255
                path = os.path.join(root, alphabet, f"character{c:02d}", f"{k}.png")
                _save_image(path, strokes, mode="1")


def test_load_omniglot_split(tmp_path, rng):
    """Check that a split reads images_<split> with alphabet/character classes."""
    _write_omniglot(tmp_path / "images_background", rng)
    _write_omniglot(tmp_path / "images_evaluation", rng, alphabets=("Tengwar",))
    bunch = load_omniglot(tmp_path, split="background")
    assert bunch.data.shape == (8, 6, 6) and bunch.data.dtype == np.uint8
    assert set(np.unique(bunch.data)) <= {0, 255}
    assert "Greek/character02" in bunch.target_names and len(bunch.target_names) == 4
    for name, path in zip(
        bunch.target_names[bunch.target], bunch.filenames, strict=True
    ):
        assert path.split(os.sep)[-3:-1] == name.split("/")
    evaluation = load_omniglot(tmp_path / "images_evaluation", image_size=3)
    assert evaluation.data.shape == (4, 3, 3) and evaluation.split is None


def test_load_omniglot_empty_tree(tmp_path):
    """Check that a tree without character PNGs is a ValueError."""
    os.makedirs(tmp_path / "Latin" / "character01")
    with pytest.raises(ValueError, match="holds no PNG file"):
        load_omniglot(tmp_path)


# ---------------------------------------------------------------- image folder


def test_load_image_folder_layout(tmp_path, rng):
    """Check that classes are the top folders and only image files count."""
    _save_image(tmp_path / "dog" / "b.PNG", rng.integers(0, 256, (3, 4)))
    _save_image(tmp_path / "dog" / "deeper" / "c.jpg", rng.integers(0, 256, (3, 4)))
    _save_image(tmp_path / "cat" / "a.png", rng.integers(0, 256, (3, 4)))
    _save_image(tmp_path / "cat" / ".hidden.png", rng.integers(0, 256, (3, 4)))
    (tmp_path / "cat" / "notes.txt").write_text("not an image")
    bunch = load_image_folder(tmp_path)
    assert bunch.data.shape == (3, 3, 4) and bunch.data.dtype == np.uint8
    assert_array_equal(bunch.target_names[bunch.target], ["cat", "dog", "dog"])
    only_png = load_image_folder(tmp_path, extensions=(".png",))
    assert only_png.data.shape[0] == 2


def test_load_image_folder_mixed_colour(tmp_path, rng):
    """Check that one RGB image makes the stack RGB unless mode='L' is asked."""
    gray = rng.integers(0, 256, (3, 4))
    _save_image(tmp_path / "a" / "0.png", gray)
    _save_image(tmp_path / "b" / "0.png", _rgb(rng, 1, 3, 4)[0])
    _save_image(tmp_path / "c" / "0.png", gray)
    bunch = load_image_folder(tmp_path)
    assert bunch.data.shape == (3, 3, 4, 3)
    for index in (0, 2):
        assert_array_equal(bunch.data[index], np.repeat(gray[..., None], 3, axis=2))
    assert load_image_folder(tmp_path, mode="L").data.shape == (3, 3, 4)


def test_load_image_folder_sizes_and_split(tmp_path, rng):
    """Check that split picks a sub-tree and image_size unifies sizes."""
    _save_image(tmp_path / "train" / "a" / "0.png", _rgb(rng, 1, 3, 4)[0])
    _save_image(tmp_path / "train" / "b" / "0.png", _rgb(rng, 1, 5, 5)[0])
    with pytest.raises(ValueError, match="has shape .* pass image_size"):
        load_image_folder(tmp_path, split="train")
    bunch = load_image_folder(tmp_path, split="train", image_size=4)
    assert bunch.data.shape == (2, 4, 4, 3) and bunch.split == "train"
    with pytest.raises(FileNotFoundError, match="split folder 'test'"):
        load_image_folder(tmp_path, split="test")


def test_load_image_folder_rejects_empty(tmp_path, rng):
    """Check that no class folder, or an empty one, is a ValueError."""
    with pytest.raises(ValueError, match="has no class folder"):
        load_image_folder(tmp_path)
    _save_image(tmp_path / "a" / "0.png", rng.integers(0, 256, (3, 4)))
    os.makedirs(tmp_path / "b")
    with pytest.raises(ValueError, match=r"Class folder .*b' holds no file"):
        load_image_folder(tmp_path)


@pytest.mark.parametrize("mode", [None, "L", "RGB"])
@pytest.mark.parametrize("suffix", [".png", ".tif"])
def test_load_image_folder_rescales_16_bit_images(tmp_path, mode, suffix):
    """Check that 16-bit images are mapped onto 0..255 (v * 255 / 65535), not
    clipped at 255 as Pillow's own conversion does."""
    wide = np.array([[0, 257, 4000], [32768, 60000, 65535]], dtype=np.uint16)
    path = tmp_path / "a" / f"0{suffix}"
    os.makedirs(path.parent)
    Image.fromarray(wide).save(path)
    data = load_image_folder(tmp_path, mode=mode).data[0]
    expected = np.rint(wide * (255 / 65535)).astype(np.uint8)
    if mode == "RGB":
        expected = np.repeat(expected[..., None], 3, axis=2)
    assert_array_equal(data, expected)


def test_load_image_folder_rejects_out_of_range_wide_images(tmp_path):
    """Check that a 32-bit image beyond 16 bits raises, naming the file, instead
    of saturating."""
    path = tmp_path / "a" / "big.tif"
    os.makedirs(path.parent)
    Image.fromarray(np.array([[0, 70000]], dtype=np.int32)).save(path)
    with pytest.raises(ValueError, match=r"big\.tif.*values in \[0, 70000\]"):
        load_image_folder(tmp_path)


def test_rgb_with_a_transparency_key_is_read_on_white(tmp_path):
    """Check that the pixels an RGB PNG marks transparent (its tRNS colour key)
    are read white in mode RGB, as those of an RGBA image are, not black."""
    pixels = np.zeros((2, 3, 3), dtype=np.uint8)
    pixels[0, 0] = (200, 10, 10)
    path = tmp_path / "a" / "keyed.png"
    os.makedirs(path.parent)
    Image.fromarray(pixels).save(path, transparency=(0, 0, 0))
    data = load_image_folder(tmp_path, mode="RGB").data[0]
    assert_array_equal(data[0, 0], [200, 10, 10])
    assert (data.reshape(-1, 3)[1:] == 255).all()


def test_load_image_folder_rejects_bad_mode(tmp_path):
    """Check that an unknown colour mode is a ValueError."""
    with pytest.raises(ValueError, match=r"'mode' parameter .* str among "
                       r"\{.*'RGB'.*\} or None\. Got 'CMYK'"):
        load_image_folder(tmp_path, mode="CMYK")


def _two_classes(root, rng):
    for name in ("a/0.png", "a/1.png", "b/0.png"):
        _save_image(root / name, rng.integers(0, 256, (3, 4)))


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symbolic links")
@pytest.mark.parametrize("link, target", [("a/up", ".."), ("a/alias", "../b"),
                                          ("a/twice.png", "0.png")])
def test_load_image_folder_refuses_link_loops_and_aliases(tmp_path, rng, link,
                                                          target):
    """Check a symbolic-link loop (a/up -> ..) or a second link to a folder or
    file already read is a ValueError naming the link, not images read many
    times or under another class's label."""
    _two_classes(tmp_path, rng)
    os.symlink(target, tmp_path / link)
    with pytest.raises(ValueError, match="' leads to .*already read as .*loop"):
        load_image_folder(tmp_path)


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symbolic links")
@pytest.mark.parametrize("linked", ["folder", "file", "class"])
def test_load_image_folder_refuses_links_leaving_the_folder(tmp_path, rng, linked):
    """Check a link to a folder or an image outside the tree read (or a class
    folder that is such a link) is a ValueError naming it."""
    root, outside = tmp_path / "tree", tmp_path / "outside"
    _two_classes(root, rng)
    _save_image(outside / "x.png", rng.integers(0, 256, (3, 4)))
    link, target = {"folder": ("a/ext", outside), "class": ("c", outside),
                    "file": ("a/x.png", outside / "x.png")}[linked]
    os.symlink(target, root / link)
    with pytest.raises(ValueError, match=f"{link}' is a symbolic link to .*outside"):
        load_image_folder(root)


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symbolic links")
def test_load_omniglot_refuses_links_leaving_the_folder(tmp_path, rng):
    """Check an Omniglot character folder linked from outside the tree is a
    ValueError naming it."""
    _write_omniglot(tmp_path / "tree", rng)
    _save_image(tmp_path / "outside" / "x.png", rng.integers(0, 256, (3, 4)))
    os.symlink(tmp_path / "outside", tmp_path / "tree" / "Greek" / "character09")
    with pytest.raises(ValueError, match="character09' is a symbolic link to .*out"):
        load_omniglot(tmp_path / "tree")


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symbolic links")
def test_load_image_folder_follows_links_inside_the_folder(tmp_path, rng):
    """Check links to images and folders elsewhere inside the tree are read."""
    _two_classes(tmp_path, rng)
    _save_image(tmp_path / ".store" / "x.png", rng.integers(0, 256, (3, 4)))
    _save_image(tmp_path / ".more" / "y.png", rng.integers(0, 256, (3, 4)))
    os.symlink("../.store/x.png", tmp_path / "b" / "x.png")
    os.symlink("../.more", tmp_path / "b" / "more")
    bunch = load_image_folder(tmp_path)
    assert bunch.target_names[bunch.target].tolist() == ["a", "a", "b", "b", "b"]


def test_image_over_the_pixel_bound_is_refused_before_decoding(tmp_path):
    """Check a 70 KB 16-bit PNG of 6000 x 6000 pixels (893 MB at peak to
    decode before) is refused from its header, naming the file and the bound."""
    path = tmp_path / "a" / "wide.png"
    os.makedirs(path.parent)
    Image.fromarray(np.zeros((6000, 6000), np.uint16)).save(path)
    assert path.stat().st_size < 80_000
    with pytest.raises(ValueError, match=r"wide\.png' is 6000 x 6000 pixels, more "
                       r"than sklearn_flowr.datasets.MAX_IMAGE_PIXELS \(33,554,432"):
        load_image_folder(tmp_path)


def test_pixel_bound_can_be_raised_and_covers_encoded_images(tmp_path, rng,
                                                             monkeypatch):
    """Check MAX_IMAGE_PIXELS bounds PNG byte strings in a pickle too, and a
    user can change it."""
    import sklearn_flowr.datasets

    _dump(tmp_path / "test_images_png.pkl", [_png_bytes(_rgb(rng, 1, 5, 4)[0])])
    _write_tiered_labels(tmp_path, "test", [0])
    monkeypatch.setattr(sklearn_flowr.datasets, "MAX_IMAGE_PIXELS", 19)
    with pytest.raises(ValueError, match=r"Image 0 of .* is 4 x 5 pixels, more"):
        load_tiered_imagenet(tmp_path, split="test")
    monkeypatch.setattr(sklearn_flowr.datasets, "MAX_IMAGE_PIXELS", 20)
    assert load_tiered_imagenet(tmp_path, split="test").data.shape == (1, 5, 4, 3)


def test_image_size_error_names_the_cli_option(tmp_path, rng):
    """Check the error for images of different sizes tells flowr-benchmark
    users its option, not only the loaders' image_size=."""
    _save_image(tmp_path / "a" / "0.png", rng.integers(0, 256, (3, 4)))
    _save_image(tmp_path / "b" / "0.png", rng.integers(0, 256, (5, 4)))
    with pytest.raises(ValueError, match=r"image_size=\(height, width\) "
                       r"\(flowr-benchmark: --image-size HEIGHT WIDTH\)"):
        load_image_folder(tmp_path)


@pytest.mark.parametrize("as_list", [list, tuple])
def test_list_of_differently_sized_images_names_the_sizes(as_list):
    """Check a list of images of different sizes gets an error naming two of
    the sizes and how to resize, not NumPy's "inhomogeneous shape"."""
    from sklearn_flowr.validation import as_model_input

    images = as_list([np.zeros((28, 28), np.uint8)] * 2 + [np.zeros((30, 28),
                                                                    np.uint8)])
    with pytest.raises(ValueError, match=r"X\[0\] has shape \(28, 28\) and X\[2\] "
                       r"has \(30, 28\). Resize .*--image-size"):
        as_model_input(images, allow_features=False)
    same = as_model_input(as_list([np.zeros((28, 28), np.uint8)] * 2),
                          allow_features=False)
    assert same.shape == (2, 1, 28, 28)
