"""benchmarks/calibration_shift.py: end to end on tiny cached features."""

import numpy as np
import pytest


@pytest.fixture(scope="module")
def script(load_benchmark_script):
    return load_benchmark_script("calibration_shift.py")


def test_table_prints_every_kind_of_row(script, tmp_path, capsys, rng):
    """Check that each split prints the five kinds of rows with the columns a
    model can score them in, and that new classes' rows look more novel than
    known classes' rows under every model (the masks pick the right rows)."""
    y = np.repeat(np.arange(30), 4)
    Z = 4.0 * rng.normal(size=(30, 10))[y] + rng.normal(size=(120, 10))
    path = tmp_path / "feats.npz"
    np.savez(path, Z=Z, y=y, g=np.tile(np.arange(4), 30))
    script.main([str(path), "--splits", "0,1"])
    lines = [line for line in capsys.readouterr().out.splitlines()
             if line.startswith("| 0 |") or line.startswith("| 1 |")]
    assert len(lines) == 10
    cells = {line.split("|")[2].strip(): line.split("|")[3:6] for line in lines[:5]}
    assert [c.strip() == "" for c in cells["calibration, known queries"]] == \
        [True, True, False]
    assert [c.strip() == "" for c in cells["calibration, held-out classes"]] == \
        [True, False, False]
    for column in range(3):
        known = float(cells["test, known classes"][column])
        new = float(cells["test, new classes"][column])
        assert new > known


def test_calibration_rows_are_the_wrappers_and_masks_partition(script, rng):
    """Check that the folds' calibration rows score as
    NoveltyCalibratedClassifier's own (same folds, known queries and models),
    and that each known test row counts once as of a class one row short (under
    the deployed head's score) and once for each fold where its class is
    neither held out nor short."""
    from sklearn_flowr import CRPGaussianClassifier
    from sklearn_flowr.calibration import NoveltyCalibratedClassifier

    y = np.repeat(np.arange(16), 4)
    Z = 3.0 * rng.normal(size=(16, 8))[y] + rng.normal(size=(64, 8))
    fit = np.tile(np.arange(4), 16) != 0
    known = y < 12
    X_fit, y_fit = Z[fit & known], y[fit & known]
    X_query, y_query = Z[~fit], y[~fit]
    novel = y_query >= 12
    scores = script.fold_scores(X_fit, y_fit, X_query, y_query, novel, cv=4, seed=0)
    wrapper = NoveltyCalibratedClassifier(CRPGaussianClassifier(), cv=4,
                                          stream=False, random_state=0
                                          ).fit(X_fit, y_fit)
    rows = wrapper.calibration_rows_
    np.testing.assert_allclose(
        np.sort(scores["calibration, known queries"][2]),
        np.sort(rows.score[~rows.is_first_sighting]), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(
        np.sort(scores["calibration, held-out classes"][2]),
        np.sort(rows.score[rows.is_first_sighting]), rtol=1e-9, atol=1e-9)
    deployed = scores["test, classes one row short in the fold"][0]
    head = CRPGaussianClassifier().fit(X_fit, y_fit)
    log_proba = head.predict_log_proba(X_query[~novel])
    expected = log_proba[:, -1] - np.logaddexp.reduce(log_proba[:, :-1], axis=1)
    np.testing.assert_allclose(np.sort(deployed), np.sort(expected), rtol=1e-9)
    # Four folds: a known class is held out in one, short in one, whole in two.
    assert scores["test, known classes"][0].size == 2 * (~novel).sum()
    assert scores["test, new classes"][0].size == 4 * novel.sum()
