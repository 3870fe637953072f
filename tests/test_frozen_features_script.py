"""benchmarks/frozen_features.py: end to end on tiny cached features, with
several renderings per class and with one (episodes)."""

import numpy as np
import pytest


@pytest.fixture(scope="module")
def script(load_benchmark_script):
    return load_benchmark_script("frozen_features.py")


def _features(tmp_path, rng, n_renderings):
    y = np.repeat(np.arange(20), 4)
    g = np.tile(np.arange(4), 20) if n_renderings > 1 else np.zeros(80, int)
    Z = 3.0 * rng.normal(size=(20, 12))[y] + rng.normal(size=(80, 12))
    path = tmp_path / f"feats{n_renderings}.npz"
    np.savez(path, Z=Z, y=y, g=g)
    return str(path)


@pytest.mark.parametrize("n_renderings", [4, 1])
def test_table_and_ratios_print(script, tmp_path, capsys, rng, n_renderings):
    """Check that every method asked for gets a row, the step ratios print for
    warm and cold caches, and SimpleShot is the unit of time."""
    path = _features(tmp_path, rng, n_renderings)
    methods = ["whitened", "crp", "knn", "fecam"]  # RanPAC's eigh is slow
    script.main([path, "--splits", "0,1", "--n-way", "3", "--shots", "2",
                 "--queries", "1", "--methods", ",".join(methods)])
    out = capsys.readouterr().out
    for name in ["simpleshot", *methods]:
        assert f"| native | {name} |" in out
    assert "| native | simpleshot | " in out and " | 1.0 |" in out
    for cache in ("warm", "cold"):
        assert f"native, {cache} caches" in out


def test_split_holds_out_one_rendering(script, rng):
    """Check that a split fits on the other renderings of the known classes
    and queries rendering s of every class."""
    y = np.repeat(np.arange(10), 4)
    g = np.tile(np.arange(4), 10)
    args = script.argparse.Namespace(known_share=0.6)
    features = np.arange(40, dtype=float)[:, None]
    X_fit, y_fit, X_query, y_query, novel = script.split(features, y, g, 2, args)
    assert not np.isin(X_fit[:, 0], np.flatnonzero(g == 2)).any()
    assert np.array_equal(X_query[:, 0], np.flatnonzero(g == 2))
    assert set(y_query[~novel]) == set(y_fit) and len(set(y_fit)) == 6


def test_max_classes_draws_one_subset_for_every_split(script, rng):
    """Check that ``--max-classes`` keeps that many classes, the same ones in
    every split, and that the design's share of new queries follows them."""
    y = np.repeat(np.arange(10), 4)
    g = np.tile(np.arange(4), 10)
    features = np.arange(40, dtype=float)[:, None]
    args = script.argparse.Namespace(known_share=0.6, max_classes=5)
    kept = []
    for s in (0, 1):
        _, y_fit, _, y_query, novel = script.split(features, y, g, s, args)
        assert np.unique(y_query).shape[0] == 5 and len(set(y_fit)) == 3
        kept.append(set(y_query))
        assert script.design_shares(y, g, args)[0] == pytest.approx(novel.mean())
    assert kept[0] == kept[1]


def test_known_class_without_other_renderings_is_new(script):
    """Check that a class drawn as known whose only row is the held-out
    rendering (an image folder with one image of it) has no fitting rows and
    that its query counts as new, the model never having seen it."""
    y = np.repeat(np.arange(10), 4)
    g = np.tile(np.arange(4), 10)
    lonely = 7
    keep = (y != lonely) | (g == 0)  # class 7: only its rendering 0
    y, g = y[keep], g[keep]
    features = np.arange(y.shape[0], dtype=float)[:, None]
    args = script.argparse.Namespace(known_share=1.0)
    _, y_fit, _, y_query, novel = script.split(features, y, g, 0, args)
    assert lonely not in y_fit
    assert novel[y_query == lonely].all() and not novel[y_query != lonely].any()


def test_wall_clock_times(script, tmp_path, capsys, rng):
    """Check that ``--clock wall`` times fit + predict in wall seconds."""
    path = _features(tmp_path, rng, 4)
    script.main([path, "--splits", "0", "--methods", "ncm", "--clock", "wall"])
    out = capsys.readouterr().out
    assert "| wall s | x SimpleShot |" in out and "| CPU s |" not in out


