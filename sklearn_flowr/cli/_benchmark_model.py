"""The ``FLOWRClassifier`` that ``flowr-benchmark`` trains: ``FLOWRClassifier()``
with the run's options, then every ``--set KEY=VALUE`` through ``set_params``,
checked before any data is loaded.
"""

from __future__ import annotations

import difflib

from sklearn.base import BaseEstimator

from .. import FLOWRClassifier
from ..training import MetaTraining, SupE, SupFC
from ..training.pipeline import resolve_device
from ._options import split_key_value

__all__ = ["PRETRAININGS", "ModelOptionError", "build_model", "check_model_options",
           "describe_model", "run_models"]

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


def _problem(model: FLOWRClassifier) -> str | None:
    """What the model's parameters, alone or together, break (the checks
    ``fit`` runs before it looks at the data); or None."""
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
    """The unfitted ``FLOWRClassifier`` of one context and pre-training.

    Parameters
    ----------
    args : argparse.Namespace
        ``flowr-benchmark``'s options.
    setting : {"small", "large"}
        The context the model is meta-trained in.
    pretrain : {"sup-e", "sup-fc", "none"}
        Its pre-training (``--pretrain``).
    meta : bool, default=True
        ``False``: ``meta=None``, the ``flowr-no-meta`` ablation (``--set
        meta__*`` items then do not apply, nor ``pretrain__*`` to ``"none"``).

    Returns
    -------
    model : FLOWRClassifier

    Raises
    ------
    ModelOptionError
        Naming the ``--set`` item (or options) the model refuses, and why.

    Examples
    --------
    >>> from sklearn_flowr.cli._benchmark import parse_args
    >>> args = parse_args(["--set", "head__covariance=isotropic",
    ...                    "--set", "calibration=None"])
    >>> model = build_model(args, "small", "sup-e")
    >>> model.head.covariance, model.calibration, model.meta.epochs
    ('isotropic', None, 10)
    """
    model = FLOWRClassifier().set_params(
        **_option_params(args, setting, pretrain, meta))
    problem = _problem(model)
    if problem:
        raise ModelOptionError(f"the options give an invalid model: {problem}")
    blame = None
    for text in args.set:
        key, value = split_key_value(text)
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
    """Why training cannot run on ``device`` (unknown, absent, or unable to hold
    a tensor), or None.
    """
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
    """The model's parameters, nested ones included, as JSON values.

    Examples
    --------
    >>> describe_model(FLOWRClassifier())["head__covariance"]
    'full'
    """
    return {key: _json_value(value)
            for key, value in model.get_params(deep=True).items()}
