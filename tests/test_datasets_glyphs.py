"""Tests of the ``glyphs`` dataset (characters rendered from fonts)."""

import os
import stat
import warnings
from pathlib import Path

import numpy as np
import pytest

from sklearn_flowr.datasets._cache import split_of as _split_of
from sklearn_flowr.datasets._glyphs import glyph_fonts, load_glyphs

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


@pytest.fixture(scope="module")
def glyphs_all():
    return load_glyphs(characters=LETTERS, split="all", n_augment=1)


def test_default_fonts_found():
    """Check that matplotlib's fonts are found, sorted, without duplicates."""
    fonts = glyph_fonts()
    names = [f.name.lower() for f in fonts]
    assert "dejavusans.ttf" in names
    assert names == sorted(names)
    assert len(set(names)) == len(names)


def test_shapes_dtypes_and_names(glyphs_all):
    """Check that images are uint8 squares and target_names index the classes."""
    assert glyphs_all.data.dtype == np.uint8
    assert glyphs_all.data.shape[1:] == (28, 28)
    assert glyphs_all.target.shape == (glyphs_all.data.shape[0],)
    assert glyphs_all.fonts.shape == glyphs_all.target.shape
    assert set(np.unique(glyphs_all.target)) == set(range(len(glyphs_all.target_names)))
    assert set(glyphs_all.target_names) <= set(LETTERS)
    # Every class has several fonts: latin letters are in every text font.
    assert np.bincount(glyphs_all.target).min() >= 5


def test_case_pairs_stay_distinct_classes(glyphs_all):
    """Check that the baseline anchor keeps 'o' and 'O' apart (no size fit)."""
    names = list(glyphs_all.target_names)
    assert "o" in names and "O" in names


def test_cross_script_lookalikes_are_merged():
    """Check that Latin 'A' and Cyrillic 'A' (one glyph in most fonts) are one class."""
    glyphs = load_glyphs(characters="AB\u0410", split="all", n_augment=0,
                         min_fonts=2)
    assert list(glyphs.target_names) == ["A", "B"]


def test_splits_are_class_disjoint_and_cover_all(glyphs_all):
    """Check that train/val/test hold disjoint classes whose union is 'all'."""
    seen = []
    for split in ("train", "val", "test"):
        part = load_glyphs(characters=LETTERS, split=split, n_augment=1)
        assert part.split == split
        assert set(part.class_split) == {split}
        assert np.array_equal(np.unique(part.target), np.arange(len(part.target_names)))
        seen.append(set(part.target_names))
    train, val, test = seen
    assert not (train & val) and not (train & test) and not (val & test)
    assert seen[0] | seen[1] | seen[2] == set(glyphs_all.target_names)


def test_split_depends_only_on_the_character():
    """Check that a character's split does not depend on the fonts available."""
    few = load_glyphs(characters=LETTERS[:20], split="all", n_augment=0)
    for name, split in zip(few.target_names, few.class_split, strict=True):
        assert split == _split_of(name)
    shares = np.mean([_split_of(chr(c)) == "train" for c in range(0x21, 0x17F)])
    assert 0.5 < shares < 0.7


