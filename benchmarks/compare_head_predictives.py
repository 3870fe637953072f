"""Novelty ranking of the head's predictives against NCM on the same embedding.

Trains (or loads from the cache) one ``FLOWRClassifier`` on a benchmark
dataset, embeds the training and test images with its meta-trained encoder,
and runs the same seeded small-context tasks through:

- ``gaussian meta``: FLOWR's head as meta-trained (the paper's predictive:
  ``FLOWRClassifier(head=CRPGaussianClassifier(), calibration=None)``, its
  ``prior_head_``);
- ``gaussian EB``: the paper's isotropic-Gaussian predictive with ``mu0``,
  ``s0``, ``b`` and ``sigma`` by empirical Bayes on the training classes;
- ``full-cov EB``: the same head with a full class-noise covariance and a full
  prior covariance (``covariance="full"``), by empirical Bayes likewise;
- ``NCM``: nearest class mean, the distance baseline, on the same embedding;
- ``NCM whitened``: NCM after whitening the embedding by the training classes'
  pooled within-class covariance (a diagnostic: how much of the full-covariance
  head's gain a whitened distance gets too).

It prints the novelty H-measure and AUROC of first sightings, the accuracy at
the protocol's fixed novelty TPR, and, for the heads, the expected calibration
error of P(novel) and the accuracy of the argmax decision. Embeddings are
cached as .npz (default under /tmp), so a re-run only evaluates.

Usage::

    python benchmarks/compare_head_predictives.py --dataset glyphs \
        --pretrain-epochs 3 --meta-epochs 3 --episodes-per-epoch 30 --tasks 300
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from pathlib import Path

import numpy as np
import torch
from sklearn.base import clone

from sklearn_flowr import CRPGaussianClassifier, FLOWRClassifier
from sklearn_flowr.baselines import NCMClassifier
from sklearn_flowr.cli._benchmark_setup import load_benchmark_data
from sklearn_flowr.protocol import SmallContextTasks, evaluate_online
from sklearn_flowr.training import MetaTraining, SupE


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", default="glyphs",
                        choices=("glyphs", "digits", "fashion-mnist"))
    parser.add_argument("--max-per-class", type=int, default=None)
    parser.add_argument("--embedding-dim", type=int, default=32)
    parser.add_argument("--pretrain-epochs", type=int, default=3)
    parser.add_argument("--meta-epochs", type=int, default=3)
    parser.add_argument("--episodes-per-epoch", type=int, default=30)
    parser.add_argument("--n-way", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tasks", type=int, default=300)
    parser.add_argument("--embed-only", action="store_true",
                        help="train and cache the embedding, then stop")
    parser.add_argument("--cache-dir", default="/tmp/flowr_head_predictives")
    return parser.parse_args(argv)


def model_params(args) -> dict:
    """The small-context ``FLOWRClassifier`` whose embedding is compared: the
    paper's isotropic head with its meta-learned prior, unmapped."""
    return dict(setting="small", embedding_dim=args.embedding_dim,
                head=CRPGaussianClassifier(covariance="isotropic"), calibration=None,
                pretrain=SupE(epochs=args.pretrain_epochs),
                meta=MetaTraining(epochs=args.meta_epochs,
                                  episodes_per_epoch=args.episodes_per_epoch,
                                  n_way=args.n_way),
                random_state=args.seed, device="cpu", verbose=0)


