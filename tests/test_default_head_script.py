"""benchmarks/default_head.py: the heads' table on digits' pixels."""


def test_raw_part_prints_every_head(load_benchmark_script, capsys):
    """Check that every head gets a row and SimpleShot is the unit of time."""
    script = load_benchmark_script("default_head.py")
    script.HEADS = {name: script.HEADS[name]
                    for name in ("crp iso", "whitened", "simpleshot")}
    script.main(["--part", "raw", "--dataset", "digits", "--seeds", "0"])
    out = capsys.readouterr().out
    for name in script.HEADS:
        assert f"| {name} | " in out
    assert "| simpleshot | " in out and " | 1.0 |" in out
