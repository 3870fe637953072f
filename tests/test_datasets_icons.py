"""Tests of the icons data set (installed freedesktop icon themes)."""

import os
import shutil

import numpy as np
import pytest
from PIL import Image

from sklearn_flowr.datasets import _icons, load_icon_themes

ROOT = "/usr/share/icons"
INSTALLED = [t for t in _icons.ICON_THEMES if os.path.isdir(os.path.join(ROOT, t))]
needs_themes = pytest.mark.skipif(
    len(INSTALLED) < 4 or shutil.which("rsvg-convert") is None,
    reason="needs the Debian icon themes and rsvg-convert: apt-get install "
           "adwaita-icon-theme papirus-icon-theme breeze-icon-theme "
           "tango-icon-theme gnome-icon-theme mate-icon-theme "
           "elementary-xfce-icon-theme faenza-icon-theme moka-icon-theme "
           "oxygen-icon-theme librsvg2-bin")
COLOURS = [(200, 30, 30), (30, 160, 40), (40, 60, 200), (220, 180, 20)]


def _icon(path, colour):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGBA", (64, 64), (*colour, 255)).save(path)


@pytest.fixture
def fake_root(tmp_path):
    """Four themes drawing "cat" and "dog" (each its own colour), with an
    alias, symbolic icons and a link out of a theme."""
    root = tmp_path / "icons"
    for t, theme in enumerate(["one", "two", "three", "four"]):
        apps = root / theme / "64x64" / "apps"
        for n, name in enumerate(["cat", "dog"]):
            colour = tuple((c + 40 * n) % 256 for c in COLOURS[t])
            _icon(apps / f"{name}.png", colour)
        _icon(apps / "bird-symbolic.png", COLOURS[t])
        _icon(root / theme / "symbolic" / "apps" / "bird.png", COLOURS[t])
        # An alias: another name for the cat's file.
        (apps / "kitten.png").symlink_to("cat.png")
    return root


def test_classes_and_styles_of_a_small_tree(fake_root):
    """Check that each name drawn by enough themes is a class, one row per
    theme, RGB uint8 with the theme of each row."""
    icons = load_icon_themes(fake_root, split="all", image_size=16,
                             themes=["one", "two", "three", "four"])
    assert icons.target_names.tolist() == ["cat", "dog"]
    assert icons.data.shape == (8, 16, 16, 3) and icons.data.dtype == np.uint8
    assert icons.themes.tolist() == ["one", "two", "three", "four"] * 2
    assert icons.target.tolist() == [0] * 4 + [1] * 4
    assert tuple(icons.data[0, 8, 8]) == COLOURS[0]


def test_aliases_and_symbolic_icons_are_left_out(fake_root):
    """Check that a link to another name's file and symbolic icons make no
    class."""
    icons = load_icon_themes(fake_root, split="all", image_size=16,
                             themes=["one", "two", "three", "four"], min_themes=1)
    assert "kitten" not in icons.target_names
    assert not any("bird" in name for name in icons.target_names)


def test_copies_under_two_names_are_left_out(fake_root):
    """Check that identical bytes under two names of one theme count for
    neither name."""
    apps = fake_root / "one" / "64x64" / "apps"
    shutil.copyfile(apps / "cat.png", apps / "dog.png")
    icons = load_icon_themes(fake_root, split="all", image_size=16,
                             themes=["one", "two", "three", "four"], min_themes=3)
    assert "one" not in icons.themes.tolist()


def test_link_leaving_a_theme_is_not_followed(fake_root, tmp_path):
    """Check that a link out of its theme's folder (to another theme or
    elsewhere) is never read."""
    outside = tmp_path / "elsewhere" / "fox.png"
    _icon(outside, (1, 2, 3))
    for theme in ["one", "two", "three"]:
        (fake_root / theme / "64x64" / "apps" / "fox.png").symlink_to(outside)
    (fake_root / "four" / "64x64" / "apps" / "fox.png").symlink_to(
        fake_root / "one" / "64x64" / "apps" / "cat.png")
    icons = load_icon_themes(fake_root, split="all", image_size=16,
                             themes=["one", "two", "three", "four"], min_themes=1)
    assert "fox" not in icons.target_names
    assert all(str(tmp_path / "elsewhere") not in f for f in icons.filenames)


