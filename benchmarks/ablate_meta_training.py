"""Meta-training ablations on glyphs from one shared pre-trained encoder.

Pre-trains one Sup-E Conv4 encoder on the glyphs training characters (cached),
then meta-trains a copy of it once per variant (a JSON dict of
``FLOWRClassifier`` parameters: ``lr``/``meta_lr``, ``n_way``, ``lambda_adapt``,
``meta_epochs``, ``episodes_per_epoch``, ...) and scores each on the same seeded
small-context test tasks: the FLOWR head with its meta-learned prior, the same
head with the prior re-estimated from the class means (``+reest prior``), and
NCM on the same embeddings. The first row is the pre-trained encoder without
meta-training. Every variant starts from the identical encoder, so the rows
differ only in meta-training.

Usage::

    python benchmarks/ablate_meta_training.py \
        '{"meta_epochs": 3, "episodes_per_epoch": 30, "meta_lr": 1e-3}' \
        '{"meta_epochs": 3, "episodes_per_epoch": 30, "meta_lr": 1e-4}'

It runs the meta-training stage of ``sklearn_flowr.training`` (``meta_train``)
on the shared pre-trained encoder, so that the variants share one
pre-training; it is a diagnostic, not an API example.
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from pathlib import Path

import joblib
import numpy as np
import torch

from sklearn_flowr import CRPGaussianClassifier, FLOWRClassifier
from sklearn_flowr._inputs import as_model_input
from sklearn_flowr.baselines import NCMClassifier
from sklearn_flowr.cli._benchmark_setup import load_benchmark_data
from sklearn_flowr.protocol import SmallContextTasks, evaluate_online
from sklearn_flowr.training import embed
from sklearn_flowr.training._class_stats import class_statistics, initial_prior
from sklearn_flowr.training._config import FLOWRConfig
from sklearn_flowr.training._head_building import build_head
from sklearn_flowr.training._meta_training import meta_train
from sklearn_flowr.training._runner import StageRunner


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("variants", nargs="*", help="JSON dicts of parameters")
    parser.add_argument("--embedding-dim", type=int, default=32)
    parser.add_argument("--pretrain-epochs", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cache-dir", default=str(Path.home() / ".cache" /
                                                   "sklearn_flowr" / "ablation"))
    return parser.parse_args(argv)


def evaluate(name, model, data, tasks, labels, y_index, reestimate=False):
    Z_test = model.transform(data.X_test)
    head = model.head_
    if reestimate:
        means, _ = class_statistics(model.transform(data.X_train), y_index,
                                    len(labels))
        prior_mean, prior_var = initial_prior(means)
        head = copy.deepcopy(head).set_params(prior_mean=prior_mean,
                                              prior_var=prior_var)
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
    labels, y_index = np.unique(data.y_train, return_inverse=True)
    name = f"base_{args.embedding_dim}_{args.pretrain_epochs}_{args.seed}.joblib"
    path = cache / name
    if path.exists():
        base = joblib.load(path)
    else:
        base = FLOWRClassifier(setting="small", embedding_dim=args.embedding_dim,
                               pretrain_epochs=args.pretrain_epochs, meta_epochs=0,
                               random_state=args.seed, verbose=0)
        base.fit(data.X_train, data.y_train)
        joblib.dump(base, path)
    tasks = SmallContextTasks(data.y_test, n_support_classes=10, n_novel_classes=5,
                              n_tasks=args.tasks, random_state=args.seed)
    evaluate("pre-trained only", base, data, tasks, labels, y_index)
    config = FLOWRConfig.from_params(base.get_params(deep=False))
    X = as_model_input(data.X_train, allow_features=config.takes_features)
    for spec in args.variants:
        model = copy.deepcopy(base).set_params(**json.loads(spec))
        config = FLOWRConfig.from_params(model.get_params(deep=False))
        encoder = copy.deepcopy(base.pretrained_encoder_)
        means, variances = class_statistics(embed(encoder, X), y_index, len(labels))
        runner = StageRunner(torch.device("cpu"), args.seed, verbose=0,
                             history=model.history_)
        tic = time.perf_counter()
        meta = meta_train(encoder, X, y_index, means, variances, config, runner)
        meta.eval()
        model.meta_module_, model.encoder_ = meta, meta.encoder
        model.head_ = build_head(CRPGaussianClassifier(**config.head_params()),
                                 meta, None, y_index, labels, config)
        history = model.history_["meta"]
        print(f"  {spec}: meta-training {time.perf_counter() - tic:.0f} s, episode "
              f"loss first epoch {history[0]['train_loss']:.3f}, last "
              f"{history[-1]['train_loss']:.3f}")
        evaluate(spec, model, data, tasks, labels, y_index)
        evaluate(spec + " +reest prior", model, data, tasks, labels, y_index, True)


if __name__ == "__main__":
    main()
