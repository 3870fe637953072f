"""benchmarks/one_row_new_class.py: end to end on tiny cached features."""

import numpy as np
import pytest


@pytest.fixture(scope="module")
def script(load_benchmark_script):
    return load_benchmark_script("one_row_new_class.py")


def test_tables_print_every_split_head_and_floor(script, tmp_path, capsys, rng):
    """Check that each split prints a row per head and each prior_floor a
    row of shares in [0, 1], and that the one-row class takes unseen rows as
    ``predict`` gives them (the counts add up with the novel share)."""
    y = np.repeat(np.arange(30), 4)
    Z = np.abs(4.0 * rng.normal(size=(30, 40))[y] + rng.normal(size=(120, 40)))
    path = tmp_path / "feats.npz"
    np.savez(path, Z=Z, y=y, g=np.tile(np.arange(4), 30))
    script.main([str(path), "--splits", "0,1", "--prior-floors", "1e-3,0.1"])
    lines = capsys.readouterr().out.splitlines()
    rows = [line.split("|")[1:-1] for line in lines
            if line.startswith("| 0 |") or line.startswith("| 1 |")]
    assert [(r[0].strip(), r[1].strip()) for r in rows] == [
        ("0", "whitened"), ("0", "isotropic"), ("1", "whitened"), ("1", "isotropic")]
    for row in rows:
        shares = [float(cell) for cell in row[3:]]
        assert all(0.0 <= share <= 1.0 for share in shares)
        assert shares[1] + shares[2] <= 1.0 + 1e-12
    floors = [line.split("|")[1:-1] for line in lines
              if line.startswith("| 1e-3 |") or line.startswith("| 0.1 |")]
    assert len(floors) == 2 and all(len(row) == 7 for row in floors)
    assert all(0.0 <= float(cell) <= 1.0 for row in floors for cell in row[1:])
