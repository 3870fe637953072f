"""Does the conformal novelty decision keep its promise? A check of
``flowr-benchmark`` results.

Run ``flowr-benchmark --quick --dataset D --pretrain sup-e --tasks 100 --out
OUT`` for each data set, then ``python benchmarks/conformal_check.py
OUT1/results.json OUT2/results.json ...``. For every (data set, context,
method) row it prints the mean false-novel rate at alpha 0.01, 0.05 and 0.1
and the mean false discovery rate of Benjamini-Hochberg at q 0.05, 0.1 and 0.2
(mean +- standard error over tasks), the power at alpha = 0.1 and q = 0.1, and
whether each holds its promise: mean <= level + 2 standard errors. It also
checks that the decision is not trivially conservative: at alpha = 0.1 the
false-novel rate is at least 0.05. The last line counts the cells that fail.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

ALPHAS = ("0.01", "0.05", "0.1")
QS = ("0.05", "0.1", "0.2")


def check_rows(results):
    """Yield ``(dataset, setting, method, cells, failures)`` per row, where
    ``cells`` are printable strings and ``failures`` names the broken
    promises."""
    dataset = results["dataset"]["name"]
    for setting, setting_result in results["settings"].items():
        for row in setting_result["rows"]:
            figures = row.get("conformal")
            if figures is None:
                yield dataset, setting, row["method"], ["n/a"], ["no figures"]
                continue
            cells, failures = [], []
            for alpha in ALPHAS:
                cell = figures["alpha"][alpha]
                mean, se = cell["false_novel_rate"], cell["false_novel_rate_se"] or 0.0
                cells.append(f"{mean:.3f}+-{se:.3f}")
                if mean > float(alpha) + 2 * se:
                    failures.append(f"FNR@{alpha}")
            if figures["alpha"]["0.1"]["false_novel_rate"] < 0.05:
                failures.append("FNR@0.1 < 0.05 (trivially conservative)")
            for q in QS:
                bh = figures["bh_levels"][q]
                mean, se = bh["fdr"], bh["fdr_se"] or 0.0
                cells.append(f"{mean:.3f}+-{se:.3f}")
                if mean > float(q) + 2 * se:
                    failures.append(f"FDR@{q}")
            power = figures["alpha"]["0.1"]["power"]
            bh_power = figures["bh_levels"]["0.1"]["power"]
            cells.append("n/a" if power is None else f"{power:.3f}")
            cells.append("n/a" if bh_power is None else f"{bh_power:.3f}")
            cells.append(f"{figures['n_tasks']}")
            yield dataset, setting, row["method"], cells, failures


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="+", help="results.json files")
    args = parser.parse_args(argv)
    head = (["data", "context", "method"] + [f"FNR@{a}" for a in ALPHAS]
            + [f"FDR@{q}" for q in QS] + ["pow@0.1", "BHpow@0.1", "tasks", "holds"])
    widths = [13, 7, 13] + [12] * 6 + [8, 9, 5, 5]
    print(" ".join(f"{h:>{w}s}" for h, w in zip(head, widths, strict=True)))
    n_failed = n_cells = 0
    for path in args.results:
        results = json.loads(Path(path).read_text())
        for dataset, setting, method, cells, failures in check_rows(results):
            n_cells += 1
            n_failed += bool(failures)
            values = [dataset, setting, method, *cells,
                      "yes" if not failures else "NO"]
            print(" ".join(f"{v:>{w}s}" for v, w in zip(values, widths,
                                                         strict=False)))
            for failure in failures:
                print(f"    fails: {failure}")
    print(f"{n_failed} of {n_cells} rows break a promise.")
    return int(n_failed > 0)


if __name__ == "__main__":
    raise SystemExit(main())
