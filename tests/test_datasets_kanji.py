"""Tests of the kanji data set (KanjiVG strokes drawn with jitter)."""

import importlib.metadata
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from sklearn_flowr.datasets import (
    _kanji,
    kanji_characters,
    kanji_strokes,
    load_kanji,
    render_kanji,
)

# Characters whose paths use only M, C and S commands (both cases), for the
# test's own reference drawing.
FEW = "一水火永あ"
SVG_HEAD = ('<svg xmlns="http://www.w3.org/2000/svg" width="109" height="109" '
            'viewBox="0 0 109 109"><g>')


def _svg_file(character):
    folder = _kanji._kanjivg_dir()
    return folder / f"{ord(character):05x}.svg"


def _reference_drawing(character, size, width_units):
    """The character's SVG paths stroked by matplotlib (not our code)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import PathPatch
    from matplotlib.path import Path as MplPath
    from PIL import Image

    root = ET.parse(_svg_file(character)).getroot()
    canvas = size * 4
    fig = plt.figure(figsize=(1, 1), dpi=canvas, facecolor="black")
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, 109)
    ax.set_ylim(109, 0)
    ax.axis("off")
    for element in root.iter("{http://www.w3.org/2000/svg}path"):
        tokens = re.findall(r"[A-Za-z]|-?\d*\.?\d+", element.get("d"))
        vertices, codes, pos, last = [], [], np.zeros(2), None
        i = 0
        while i < len(tokens):
            if tokens[i].isalpha():
                cmd, i = tokens[i], i + 1
            n = {"m": 2, "c": 6, "s": 4}[cmd.lower()]
            vals = np.array(tokens[i:i + n], dtype=float).reshape(-1, 2)
            i += n
            base = pos if cmd.islower() else 0
            pts = vals + base
            if cmd.lower() == "m":
                vertices.append(pts[0])
                codes.append(MplPath.MOVETO)
                pos, last = pts[0], None
                continue
            if cmd.lower() == "s":
                mirror = pos if last is None else 2 * pos - last
                pts = np.vstack([mirror, pts])
            vertices.extend(pts)
            codes.extend([MplPath.CURVE4] * 3)
            pos, last = pts[2], pts[1]
        ax.add_patch(PathPatch(MplPath(vertices, codes), fill=False,
                               edgecolor="white", capstyle="round",
                               joinstyle="round",
                               linewidth=width_units * canvas / 109 * 72 / canvas))
    fig.canvas.draw()
    image = np.asarray(fig.canvas.buffer_rgba())[..., 0]
    plt.close(fig)
    return np.asarray(Image.fromarray(image).resize((size, size),
                                                    Image.Resampling.BOX))


def _correlation(a, b):
    a = a.ravel().astype(float) - a.mean()
    b = b.ravel().astype(float) - b.mean()
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


@pytest.fixture
def kanjivg():
    """Skip without the KanjiVG package (it installs data, no module)."""
    try:
        return importlib.metadata.distribution("kanjivg")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("the kanji extra (kanjivg) is not installed")


@pytest.fixture
def tiny_kanjivg(tmp_path):
    """A folder in KanjiVG's layout with three hand-written characters."""
    paths = {
        "一": ["M10,55 C30,54 70,53 99,54"],
        "二": ["M25,35 c20,-1 40,-1 60,0", "M10,80 C40,79 70,78 99,79"],
        "三": ["M25,25 L85,25", "M30,55 l50,0", "M10,85 H99"],
        "十": ["M10,50 L99,50", "M55,10 V99"],
        "口": ["M20,20 L20,90", "M20,20 L90,20 L90,90", "M20,90 L90,90"],
    }
    for character, strokes in paths.items():
        body = "".join(f'<path d="{d}"/>' for d in strokes)
        (tmp_path / f"{ord(character):05x}.svg").write_text(
            f"{SVG_HEAD}{body}</g></svg>", encoding="utf-8")
    (tmp_path / "04e00-Kaisho.svg").write_text(f"{SVG_HEAD}</g></svg>")
    return tmp_path


