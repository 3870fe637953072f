"""benchmarks/whitener_solvers.py: its table on small shapes."""

import pytest


@pytest.fixture(scope="module")
def script(load_benchmark_script):
    return load_benchmark_script("whitener_solvers.py")


def test_quick_table(script, capsys):
    """Check one row per shape, a time for each solver that applies (the span
    only where the rows are fewer than the features), "auto"'s pick among
    them and a positive ratio to SimpleShot."""
    script.main(["--quick", "--repeats", "1"])
    lines = [line for line in capsys.readouterr().out.splitlines()
             if line.startswith("| ") and "x" in line.split("|")[1]
             and "classes" not in line]
    assert len(lines) == len(script.QUICK_SHAPES)
    for line, (n_classes, per_class) in zip(lines, script.QUICK_SHAPES, strict=True):
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        assert cells[0] == f"{n_classes} x {per_class}"
        assert int(cells[1]) == n_classes * per_class
        times = dict(zip(("eigen", "gram", "span"), cells[2:5], strict=True))
        assert (times["span"] == "--") == (n_classes * per_class >= 64)
        assert all(float(t) > 0 for t in times.values() if t != "--")
        assert cells[5] in times and cells[6] in times and times[cells[6]] != "--"
        assert float(cells[7].rstrip("x")) > 0


def test_shapes_option(script, capsys):
    """Check that ``--shapes`` runs those shapes only, and that a malformed
    list is refused naming the form it takes."""
    script.main(["--quick", "--repeats", "1", "--shapes", "5x3,8x4"])
    rows = [line.split("|")[1].strip() for line in capsys.readouterr().out.splitlines()
            if line.startswith("| ") and "classes" not in line and "---" not in line]
    assert rows == ["5 x 3", "8 x 4"]
    for bad in ("800by3", "800", "5x1"):
        with pytest.raises(SystemExit):
            script.main(["--shapes", bad])
        assert f"classes x rows per class, both at least 2, e.g. 800x3,1111x3; " \
            f"got {bad!r}" in capsys.readouterr().err