def test_min_themes_counts_distinct_themes(fake_root):
    """Check that a name drawn by fewer than min_themes themes is no class."""
    (fake_root / "four" / "64x64" / "apps" / "dog.png").unlink()
    icons = load_icon_themes(fake_root, split="all", image_size=16,
                             themes=["one", "two", "three", "four"])
    assert icons.target_names.tolist() == ["cat"]


def test_cache_gives_the_same_arrays(fake_root, tmp_path):
    """Check that a cached load equals a fresh one."""
    kwargs = dict(split="all", image_size=16, themes=["one", "two", "three", "four"])
    fresh = load_icon_themes(fake_root, **kwargs)
    load_icon_themes(fake_root, cache_dir=tmp_path / "cache", **kwargs)
    cached = load_icon_themes(fake_root, cache_dir=tmp_path / "cache", **kwargs)
    assert len(list((tmp_path / "cache").glob("icons-*.npz"))) == 1
    for key in ("data", "target", "target_names", "themes", "filenames"):
        np.testing.assert_array_equal(cached[key], fresh[key])


@pytest.mark.parametrize("kwargs, match", [
    (dict(image_size=4), r"'image_size' parameter .* range \[8, inf\)\. Got 4"),
    (dict(min_themes=0), r"'min_themes' parameter .* range \[1, inf\)"),
    (dict(max_themes=2), "max_themes must be None or an integer >= min_themes=4"),
    (dict(max_classes=0), r"'max_classes' parameter .* range \[1, inf\) or None"),
    (dict(split="everything"), r"'split' parameter .* str among \{.*'all'.*\}"),
    (dict(themes=[]), "themes must be None or a non-empty sequence"),
    (dict(themes=["one", "one"]), "distinct theme folder names"),
    (dict(themes=["../etc"]), "theme folder names under root"),
])
def test_bad_parameters_raise(fake_root, kwargs, match):
    """Check that bad parameters raise a ValueError naming the problem."""
    with pytest.raises(ValueError, match=match):
        load_icon_themes(fake_root, **kwargs)


def test_missing_root_names_the_packages(tmp_path):
    """Check that a missing root says which Debian packages to install."""
    with pytest.raises(FileNotFoundError, match="apt-get install .*papirus-icon-theme"):
        load_icon_themes(tmp_path / "nothing")


def test_missing_theme_names_its_package(fake_root):
    """Check that a theme not installed names its Debian package."""
    with pytest.raises(FileNotFoundError, match="apt-get install breeze-icon-theme"):
        load_icon_themes(fake_root, themes=["one", "breeze"])


def test_too_few_default_themes_names_the_packages(fake_root):
    """Check that a root without the default themes names the packages."""
    with pytest.raises(FileNotFoundError, match="0 icon theme.*apt-get install"):
        load_icon_themes(fake_root)


def test_missing_renderer_names_its_package(fake_root, monkeypatch):
    """Check that SVG icons without rsvg-convert name librsvg2-bin."""
    for t, theme in enumerate(["one", "two", "three", "four"]):
        svg = fake_root / theme / "scalable" / "apps" / "owl.svg"
        svg.parent.mkdir(parents=True)
        svg.write_text(f'<svg xmlns="http://www.w3.org/2000/svg" width="8" '
                       f'height="8"><rect width="8" height="{t + 1}"/></svg>')
    monkeypatch.setattr(_icons.shutil, "which", lambda name: None)
    with pytest.raises(FileNotFoundError, match="apt-get install librsvg2-bin"):
        load_icon_themes(fake_root, themes=["one", "two", "three", "four"])