def test_parse_relative_equals_absolute():
    """Check that relative commands give the nodes of their absolute form."""
    absolute = _kanji._parse_path("M10,20C15,25,20,30,30,30S50,40,60,60")
    relative = _kanji._parse_path("m10,20c5,5,10,10,20,10s20,10,30,30")
    assert len(absolute) == len(relative) == 1
    np.testing.assert_allclose(absolute[0], relative[0])
    # S mirrors the previous second control point (20, 30) about (30, 30).
    np.testing.assert_allclose(absolute[0][4], [40, 30])


def test_parse_repeated_arguments_and_lines():
    """Check that a command repeats over argument groups and lines become
    straight cubics."""
    (nodes,) = _kanji._parse_path("M0,0c1,1,2,2,3,3,1,1,2,2,3,3L9,6")
    assert nodes.shape == (10, 2)
    np.testing.assert_allclose(nodes[6], [6, 6])
    np.testing.assert_allclose(nodes[7:], [[7, 6], [8, 6], [9, 6]])


def test_parse_rejects_bad_path():
    """Check that a path without a command or with missing numbers raises."""
    with pytest.raises(ValueError, match="does not start with a command"):
        _kanji._parse_path("10,20")
    with pytest.raises(ValueError, match="needs 6 numbers"):
        _kanji._parse_path("M0,0C1,2")


