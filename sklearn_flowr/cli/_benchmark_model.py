"""What ``flowr-benchmark`` runs: the ``FLOWRClassifier`` of each context and
pre-training (its options, then every ``--set KEY=VALUE`` through
``set_params``, checked before any data is loaded), the methods evaluated on
its embeddings, and their tasks."""

import ast
import difflib
from functools import partial

import numpy as np
from sklearn.base import BaseEstimator

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
from ..protocol import LargeContextTasks, SmallContextTasks, small_context_sizes
from ..training import MetaTraining, SupE, SupFC
from ..training.pipeline import resolve_device
from ._benchmark_setup import UserDataError, setting_data

__all__ = ["METHODS", "PRETRAININGS", "ModelOptionError", "baseline_template",
           "benchmark_tasks", "build_model", "check_model_options",
           "describe_model", "method_template", "plan_run", "run_models"]

# --pretrain's choices and the stage each builds.
PRETRAININGS = {"sup-e": SupE, "sup-fc": SupFC, "none": None}
# The stages' names in the run's log (by class name; no stage: "NoneType").
PRETRAIN_NAMES = {"SupE": "Sup-E", "SupFC": "Sup-FC", "NoneType": "untrained"}
# What the run's convenience options default to: FLOWRClassifier's defaults.
DEFAULT_MODEL = FLOWRClassifier()
DEFAULT_PRETRAIN = SupE()
DEFAULT_META = MetaTraining()
# Parameters the run sets itself, and why --set may not.
_RUN_OWNED = {
    "setting": "the run fits one model per context; choose them with --setting",
    "checkpoint_dir": "the run fits several models, which cannot share one "
    "checkpoint folder",
    "accelerator": "an Accelerator cannot be given on the command line",
}


class ModelOptionError(ValueError):
    """A ``--set`` item or option the model refuses (a usage error)."""


def _option_params(args, setting: str, pretrain: str, meta: bool) -> dict:
    """The run's options as ``set_params`` parameters, nested ones included."""
    stage = PRETRAININGS[pretrain]
    params = dict(backbone=args.backbone, setting=setting,
                  pretrain=None if stage is None else stage(),
                  embedding_dim=args.embedding_dim,
                  fine_tune_steps=args.fine_tune_steps, device=args.device,
                  random_state=args.seed,
                  # Training progress (skorch's epoch tables and bars).
                  verbose=int(args.verbose >= 1))
    if stage is not None:
        params["pretrain__epochs"] = args.pretrain_epochs
    if meta:
        params.update(meta__epochs=args.meta_epochs,
                      meta__episodes_per_epoch=args.episodes_per_epoch,
                      meta__encoder_lr=args.meta_lr,
                      meta__lambda_adapt=args.lambda_adapt)
    else:
        params["meta"] = None
    return params


def _split_key_value(text: str) -> tuple[str, object]:
    """``(KEY, VALUE)`` of ``KEY=VALUE``, VALUE a Python literal or else text."""
    key, _, value = text.partition("=")
    try:
        return key.strip(), ast.literal_eval(value.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return key.strip(), value.strip()


def _problem(model: FLOWRClassifier) -> str | None:
    """What ``model.check_fit()`` refuses in its parameters, or None."""
    try:
        model.check_fit()
    except (ValueError, TypeError) as exc:
        return str(exc)
    return None


def _unknown_key(model: FLOWRClassifier, key: str) -> str | None:
    """Why ``key`` is no parameter of ``model`` (with close matches), or None."""
    valid = model.get_params(deep=True)
    if key in valid:
        return None
    part = key.split("__", 1)[0]
    if "__" in key and part in valid and valid[part] is None:
        return f"{part} is None in this model, so it has no {key!r}"
    close = difflib.get_close_matches(key, list(valid), n=3)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    return (f"FLOWRClassifier has no parameter {key!r}{hint}; the keys are its "
            "parameters and its parts' settings as head__*, pretrain__*, meta__* "
            "(FLOWRClassifier().get_params(deep=True))")


def build_model(args, setting: str, pretrain: str, *,
                meta: bool = True) -> FLOWRClassifier:
    """The unfitted ``FLOWRClassifier`` of one context and pre-training
    (``meta=False``: ``meta=None``, the ``flowr-no-meta`` ablation); a
    ``ModelOptionError`` names the ``--set`` item the model refuses."""
    model = FLOWRClassifier().set_params(
        **_option_params(args, setting, pretrain, meta))
    problem = _problem(model)
    if problem:
        raise ModelOptionError(f"the options give an invalid model: {problem}")
    blame = None
    for text in args.set:
        key, value = _split_key_value(text)
        part = key.split("__", 1)[0]
        if "__" in key and ((part == "pretrain" and PRETRAININGS[pretrain] is None)
                            or (part == "meta" and not meta)):
            continue  # the stage this run left out on purpose
        if key in _RUN_OWNED:
            raise ModelOptionError(f"--set {text}: {_RUN_OWNED[key]}.")
        why = _unknown_key(model, key)
        if why:
            raise ModelOptionError(f"--set {text}: {why}.")
        try:
            model.set_params(**{key: value})
        except (ValueError, TypeError, AttributeError) as exc:
            raise ModelOptionError(f"--set {text}: {exc}") from None
        if blame is None and _problem(model):
            blame = text
    problem = _problem(model)
    if problem:
        # Named after the first item after which the model was invalid.
        raise ModelOptionError(f"--set {blame}: {problem}")
    return model


def _device_problem(device: str) -> str | None:
    """Why training cannot run on ``device`` (unknown, absent, or unable to
    hold a tensor), or None."""
    try:
        resolved = resolve_device(device)
    except ValueError as exc:
        return str(exc)
    if resolved.type == "cpu":
        return None
    if resolved.type == "meta":
        return "the meta device holds no data; use cpu, cuda or auto."
    import torch

    if resolved.type == "cuda" and resolved.index is not None:
        count = torch.cuda.device_count()
        if resolved.index >= count:
            return (f"this machine has {count} CUDA device(s), numbered from 0; "
                    "use cuda (the current one) or cuda:0 .. "
                    f"cuda:{count - 1}.")
    try:
        torch.zeros(1, device=resolved)
    except Exception as exc:  # torch raises several types for a bad device
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return (f"cannot place a tensor there ({type(exc).__name__}: {first}); "
                "use cpu or auto.")
    return None


def check_model_options(args) -> str | None:
    """Why the run's models (:func:`run_models`) cannot be built, or None."""
    problem = _device_problem(args.device)
    if problem:
        return f"--device {args.device}: {problem}"
    if all(PRETRAININGS[pretrain] is None for pretrain in args.pretrain):
        for text in args.set:
            if text.startswith("pretrain__"):
                return (f"--set {text}: no model of this run has a pre-training "
                        "stage (--pretrain none).")
    try:
        for setting in args.setting:
            run_models(args, setting)
    except ModelOptionError as exc:
        return str(exc)
    return None


def run_models(args, setting: str) -> list[FLOWRClassifier]:
    """The unfitted models of one context: one per ``--pretrain``, and their
    no-meta-training twins when ``flowr-no-meta`` runs."""
    metas = (True, False) if "flowr-no-meta" in args.methods else (True,)
    return [build_model(args, setting, pretrain, meta=meta)
            for pretrain in args.pretrain for meta in metas]


def _json_value(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)) and all(
            v is None or isinstance(v, (bool, int, float, str)) for v in value):
        return list(value)
    if isinstance(value, BaseEstimator):
        return repr(value)
    return str(value)


