"""``flowr-benchmark``'s entry point: check the outputs, run, print, write."""

from __future__ import annotations

import errno
import functools
import json
import os
import sys
from pathlib import Path

from ..saving import temporary_name, write_atomically
from ._benchmark_figures import plot_discovery, plot_figures
from ._benchmark_parser import build_parser, parse_args
from ._benchmark_report import format_table
from ._benchmark_run import run_benchmark
from ._benchmark_setup import progress
from ._user_data import UserDataError

__all__ = ["main"]


def _output_problem(args) -> str | None:
    """Why the run could not write its results or cache, or None; creates the
    folders and probes them with a uniquely named file, never the outputs."""
    checks = [(Path(args.out), ("results.json", "roc.png", "discovery.png"),
               "--out", "pass a folder you can write to")]
    if args.cache_dir:
        checks.append((Path(args.cache_dir), (), "--cache-dir",
                       "pass a folder you can write to, or --cache-dir '' to "
                       "run without a cache"))
    for folder, names, option, fix in checks:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            for name in names:
                # The outputs are replaced atomically: only a folder in the
                # way blocks them.
                if (folder / name).is_dir():
                    raise IsADirectoryError(errno.EISDIR, "Is a directory",
                                            str(folder / name))
            probe = temporary_name(folder / "write-test")
            with open(probe, "xb"):
                pass
            os.unlink(probe)
        except OSError as exc:
            where = str(exc.filename) if exc.filename else str(folder)
            return (f"{option} {str(folder)!r} cannot be written: {where!r}: "
                    f"{exc.strerror or exc}; {fix}.")
    return None


def main(argv=None) -> int:
    """Run ``flowr-benchmark``: train, evaluate, print the tables, save figures.

    Parameters
    ----------
    argv : list of str or None, default=None
        Command-line arguments (see ``flowr-benchmark --help``); ``None`` reads
        ``sys.argv``.

    Returns
    -------
    int
        The exit status: 0, or 1 when an output cannot be written (a one-line
        message after the tables). Bad options, ``--data``, devices or outputs
        stop before any training with a usage error (``SystemExit`` 2).

    Examples
    --------
    From a shell: ``flowr-benchmark --quick --out flowr-benchmark-out``.

    >>> from sklearn_flowr.cli._benchmark_parser import build_parser, parse_args
    >>> print(build_parser().format_usage())  # doctest: +ELLIPSIS
    usage: flowr-benchmark [-h] [--dataset {glyphs,...} | --data PATH] ...
    >>> args = parse_args(["--quick", "--tasks", "50"])  # --quick keeps --tasks
    >>> args.dataset, args.tasks, args.pretrain_epochs
    ('glyphs', 50, 3)
    """
    args = parse_args(argv)
    # Outputs first: an unwritable folder must stop the run before training.
    problem = _output_problem(args)
    if problem:
        build_parser().error(problem)
    # Flushed: stage lines keep their place among the progress bars (stderr).
    log = (functools.partial(print, flush=True) if args.verbose
           else (lambda *a, **k: None))
    try:
        # Raised only before training.
        results = run_benchmark(args, log=log)
    except UserDataError as exc:
        build_parser().error(str(exc))
    out = Path(args.out)
    # The tables first: a failing write (a full disk) cannot take them along.
    print()
    for setting, setting_result in results["settings"].items():
        print(format_table(setting_result, setting))
        print()
    with progress(log, f"writing {out / 'results.json'} and drawing "
                  f"{out / 'roc.png'}"):
        problem = _write_outputs(results, out)
    if problem:
        # One line, no traceback: the tables above already hold the results.
        print(f"flowr-benchmark: error: {problem}", file=sys.stderr, flush=True)
        return 1
    print(f"Figures: {out / 'results.json'}, ROC curves, reliability "
          f"diagrams and conformal false-novel rates: {out / 'roc.png'} "
          f"({results['seconds']:.0f} s)")
    return 0


def _write_outputs(results, out: Path) -> str | None:
    """Write results.json and roc.png into ``out``; why one failed, or None."""
    target = out
    try:
        out.mkdir(parents=True, exist_ok=True)
        target = out / "results.json"
        text = json.dumps(results, indent=1).encode("utf-8")
        write_atomically(target, lambda file: file.write(text))
        target = out / "roc.png"
        write_atomically(target, lambda file: plot_figures(results, file))
        if any(result.get("discovery") for result in results["settings"].values()):
            target = out / "discovery.png"
            write_atomically(target, lambda file: plot_discovery(results, file))
    except OSError as exc:
        # exc.filename, when set, is the temporary name: name the target.
        return (f"cannot write {str(target)!r}: "
                f"{exc.strerror or type(exc).__name__ + ': ' + str(exc)}; the "
                "tables above hold the results (free space or pass another "
                "--out to keep the files).")
    return None


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
