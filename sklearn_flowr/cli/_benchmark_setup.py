"""Data, trained encoders and method templates of ``flowr-benchmark``.

Everything expensive is cached under one folder, keyed by a hash of what it
depends on: the dataset arrays, the fitted ``FLOWRClassifier`` of each
(setting, pre-training) pair and the features it extracts. A re-run with the
same arguments only evaluates. A cache file that cannot be read back is
recomputed and rewritten, with a warning naming it.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import joblib
import numpy as np
from sklearn.base import clone
from sklearn.model_selection import GroupShuffleSplit
from sklearn.utils.validation import check_is_fitted

from .._empirical_head import empirical_bayes_head
from .._flowr import NOISE_SHRINKAGE_GRID, FLOWRClassifier
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
from ..datasets._cache import read_cache, write_cache
from ..protocol import calibrate_novelty, cross_fit_novelty_calibration
from ..protocol._cross_fit import cross_fit_plan

DATASETS = ("glyphs", "kanji", "fashion-mnist", "digits")
# kanji: this many KanjiVG characters (by a fixed hash; about 60% of them are
# training classes, the known-known classes of the large context) drawn this
# many times each.
KANJI_CLASSES = 1000
KANJI_INSTANCES = 20
# The ablation rides along as two methods of its own: FLOWR's head without
# meta-training (on the pre-trained embedding) and NCM on FLOWR's meta-trained
# embedding, so every table answers "does meta-training help?" (flowr vs
# flowr-no-meta) and "does the head beat a distance on the same features?"
# (flowr vs ncm-flowr-emb). flowr-full is the switchable improvement
# FLOWRClassifier(covariance="full"), built from the same cached features;
# flowr-full-cal is that head with P(novel) Platt-mapped by calibrate_novelty
# on episodes of the training classes (same ranking, so the same H-measure and
# fixed-TPR accuracy; only ECE, Brier and the argmax decision can differ).
# flowr-full-cvcal maps it by cross_fit_novelty_calibration instead (one model
# trained per fold of classes, so it runs only when asked for).
METHODS = ("flowr", "flowr-full", "flowr-full-cal", "flowr-full-cvcal",
           "flowr-no-meta", "ncm-flowr-emb", "ncm", "protonet", "peeler", "evm")
DEFAULT_METHODS = tuple(method for method in METHODS
                        if method != "flowr-full-cvcal")
METHOD_NAMES = {"flowr": "FLOWR", "flowr-full": "FLOWR full",
                "flowr-full-cal": "FLOWR full cal",
                "flowr-full-cvcal": "FLOWR cv-cal",
                "flowr-no-meta": "FLOWR no-meta",
                "ncm-flowr-emb": "NCM FLOWR-emb", "ncm": "NCM",
                "protonet": "ProtoNet", "peeler": "PEELER", "evm": "EVM"}
# The encoder whose features a method runs on: "flowr" the meta-trained one,
# "base" the pre-trained one (before meta-training).
METHOD_FEATURES = {"flowr": "flowr", "flowr-full": "flowr", "flowr-full-cal": "flowr",
                   "flowr-full-cvcal": "flowr", "ncm-flowr-emb": "flowr"}
# Ten-class datasets: the first five classes train the encoder, the last five
# are the test split (few-shot tasks need classes the encoder never saw).
_TEN_CLASS_TRAIN = np.arange(5)
_PRETRAIN_NAMES = {"sup-e": "Sup-E", "sup-fc": "Sup-FC", None: "untrained"}


@dataclass
class BenchmarkData:
    """Class-disjoint train and test images of one dataset."""

    name: str
    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray

    def fingerprint(self) -> str:
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
                        random_state: int = 0) -> BenchmarkData:
    """Train/test images of a benchmark dataset, as float32 in [0, 1].

    ``max_per_class`` keeps at most that many rows of every class (a seeded
    choice), to bound training time on large datasets. ``kanji_classes`` and
    ``kanji_instances`` size the kanji data set (:func:`load_kanji`'s
    ``max_classes`` and ``n_instances``); its drawings do not depend on
    ``random_state``, so every seed sees the same data.
    """
    if name == "glyphs":
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
    offset = int(y_train.max()) + 1
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


def _digest(payload) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True,
                                     default=str).encode()).hexdigest()[:16]


def fit_or_load_model(params: dict, X, y, *, data_key: str, cache_dir,
                      log=print) -> FLOWRClassifier:
    """Fit ``FLOWRClassifier(**params)`` on (X, y), or load it from the cache.

    An unreadable cache file (truncated, damaged, pickled by an incompatible
    version) is not an error: a warning names it and the model is trained
    again and re-cached.
    """
    path = None
    if cache_dir is not None:
        path = Path(cache_dir) / "models" / f"{model_key(params, data_key)}.joblib"
        if path.is_file():
            log(f"   loading cached model {path} ...")
            model = read_cache(path, _read_model)
            if model is not None:
                return model
    model = FLOWRClassifier(**params)
    log(f"   training FLOWR {_PRETRAIN_NAMES.get(model.pretrain, model.pretrain)} "
        f"encoder on {X.shape[0]} images ({model.pretrain_epochs} pre-training + "
        f"{model.meta_epochs} meta-training epochs) ...")
    model.fit(X, y)
    if path is not None:
        write_cache(path, functools.partial(joblib.dump, model))
    return model


def _read_model(path: Path) -> FLOWRClassifier:
    model = joblib.load(path)
    if not isinstance(model, FLOWRClassifier):
        raise TypeError(f"it holds a {type(model).__name__}, not a FLOWRClassifier")
    check_is_fitted(model)
    return model


def features_or_load(model_key: str, model: FLOWRClassifier, arrays: dict, *,
                     cache_dir, log=print) -> dict:
    """Embeddings of each named array, by the meta-trained ("flowr") and the
    pre-trained ("base") encoder, cached next to the model.

    A cache file that is unreadable or does not hold the embeddings of these
    arrays is recomputed and rewritten, with a warning naming it.
    """
    path = None
    if cache_dir is not None:
        path = Path(cache_dir) / "features" / f"{model_key}.npz"
        if path.is_file():
            log("   loading cached features ...")
            features = read_cache(path, functools.partial(_read_features,
                                                          arrays=arrays))
            if features is not None:
                return features
    log(f"   extracting features of {sum(len(X) for X in arrays.values())} "
        "images ...")
    features = {}
    for name, X in arrays.items():
        features[f"flowr/{name}"] = model.transform(X)
        features[f"base/{name}"] = model.transform(X, encoder="pretrained")
    if path is not None:
        write_cache(path, lambda file: np.savez(file, **features))
    return features


def _read_features(path: Path, arrays: dict) -> dict:
    with np.load(path, allow_pickle=False) as cached:
        features = {f"{kind}/{name}": cached[f"{kind}/{name}"]
                    for name in arrays for kind in ("flowr", "base")}
    for key, Z in features.items():
        n_rows = len(arrays[key.split("/", 1)[1]])
        if Z.ndim != 2 or Z.shape[0] != n_rows:
            raise ValueError(f"{key!r} has shape {Z.shape}; expected ({n_rows}, "
                             "embedding_dim)")
    return features


def model_key(params: dict, data_key: str) -> str:
    """Cache key of a model: every parameter of ``FLOWRClassifier``, defaults
    included, so a model cached before a parameter was added or a default
    changed is not mistaken for a current one. ``verbose`` is keyed as 0: it
    changes what training prints, not the model."""
    key_params = FLOWRClassifier(**params).get_params() | {"verbose": 0}
    return _digest([key_params, data_key])


def method_features(method: str) -> str:
    """``"flowr"`` (meta-trained encoder) or ``"base"`` (pre-trained encoder)."""
    return METHOD_FEATURES.get(method, "base")


def cross_fit_option_problem(args) -> str | None:
    """Why ``--calibration-cv`` and the options that need it do not fit
    together (a usage error), or None."""
    if args.calibration_cv is not None:
        return None
    if "flowr-full-cvcal" in args.methods:
        return "flowr-full-cvcal needs --calibration-cv K."
    if args.calibration_held_classes is not None:
        return "--calibration-held-classes needs --calibration-cv K."
    if args.noise_shrinkage == "auto":
        return ("--noise-shrinkage auto is chosen on --calibration-cv's folds; "
                "give --calibration-cv K.")
    return None


def cross_fit_setting_problem(cv, params: dict, X_fit, y_fit, seed) -> str | None:
    """Why flowr-full-cvcal's folds (``cv``) cannot train models of
    ``params`` on ``y_fit`` (checked before any training), or None."""
    if cv is None:
        return None
    try:
        plan = cross_fit_plan(cv, X_fit, y_fit, setting=params["setting"],
                              random_state=seed)
        FLOWRClassifier(**{**params, "covariance": "full"})._check_cross_fit_plan(
            y_fit, plan)
    except ValueError as exc:
        return f"--calibration-cv on the {params['setting']} context: {exc}"
    return None


def calibration_folds(args):
    """The ``cv`` of flowr-full-cvcal (``--calibration-cv``,
    ``--calibration-held-classes``), or None."""
    if args.calibration_cv is None:
        return None
    if args.calibration_held_classes is None:
        return args.calibration_cv
    return GroupShuffleSplit(n_splits=args.calibration_cv,
                             test_size=args.calibration_held_classes,
                             random_state=args.seed)


def method_template(method: str, setting: str, model: FLOWRClassifier,
                    Z_train, y_train, *, prior_scale: float = 1.0,
                    noise_shrinkage: float = 0.0,
                    calibration: dict | None = None,
                    cross_fit: dict | None = None):
    """The estimator ``evaluate_online`` copies for every task.

    Small context: an unfitted estimator (FLOWR: the head with the
    meta-learned prior; PEELER: with the precision learned on the training
    classes). Large context: fitted on the training classes' features.
    ``Z_train`` are the training features of the method's encoder
    (:func:`method_features`). ``prior_scale``, ``noise_shrinkage``: the
    full head's (``FLOWRClassifier``'s parameters). ``calibration``: keyword
    arguments of :func:`~sklearn_flowr.protocol.calibrate_novelty` for "flowr-full-cal",
    whose fitted map the template carries as ``novelty_calibration``.
    ``cross_fit``: for "flowr-full-cvcal", the training inputs ``X`` (the
    folds train on them) and the ``cv`` of
    :func:`~sklearn_flowr.protocol.cross_fit_novelty_calibration`, which runs
    with ``calibration``'s other arguments on models like ``model`` with the
    full head; with ``choose_shrinkage`` it also chooses the head's
    ``noise_shrinkage`` (FLOWRClassifier's ``"auto"`` grid). The cross-fit's
    result is left in ``cross_fit["result"]``.
    """
    if method == "flowr":
        return model.head_
    if method == "flowr-no-meta":
        return no_meta_head(setting, model, Z_train, y_train)
    if method in ("flowr-full", "flowr-full-cal", "flowr-full-cvcal"):
        head = full_covariance_head(setting, model, Z_train, y_train,
                                    prior_scale=prior_scale,
                                    noise_shrinkage=noise_shrinkage)
        if method == "flowr-full-cal":
            fitted = calibrate_novelty(head, Z_train, y_train, setting=setting,
                                       **(calibration or {}))
            head.set_params(novelty_calibration=(fitted.slope, fitted.intercept))
        elif method == "flowr-full-cvcal":
            if cross_fit is None:
                raise ValueError("flowr-full-cvcal needs cross_fit (the training "
                                 "inputs and the folds).")
            folds = clone(model).set_params(covariance="full",
                                            prior_scale=prior_scale,
                                            noise_shrinkage=noise_shrinkage)
            fitted = cross_fit_novelty_calibration(
                folds, cross_fit["X"], y_train, cv=cross_fit["cv"],
                noise_shrinkages=list(NOISE_SHRINKAGE_GRID)
                if cross_fit.get("choose_shrinkage") else None,
                **(calibration or {}))
            cross_fit["result"] = fitted
            if fitted.noise_shrinkage != noise_shrinkage:
                head = full_covariance_head(setting, model, Z_train, y_train,
                                            prior_scale=prior_scale,
                                            noise_shrinkage=fitted.noise_shrinkage)
            head.set_params(novelty_calibration=(fitted.slope, fitted.intercept))
        return head
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


def no_meta_head(setting: str, model: FLOWRClassifier, Z_train, y_train):
    """FLOWR without meta-training: its head on the pre-trained embedding.

    The head's hyper-parameters are FLOWR's (``a``, the class prior, the
    known-class pseudo-count); what meta-training would learn -- the prior
    ``(mu0, s0)``, the concentration ``b`` -- and the class noise ``sigma``
    come from empirical Bayes on the training classes' pre-trained features
    (``CRPGaussianClassifier``'s "auto"), the best a head can do without
    training. Small context: unfitted, with that prior. Large context: the
    training classes conditioned from it, kept fixed online unless
    ``update_known``, as FLOWR's own large-context head.
    """
    return empirical_bayes_head(model.head_, Z_train, y_train, setting=setting,
                                frozen=not model.update_known, b="auto")


def full_covariance_head(setting: str, model: FLOWRClassifier, Z_train, y_train,
                         prior_scale: float = 1.0, noise_shrinkage: float = 0.0):
    """FLOWR's head with full covariances on its meta-trained embedding.

    What ``FLOWRClassifier(covariance="full")`` builds after meta-training,
    from the cached features of the isotropic model: ``mu0``, the full prior
    covariance and the full class noise by empirical Bayes on the training
    classes' meta-trained embeddings; ``a`` and the meta-learned ``b`` kept;
    the prior covariance times ``prior_scale`` and the noise covariance shrunk
    by ``noise_shrinkage`` (FLOWRClassifier's parameters).
    """
    return empirical_bayes_head(model.head_, Z_train, y_train, setting=setting,
                                frozen=not model.update_known,
                                prior_scale=prior_scale, covariance="full",
                                noise_shrinkage=noise_shrinkage)
