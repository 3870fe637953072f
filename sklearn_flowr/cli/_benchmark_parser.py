"""``flowr-benchmark``: the paper's few-shot open-world tables, end to end.

It fits the estimator a user builds -- ``FLOWRClassifier()`` with the run's
options and every ``--set KEY=VALUE`` applied with ``set_params`` -- once per
pre-training (``--pretrain``) and context (``--setting``), and runs every
method through the same seeded tasks with
:func:`~sklearn_flowr.protocol.evaluate_online`: FLOWR's own head, NCM on its
meta-trained embedding, and the baselines NCM, ProtoNet, PEELER and EVM on the
pre-trained embedding. It prints the paper-style table (accuracies at the fixed
novelty TPR as mean +- 95% CI over tasks, H-measure, AUROC, calibration of
P(novel)) and the conformal novelty decision's false-novel rate, power and
Benjamini-Hochberg figures, and writes results.json and roc.png. The user
guide ("Evaluation protocol") explains every figure.

``--data`` runs on your own data: a folder with a sub-folder of images per
class, or an ``.npz`` of ``X_train``, ``y_train``, ``X_test``, ``y_test`` with
class-disjoint labels. ``--n-jobs`` spreads tasks over joblib workers.
"""

import argparse
import inspect
import math
import re
import textwrap
from pathlib import Path

from ..datasets import load_fashion_mnist, load_glyphs
from ..encoders import BACKBONE_NAMES
from ._benchmark_model import (
    DEFAULT_META,
    DEFAULT_METHODS,
    DEFAULT_MODEL,
    DEFAULT_PRETRAIN,
    METHODS,
    PRETRAININGS,
    build_model,
    check_model_options,
)
from ._benchmark_report import CALIBRATION_SETS
from ._benchmark_setup import DATASETS, KANJI_CLASSES, KANJI_INSTANCES

__all__ = ["build_parser", "parse_args"]

# Seeds go to numpy's RandomState and torch, which take 0 .. 2**32 - 1.
MAX_SEED = 2**32 - 1
# Every task's predictions are held in memory: more would exhaust it late.
MAX_TASKS = 10**6


def integer(low: int, high: int | None = None, *, why: str = "",
            cap: int | None = None, cap_why: str = ""):
    """An argparse ``type=`` for an integer in ``[low, high]``, at most ``cap``
    (a size that would exhaust memory or time late in a run)."""
    allowed = f">= {low}" if high is None else f"in {low}..{high}"
    return _number(int, "an integer", f"an integer {allowed}{why}",
                   lambda value: low <= value <= (math.inf if high is None else high),
                   cap, cap_why)


def real(low: float, high: float = math.inf, *, closed: bool = True):
    """An argparse ``type=`` for a finite number ``>= low`` (``> low`` when not
    ``closed``) and ``<= high``."""
    allowed = (f"in {'[' if closed else '('}{low:g}, {high:g}]"
               if math.isfinite(high) else f"{'>=' if closed else '>'} {low:g}")
    return _number(float, "a number", f"a finite number {allowed}",
                   lambda value: (math.isfinite(value) and value <= high
                                  and (value >= low if closed else value > low)))


def _number(convert, kind: str, allowed: str, fits, cap=None, cap_why=""):
    """The parser :func:`integer` and :func:`real` return."""

    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected {kind}; got {text!r}") from None
        if not fits(value):
            raise argparse.ArgumentTypeError(f"must be {allowed}; got {text}")
        if cap is not None and value > cap:
            raise argparse.ArgumentTypeError(
                f"must be at most {cap}{cap_why}; got {text}")
        return value

    return parse


def key_value(text: str) -> str:
    """An argparse ``type=`` for ``KEY=VALUE``, kept as given."""
    key, sep, _ = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(
            f"expected KEY=VALUE, e.g. head__covariance=isotropic; got {text!r}")
    return text


