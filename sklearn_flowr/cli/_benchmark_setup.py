"""Data, methods and their templates of ``flowr-benchmark``.

The benchmark's data sets (rendered glyphs, kanji, Fashion-MNIST, digits) or
a user's own (``--data``, :mod:`._user_data`) as class-disjoint training and
test images; the two contexts' splits of them; and the estimators each
method evaluates on features. Rendered data (glyphs, kanji) are cached as
plain arrays, read back without unpickling anything; trained models are not
cached (an in-process memo avoids retraining within one run).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from .. import FLOWRClassifier
from ..baselines import (
    EVMClassifier,
    NCMClassifier,
    PEELERClassifier,
    ProtoNetClassifier,
)
from ..datasets import (
    load_digits_images,
    load_fashion_mnist,
    load_glyphs,
    load_kanji,
)
from ..protocol import LargeContextTasks, SmallContextTasks, small_context_sizes
from ._benchmark_model import PRETRAIN_NAMES, build_model
from ._user_data import UserDataError, load_user_data

DATASETS = ("glyphs", "kanji", "fashion-mnist", "digits")
# kanji: this many KanjiVG characters (by a fixed hash; about 60% of them are
# training classes, the known-known classes of the large context) drawn this
# many times each.
KANJI_CLASSES = 1000
KANJI_INSTANCES = 20
# "flowr" is the fitted FLOWRClassifier's own head; "ncm-flowr-emb" NCM on
# the same meta-trained embedding (does the head beat a distance on the same
# features?); "flowr-no-meta" a second FLOWRClassifier fitted with meta=None
# (does meta-training help? It trains another model, so it runs only when
# asked for); the baselines run on the pre-trained embedding.
METHODS = ("flowr", "flowr-no-meta", "ncm-flowr-emb", "ncm", "protonet", "peeler",
           "evm")
DEFAULT_METHODS = tuple(method for method in METHODS if method != "flowr-no-meta")
METHOD_NAMES = {"flowr": "FLOWR", "flowr-no-meta": "FLOWR no-meta",
                "ncm-flowr-emb": "NCM FLOWR-emb", "ncm": "NCM",
                "protonet": "ProtoNet", "peeler": "PEELER", "evm": "EVM"}
# The encoder whose features a method runs on: "flowr" the meta-trained one,
# "base" the pre-trained one (before meta-training; flowr-no-meta's model has
# no other).
METHOD_FEATURES = {"flowr": "flowr", "ncm-flowr-emb": "flowr"}
# Ten-class datasets: the first five classes train the encoder, the last five
# are the test split (few-shot tasks need classes the encoder never saw).
_TEN_CLASS_TRAIN = np.arange(5)


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
    """Train/test images of a benchmark dataset, as float32 in [0, 1].

    ``max_per_class`` keeps at most that many rows of every class (a seeded
    choice), to bound training time on large datasets. ``kanji_classes`` and
    ``kanji_instances`` size the kanji data set (:func:`load_kanji`'s
    ``max_classes`` and ``n_instances``); its drawings do not depend on
    ``random_state``, so every seed sees the same data. ``user_data``: the
    path of ``--data`` (:func:`~._user_data.load_user_data`; ``name`` is then
    only the data's name), whose labels become ``0 .. k - 1`` for the
    training classes and ``k ..`` for the test classes; it raises
    :class:`~._user_data.UserDataError` on data it cannot run on.
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
    """Half of every training class fits the large-context model; the other
    half is the held-out query pool of the known-known classes."""
    rng = np.random.default_rng([random_state, 1])
    fit_rows = []
    for label in np.unique(y):
        rows = rng.permutation(np.flatnonzero(y == label))
        fit_rows.append(rows[: rows.shape[0] // 2])
    is_fit = np.zeros(y.shape[0], dtype=bool)
    is_fit[np.concatenate(fit_rows)] = True
    return np.flatnonzero(is_fit), np.flatnonzero(~is_fit)


def setting_data(setting: str, data, seed):
    """``(X_fit, y_fit, X_eval, y_eval)`` of one context: small, the
    training classes fit and the test classes are evaluated; large, half of
    every training class fits (the known-known classes) and the other half
    is evaluated with the test classes."""
    if setting == "small":
        return data.X_train, data.y_train, data.X_test, data.y_test
    fit_rows, held_rows = split_fit_and_held_out(data.y_train, seed)
    return (data.X_train[fit_rows], data.y_train[fit_rows],
            np.concatenate([data.X_train[held_rows], data.X_test]),
            np.concatenate([data.y_train[held_rows], data.y_test]))


def fit_model(model: FLOWRClassifier, X, y, *, log=print):
    """``model.fit_transform(X, y)``, logged: what is trained on how many
    images; ``(model, Z)``, ``Z`` the training images' final embeddings.

    Within one process an identical earlier fit's encoder is reused
    (``FLOWRClassifier(reuse_encoder=True)``); nothing is read from or
    written to disk.
    """
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
    """The estimator ``evaluate_online`` copies for every task of ``method``.

    ``flowr`` and ``flowr-no-meta``: the fitted model's own head, as
    :meth:`~sklearn_flowr.FLOWRClassifier.adapt` starts from it -- the prior
    head (no classes) in the small context, the head knowing the training
    classes in the large one. ``ncm-flowr-emb``: NCM
    (:func:`baseline_template`), as the other baselines. ``Z_train`` are the
    training features of the method's encoder (:func:`method_features`).
    """
    if method in ("flowr", "flowr-no-meta"):
        return model.prior_head_ if setting == "small" else model.head_
    return baseline_template("ncm" if method == "ncm-flowr-emb" else method,
                             setting, Z_train, y_train)


def baseline_template(method: str, setting: str, Z_train, y_train):
    """A distance baseline as ``evaluate_online`` copies it: unfitted (PEELER
    with the precision learned on the training classes) in the small context,
    fitted on the training classes' features in the large one."""
    if method == "ncm":
        estimator = NCMClassifier()
    elif method == "protonet":
        estimator = ProtoNetClassifier()
    elif method == "evm":
        estimator = EVMClassifier()
    elif method == "peeler":
        precision = PEELERClassifier().fit(Z_train, y_train).precision_
        estimator = PEELERClassifier(precision=precision)
    else:
        raise ValueError(f"Unknown method {method!r}; choose from {METHODS}.")
    if setting == "large":
        estimator.fit(Z_train, y_train)
    return estimator


def benchmark_tasks(setting, y_fit, y_eval, y_test, args):
    """The setting's evaluation tasks over ``y_eval`` (the rows of
    :func:`setting_data`) and a description of their protocol."""
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
    """Embeddings of the fit and evaluation rows, computed once per encoder:
    a method's ``(Z_fit, Z_eval)``.

    ``flowr`` and ``ncm-flowr-emb`` read the fitted model's meta-trained
    embedding (``transform``), the baselines its pre-trained one
    (``transform(X, encoder="pretrained")``), ``flowr-no-meta`` its own
    model's embedding.
    """

    def __init__(self, models, X_fit, X_eval, fit_embeddings=None):
        self.models, self.X_fit, self.X_eval = models, X_fit, X_eval
        # The fit rows' embeddings ``fit_transform`` returned, per key.
        self._fit_embeddings = dict(fit_embeddings or {})
        self._cache = {}

    def __call__(self, method):
        """``(Z_fit, Z_eval)`` of ``method``'s encoder."""
        if method == "flowr-no-meta":
            key, model, encoder = method, self.models[method], "current"
        else:
            kind = method_features(method)
            key, model = kind, self.models["flowr"]
            encoder = "current" if kind == "flowr" else "pretrained"
        if key not in self._cache:
            Z_fit = self._fit_embeddings.get(key)
            if Z_fit is None:
                Z_fit = model.transform(self.X_fit, encoder=encoder)
            self._cache[key] = Z_fit, model.transform(self.X_eval, encoder=encoder)
        return self._cache[key]


def plan_run(args, data) -> dict:
    """Per setting, its data split, tasks and protocol, once everything the
    run can check before training has passed.

    The data must suit the backbone (2-d features ``mlp``, images the
    others), every context's tasks must be drawable from it, and every model
    of the run must accept its training classes (the checks ``fit`` runs
    before it trains).

    Raises
    ------
    UserDataError
        Naming the data (``--data`` or ``--dataset``) and the problem.
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
        for model in _run_models(args, setting):
            try:
                model.check_fit(split[0], split[1])
            except ValueError as exc:
                raise UserDataError(
                    f"{where}: the {setting}-context model cannot be fitted on "
                    f"its training classes: {exc}") from None
        plan[setting] = split, tasks, protocol
    return plan


def _run_models(args, setting):
    """The unfitted models of one context: one per ``--pretrain``, and their
    no-meta-training twins when ``flowr-no-meta`` runs."""
    metas = (True, False) if "flowr-no-meta" in args.methods else (True,)
    return [build_model(args, setting, pretrain, meta=meta)
            for pretrain in args.pretrain for meta in metas]

