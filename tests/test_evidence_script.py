"""The evidence benchmark runs end to end (tiny ``--smoke`` budget)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "evidence_flowr.py"


@pytest.mark.slow
def test_evidence_script_smoke(tmp_path):
    out = tmp_path / "results.json"
    # A subprocess: the script limits torch's thread count for its own run.
    proc = subprocess.run([sys.executable, str(SCRIPT), "--smoke", "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for title in ["Claim 1 [LC", "Claim 1 [SC", "Claim 2 [LC", "Claim 2 [SC",
                  "Claim 3 [SC"]:
        assert title in proc.stdout
    results = json.loads(out.read_text())
    assert all(results["checks"]["same_pretraining"])
    for ctx, names in [("lc", ["flowr", "flowr_lambda0", "sup-e_only",
                               "sup-fc_only", "untrained"]),
                       ("sc", ["flowr", "flowr_ft2", "untrained"])]:
        for name in names:
            seed = results["per_seed"][ctx][name][0]
            assert 0.0 <= seed["accuracy"] <= 1.0
            assert 0.0 <= seed["auroc"] <= 1.0
            assert seed["novel_tpr"] >= (0.6 if ctx == "lc" else 0.15)
            assert seed["n_novel_rows"] == 4 * (3 if ctx == "lc" else 2)