def test_stroke_counts_match_svg(kanjivg):
    """Check that every character has as many strokes as its SVG paths."""
    characters = kanji_characters()
    for character in characters[:: len(characters) // 60]:
        root = ET.parse(_svg_file(character)).getroot()
        n_paths = sum(1 for _ in root.iter("{http://www.w3.org/2000/svg}path"))
        assert len(kanji_strokes(character)) == n_paths, character


def test_clean_render_matches_reference_drawing(kanjivg):
    """Check that a clean render looks like matplotlib's drawing of the SVG,
    and more like its own character's than like any other."""
    renders = [render_kanji(c, image_size=32) for c in FEW]
    references = [_reference_drawing(c, 32, 7.0) for c in FEW]
    scores = np.array([[_correlation(r, ref) for ref in references]
                       for r in renders])
    assert np.all(np.diag(scores) > 0.9), np.diag(scores)
    assert np.all(scores.argmax(axis=1) == np.arange(len(FEW)))


def test_characters_are_kanji_and_kana(kanjivg):
    """Check that the default classes are thousands of kanji and kana only."""
    characters = kanji_characters()
    assert len(characters) > 6000
    assert "水" in characters and "あ" in characters
    assert "A" not in characters and "1" not in characters
    assert characters == sorted(characters)


def test_load_shapes_and_types(tiny_kanjivg):
    """Check the Bunch's arrays, shapes and dtypes."""
    kanji = load_kanji(data_dir=tiny_kanjivg, split="all", image_size=16,
                       n_instances=3)
    assert kanji.data.shape == (15, 16, 16) and kanji.data.dtype == np.uint8
    assert kanji.target.dtype == np.int64
    assert list(kanji.target_names) == sorted("一二三十口")
    np.testing.assert_array_equal(kanji.instance, np.tile(np.arange(3), 5))
    assert kanji.data.reshape(15, -1).max(axis=1).min() > 100  # ink everywhere


def test_jitter_zero_gives_identical_instances(tiny_kanjivg):
    """Check that jitter=0 draws every instance as the clean render."""
    kanji = load_kanji(data_dir=tiny_kanjivg, split="all", image_size=16,
                       n_instances=2, jitter=0.0)
    clean = render_kanji("二", image_size=16, data_dir=tiny_kanjivg)
    index = list(kanji.target_names).index("二")
    for image in kanji.data[kanji.target == index]:
        np.testing.assert_array_equal(image, clean)


def test_deterministic_by_seed(tiny_kanjivg):
    """Check that a seed fixes the drawings and another seed changes them."""
    params = dict(data_dir=tiny_kanjivg, split="all", image_size=16, n_instances=3)
    first = load_kanji(random_state=1, **params).data
    np.testing.assert_array_equal(first, load_kanji(random_state=1, **params).data)
    assert not np.array_equal(first, load_kanji(random_state=2, **params).data)


def test_class_drawings_do_not_depend_on_other_classes(tiny_kanjivg):
    """Check that a class draws the same whichever characters are asked for."""
    params = dict(data_dir=tiny_kanjivg, split="all", image_size=16, n_instances=2)
    alone = load_kanji(characters="二", **params).data
    together = load_kanji(characters="一二三", **params)
    index = list(together.target_names).index("二")
    np.testing.assert_array_equal(alone, together.data[together.target == index])


def test_splits_are_class_disjoint(kanjivg):
    """Check that train, val and test hold disjoint classes covering all, and
    that a character's split does not depend on the other characters."""
    params = dict(image_size=8, n_instances=1, max_classes=60)
    names = {split: set(load_kanji(split=split, **params).target_names)
             for split in ("train", "val", "test")}
    assert all(names.values())
    assert not (names["train"] & names["val"] or names["train"] & names["test"]
                or names["val"] & names["test"])
    everything = load_kanji(split="all", **params)
    assert set().union(*names.values()) == set(everything.target_names)
    some = sorted(names["test"])[:3] + sorted(names["train"])[:3]
    subset = load_kanji(split="test", characters=some, image_size=8, n_instances=1)
    assert set(subset.target_names) == set(some[:3])


def test_max_classes_is_nested(kanjivg):
    """Check that a larger class cap keeps every class of a smaller one."""
    small = load_kanji(split="all", image_size=8, n_instances=1, max_classes=10)
    large = load_kanji(split="all", image_size=8, n_instances=1, max_classes=30)
    assert len(small.target_names) == 10 and len(large.target_names) == 30
    assert set(small.target_names) <= set(large.target_names)


def test_missing_data_names_the_extra(monkeypatch):
    """Check that without the kanjivg package the error names the extra."""
    monkeypatch.setattr(_kanji, "_DISTRIBUTION", "no-such-distribution-kanjivg")
    with pytest.raises(ImportError, match=r"pip install sklearn-flowr\[kanji\]"):
        load_kanji(characters="一")
    with pytest.raises(ImportError, match="kanji"):
        kanji_characters()


def test_bad_arguments(tiny_kanjivg, tmp_path):
    """Check that bad parameters raise clear errors."""
    with pytest.raises(ValueError, match=r"'split' parameter .* \{.*'all'.*\}"):
        load_kanji(data_dir=tiny_kanjivg, split="dev")
    with pytest.raises(ValueError, match=r"'n_instances' parameter .* \[1, inf\)"):
        load_kanji(data_dir=tiny_kanjivg, n_instances=0)
    with pytest.raises(ValueError, match=r"'jitter' parameter .* \[0\.0, inf\)"):
        load_kanji(data_dir=tiny_kanjivg, jitter=-1.0)
    with pytest.raises(ValueError, match="no drawing of"):
        load_kanji(data_dir=tiny_kanjivg, characters="一龍")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_kanji(data_dir=tmp_path / "nowhere")


def test_cache_is_reused_and_rebuilt_when_damaged(tiny_kanjivg, tmp_path,
                                                  monkeypatch):
    """Check that a second load reads the cache, and a damaged cache file is
    drawn again with a warning."""
    cache = tmp_path / "cache"
    params = dict(data_dir=tiny_kanjivg, split="all", image_size=16, n_instances=2,
                  cache_dir=cache)
    first = load_kanji(**params)
    (cache_file,) = cache.glob("kanji-*.npz")
    build = _kanji._build_kanji

    def no_build(*args, **kwargs):
        raise AssertionError("drawn again despite the cache")

    monkeypatch.setattr(_kanji, "_build_kanji", no_build)
    np.testing.assert_array_equal(load_kanji(**params).data, first.data)
    monkeypatch.setattr(_kanji, "_build_kanji", build)
    cache_file.write_bytes(b"not an npz file")
    with pytest.warns(UserWarning, match="is unreadable"):
        again = load_kanji(**params)
    np.testing.assert_array_equal(again.data, first.data)
    np.testing.assert_array_equal(load_kanji(**params).data, first.data)
