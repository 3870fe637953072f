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