@pytest.mark.parametrize("n_renderings", [4, 1])
def test_design_shares_are_the_queries_shares(script, tmp_path, rng, n_renderings):
    """Check that the shares the calibration is told are the protocol's: new
    rows among the queries, and first sightings when they are streamed."""
    features, y, g = script.load(_features(tmp_path, rng, n_renderings))
    args = script.argparse.Namespace(known_share=0.6, n_way=3, shots=2, queries=1)
    new, first = script.design_shares(y, g, args)
    _, _, _, y_query, novel = script.split(features, y, g, 0, args)
    assert new == pytest.approx(novel.mean())
    n_first = np.unique(y_query[novel]).shape[0]
    assert first == pytest.approx(n_first / y_query.shape[0])


def test_ece_columns_print_for_heads_and_anchors(script, tmp_path, capsys, rng):
    """Check that --ece prints raw and calibrated ECEs for the head and the
    calibrated ones for an anchor's score, the ECE of each score's best
    Platt map and of each calibrated P(novel) mean-matched on the queries."""
    path = _features(tmp_path, rng, 4)
    script.main([path, "--splits", "0", "--methods", "default,simpleshot", "--ece"])
    out = capsys.readouterr().out
    assert ("ECE raw | ECE calibrated | its floor | stream ECE raw |"
            " stream ECE calibrated | best Platt map's ECE | mean-matched ECE |") in out
    head, anchor = (next(line for line in out.splitlines()
                         if line.startswith(f"| native | {name} |"))
                    for name in ("default", "simpleshot"))
    assert len([c for c in head.split("|")[8:15] if c.strip()]) == 7
    assert ([c.strip() == "" for c in anchor.split("|")[8:15]]
            == [True, False, False, True, False, False, False])
    # The best Platt map's ECE, fitted on the queries, and the mean-matched
    # one are a probability's ECE.
    assert 0 <= float(head.split("|")[13]) <= 1
    assert 0 <= float(head.split("|")[14]) <= 1
    assert "the queries of every split pooled" in out
    pooled = out.split("the queries of every split pooled")[1]
    for name in ("default", "simpleshot"):
        assert f"| native | {name} | 0." in pooled


def test_paired_table_compares_the_default_head(script, tmp_path, capsys, rng):
    """Check that the paired differences are the default head's over each
    other method when the run has no ``whitened`` column."""
    path = _features(tmp_path, rng, 4)
    script.main([path, "--splits", "0,1", "--methods", "default,knn"])
    out = capsys.readouterr().out
    paired = out.split("default minus each method", 1)[1]
    for name in ("simpleshot", "knn"):
        assert f"| native | {name} | " in paired
    assert "| native | default | " not in paired


def test_ece_seeds_print_the_pooled_ece_of_each_seed(script, tmp_path, capsys, rng):
    """Check that --ece-seeds prints, per method, the pooled ECE and Brier
    score of each calibration seed and their mean: the first seed's are the
    table's."""
    path = _features(tmp_path, rng, 4)
    script.main([path, "--splits", "0,1", "--methods", "default", "--ece",
                 "--ece-seeds", "0,1,2"])
    out = capsys.readouterr().out
    pooled = out.split("the queries of every split pooled")[1]
    table = next(line for line in pooled.splitlines()
                 if line.startswith("| native | default |"))
    ece_in_table = float(table.split("|")[3].split("(")[0])
    brier_in_table = float(table.split("Brier")[1].split("|")[0])
    matched_in_table = float(table.split("mean-matched")[1].split("|")[0])
    for figure, first in (("ECE", ece_in_table), ("Brier", brier_in_table),
                          ("mean-matched ECE", matched_in_table)):
        seeds = next(line for line in pooled.splitlines()
                     if line.startswith(f"  default {figure} over seeds 0,1,2:"))
        values = [float(v) for v in seeds.split("(")[1].rstrip(")").split()]
        assert len(values) == 3 and values[0] == pytest.approx(first, abs=6e-4)
        assert 0.0 < min(values) and max(values) < 1.0
        mean = float(seeds.split(":")[1].split("+-")[0])
        assert mean == pytest.approx(np.mean(values), abs=1.5e-4)


def test_float32_features_reach_the_methods_as_float32(script, tmp_path, capsys,
                                                        rng):
    """Check that --dtype float32 hands the methods float32 features (a
    network's precision) and that the heads' figures equal float64's but for
    rounding."""
    path = _features(tmp_path, rng, 4)
    features = script.load(path, "float32")[0]
    assert features.dtype == np.float32
    tables = {}
    for dtype in ("float64", "float32"):
        script.main([path, "--splits", "0", "--methods", "default", "--dtype",
                     dtype])
        out = capsys.readouterr().out
        assert f"({dtype}): mean over splits 0" in out
        tables[dtype] = next(line for line in out.splitlines()
                             if line.startswith("| native | default |"))
    # known acc, AUROC and H of the default head, three decimals.
    assert tables["float32"].split("|")[3:6] == tables["float64"].split("|")[3:6]
