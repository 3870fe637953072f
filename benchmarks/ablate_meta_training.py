"""Meta-training ablations on glyphs from one shared pre-trained encoder.

Pre-trains one Sup-E Conv4 encoder on the glyphs training characters (a
``FLOWRClassifier`` with ``meta=None``, cached), then meta-trains a copy of its
``pretrained_encoder_`` once per variant -- a JSON dict of
:class:`~sklearn_flowr.training.MetaTraining` settings (``encoder_lr``, ``n_way``,
``lambda_adapt``, ``epochs``, ``episodes_per_epoch``, ...) -- as
``FLOWRClassifier(backbone=<that encoder>, pretrain=None, meta=MetaTraining(...))``
and scores each on the same seeded small-context test tasks: the FLOWR head
with its meta-learned prior (the paper's isotropic head,
``head=CRPGaussianClassifier()``, its ``prior_head_``), the same head with the
prior re-estimated from the class means (``+reest prior``), and NCM on the same
embeddings. The first row is the pre-trained encoder without meta-training.
Every variant starts from the identical encoder, so the rows differ only in
meta-training (``class_stats="learned"`` needs Sup-E's head and is not
available here).

Usage::

    python benchmarks/ablate_meta_training.py \
        '{"epochs": 3, "episodes_per_epoch": 30, "encoder_lr": 1e-3}' \
        '{"epochs": 3, "episodes_per_epoch": 30, "encoder_lr": 1e-4}'

It is a diagnostic, not an API example.
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from pathlib import Path

import numpy as np
from sklearn.base import clone

import sklearn_flowr
from sklearn_flowr import CRPGaussianClassifier, FLOWRClassifier
from sklearn_flowr.baselines import NCMClassifier
from sklearn_flowr.cli._benchmark_setup import load_benchmark_data
from sklearn_flowr.protocol import SmallContextTasks, evaluate_online
from sklearn_flowr.training import MetaTraining, SupE


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("variants", nargs="*",
                        help="JSON dicts of MetaTraining parameters")
    parser.add_argument("--embedding-dim", type=int, default=32)
    parser.add_argument("--pretrain-epochs", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cache-dir", default=str(Path.home() / ".cache" /
                                                   "sklearn_flowr" / "ablation"))
    return parser.parse_args(argv)


def model_params(args) -> dict:
    """What every model here shares: the paper's isotropic head, unmapped."""
    return dict(setting="small", embedding_dim=args.embedding_dim,
                head=CRPGaussianClassifier(covariance="isotropic"), calibration=None,
                random_state=args.seed, verbose=0)


def evaluate(name, model, data, tasks, reestimate=False):
    Z_test = model.transform(data.X_test)
    head = model.prior_head_
    if reestimate:
        fitted = CRPGaussianClassifier(covariance="isotropic").fit(
            model.transform(data.X_train), data.y_train)
        head = clone(head).set_params(prior_mean=fitted.prior_mean_,
                                      prior_var=fitted.prior_var_)
    flowr = evaluate_online(head, Z_test, data.y_test, tasks, setting="small")
    ncm = evaluate_online(NCMClassifier(), Z_test, data.y_test, tasks,
                          setting="small")
    print(f"{name:60s} FLOWR H={flowr.h_measure:.3f} Acc={flowr.accuracy:.3f} | "
          f"NCM H={ncm.h_measure:.3f} Acc={ncm.accuracy:.3f} | "
          f"s0={np.mean(head.get_params()['prior_var']):.3f}", flush=True)


def main(argv=None):
    args = parse_args(argv)
    cache = Path(args.cache_dir)
    cache.mkdir(parents=True, exist_ok=True)
    data = load_benchmark_data("glyphs", cache_dir=cache / "data")
    name = (f"pretrained_{args.embedding_dim}_{args.pretrain_epochs}_"
            f"{args.seed}.skops")
    path = cache / name
    if path.exists():
        base = sklearn_flowr.load(path)  # skops, trusting named types only
    else:
        base = FLOWRClassifier(pretrain=SupE(epochs=args.pretrain_epochs),
                               meta=None, **model_params(args))
        base.fit(data.X_train, data.y_train)
        sklearn_flowr.save(base, path)
    tasks = SmallContextTasks(data.y_test, n_support_classes=10, n_novel_classes=5,
                              n_tasks=args.tasks, random_state=args.seed)
    evaluate("pre-trained only", base, data, tasks)
    for spec in args.variants:
        # The module is trained in place: every variant gets its own copy.
        model = FLOWRClassifier(backbone=copy.deepcopy(base.pretrained_encoder_),
                                pretrain=None, meta=MetaTraining(**json.loads(spec)),
                                **model_params(args))
        tic = time.perf_counter()
        model.fit(data.X_train, data.y_train)
        history = model.history_["meta"]
        print(f"  {spec}: meta-training {time.perf_counter() - tic:.0f} s, episode "
              f"loss first epoch {history[0]['train_loss']:.3f}, last "
              f"{history[-1]['train_loss']:.3f}")
        evaluate(spec, model, data, tasks)
        evaluate(spec + " +reest prior", model, data, tasks, True)


if __name__ == "__main__":
    main()