def embedding(args) -> dict:
    """Train/test embeddings of the meta-trained encoder and its learned head
    hyper-parameters, from the cache when present."""
    params = model_params(args)
    described = FLOWRClassifier(**params).get_params(deep=True)
    described = {name: value for name, value in described.items()
                 if "__" in name or not hasattr(value, "get_params")}
    key = hashlib.sha256(json.dumps([args.dataset, args.max_per_class, described],
                                    sort_keys=True, default=repr).encode()
                         ).hexdigest()[:12]
    path = Path(args.cache_dir) / f"{args.dataset}-{key}.npz"
    if path.exists():
        with np.load(path, allow_pickle=False) as cached:
            return {name: cached[name] for name in cached.files}
    data = load_benchmark_data(args.dataset, max_per_class=args.max_per_class,
                               cache_dir=Path(args.cache_dir) / "data")
    torch.set_num_threads(2)
    tic = time.perf_counter()
    model = FLOWRClassifier(**params).fit(data.X_train, data.y_train)
    print(f"trained {model} in {time.perf_counter() - tic:.0f} s", flush=True)
    # The small context's start: the head with the meta-learned prior.
    prior = model.prior_head_.get_params()
    arrays = dict(Z_train=model.transform(data.X_train), y_train=data.y_train,
                  Z_test=model.transform(data.X_test), y_test=data.y_test,
                  meta_prior_mean=np.asarray(prior["prior_mean"], dtype=float),
                  meta_prior_var=np.asarray(prior["prior_var"], dtype=float),
                  meta_b=np.float64(prior["b"]), meta_sigma=np.float64(prior["sigma"]),
                  params=np.array(repr(model)))
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **arrays)
    print(f"cached the embedding in {path}", flush=True)
    return arrays


def empirical_bayes_head(Z_train, y_train, **params):
    """An unfitted head whose hyper-parameters are empirical Bayes on the
    training classes (what small-context tasks start from)."""
    fitted = CRPGaussianClassifier(covariance="isotropic", **params).fit(
        Z_train, y_train)
    return clone(fitted).set_params(prior_mean=fitted.prior_mean_,
                                    prior_var=fitted.prior_var_, b=fitted.b_,
                                    sigma=fitted.sigma_)


def main(argv=None):
    args = parse_args(argv)
    arrays = embedding(args)
    if args.embed_only:
        return
    Z_train, y_train = arrays["Z_train"], arrays["y_train"]
    Z_test, y_test = arrays["Z_test"], arrays["y_test"]
    print(f"embedding of {arrays['params']}: {Z_train.shape[0]} "
          f"training rows / {np.unique(y_train).shape[0]} classes, "
          f"{Z_test.shape[0]} test rows / {np.unique(y_test).shape[0]} classes, "
          f"d = {Z_train.shape[1]}")
    methods = {
        "gaussian meta": CRPGaussianClassifier(
            covariance="isotropic", prior_mean=arrays["meta_prior_mean"],
            prior_var=arrays["meta_prior_var"],
            b=float(arrays["meta_b"]), sigma=float(arrays["meta_sigma"])),
        "gaussian EB": empirical_bayes_head(Z_train, y_train),
        "full-cov EB": empirical_bayes_head(Z_train, y_train, covariance="full"),
        "NCM": NCMClassifier(),
        "NCM whitened": NCMClassifier(),
    }
    # The pooled within-class covariance (Ledoit-Wolf shrunk): the full head's
    # class noise by empirical Bayes.
    noise = CRPGaussianClassifier(covariance="full").fit(Z_train, y_train).sigma_
    values, vectors = np.linalg.eigh(noise)
    whitened_test = Z_test @ (vectors / np.sqrt(values))
    tasks = SmallContextTasks(y_test, n_support_classes=10, n_novel_classes=5,
                              n_tasks=args.tasks, random_state=args.seed)
    print(f"\n{'method':16s} {'H':>6s} {'AUROC':>6s} {'Acc':>6s} {'ECE':>6s} "
          f"{'argmax Acc':>10s}")
    for name, estimator in methods.items():
        Z = whitened_test if name == "NCM whitened" else Z_test
        report = evaluate_online(estimator, Z, y_test, tasks, setting="small")
        ece = "n/a" if report.ece is None else f"{report.ece:.3f}"
        argmax = ("n/a" if report.argmax_accuracy is None
                  else f"{report.argmax_accuracy:.3f}")
        print(f"{name:16s} {report.h_measure:6.3f} {report.auroc:6.3f} "
              f"{report.accuracy:6.3f} {ece:>6s} {argmax:>10s}", flush=True)


if __name__ == "__main__":
    main()