def plain_text(text: str) -> str:
    """``text`` without reST markup, its paragraphs refilled, for the terminal."""
    text = re.sub(r":\w+:`~?(?:[\w.]*\.)?([^`]+)`", r"\1", text)
    text = text.replace("``", "")
    return "\n\n".join(textwrap.fill(" ".join(paragraph.split()), width=79,
                                     break_on_hyphens=False)
                       for paragraph in text.strip().split("\n\n"))


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Help with every default stated once (not where the text says
    ``default:``, nor for flags), lines broken at spaces only."""

    def _get_help_string(self, action):
        help_text = action.help or ""
        if ("default:" in help_text or action.default is argparse.SUPPRESS
                or action.nargs == 0):
            return help_text
        default = action.default
        if isinstance(default, (list, tuple)):
            default = " ".join(map(str, default)) or "none"
        return f"{help_text} (default: {str(default).replace('%', '%%')})"

    def _split_lines(self, text, width):
        text = " ".join(text.split())
        return textwrap.wrap(text, width, break_on_hyphens=False)


_FASHION_MNIST_PATH = inspect.signature(load_fashion_mnist).parameters[
    "path"].default
_MIN_FONTS = inspect.signature(load_glyphs).parameters["min_fonts"].default
# Caps checked by argparse: beyond them a run would exhaust memory or time
# long after it started. Class caps get the int32 bound of the model's counts.
_MAX_COUNT = 2**31 - 1
_MAX_JOBS = 1024
_MAX_KANJI_INSTANCES = 1000
_MAX_IMAGE_SIDE = 4096
_TASKS_WHY = " (every task's predictions are held in memory)"
# What --quick sets on options left at their defaults; its --help is made
# from this dict.
_QUICK = dict(dataset="glyphs", tasks=200, lc_known_query_classes=20,
              pretrain_epochs=3, meta_epochs=3, episodes_per_epoch=30,
              embedding_dim=32, evm_tasks=50)


_QUICK_HELP = (
    "a short run (1 min 53 s on 2 quiet CPU cores, see README); sets "
    + ", ".join(f"--{key.replace('_', '-')} {value}" for key, value in _QUICK.items())
    + ". An option given explicitly keeps its value, and a run on your own data "
    "PATH stays on it")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``flowr-benchmark`` (``--quick`` not applied)."""
    parser = argparse.ArgumentParser(
        prog="flowr-benchmark", description=plain_text(__doc__),
        formatter_class=HelpFormatter)
    add = parser.add_argument
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--dataset", choices=DATASETS, default="glyphs",
        help="images to run on: rendered font glyphs (bundled fonts), kanji "
        "drawn from KanjiVG's strokes (pip install sklearn-flowr[kanji]), "
        "Fashion-MNIST (idx files) or scikit-learn's 8x8 digits")
    source.add_argument(
        "--data", default=None, metavar="PATH",
        help="your own data instead of --dataset: a folder with one sub-folder "
        "of images per class (at least 4; about half of them, a choice by "
        "--seed, are the training classes, the others the test classes), or an "
        ".npz file of X_train, y_train, X_test, y_test (read without "
        "unpickling; labels integers or strings, the training and test "
        "classes disjoint; X numbers: images (n, H, W), (n, H, W, C), "
        "(n, C, H, W), or features (n, d) with --backbone mlp) (default: none)")
    add("--image-size", type=integer(1, cap=_MAX_IMAGE_SIDE), nargs="+",
        default=None, metavar="SIDE",
        help="with --data FOLDER: resize every image to HEIGHT WIDTH (one "
        "number: a square), for folders of differently sized images "
        "(default: the images' own size, which must be one)")
    add("--data-path", default=None,
        help="folder of the idx files (fashion-mnist; default: "
        f"{_FASHION_MNIST_PATH})")
    add("--font-dir", action="append", default=[],
        help="extra font folder for glyphs (repeatable), e.g. /usr/share/fonts")
    add("--max-fonts", type=integer(_MIN_FONTS, why=" (a glyph class needs "
                                     f"{_MIN_FONTS} fonts)", cap=_MAX_COUNT),
        default=None,
        help="glyphs: at most this many fonts per class, a seeded choice "
        "(default: all)")
    add("--kanji-classes", type=integer(20, why=" (about a fifth of them "
                                         "are test classes)", cap=_MAX_COUNT),
        default=KANJI_CLASSES,
        help="kanji: characters drawn, by a fixed hash; about 60%% are the "
        "training (large context: known-known) classes, 20%% the test classes")
    add("--kanji-instances", type=integer(20, why=" (a small-context task "
                                           "takes up to 10 shots and 10 queries "
                                           "of a class)",
                                           cap=_MAX_KANJI_INSTANCES,
                                           cap_why=" (every drawing is held "
                                           "in memory)"),
        default=KANJI_INSTANCES,
        help="kanji: drawings per character")
    add("--setting", nargs="+", choices=("small", "large"),
        default=["small", "large"], help="evaluation settings (contexts) to run")
    add("--methods", nargs="+", choices=METHODS, default=list(DEFAULT_METHODS),
        help="methods to evaluate on the same tasks: flowr (the fitted "
        "FLOWRClassifier's head), ncm-flowr-emb (NCM on its meta-trained "
        "embedding), flowr-no-meta (a second FLOWRClassifier fitted with "
        "meta=None: one more training per model, so not run by default) and the "
        "baselines on the pre-trained embedding (the frozen-feature anchors "
        "simpleshot, mahalanobis++, ranpac, knn and fecam only when named)")
    add("--pretrain", nargs="+", choices=tuple(PRETRAININGS),
        default=["sup-e", "sup-fc"],
        help="pre-trainings, one model each: pretrain=SupE(), SupFC() or None "
        "(no pre-training: meta-training starts from the untrained encoder, "
        "which the baselines then run on)")
    add("--backbone", choices=BACKBONE_NAMES, default=DEFAULT_MODEL.backbone,
        help="encoder architecture (FLOWRClassifier's backbone); mlp reads "
        "feature vectors: --data with an .npz of 2-d X")
    add("--tasks", type=integer(1, cap=MAX_TASKS, cap_why=_TASKS_WHY),
        default=1000, help="tasks per setting")
    add("--evm-tasks", type=integer(1, cap=MAX_TASKS, cap_why=_TASKS_WHY),
        default=None,
        help="evaluate EVM on the first N tasks only, it is ~50x slower "
        "(default: all tasks)")
    add("--lc-known-query-classes", type=integer(1, cap=_MAX_COUNT),
        default=None,
        help="known classes queried per large-context task (default: all)")
    add("--max-per-class", type=integer(2, why=": the large context fits on "
                                         "half of each class and queries the "
                                         "other half", cap=_MAX_COUNT),
        default=None,
        help="cap on images per class, bounds training time (default: no cap)")
    add("--embedding-dim", type=integer(1), default=DEFAULT_MODEL.embedding_dim,
        help="embedding dimension (embedding_dim)")
    add("--pretrain-epochs", type=integer(0), default=DEFAULT_PRETRAIN.epochs,
        help="epochs of Sup-E / Sup-FC pre-training (pretrain__epochs)")
    add("--meta-epochs", type=integer(1), default=DEFAULT_META.epochs,
        help="epochs of meta-training (meta__epochs; for none, --methods "
        "flowr-no-meta or --set meta=None)")
    add("--episodes-per-epoch", type=integer(1),
        default=DEFAULT_META.episodes_per_epoch,
        help="meta-training episodes per epoch (meta__episodes_per_epoch)")
    add("--meta-lr", type=real(0.0, closed=False), default=DEFAULT_META.encoder_lr,
        help="meta-training learning rate (meta__encoder_lr; default: a tenth of the "
        "pre-training rate)")
    add("--lambda-adapt", type=real(0.0), default=DEFAULT_META.lambda_adapt,
        help="weight of the adaptation loss in meta-training (meta__lambda_adapt)")
    add("--fine-tune-steps", type=integer(0),
        default=DEFAULT_MODEL.fine_tune_steps,
        help="small context: last-layer fine-tuning steps on each task's support "
        "set (fine_tune_steps; FLOWR then runs on images, its encoder tuned per "
        "task)")
    add("--set", action="append", type=key_value, default=[],
        metavar="KEY=VALUE",
        help="set a FLOWRClassifier parameter with set_params after the options "
        "above, nested ones as head__sigma or meta__n_way (repeatable; VALUE is "
        "a Python literal or else a string), e.g. --set "
        "head__covariance=isotropic --set calibration=None for the paper's head, "
        "--set head__prior_scale=2, --set calibration=3; a key or value the "
        "model refuses stops the run before any data is loaded (default: none)")
    add("--conformal-calibration", choices=CALIBRATION_SETS, default="tasks",
        help="calibration rows of the conformal novelty decision: tasks, the "
        "known-class rows of the other test tasks (classes the encoder never "
        "saw, cross-conformal over tasks); training, calibration tasks drawn "
        "from the training classes (the encoder saw them; a run per method)")
    add("--label-fraction", type=real(0.0, 1.0), nargs="+", default=None,
        metavar="F",
        help="also run class discovery under a label budget: the share of "
        "queries whose label arrives, e.g. 0 0.1 (FLOWR's head, the isotropic "
        "head and DP-means on FLOWR's embedding; a table, the JSON's "
        "discovery rows and discovery.png; default: not run)")
    add("--label-delay", type=integer(0, cap=_MAX_COUNT), default=0,
        help="with --label-fraction: rows after its query that a label arrives "
        "(0: right after the prediction)")
    add("--n-jobs", type=integer(1, cap=_MAX_JOBS,
                                 cap_why=" (joblib starts that many workers)"),
        default=1, help="joblib workers over tasks")
    add("--device", default=DEFAULT_MODEL.device,
        help="torch device of training and feature extraction: auto (CUDA when "
        "available), cpu, cuda, cuda:1, ...")
    add("--seed", type=integer(0, MAX_SEED), default=0,
        help="seed of data subsampling, training (random_state) and task "
        "sampling")
    add("--out", default="flowr-benchmark-out",
        help="folder for results.json and roc.png (ROC curves, reliability "
        "diagrams, conformal false-novel rate against alpha)")
    add("--cache-dir", default=str(Path.home() / ".cache" / "sklearn_flowr"),
        help="cache of rendered glyph and kanji images, plain arrays read back "
        "without unpickling ('' disables). Trained models are never cached: "
        "each run trains its own")
    add("--quick", action="store_true", help=_QUICK_HELP)
    add("-v", "--verbose", type=integer(0, cap=_MAX_COUNT), default=1,
        metavar="LEVEL",
        help="0: only the tables; 1: a line per stage, training progress bars "
        "and a progress bar per evaluation; 2: also FLOWR's per-task "
        "fine-tuning bars")
    add("-q", "--quiet", action="store_const", const=0, dest="verbose",
        help="same as --verbose 0")
    return parser


