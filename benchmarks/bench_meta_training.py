"""Meta-training throughput: FLOWR's ``EpisodicMetaNet`` vs a hand-written loop.

Run with ``python benchmarks/bench_meta_training.py`` (options below). Both
paths train the same :class:`~sklearn_flowr.training.FLOWRMetaModule` (a Conv4
encoder, same initial weights) on the same small-context episodes -- the paper's
shape by default: 40 support classes of U{1..10} shots, 10 unknown-unknown
classes, 5 query rows per class -- drawn by the same
:class:`~sklearn_flowr.training.EpisodeDataset` with the training images held
on the device (as ``FLOWRClassifier`` holds them when they fit), with the same
loss (:func:`~sklearn_flowr.training.meta_training_loss`) and Adam at 1e-4.

- "FLOWR": ``EpisodicMetaNet.partial_fit`` over the dataset (skorch's loop:
  ``DataLoader``, callbacks, history, one loss read per episode).
- "hand-written": a plain loop that draws the same episode indices, gathers
  the rows on the device and takes the step, reading the loss once at the end.
- "host data" (``--host-data``): FLOWR's path with the images on the host, a
  gather and a host-to-device copy per episode (the code before the
  device-resident dataset).

The paths alternate one epoch each per round after a warm-up; the ratio is the
median of the per-round ratios (the machines are shared and noisy). The last
line projects the paper's schedule (60 epochs x 1,000 episodes) from FLOWR's
episodes per second.
"""

import argparse
import copy
import time

import numpy as np
import torch

from sklearn_flowr.encoders import Conv4
from sklearn_flowr.training import EpisodeDataset, EpisodicMetaNet, FLOWRMetaModule
from sklearn_flowr.training import meta_training_loss as flowr_loss
from sklearn_flowr.training._device import (
    deterministic_cuda,
    to_device,
    to_device_if_fits,
)

LR = 1e-4


def make_data(n_classes, per_class, size, seed=0):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(n_classes), per_class)
    X = rng.random((y.shape[0], 1, size, size), dtype=np.float32)
    return X, y


def make_module(size, seed=0):
    torch.manual_seed(seed)
    encoder = Conv4(in_channels=1, embedding_dim=64, input_size=(size, size))
    return FLOWRMetaModule(encoder, prior_var=1.0)


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def flowr_epoch_fn(module, episodes, device, autocast, options):
    callbacks = []
    if options.progress:
        from skorch.callbacks import ProgressBar

        callbacks = [("progress", ProgressBar(batches_per_epoch=len(episodes)))]
    net = EpisodicMetaNet(module=copy.deepcopy(module), lr=LR, max_epochs=1,
                          device=str(device), verbose=int(options.progress),
                          callbacks=callbacks, autocast=autocast,
                          compile=options.compile,
                          optimizer__fused=options.fused_adam or None)
    net.initialize()

    def epoch():
        net.partial_fit(episodes)
        synchronize(device)

    return epoch


def plain_epoch_fn(module, episodes, device, autocast, options):
    model = copy.deepcopy(module).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=LR,
                                 fused=options.fused_adam or None)
    X = torch.as_tensor(episodes.X, device=device)
    forward, loss_fn = model, flowr_loss
    if options.compile:
        forward, loss_fn = torch.compile(model), torch.compile(flowr_loss)

    def epoch():
        model.train()
        total = torch.zeros((), device=device)
        for index in range(len(episodes)):
            rows, labels, n_support = episodes.sample_indices(index)
            x = X[to_device(rows, device)]
            labels = torch.as_tensor(labels)
            with torch.autocast(device.type, dtype=autocast,
                                enabled=autocast is not None):
                z = forward(x)
            z = z.float()
            n_way = int(labels[:n_support].max()) + 1
            loss = loss_fn(z[:n_support], labels[:n_support], z[n_support:],
                              labels[n_support:], n_way, **model.episode_params())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.detach()
        float(total)
        synchronize(device)

    return epoch


def count_syncs(module, episodes, device):
    """Host-device synchronisations in one FLOWR training episode (CUDA)."""
    import warnings

    net = EpisodicMetaNet(module=copy.deepcopy(module), lr=LR, device=str(device),
                          verbose=0).initialize()
    net.train_step_single(episodes[0])  # warm-up: lazy initialisation
    torch.cuda.synchronize(device)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            net.train_step_single(episodes[1])
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return [str(w.message).splitlines()[0] for w in caught]


