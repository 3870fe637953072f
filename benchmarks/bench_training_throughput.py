"""Training throughput of one Sup-E epoch: skorch ``SupENet`` vs a plain torch loop.

Run with ``python benchmarks/bench_training_throughput.py`` (options:
``--device {auto,cpu,cuda}``, ``--n-images``, ``--rounds``, ``--threads``,
``--encoder {conv4,mlp}``).

Both paths train the same model -- :class:`~sklearn_flowr.encoders.Conv4` under
:class:`~sklearn_flowr.training.SupEModule`, same initial weights -- with the
same criterion (:class:`~sklearn_flowr.training.SupELoss`), Adam at ``lr=1e-3``,
mini-batches of 64 drawn in a fresh random order each epoch, the same images
(random ``1x28x28`` float32, 64 classes, held as NumPy arrays on the host) and
the same number of torch threads. The hand-written loop is the lean one an
engineer would write: a ``randperm``, one fancy index per batch, a host-to-device
copy, forward / backward / step, and the loss summed on the device and read
once per epoch. The skorch path is a plain ``net.partial_fit(X, y)`` of one
epoch on an initialised net, i.e. ``fit``'s loop without re-initialising.

Machines are shared and noisy, so the two paths run alternately, one epoch
each per round, after a warm-up epoch each; the ratio is the median of the
per-round ratios and the throughputs are medians over rounds. The target is
skorch within 10% of the plain loop (ratio >= 0.90).

On a CPU a Conv4 step takes hundreds of milliseconds and any per-batch cost of
the training loop disappears in it; on a GPU the step takes a few milliseconds
and the loop's own cost shows. ``--encoder mlp`` (a one-hidden-layer MLP, a
step of a few milliseconds on a CPU) exposes that cost without a GPU; the last
line prints it per batch.
"""

import argparse
import copy
import time

import numpy as np
import torch

from sklearn_flowr.encoders import Conv4, MLPEncoder
from sklearn_flowr.training import SupELoss, SupEModule, SupENet

BATCH_SIZE = 64
LR = 1e-3


def make_data(n_images, n_classes, seed=0):
    """Random images ``(n_images, 1, 28, 28)`` and balanced labels, as NumPy."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_images, 1, 28, 28)).astype(np.float32)
    y = rng.permutation(np.arange(n_images) % n_classes).astype(np.int64)
    return X, y


def make_module(encoder, n_classes, seed=0):
    """The Sup-E module both paths train, built from a fixed seed."""
    torch.manual_seed(seed)
    if encoder == "conv4":
        phi = Conv4(in_channels=1, embedding_dim=64, input_size=(28, 28))
    else:
        # A small MLP makes each step cheap, so that the per-batch cost of the
        # training loop itself shows (as a fast GPU makes it show for Conv4).
        phi = MLPEncoder(28 * 28, hidden=(256,), embedding_dim=64)
    return SupEModule(phi, n_classes)


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def skorch_epoch_fn(module, X, y, device):
    """One epoch through ``SupENet.partial_fit`` (module deep-copied in)."""
    net = SupENet(module=copy.deepcopy(module), batch_size=BATCH_SIZE, lr=LR,
                  max_epochs=1, device=str(device), verbose=0)
    net.initialize()

    def epoch():
        net.partial_fit(X, y)
        synchronize(device)

    return epoch


def plain_epoch_fn(module, X, y, device):
    """One epoch of the hand-written loop on a deep copy of ``module``."""
    model = copy.deepcopy(module).to(device)
    criterion = SupELoss().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    # Host tensors, copied a batch at a time like skorch's (pageable memory);
    # with --data-on-device both paths get the images as a device tensor.
    X_host = X if torch.is_tensor(X) else torch.from_numpy(X)
    y_host = torch.from_numpy(y)

    def epoch():
        model.train()
        total = torch.zeros((), device=device)
        order = torch.randperm(X_host.shape[0])
        for start in range(0, X_host.shape[0], BATCH_SIZE):
            rows = order[start:start + BATCH_SIZE]
            xb = X_host[rows.to(X_host.device)].to(device)
            yb = y_host[rows].to(device)
            optimizer.zero_grad()
            loss = criterion(model(xb), yb, model.class_means, model.class_log_var)
            loss.backward()
            optimizer.step()
            total += loss.detach()
        float(total)  # one read per epoch, as a loop logging the epoch loss would
        synchronize(device)

    return epoch


def seconds(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def paired_throughput(ours, reference, n_images, rounds):
    """Images/s of both paths, alternating one epoch each for ``rounds`` rounds.

    Returns the median images/s of each and the median per-round ratio
    ``ours / reference`` of images/s.
    """
    ours(), reference()  # warm-up: allocator, cuDNN autotuning, lazy init
    times = []
    for r in range(rounds):
        # Alternate which path goes first, so neither always follows the other.
        if r % 2:
            t_ref, t_ours = seconds(reference), seconds(ours)
        else:
            t_ours, t_ref = seconds(ours), seconds(reference)
        times.append((t_ours, t_ref))
    t_ours, t_ref = np.array(times).T
    return (float(np.median(n_images / t_ours)), float(np.median(n_images / t_ref)),
            float(np.median(t_ref / t_ours)))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--n-images", type=int, default=8192)
    parser.add_argument("--n-classes", type=int, default=64)
    parser.add_argument("--encoder", choices=("conv4", "mlp"), default="conv4",
                        help="mlp: a cheap step, exposing per-batch loop overhead")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None,
                        help="torch CPU threads for both paths (default: torch's)")
    parser.add_argument("--data-on-device", action="store_true",
                        help="hold the images on the device in both paths (as "
                             "FLOWRClassifier does on a GPU when they fit)")
    args = parser.parse_args(argv)
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(args.device)
    if args.threads is not None:
        torch.set_num_threads(args.threads)

    X, y = make_data(args.n_images, args.n_classes)
    if args.data_on_device:
        X = torch.as_tensor(X, device=device)
    module = make_module(args.encoder, args.n_classes)
    ours = skorch_epoch_fn(module, X, y, device)
    reference = plain_epoch_fn(module, X, y, device)
    skorch_ips, plain_ips, ratio = paired_throughput(ours, reference, args.n_images,
                                                     args.rounds)
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"Sup-E epoch, {args.encoder}, {args.n_images} images 1x28x28, "
          f"{args.n_classes} classes, batch {BATCH_SIZE}, Adam lr {LR}, "
          f"{where}, {torch.get_num_threads()} threads, {args.rounds} rounds, "
          f"images on the {'device' if args.data_on_device else 'host'}")
    print(f"plain torch loop: {plain_ips:,.0f} images/s")
    print(f"skorch SupENet:   {skorch_ips:,.0f} images/s")
    print(f"ratio skorch / plain: {ratio:.3f} (target >= 0.95)")
    overhead = (1 / skorch_ips - 1 / plain_ips) * BATCH_SIZE
    print(f"skorch's extra time per batch: {overhead * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
