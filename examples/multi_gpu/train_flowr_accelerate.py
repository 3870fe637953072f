"""
====================================================================
Multi-GPU training of the FLOWR encoder with Hugging Face accelerate
====================================================================

Sup-E pre-training, then small-context FLOWR meta-training, of a Conv4
encoder on the ``glyphs`` characters, on as many GPUs (or machines) as
``accelerate launch`` starts; the main process then evaluates the learned
head on held-out characters and saves the encoder. This script is not run
when the documentation is built; run it yourself::

    pip install "sklearn-flowr[accelerate]"
    # one machine, two GPUs
    accelerate launch --multi_gpu --num_processes 2 \\
        examples/multi_gpu/train_flowr_accelerate.py --output encoder.pt
    # or torchrun, which accelerate's Accelerator also understands
    torchrun --nproc_per_node 2 examples/multi_gpu/train_flowr_accelerate.py
    # a quick check on one CPU (well under a minute)
    python examples/multi_gpu/train_flowr_accelerate.py --cpu --quick

Several machines: run ``accelerate config`` on each (or pass
``--num_machines``, ``--machine_rank``, ``--main_process_ip`` and
``--main_process_port`` to ``accelerate launch``), then start the same
command on every machine.

Things that change with the number of processes ``P``:

- **Batch size.** ``--batch-size`` is per process: each optimiser step
  averages the gradients of ``P`` mini-batches, so the effective batch is
  ``P x batch_size`` and an epoch takes ``1 / P`` of the steps. Scale the
  learning rate (or the batch size) if you want the single-GPU dynamics.
- **Episodes.** Each process trains on one episode per step and the
  gradients are averaged over the ``P`` episodes of a step; an epoch is still
  ``--episodes`` episodes, ``--episodes / P`` steps on each process. Keep
  ``--episodes`` a multiple of ``P``: accelerate pads the last step by
  repeating the first episodes of the epoch.
- **Batch normalisation.** During pre-training the statistics are those of
  each process's own mini-batch (DDP averages gradients, not batch-norm
  statistics; its running statistics are broadcast from process 0). For
  statistics over the whole effective batch, convert the encoder with
  ``torch.nn.SyncBatchNorm.convert_sync_batchnorm`` (GPUs only).
  Meta-training keeps batch norm frozen (``FLOWRMetaModule``'s default).
- **Seeds.** Every process builds the same initial weights (same seeds) and
  draws the same episode ``i`` of epoch ``e``; the shuffling of the
  mini-batches is synchronised by accelerate.
- **Side effects.** Every process runs this whole script: only the main
  process (``accelerator.is_main_process``) should save files, print results
  or evaluate; training prints its epoch table on the main process only.
"""

import argparse
import time

import numpy as np
import torch
from accelerate import Accelerator
from sklearn.metrics import roc_auc_score

from sklearn_flowr import CRPGaussianClassifier
from sklearn_flowr.datasets import load_glyphs
from sklearn_flowr.encoders import Conv4
from sklearn_flowr.training import (
    AcceleratedEpisodicMetaNet,
    AcceleratedSupENet,
    EpisodeDataset,
    FLOWRMetaModule,
    embed,
)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[1])
    parser.add_argument("--cpu", action="store_true",
                        help="train on the CPU even when GPUs are present")
    parser.add_argument("--quick", action="store_true",
                        help="a small run: a few classes, a narrow Conv4, one "
                             "epoch of each stage")
    parser.add_argument("--pretrain-epochs", type=int, default=10)
    parser.add_argument("--meta-epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=128,
                        help="mini-batch size per process")
    parser.add_argument("--episodes", type=int, default=200,
                        help="episodes per meta-training epoch, all processes")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--embedding-dim", type=int, default=64)
    parser.add_argument("--mixed-precision", choices=["no", "fp16", "bf16"],
                        default=None, help="default: accelerate's configuration")
    parser.add_argument("--output", default=None,
                        help="save the meta-trained encoder's state_dict here")
    args = parser.parse_args(argv)
    if args.quick:
        args.pretrain_epochs = args.meta_epochs = 1
        args.episodes = 20
    return args