def profile_episodes(module, episodes, device, n_episodes=30):
    """Where an episode's time goes: host (CPU) vs device (CUDA) per op."""
    from torch.profiler import ProfilerActivity, profile

    net = EpisodicMetaNet(module=copy.deepcopy(module), lr=LR, device=str(device),
                          verbose=0).initialize()
    for i in range(3):
        net.train_step_single(episodes[i])
    synchronize(device)
    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    start = time.perf_counter()
    with profile(activities=activities) as prof:
        for i in range(n_episodes):
            net.train_step_single(episodes[i])
        synchronize(device)
    wall = (time.perf_counter() - start) / n_episodes * 1e3
    events = prof.key_averages()
    sort = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    print(f"profile: {wall:.2f} ms per episode (profiled)")
    print(events.table(sort_by=sort, row_limit=12, max_name_column_width=40))
    if device.type == "cuda":
        busy = sum(e.self_device_time_total for e in events) / n_episodes / 1e3
        print(f"device busy {busy:.2f} ms per episode")


def seconds(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--n-way", type=int, default=40)
    parser.add_argument("--n-unknown", type=int, default=10)
    parser.add_argument("--n-query", type=int, default=5)
    parser.add_argument("--episodes", type=int, default=200,
                        help="episodes per round (one 'epoch')")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--image-size", type=int, default=28)
    parser.add_argument("--n-classes", type=int, default=224)
    parser.add_argument("--per-class", type=int, default=40)
    parser.add_argument("--autocast", choices=("none", "bf16"), default="none")
    parser.add_argument("--compile", action="store_true",
                        help="torch.compile the module and loss in both paths")
    parser.add_argument("--fused-adam", action="store_true",
                        help="Adam(fused=True) in both paths (CUDA)")
    parser.add_argument("--deterministic", action="store_true",
                        help="cuDNN deterministic algorithms (as FLOWRClassifier "
                             "trains)")
    parser.add_argument("--progress", action="store_true",
                        help="FLOWR with its default verbose=1 (epoch table and "
                             "tqdm bar over episodes)")
    parser.add_argument("--profile", action="store_true",
                        help="print torch.profiler's per-op host and device times")
    parser.add_argument("--host-data", action="store_true",
                        help="also time FLOWR with the images on the host")
    args = parser.parse_args(argv)
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(args.device)
    autocast = torch.bfloat16 if args.autocast == "bf16" else None

    X, y = make_data(args.n_classes, args.per_class, args.image_size)
    common = dict(n_way=args.n_way, n_unknown=args.n_unknown, n_query=args.n_query,
                  n_episodes=args.episodes, random_state=0)
    on_device = EpisodeDataset(to_device_if_fits(X, device), y, **common)
    module = make_module(args.image_size)
    paths = {"FLOWR": flowr_epoch_fn(module, on_device, device, autocast, args),
             "hand-written": plain_epoch_fn(module, on_device, device, autocast,
                                            args)}
    if args.host_data:
        paths["host data"] = flowr_epoch_fn(module, EpisodeDataset(X, y, **common),
                                            device, autocast, args)
    if device.type == "cuda":
        syncs = count_syncs(module, on_device, device)
        print(f"host-device synchronisations in one FLOWR episode step: "
              f"{len(syncs)}", *syncs, sep="\n  ")
    if args.profile:
        profile_episodes(module, on_device, device)
    times = {name: [] for name in paths}
    names = list(paths)
    with deterministic_cuda(args.deterministic):
        for name, fn in paths.items():
            print(f"warm-up {name}: {seconds(fn):.1f} s", flush=True)
        for r in range(args.rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:
                times[name].append(seconds(paths[name]))
    rate = {name: args.episodes / np.median(t) for name, t in times.items()}
    ratio = float(np.median(np.array(times["hand-written"]) / np.array(times["FLOWR"])))
    rows = args.n_way * 5.5 + (args.n_way + args.n_unknown) * args.n_query
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"meta-training, Conv4 {args.image_size}x{args.image_size}, {args.n_way}-way "
          f"+ {args.n_unknown} unknown, {args.n_query} queries/class (~{rows:.0f} "
          f"images/episode), {args.episodes} episodes x {args.rounds} rounds, "
          f"autocast {args.autocast}, compile {args.compile}, fused Adam "
          f"{args.fused_adam}, deterministic {args.deterministic}, progress "
          f"{args.progress}, {where}")
    for name, value in rate.items():
        print(f"{name:>13}: {value:8.1f} episodes/s")
    print(f"ratio FLOWR / hand-written: {ratio:.3f}")
    minutes = 60 * 1000 / rate["FLOWR"] / 60
    print(f"paper schedule (60 x 1,000 episodes) at FLOWR's rate: {minutes:.1f} min")


if __name__ == "__main__":
    main()
