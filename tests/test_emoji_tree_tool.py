"""tools/emoji_tree.py: npm's emoji-datasource packages to an image-folder tree
of one class per emoji and one image per vendor."""

import importlib.util
import io
import tarfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

TOOL = Path(__file__).resolve().parents[1] / "tools" / "emoji_tree.py"


@pytest.fixture(scope="module")
def tool():
    spec = importlib.util.spec_from_file_location(TOOL.stem, TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _png(value):
    buffer = io.BytesIO()
    Image.fromarray(np.full((8, 8, 4), value, dtype=np.uint8)).save(buffer, "PNG")
    return buffer.getvalue()


def _package(path, vendor, members):
    """A .tgz laid out as npm pack saves emoji-datasource-<vendor>."""
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_tree_of_emoji_every_vendor_draws(tool, tmp_path):
    """Check that the tree holds the emoji both vendors draw (one drawn by one
    vendor only is left out), skin-tone variants left out, each vendor's own
    image under its name, and nothing outside the image folder of the size."""
    archives = []
    for value, vendor in ((10, "apple"), (200, "google")):
        codepoints = ["1f600", "1f44b", "1f44b-1f3fb", "0023-fe0f-20e3"]
        if vendor == "apple":
            codepoints.append("1f9ff")  # drawn by one vendor only
        members = {f"package/img/{vendor}/64/{c}.png": _png(value)
                   for c in codepoints}
        members[f"package/img/{vendor}/32/1f601.png"] = _png(value)  # other size
        members["package/emoji.json"] = b"[]"
        archives.append(_package(tmp_path / f"emoji-datasource-{vendor}-16.0.0.tgz",
                                 vendor, members))
    out = tmp_path / "tree"
    assert tool.build_tree(archives, out) == 3
    assert sorted(p.name for p in out.iterdir()) == ["0023-fe0f-20e3", "1f44b",
                                                      "1f600"]
    for folder in out.iterdir():
        assert sorted(p.name for p in folder.iterdir()) == ["apple.png", "google.png"]
    assert np.asarray(Image.open(out / "1f600" / "apple.png"))[0, 0, 0] == 10
    assert np.asarray(Image.open(out / "1f600" / "google.png"))[0, 0, 0] == 200


def test_bad_archives_are_named(tool, tmp_path):
    """Check that a file not named as npm saves the packages, a package without
    images of the size, and a single vendor each raise an error naming it."""
    stray = _package(tmp_path / "icons.tgz", "apple", {"package/a.png": _png(1)})
    with pytest.raises(ValueError, match="emoji-datasource-<vendor>"):
        tool.build_tree([stray], tmp_path / "out")
    empty = _package(tmp_path / "emoji-datasource-apple-1.tgz", "apple",
                     {"package/img/apple/32/1f600.png": _png(1)})
    with pytest.raises(ValueError, match="no package/img/apple/64"):
        tool.build_tree([empty], tmp_path / "out")
    one = _package(tmp_path / "emoji-datasource-google-1.tgz", "google",
                   {"package/img/google/64/1f600.png": _png(1)})
    with pytest.raises(ValueError, match="two or more vendors"):
        tool.build_tree([one], tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_members_outside_the_image_folder_are_not_written(tool, tmp_path):
    """Check that a member whose name would leave the tree (``..``) is not
    read as an emoji: only code-point names are written (the tree sits deep
    enough that an escape would land inside ``tmp_path``)."""
    archives = [_package(tmp_path / f"emoji-datasource-{v}-1.tgz", v, {
        f"package/img/{v}/64/1f600.png": _png(5),
        f"package/img/{v}/64/../../../../evil.png": _png(6)}) for v in ("a", "b")]
    out = tmp_path / "1" / "2" / "3" / "4" / "tree"
    assert tool.build_tree(archives, out) == 1
    assert sorted(p.name for p in out.iterdir()) == ["1f600"]
    assert not list(tmp_path.rglob("evil*"))


def test_a_vendor_twice_or_a_used_folder_is_refused(tool, tmp_path, capsys):
    """Check that two packages of one vendor and an --out that already holds
    files are refused, naming the problem, before anything is written; and
    that the command line prints the emoji and vendors it wrote."""
    members = {"package/img/apple/64/1f600.png": _png(1)}
    first = _package(tmp_path / "emoji-datasource-apple-15.0.0.tgz", "apple", members)
    second = _package(tmp_path / "emoji-datasource-apple-16.0.0.tgz", "apple", members)
    with pytest.raises(ValueError, match="both apple's"):
        tool.build_tree([first, second], tmp_path / "out")
    assert not (tmp_path / "out").exists()
    used = tmp_path / "used"
    (used / "old").mkdir(parents=True)
    with pytest.raises(ValueError, match="is not empty"):
        tool.build_tree([first], used)
    google = _package(tmp_path / "emoji-datasource-google-16.0.0.tgz", "google",
                      {"package/img/google/64/1f600.png": _png(2)})
    tool.main([str(first), str(google), "--out", str(tmp_path / "tree")])
    assert "1 emoji x 2 vendors (apple, google)" in capsys.readouterr().out
