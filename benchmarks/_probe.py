"""What the probes of ``benchmarks/`` share: ``flowr-benchmark``'s run, in brief.

``noise_shrinkage.py``, ``novel_class_shift.py`` and ``novelty_map_targets.py``
measure one question each on ``flowr-benchmark``'s data, contexts and tasks
(same seeds) with a ``FLOWRClassifier`` trained as its options say. This
module holds their options (a subset of ``flowr-benchmark``'s), the model
they build, the tasks they draw and how a probe's result is printed and
saved. It is not a script; the probes import it from their own folder.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from sklearn_flowr import FLOWRClassifier
from sklearn_flowr.cli._benchmark_setup import DATASETS
from sklearn_flowr.protocol import (
    LargeContextTasks,
    SmallContextTasks,
    small_context_sizes,
)
from sklearn_flowr.training import MetaTraining, SupE, SupFC

# flowr-benchmark's fixed novelty TPR of each context, and what --quick sets.
TPR = {"small": 0.15, "large": 0.6}
QUICK = dict(dataset="glyphs", tasks=200, lc_known_query_classes=20,
             pretrain_epochs=3, meta_epochs=3, episodes_per_epoch=30,
             embedding_dim=32)
PRETRAININGS = {"sup-e": SupE, "sup-fc": SupFC, "none": None}


def build_parser(description) -> argparse.ArgumentParser:
    """``flowr-benchmark``'s data, training and task options (a subset)."""
    parser = argparse.ArgumentParser(description=description)
    add = parser.add_argument
    add("--dataset", choices=DATASETS, default="glyphs")
    add("--data-path", default=None, help="fashion-mnist: folder of the idx files")
    add("--font-dir", action="append", default=[], help="glyphs: extra fonts")
    add("--max-fonts", type=int, default=None)
    add("--kanji-classes", type=int, default=1000)
    add("--kanji-instances", type=int, default=20)
    add("--max-per-class", type=int, default=None)
    add("--setting", nargs="+", choices=("small", "large"),
        default=["small", "large"])
    add("--pretrain", nargs="+", choices=tuple(PRETRAININGS),
        default=["sup-e", "sup-fc"])
    add("--backbone", default="conv4")
    add("--tasks", type=int, default=1000, help="tasks per setting")
    add("--lc-known-query-classes", type=int, default=None)
    add("--embedding-dim", type=int, default=64)
    add("--pretrain-epochs", type=int, default=20)
    add("--meta-epochs", type=int, default=10, help="0: no meta-training")
    add("--episodes-per-epoch", type=int, default=100)
    add("--n-jobs", type=int, default=1, help="joblib workers over tasks")
    add("--device", default="auto")
    add("--seed", type=int, default=0)
    add("--out", default="flowr-benchmark-out", help="folder of the JSON")
    add("--cache-dir", default=str(Path.home() / ".cache" / "sklearn_flowr"),
        help="cache of rendered data ('' disables)")
    add("--quick", action="store_true",
        help="sets " + ", ".join(f"--{k.replace('_', '-')} {v}"
                                 for k, v in QUICK.items())
        + " unless given")
    add("-v", "--verbose", type=int, default=1)
    add("-q", "--quiet", action="store_const", const=0, dest="verbose")
    return parser


def parse_args(parser, argv):
    args = parser.parse_args(argv)
    if args.quick:
        parser.set_defaults(**QUICK)
        args = parser.parse_args(argv)
    return args


def build_model(args, setting, pretrain, **params) -> FLOWRClassifier:
    """The run's ``FLOWRClassifier`` of one context and pre-training."""
    stage = PRETRAININGS[pretrain]
    meta = (MetaTraining(epochs=args.meta_epochs,
                         episodes_per_epoch=args.episodes_per_epoch)
            if args.meta_epochs else None)
    return FLOWRClassifier(
        backbone=args.backbone, setting=setting, embedding_dim=args.embedding_dim,
        pretrain=None if stage is None else stage(epochs=args.pretrain_epochs),
        meta=meta, device=args.device, random_state=args.seed,
        verbose=int(args.verbose >= 1), **params)


def run_probe(args, probe, format_result, filename):
    """Run ``probe``, print its result and save it as JSON under ``--out``."""
    log = print if args.verbose >= 1 else (lambda *a, **k: None)
    result = probe(args, log=log)
    print(format_result(result))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / filename).write_text(json.dumps(result, indent=2))
    return result



def benchmark_tasks(setting, y_fit, y_eval, y_test, args):
    """``flowr-benchmark``'s test tasks of one context on ``y_eval``: small,
    the paper's 10 support + 5 novel classes (in proportion below 15);
    large, the classes of ``y_fit`` known and 5 novel classes."""
    if setting == "small":
        n_support, n_novel = small_context_sizes(np.unique(y_eval).shape[0])
        return SmallContextTasks(y_eval, n_support_classes=n_support,
                                 n_novel_classes=n_novel, n_tasks=args.tasks,
                                 random_state=args.seed)
    known = np.unique(y_fit)
    n_queried = args.lc_known_query_classes
    if n_queried is not None and n_queried >= known.shape[0]:
        n_queried = None  # a cap above the known classes: all of them
    return LargeContextTasks(y_eval, known,
                             n_novel_classes=min(5, np.unique(y_test).shape[0]),
                             n_tasks=args.tasks, n_known_query_classes=n_queried,
                             random_state=args.seed)