@pytest.fixture(scope="module")
def installed():
    """Ten classes of the installed themes at 16 pixels."""
    return load_icon_themes(split="all", image_size=16, max_classes=10)


@needs_themes
def test_installed_themes_classes(installed):
    """Check a small load of the installed themes: every class drawn by at
    least min_themes distinct themes, one row per theme, each file its own
    name's (no alias), no symbolic icon."""
    assert installed.target_names.shape == (10,)
    assert installed.data.shape[1:] == (16, 16, 3)
    for label in range(10):
        themes = installed.themes[installed.target == label]
        assert len(set(themes)) == len(themes) >= 4
    assert not any("symbolic" in path for path in installed.filenames)
    assert len(set(installed.filenames)) == len(installed.filenames)
    for path, label in zip(installed.filenames, installed.target, strict=True):
        assert os.path.realpath(path) == path
        name = os.path.splitext(os.path.basename(path))[0]
        assert name == installed.target_names[label]


@needs_themes
def test_installed_themes_deterministic_and_nested(installed):
    """Check that a second load with a smaller max_classes gives a subset of
    the classes, with the same rows, themes and pixels."""
    small = load_icon_themes(split="all", image_size=16, max_classes=5)
    assert set(small.target_names) <= set(installed.target_names)
    rows = np.isin(installed.target_names[installed.target], small.target_names)
    np.testing.assert_array_equal(small.data, installed.data[rows])
    np.testing.assert_array_equal(small.themes, installed.themes[rows])
    np.testing.assert_array_equal(small.filenames, installed.filenames[rows])

@pytest.mark.skipif(shutil.which("rsvg-convert") is None,
                    reason="needs rsvg-convert: apt-get install librsvg2-bin")
def test_svg_icons_are_drawn_on_white(fake_root):
    """Check that an SVG icon is drawn at image_size, its transparent part
    white."""
    for t, theme in enumerate(["one", "two", "three", "four"]):
        svg = fake_root / theme / "scalable" / "apps" / "owl.svg"
        svg.parent.mkdir(parents=True)
        svg.write_text(f'<svg xmlns="http://www.w3.org/2000/svg" width="8" '
                       f'height="8"><rect width="8" height="{t + 1}"/></svg>')
    icons = load_icon_themes(fake_root, split="all", image_size=16,
                             themes=["one", "two", "three", "four"])
    owl = icons.data[icons.target == list(icons.target_names).index("owl")]
    assert owl.shape == (4, 16, 16, 3)
    assert (owl[0, :2] == 0).all() and (owl[0, -2:] == 255).all()


def test_image_over_max_pixels_is_refused(fake_root, monkeypatch):
    """Check that an icon over MAX_IMAGE_PIXELS raises before it is decoded."""
    import sklearn_flowr.datasets as datasets

    monkeypatch.setattr(datasets, "MAX_IMAGE_PIXELS", 32 * 32)
    with pytest.raises(ValueError, match="MAX_IMAGE_PIXELS"):
        load_icon_themes(fake_root, split="all", image_size=16,
                         themes=["one", "two", "three", "four"])


def test_link_loop_is_skipped(fake_root):
    """Check that a symbolic-link loop inside a theme is skipped, not followed
    forever."""
    apps = fake_root / "one" / "64x64" / "apps"
    (apps / "ping.png").symlink_to("pong.png")
    (apps / "pong.png").symlink_to("ping.png")
    icons = load_icon_themes(fake_root, split="all", image_size=16,
                             themes=["one", "two", "three", "four"], min_themes=1)
    assert icons.target_names.tolist() == ["cat", "dog"]


def test_theme_folder_linked_from_outside_root_is_refused(fake_root, tmp_path):
    """Check that a theme folder that is a link out of root is not read."""
    (fake_root / "five").symlink_to(tmp_path)
    with pytest.raises(ValueError, match="outside"):
        load_icon_themes(fake_root, themes=["one", "five"], min_themes=1)
