"""Data, tasks and method templates of ``flowr-benchmark``: the data sets (or
``--data``) as class-disjoint training and test images, split per context.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
from dataclasses import dataclass
from functools import partial

import numpy as np

from .. import FLOWRClassifier
from ..baselines import (
    EVMClassifier,
    FeCAMClassifier,
    KNNClassifier,
    MahalanobisPlusPlusClassifier,
    NCMClassifier,
    PEELERClassifier,
    ProtoNetClassifier,
    RanPACClassifier,
    SimpleShotClassifier,
)
from ..datasets import (
    load_digits_images,
    load_fashion_mnist,
    load_glyphs,
    load_kanji,
)
from ..protocol import LargeContextTasks, SmallContextTasks, small_context_sizes
from ._benchmark_model import PRETRAIN_NAMES, build_model, run_models
from ._user_data import UserDataError, load_user_data

DATASETS = ("glyphs", "kanji", "fashion-mnist", "digits")
# kanji: this many KanjiVG characters drawn this many times each.
KANJI_CLASSES = 1000
KANJI_INSTANCES = 20
# --methods: "flowr-no-meta" trains another model, so it runs only when asked.
# The frozen-feature anchors run only when asked for (--methods). RanPAC's
# prediction after each learned row costs O(M^3): M = 256 keeps a stream quick.
ANCHORS = {"simpleshot": SimpleShotClassifier,
           "mahalanobis++": MahalanobisPlusPlusClassifier,
           "ranpac": partial(RanPACClassifier, n_components=256, random_state=0),
           "knn": KNNClassifier, "fecam": FeCAMClassifier}
METHODS = ("flowr", "flowr-no-meta", "ncm-flowr-emb", "ncm", "protonet", "peeler",
           "evm", *ANCHORS)
DEFAULT_METHODS = tuple(method for method in METHODS
                        if method != "flowr-no-meta" and method not in ANCHORS)
METHOD_NAMES = {"flowr": "FLOWR", "flowr-no-meta": "FLOWR no-meta",
                "ncm-flowr-emb": "NCM FLOWR-emb", "ncm": "NCM",
                "protonet": "ProtoNet", "peeler": "PEELER", "evm": "EVM",
                "simpleshot": "SimpleShot", "mahalanobis++": "Mahalanobis++",
                "ranpac": "RanPAC", "knn": "kNN", "fecam": "FeCAM"}
# Methods on the meta-trained encoder's features; the others on the
# pre-trained one's ("base"; flowr-no-meta's model has no other).
METHOD_FEATURES = {"flowr": "flowr", "ncm-flowr-emb": "flowr"}
# Ten-class datasets: the first five classes train the encoder, the last five
# are the test split.
_TEN_CLASS_TRAIN = np.arange(5)
# Seconds between the "still ..." lines of a stage without progress bars.
PROGRESS_EVERY = 5.0


@contextlib.contextmanager
def progress(log, what: str, every: float = PROGRESS_EVERY):
    """Log ``what ...``, then ``... still <what> (N s)`` every ``every``
    seconds until the block ends: no silent stage."""
    log(f"{what} ...")
    done = threading.Event()
    tic = time.perf_counter()

    def beat():
        while not done.wait(every):
            log(f"   ... still {what.strip()} ({time.perf_counter() - tic:.0f} s)")

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


@dataclass
class BenchmarkData:
    """Class-disjoint train and test images of one dataset."""

    name: str
    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray

    def fingerprint(self) -> str:
        """A short hash of the name and the four arrays."""
        digest = hashlib.sha256(self.name.encode())
        for array in (self.X_train, self.y_train, self.X_test, self.y_test):
            digest.update(str(array.shape).encode())
            digest.update(np.ascontiguousarray(array).tobytes())
        return digest.hexdigest()[:16]


def load_benchmark_data(name: str, *, data_path=None, font_dirs=(),
                        max_fonts: int | None = None,
                        max_per_class: int | None = None,
                        kanji_classes: int = KANJI_CLASSES,
                        kanji_instances: int = KANJI_INSTANCES, cache_dir=None,
                        random_state: int = 0, user_data=None,
                        image_size=None) -> BenchmarkData:
    """Train/test images of a benchmark dataset (or of ``user_data``, the
    ``--data`` path), float32 in [0, 1], test labels offset past the training
    ones; ``max_per_class`` keeps a seeded choice of rows per class.
    """
    if user_data is not None:
        X_train, y_train, X_test, y_test = load_user_data(
            user_data, random_state=random_state, image_size=image_size)
        train_labels, y_train = np.unique(y_train, return_inverse=True)
        y_test = np.unique(y_test, return_inverse=True)[1] + train_labels.shape[0]
        parts = (X_train, y_train, X_test, y_test)
    elif name == "glyphs":
        glyphs = dict(max_fonts=max_fonts, cache_dir=cache_dir)
        train = load_glyphs(font_dirs or None, split="train", **glyphs)
        test = load_glyphs(font_dirs or None, split="test", **glyphs)
        parts = (train.data, train.target, test.data, test.target)
    elif name == "kanji":
        kanji = dict(max_classes=kanji_classes, n_instances=kanji_instances,
                     cache_dir=cache_dir)
        train = load_kanji(split="train", **kanji)
        test = load_kanji(split="test", **kanji)
        parts = (train.data, train.target, test.data, test.target)
    elif name in ("fashion-mnist", "digits"):
        if name == "digits":
            full = load_digits_images()
        else:
            full = (load_fashion_mnist() if data_path is None
                    else load_fashion_mnist(data_path))
        is_train = np.isin(full.target, _TEN_CLASS_TRAIN)
        parts = (full.data[is_train], full.target[is_train],
                 full.data[~is_train], full.target[~is_train])
    else:
        raise ValueError(f"Unknown dataset {name!r}; choose one of {DATASETS}.")
    X_train, y_train, X_test, y_test = parts
    if max_per_class is not None:
        rng = np.random.default_rng(random_state)
        X_train, y_train = _cap_per_class(X_train, y_train, max_per_class, rng)
        X_test, y_test = _cap_per_class(X_test, y_test, max_per_class, rng)
    # Test labels are offset so a test class never shares a label with a
    # training class (the large context mixes both).
    offset = 0 if user_data is not None else int(y_train.max()) + 1
    return BenchmarkData(name, _as_unit_float(X_train), y_train.astype(np.int64),
                         _as_unit_float(X_test), y_test.astype(np.int64) + offset)


def _cap_per_class(X, y, cap, rng):
    keep = np.concatenate([
        np.sort(rng.permutation(np.flatnonzero(y == label))[:cap])
        for label in np.unique(y)
    ])
    keep.sort()
    return X[keep], y[keep]


def _as_unit_float(images):
    return (images.astype(np.float32) / 255.0 if images.dtype == np.uint8
            else images.astype(np.float32))


def split_fit_and_held_out(y, random_state):
    """A seeded half of every class's rows (fit) and the other half."""
    rng = np.random.default_rng([random_state, 1])
    fit_rows = []
    for label in np.unique(y):
        rows = rng.permutation(np.flatnonzero(y == label))
        fit_rows.append(rows[: rows.shape[0] // 2])
    is_fit = np.zeros(y.shape[0], dtype=bool)
    is_fit[np.concatenate(fit_rows)] = True
    return np.flatnonzero(is_fit), np.flatnonzero(~is_fit)


def setting_data(setting: str, data, seed):
    """``(X_fit, y_fit, X_eval, y_eval)`` of one context: small, the training
    classes fit and the test classes are evaluated; large, a seeded half of every
    training class fits and the other half is evaluated with the test classes.
    """
    if setting == "small":
        return data.X_train, data.y_train, data.X_test, data.y_test
    fit_rows, held_rows = split_fit_and_held_out(data.y_train, seed)
    return (data.X_train[fit_rows], data.y_train[fit_rows],
            np.concatenate([data.X_train[held_rows], data.X_test]),
            np.concatenate([data.y_train[held_rows], data.y_test]))


def fit_model(model: FLOWRClassifier, X, y, *, log=print):
    """``(model, model.fit_transform(X, y))``, logged."""
    pretrain = model.pretrain
    name = PRETRAIN_NAMES.get(type(pretrain).__name__, type(pretrain).__name__)
    epochs = [f"{pretrain.epochs} pre-training" if pretrain is not None else
              "no pre-training",
              f"{model.meta.epochs} meta-training epochs" if model.meta is not None
              else "no meta-training"]
    log(f"   training FLOWR {name} encoder on {X.shape[0]} images "
        f"({' + '.join(epochs)}) ...")
    return model, model.fit_transform(X, y)


def method_features(method: str) -> str:
    """``"flowr"`` (meta-trained encoder) or ``"base"`` (pre-trained encoder)."""
    return METHOD_FEATURES.get(method, "base")


def method_template(method: str, setting: str, model: FLOWRClassifier, Z_train,
                    y_train):
    """The estimator ``evaluate_online`` copies for every task of ``method``: the
    fitted model's own head for FLOWR (the prior head in the small context), else
    a baseline on ``Z_train``, the features of the method's encoder.
    """
    if method in ("flowr", "flowr-no-meta"):
        return model.prior_head_ if setting == "small" else model.head_
    return baseline_template("ncm" if method == "ncm-flowr-emb" else method,
                             setting, Z_train, y_train)


def baseline_template(method: str, setting: str, Z_train, y_train):
    """A distance baseline, unfitted in the small context (PEELER with the training
    classes' precision) and fitted on ``Z_train`` in the large one.
    """
    if method == "ncm":
        estimator = NCMClassifier()
    elif method == "protonet":
        estimator = ProtoNetClassifier()
    elif method == "evm":
        estimator = EVMClassifier()
    elif method in ANCHORS:
        estimator = ANCHORS[method]()
    elif method == "peeler":
        precision = PEELERClassifier().fit(Z_train, y_train).precision_
        estimator = PEELERClassifier(precision=precision)
    else:
        raise ValueError(f"Unknown method {method!r}; choose from {METHODS}.")
    if setting == "large":
        estimator.fit(Z_train, y_train)
    return estimator


def benchmark_tasks(setting, y_fit, y_eval, y_test, args):
    """The setting's tasks over ``y_eval`` and a description of their protocol."""
    if setting == "small":
        n_support, n_novel = small_context_sizes(np.unique(y_eval).shape[0])
        tasks = SmallContextTasks(y_eval, n_support_classes=n_support,
                                  n_novel_classes=n_novel, n_tasks=args.tasks,
                                  random_state=args.seed)
        return tasks, {"n_support_classes": n_support, "n_novel_classes": n_novel,
                       "shots": [1, 10], "n_query": 10}
    n_novel = min(5, np.unique(y_test).shape[0])
    n_known = int(np.unique(y_fit).shape[0])
    # A cap above the number of known classes (--quick on a ten-class
    # dataset) means "all of them".
    n_queried = (None if args.lc_known_query_classes is None
                 or args.lc_known_query_classes >= n_known
                 else args.lc_known_query_classes)
    tasks = LargeContextTasks(y_eval, np.unique(y_fit), n_novel_classes=n_novel,
                              n_tasks=args.tasks, n_known_query_classes=n_queried,
                              random_state=args.seed)
    return tasks, {"n_known_classes": n_known, "n_known_query_classes": n_queried,
                   "n_novel_classes": n_novel, "n_query": 10}


class Features:
    """Each encoder's embeddings of the fit and evaluation rows, computed once:
    ``features(method)`` is ``(Z_fit, Z_eval)``.
    """

    def __init__(self, models, X_fit, X_eval, fit_embeddings=None, *,
                 log=lambda *a, **k: None):
        self.models, self.X_fit, self.X_eval = models, X_fit, X_eval
        # The fit rows' embeddings ``fit_transform`` returned, per key.
        self._fit_embeddings = dict(fit_embeddings or {})
        self._cache = {}
        self.log = log

    def __call__(self, method):
        if method == "flowr-no-meta":
            key, model, encoder = method, self.models[method], "current"
        else:
            kind = method_features(method)
            key, model = kind, self.models["flowr"]
            encoder = "current" if kind == "flowr" else "pretrained"
        if key not in self._cache:
            Z_fit = self._fit_embeddings.get(key)
            rows = self.X_eval.shape[0] + (0 if Z_fit is not None
                                           else self.X_fit.shape[0])
            name = {"base": "pre-trained", "flowr": "meta-trained"}.get(key, key)
            with progress(self.log, f"   embedding {rows} rows with the {name} "
                          "encoder"):
                if Z_fit is None:
                    Z_fit = model.transform(self.X_fit, encoder=encoder)
                self._cache[key] = Z_fit, model.transform(self.X_eval,
                                                          encoder=encoder)
        return self._cache[key]


def plan_run(args, data) -> dict:
    """Per setting, its data split, tasks and protocol, after every check the run
    can make before training (data suits the backbone, tasks drawable, each model
    accepts its classes); a problem raises ``UserDataError``.
    """
    where = (f"--data {args.data!r}" if getattr(args, "data", None)
             else f"--dataset {args.dataset}")
    n_dims = data.X_train.ndim
    backbone = build_model(args, args.setting[0], args.pretrain[0]).backbone
    if n_dims == 2 and backbone != "mlp":
        raise UserDataError(f"{where}: X is 2-d, feature vectors of "
                            f"{data.X_train.shape[1]} values: they need "
                            "--backbone mlp (an image backbone reads (n, H, W), "
                            "(n, H, W, C) or (n, C, H, W)).")
    if n_dims > 2 and backbone == "mlp":
        raise UserDataError(f"{where}: X holds images of shape "
                            f"{data.X_train.shape[1:]}; --backbone mlp reads "
                            "feature vectors: choose an image backbone.")
    plan = {}
    for setting in args.setting:
        split = setting_data(setting, data, args.seed)
        try:
            tasks, protocol = benchmark_tasks(setting, split[1], split[3],
                                              data.y_test, args)
        except ValueError as exc:
            raise UserDataError(f"{where}: the {setting} context's tasks cannot "
                                f"be drawn from it: {exc}") from None
        for model in run_models(args, setting):
            try:
                model.check_fit(split[0], split[1])
            except ValueError as exc:
                raise UserDataError(
                    f"{where}: the {setting}-context model cannot be fitted on "
                    f"its training classes: {exc}") from None
        plan[setting] = split, tasks, protocol
    return plan