def images(bunch, n_classes=None):
    """Float images of shape (n, 1, H, W) in [0, 1] and class indices."""
    X, y = bunch.data, bunch.target
    if n_classes is not None:
        keep = y < n_classes
        X, y = X[keep], y[keep]
    return (X[:, None] / np.float32(255)).astype(np.float32), y


def main(argv=None):
    args = parse_args(argv)
    accelerator = Accelerator(cpu=args.cpu, mixed_precision=args.mixed_precision)
    accelerator.print(f"{accelerator.num_processes} process(es) on "
                      f"{accelerator.device}; {accelerator.distributed_type}")
    start = time.perf_counter()

    # Every process loads the data; the loaders shard it.
    X, y = images(load_glyphs(split="train"), 30 if args.quick else None)
    n_classes = int(y.max()) + 1
    torch.manual_seed(0)  # the same initial encoder on every process
    encoder = Conv4(embedding_dim=args.embedding_dim,
                    hidden_channels=16 if args.quick else 64,
                    input_size=X.shape[2:])

    # Sup-E pre-training: mini-batches sharded across the processes.
    sup_e = AcceleratedSupENet(
        module__encoder=encoder, module__n_classes=n_classes,
        accelerator=accelerator, batch_size=args.batch_size, lr=args.lr,
        max_epochs=args.pretrain_epochs, random_state=0,
        # A last batch of one row breaks batch norm in training mode.
        iterator_train__drop_last=True,
    ).fit(X, y)

    # Meta-training: one episode per process and step.
    meta = FLOWRMetaModule.from_sup_e(sup_e.module_, setting="small")
    episodes = EpisodeDataset(X, y, n_way=5, n_unknown=2, n_query=5,
                              n_episodes=args.episodes, random_state=0)
    net = AcceleratedEpisodicMetaNet(
        module=meta, accelerator=accelerator, lr=args.lr,
        max_epochs=args.meta_epochs,
    ).fit(episodes)

    # Only the main process evaluates and saves.
    if accelerator.is_main_process:
        if args.quick:
            print("--quick: a check of the wiring; the model is barely trained")
        evaluate(net.module_, load_glyphs(split="test"))
        if args.output:
            torch.save(net.module_.encoder.state_dict(), args.output)
            print(f"encoder saved to {args.output}")
        print(f"done in {time.perf_counter() - start:.1f} s")
    accelerator.wait_for_everyone()
    accelerator.end_training()


def evaluate(meta, test, n_known=5, shots=5, n_unknown=3, seed=0):
    """One open-world task on held-out characters: 5 classes learned from 5
    shots each, queries from them and from 3 classes never seen."""
    X, y = images(test)
    rng = np.random.default_rng(seed)
    classes = rng.permutation(np.unique(y))[: n_known + n_unknown]
    known, unknown = classes[:n_known], classes[n_known:]
    support = np.concatenate([rng.permutation(np.flatnonzero(y == c))[:shots]
                              for c in known])
    query = np.setdiff1d(np.flatnonzero(np.isin(y, classes)), support)
    head = CRPGaussianClassifier(covariance="isotropic", **meta.head_kwargs(),
                                 known_count="observed")
    head.fit(embed(meta.encoder, X[support]), y[support])
    Z = embed(meta.encoder, X[query])
    p_novel = head.predict_proba(Z)[:, -1]
    is_novel = np.isin(y[query], unknown)
    accuracy = np.mean(head.predict(Z[~is_novel]) == y[query][~is_novel])
    print(f"held-out task: accuracy on the {n_known} known classes "
          f"{accuracy:.2f}, AUROC of P(novel) {roc_auc_score(is_novel, p_novel):.2f}")


if __name__ == "__main__":
    main()
