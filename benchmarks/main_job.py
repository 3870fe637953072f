"""How long the main job takes, and its longest silence.

Run ``python benchmarks/main_job.py`` (it runs ``flowr-benchmark --quick
--verbose 1`` once, about 2-5 minutes on 2 CPU cores; extra arguments after
``--`` go to ``flowr-benchmark``). It reads the job's output as it comes (a
pseudo-terminal is not needed: progress bars write to stderr, which is read
unbuffered) and prints the wall time, the CPU time of the job and its
children, and the five longest gaps between two writes, with the last line
printed before each, against the goals of issue 28 (at most 4 minutes; no
silence over 10 s at ``-v 1``), and EVM's share of the evaluation: the
``seconds`` of its rows in ``results.json`` over those of every row (goal: at
most 30%).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import selectors
import subprocess
import sys
import tempfile
import time

GOAL_SECONDS = 240.0
GOAL_GAP = 10.0
GOAL_EVM_SHARE = 0.30


def evm_share(results):
    """EVM's seconds over all rows' seconds in a ``results.json`` dict, and
    the same per setting (``{setting: (evm, all)}``)."""
    per_setting = {}
    for setting, block in results["settings"].items():
        rows = block["rows"]
        per_setting[setting] = (
            sum(row["seconds"] for row in rows if row["method"] == "evm"),
            sum(row["seconds"] for row in rows))
    evm = sum(part for part, _ in per_setting.values())
    total = sum(whole for _, whole in per_setting.values())
    return (evm / total if total else float("nan")), per_setting


def run(command):
    """Run ``command``; return ``(wall, cpu, gaps, status)`` where ``gaps``
    are ``(seconds, text before)`` between consecutive writes."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env=env)
    selector = selectors.DefaultSelector()
    for stream in (process.stdout, process.stderr):
        os.set_blocking(stream.fileno(), False)
        selector.register(stream, selectors.EVENT_READ)
    last, tail, gaps = start, "(start)", []
    open_streams = 2
    while open_streams:
        for key, _ in selector.select():
            chunk = key.fileobj.read()
            if chunk is None:
                continue
            if not chunk:
                selector.unregister(key.fileobj)
                open_streams -= 1
                continue
            now = time.perf_counter()
            gaps.append((now - last, tail))
            last = now
            text = chunk.decode(errors="replace").replace("\r", "\n").strip()
            if text:
                tail = text.splitlines()[-1][-90:]
    status = process.wait()
    wall = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, usage.ru_utime + usage.ru_stime, gaps, status


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("extra", nargs="*", help="arguments for flowr-benchmark")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        command = [sys.executable, "-c", "from sklearn_flowr.cli import "
                   "benchmark_main; raise SystemExit(benchmark_main())", "--quick",
                   "--verbose", "1", "--out", folder, "--cache-dir",
                   os.path.join(folder, "cache"), *args.extra]
        print("running: flowr-benchmark", " ".join(command[3:]), flush=True)
        wall, cpu, gaps, status = run(command)
        out = command[len(command) - 1 - command[::-1].index("--out") + 1]
        results_path = os.path.join(out, "results.json")
        results = None
        if status == 0 and os.path.exists(results_path):
            with open(results_path) as file:
                results = json.load(file)
    print(f"status {status}; wall {wall:.1f} s (goal <= {GOAL_SECONDS:.0f} s: "
          f"{'met' if wall <= GOAL_SECONDS else 'NOT met'}); CPU {cpu:.1f} s")
    longest = sorted(gaps, reverse=True)[:5]
    print(f"longest silences (goal <= {GOAL_GAP:.0f} s: "
          f"{'met' if longest[0][0] <= GOAL_GAP else 'NOT met'}):")
    for seconds, tail in longest:
        print(f"  {seconds:6.1f} s after: {tail}")
    if results is not None:
        share, per_setting = evm_share(results)
        parts = ", ".join(f"{setting} {evm:.2f} of {whole:.2f} s"
                          for setting, (evm, whole) in per_setting.items())
        print(f"EVM's share of the evaluation rows' seconds: {100 * share:.1f}% "
              f"({parts}; goal <= {100 * GOAL_EVM_SHARE:.0f}%: "
              f"{'met' if share <= GOAL_EVM_SHARE else 'NOT met'})")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