def describe_model(model: FLOWRClassifier) -> dict:
    """The model's parameters, nested ones included, as JSON values."""
    return {key: _json_value(value)
            for key, value in model.get_params(deep=True).items()}


# --methods: "flowr-no-meta" trains another model, so it runs only when asked.
# The frozen-feature anchors run only when asked for (--methods). RanPAC's
# prediction after each learned row costs O(M^3): M = 256 keeps a stream quick.
ANCHORS = {"simpleshot": SimpleShotClassifier,
           "mahalanobis++": MahalanobisPlusPlusClassifier,
           "ranpac": partial(RanPACClassifier, n_components=256, random_state=0),
           "knn": KNNClassifier, "fecam": FeCAMClassifier}
_BASELINES = {"ncm": NCMClassifier, "protonet": ProtoNetClassifier,
              "evm": EVMClassifier, **ANCHORS}
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
# pre-trained one's (flowr-no-meta's model has no other).
META_TRAINED_METHODS = ("flowr", "ncm-flowr-emb")


def fit_model(model: FLOWRClassifier, X, y, *, log=print):
    """``model.fit_transform(X, y)``, logged."""
    pretrain = model.pretrain
    name = PRETRAIN_NAMES.get(type(pretrain).__name__, type(pretrain).__name__)
    epochs = [f"{pretrain.epochs} pre-training" if pretrain is not None else
              "no pre-training",
              f"{model.meta.epochs} meta-training epochs" if model.meta is not None
              else "no meta-training"]
    log(f"   training FLOWR {name} encoder on {X.shape[0]} images "
        f"({' + '.join(epochs)}) ...")
    return model.fit_transform(X, y)


def method_template(method: str, setting: str, model: FLOWRClassifier, Z_train,
                    y_train):
    """What ``evaluate_online`` copies per task: FLOWR's fitted head (the prior
    head in the small context), else a baseline on ``Z_train``."""
    if method in ("flowr", "flowr-no-meta"):
        return model.prior_head_ if setting == "small" else model.head_
    return baseline_template("ncm" if method == "ncm-flowr-emb" else method,
                             setting, Z_train, y_train)


def baseline_template(method: str, setting: str, Z_train, y_train):
    """A distance baseline, unfitted in the small context (PEELER with the
    training classes' precision) and fitted on ``Z_train`` in the large one."""
    if method == "peeler":
        precision = PEELERClassifier().fit(Z_train, y_train).precision_
        estimator = PEELERClassifier(precision=precision)
    elif method in _BASELINES:
        estimator = _BASELINES[method]()
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


def plan_run(args, data) -> dict:
    """Per setting, its data split, tasks and protocol, after every check the run
    can make before training; a problem raises ``UserDataError``."""
    where = (f"--data {args.data!r}" if args.data else f"--dataset {args.dataset}")
    if data.X_train.ndim > 2 and build_model(
            args, args.setting[0], args.pretrain[0]).backbone == "mlp":
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
                # fit's advice names its parameter; here it is an option.
                problem = str(exc).replace("backbone='mlp'", "--backbone mlp")
                raise UserDataError(
                    f"{where}: the {setting}-context model cannot be fitted on "
                    f"its training classes: {problem}") from None
        plan[setting] = split, tasks, protocol
    return plan