def parse_args(argv=None) -> argparse.Namespace:
    """Parse the options (``--quick`` changes the defaults, not given values)
    and check every model the run fits: a problem is a usage error."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.quick:
        parser.set_defaults(**_QUICK)
        args = parser.parse_args(argv)
    if args.data is not None:
        path = Path(args.data)
        if not path.exists():
            parser.error(f"--data {args.data!r}: no such file or folder.")
        args.dataset = path.name
    if args.image_size is not None:
        if len(args.image_size) > 2:
            parser.error(f"--image-size takes HEIGHT WIDTH or one SIDE; got "
                         f"{len(args.image_size)} numbers.")
        if args.data is None or not Path(args.data).is_dir():
            parser.error("--image-size resizes the images of --data FOLDER; "
                         "the other data sets have one image size.")
        args.image_size = tuple((args.image_size * 2)[:2])  # one SIDE: a square
    problem = check_model_options(args)
    if problem:
        parser.error(problem)
    if (args.data is None and build_model(args, args.setting[0],
                                          args.pretrain[0]).backbone == "mlp"):
        parser.error(f"--backbone mlp reads feature vectors, and --dataset "
                     f"{args.dataset} holds images: choose an image backbone, or "
                     "pass --data FILE.npz with 2-d X_train and X_test.")
    return args
