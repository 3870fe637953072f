"""benchmarks/conformal_check.py flags exactly the broken promises."""

import importlib.util
import json
from pathlib import Path

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "conformal_check.py"


def _load():
    spec = importlib.util.spec_from_file_location("conformal_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _figures(fnr, fdr, se=0.01):
    return {"n_tasks": 60,
            "alpha": {a: {"false_novel_rate": fnr[a], "false_novel_rate_se": se,
                          "power": 0.5, "power_se": 0.02}
                      for a in ("0.01", "0.05", "0.1")},
            "bh_levels": {q: {"q": float(q), "fdr": fdr[q], "fdr_se": se,
                              "power": 0.3, "power_se": 0.02}
                          for q in ("0.05", "0.1", "0.2")}}


def test_conformal_check_flags_broken_and_trivial_rows(tmp_path, capsys):
    module = _load()
    good = _figures({"0.01": 0.01, "0.05": 0.069, "0.1": 0.1},
                    {"0.05": 0.05, "0.1": 0.1, "0.2": 0.2})
    broken = _figures({"0.01": 0.01, "0.05": 0.071, "0.1": 0.1},  # 0.05 + 2 se < 0.071
                      {"0.05": 0.05, "0.1": 0.13, "0.2": 0.2})
    trivial = _figures({"0.01": 0.0, "0.05": 0.0, "0.1": 0.04},
                       {"0.05": 0.0, "0.1": 0.0, "0.2": 0.0})
    results = {"dataset": {"name": "toy"}, "settings": {"small": {"rows": [
        {"method": "flowr", "conformal": good},
        {"method": "ncm", "conformal": broken},
        {"method": "evm", "conformal": trivial},
        {"method": "peeler", "conformal": None}]}}}
    rows = {method: failures for _, _, method, _, failures
            in module.check_rows(results)}
    assert rows["flowr"] == []
    assert rows["ncm"] == ["FNR@0.05", "FDR@0.1"]
    assert rows["evm"] == ["FNR@0.1 < 0.05 (trivially conservative)"]
    assert rows["peeler"] == ["no figures"]
    path = tmp_path / "results.json"
    path.write_text(json.dumps(results))
    assert module.main([str(path)]) == 1
    assert "3 of 4 rows break a promise." in capsys.readouterr().out