def test_deterministic_and_seeded():
    """Check that the same seed gives the same images and another seed others."""
    a = load_glyphs(characters="abc", split="all", random_state=1)
    b = load_glyphs(characters="abc", split="all", random_state=1)
    c = load_glyphs(characters="abc", split="all", random_state=2)
    assert np.array_equal(a.data, b.data)
    assert not np.array_equal(a.data, c.data)
    assert a.data.shape[0] == 2 * (a.data.shape[0] // 2)  # n_augment=2 copies


def test_cache_round_trip(tmp_path):
    """Check that a cached load returns exactly the rendered arrays."""
    first = load_glyphs(characters="xyz", split="all", cache_dir=tmp_path)
    assert len(list(tmp_path.glob("glyphs-*.npz"))) == 1
    second = load_glyphs(characters="xyz", split="all", cache_dir=tmp_path)
    for key in ("data", "target", "target_names", "fonts", "class_split"):
        assert np.array_equal(first[key], second[key])


def _truncated(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _garbage(path):
    path.write_bytes(b"not an npz archive")


def _missing_key(path):
    with np.load(path) as cached:
        arrays = {key: cached[key] for key in cached.files if key != "fonts"}
    np.savez(path, **arrays)


@pytest.mark.parametrize("damage", [_truncated, _garbage, _missing_key])
def test_unreadable_cache_is_rebuilt(tmp_path, damage):
    """Check that a damaged cache file gives a warning naming it, the same
    arrays as a fresh render, and a rewritten file that loads silently."""
    fresh = load_glyphs(characters="xyz", split="all", cache_dir=tmp_path)
    (cache_file,) = tmp_path.glob("glyphs-*.npz")
    damage(cache_file)
    with pytest.warns(UserWarning, match=rf"{cache_file.name}.*is unreadable"):
        rebuilt = load_glyphs(characters="xyz", split="all", cache_dir=tmp_path)
    for key in ("data", "target", "target_names", "fonts", "class_split"):
        assert np.array_equal(fresh[key], rebuilt[key])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = load_glyphs(characters="xyz", split="all", cache_dir=tmp_path)
    assert np.array_equal(again.data, fresh.data)
    assert sorted(p.name for p in tmp_path.iterdir()) == [cache_file.name]


def test_unwritable_cache_warns_and_returns_the_data(tmp_path):
    """Check that a cache folder that cannot be created costs the cache, not
    the data: a warning names the file."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.warns(UserWarning, match="Cannot write cache file"):
        glyphs = load_glyphs(characters="xyz", split="all", n_augment=0,
                             cache_dir=blocker / "cache")
    assert glyphs.data.shape[0] > 0


def test_max_fonts_and_return_X_y():
    """Check that max_fonts caps instances per class and return_X_y gives arrays."""
    X, y = load_glyphs(characters="ab", split="all", n_augment=0, max_fonts=5,
                       return_X_y=True)
    assert np.bincount(y).max() == 5
    assert X.shape == (y.shape[0], 28, 28)


def test_extra_font_folder_adds_instances(tmp_path):
    """Check that a given font folder is searched (here: a copy of one font)."""
    import shutil

    source = next(f for f in glyph_fonts() if f.name == "DejaVuSans.ttf")
    shutil.copy(source, tmp_path / "Copy-DejaVuSans-Extra.ttf")
    base = load_glyphs(characters="k", split="all", n_augment=0, min_fonts=1)
    more = load_glyphs([tmp_path], characters="k", split="all", n_augment=0,
                       min_fonts=1)
    assert more.data.shape[0] == base.data.shape[0] + 1


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"split": "dev"}, r"'split' parameter .* must be a str among \{.*'all'.*\}"),
        ({"image_size": 4}, r"'image_size' parameter .* must be an int in the "
                            r"range \[8, inf\)\. Got 4"),
        ({"n_augment": -1}, r"'n_augment' parameter .* range \[0, inf\)"),
        ({"min_fonts": 0}, r"'min_fonts' parameter .* range \[1, inf\)"),
        ({"max_fonts": 2, "min_fonts": 3},
         "max_fonts must be None or an integer >= min_fonts=3; got 2"),
        ({"characters": ["ab"]}, "single characters"),
        ({"characters": "\u4e00", "min_fonts": 50}, "No character is covered"),
    ],
)
def test_bad_arguments(kwargs, match):
    """Check that bad arguments raise clear errors."""
    kwargs.setdefault("characters", "ab")
    with pytest.raises(ValueError, match=match):
        load_glyphs(**kwargs)


@pytest.mark.parametrize("as_type", [str, Path])
def test_single_font_folder_is_one_folder(tmp_path, as_type):
    """Check that a str or path for font_dirs is one folder, not an iterable of
    one-character folder names."""
    import shutil

    source = next(f for f in glyph_fonts() if f.name == "DejaVuSans.ttf")
    shutil.copy(source, tmp_path / "Copy-DejaVuSans-Extra.ttf")
    fonts = glyph_fonts(as_type(tmp_path), include_default=False)
    assert [f.name for f in fonts] == ["Copy-DejaVuSans-Extra.ttf"]
    one = load_glyphs(as_type(tmp_path), characters="k", split="all",
                      n_augment=0, min_fonts=1)
    listed = load_glyphs([tmp_path], characters="k", split="all", n_augment=0,
                         min_fonts=1)
    assert np.array_equal(one.data, listed.data)


def test_missing_font_folder(tmp_path):
    """Check that a missing font folder is named in the error."""
    with pytest.raises(FileNotFoundError, match="does-not-exist"):
        load_glyphs([tmp_path / "does-not-exist"], characters="ab")


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX permissions")
@pytest.mark.parametrize("writable", ["folder", "file"])
def test_cache_writable_by_every_user_is_not_trusted(tmp_path, writable):
    """Check a cache file in a folder every user can write to (or itself
    writable by all) is not read back: a test image replaced there by another
    user's data is not loaded; a warning says why and the data are rendered."""
    cache = tmp_path / "cache"
    fresh = load_glyphs(characters="xyz", split="all", cache_dir=cache)
    (cache_file,) = cache.glob("glyphs-*.npz")
    with np.load(cache_file) as cached:
        arrays = {key: cached[key] for key in cached.files}
    arrays["data"] = 255 - arrays["data"]  # another user's images
    np.savez(cache_file, **arrays)
    os.chmod(cache if writable == "folder" else cache_file, 0o777)
    with pytest.warns(UserWarning, match=rf"{cache_file.name}.*is not used: it or "
                      "its folder is writable by every user"):
        again = load_glyphs(characters="xyz", split="all", cache_dir=cache)
    assert np.array_equal(again.data, fresh.data)
    os.chmod(cache, 0o777 | stat.S_ISVTX)  # /tmp's sticky bit: files stay own
    os.chmod(cache_file, 0o644)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_glyphs(characters="xyz", split="all", cache_dir=cache)


def test_killed_writers_temporary_files_are_removed(tmp_path):
    """Check a temporary file a killed run left beside a cache file is removed
    by the next load, and a live writer's (recent) one is kept."""
    load_glyphs(characters="xyz", split="all", cache_dir=tmp_path)
    (cache_file,) = tmp_path.glob("glyphs-*.npz")
    stale = tmp_path / f".{cache_file.name}.4242.{'0' * 32}.tmp"
    live = tmp_path / f".{cache_file.name}.4243.{'1' * 32}.tmp"
    for tmp in (stale, live):
        tmp.write_bytes(b"partial")
    os.utime(stale, (0, 0))
    load_glyphs(characters="xyz", split="all", cache_dir=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [cache_file.name, live.name])
