"""Frozen EfficientNet-Lite0 features of kanji, icons, fashion-mnist or a
folder of your own images, for ``benchmarks/frozen_features.py``.

The package's EfficientNet-Lite0 with its ImageNet weights (the
``efficientnet`` extra's wheel), no projection: each image, upsampled to
64 x 64 and scaled as the network was trained, gives its globally pooled
1280-d feature vector. Nothing is downloaded; every data set comes from what
Debian or PyPI packages installed (kanji: its fonts; icons: the icon themes
:func:`~sklearn_flowr.datasets.load_icon_themes` names; fashion-mnist:
``dataset-fashion-mnist``). Deterministic: the same files give the same
features (one torch thread, fixed row choice).

The output ``.npz`` holds ``Z`` (n_samples, 1280) float32, ``y`` the class of
each row and ``g`` its rendering (kanji: the drawing; icons: the theme's place
among the class's four; fashion-mnist: 0, one rendering; a folder: the
image's place among its class's, by file path, so that split ``s`` of the
benchmark holds out every class's ``s``-th image).

Run: ``OMP_NUM_THREADS=1 python tools/extract_features.py kanji --out
feats/kanji.npz`` (also ``icons``, ``fashion``; ``icons --themes
breeze,gnome,...`` reads those themes only; ``folder --root PATH`` reads
``PATH/<class>/<images>``, colour, resized to ``--image-size``).
"""

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from sklearn_flowr.encoders import EfficientNetLite0Encoder


def images(name: str, cache_dir=None, themes=None, root=None, image_size=64):
    """``(images, y, g)``: uint8 images (n, H, W) or (n, H, W, 3); ``themes``:
    the icon themes to read (None: the loader's); ``root``: the folder's tree
    (``name="folder"``), its images resized to ``image_size``."""
    from sklearn_flowr import datasets

    if name == "folder":
        if root is None:
            raise ValueError("folder needs --root: the tree root/<class>/<images>.")
        data = datasets.load_image_folder(root, image_size=image_size, mode="RGB")
        return data.data, data.target, place_in_class(data.target)

    if name == "kanji":
        data = datasets.load_kanji(split="all", n_instances=4, max_classes=2000,
                                   image_size=32, cache_dir=cache_dir)
        return data.data, data.target, data.instance
    if name == "icons":
        data = datasets.load_icon_themes(split="all", image_size=64, max_themes=4,
                                         themes=themes, cache_dir=cache_dir)
        # Split s of the benchmark holds out every class's s-th theme.
        return data.data, data.target, place_in_class(data.target)
    if name == "fashion":
        data = datasets.load_fashion_mnist(subset="test")
        rng = np.random.default_rng(0)
        rows = np.concatenate([rng.choice(np.flatnonzero(data.target == c), 300,
                                          replace=False) for c in range(10)])
        return data.data[rows], data.target[rows], np.zeros(len(rows), dtype=int)
    raise ValueError(f"Unknown data set {name!r}: kanji, icons, fashion or folder.")


def place_in_class(target):
    """Each row's place among the rows of its class, 0, 1, ... in row order
    (``target`` sorted, as the loaders return it)."""
    return np.arange(len(target)) - np.searchsorted(target, target)


def features(pixels: np.ndarray, batch_size: int = 128) -> np.ndarray:
    """Pooled 1280-d features of uint8 images, (n, 1280) float32."""
    colour = pixels.ndim == 4
    encoder = EfficientNetLite0Encoder(3 if colour else 1, embedding_dim=None).eval()
    out = []
    with torch.no_grad():
        for start in range(0, len(pixels), batch_size):
            x = torch.from_numpy(np.ascontiguousarray(
                pixels[start:start + batch_size])).float() / 255.0
            x = x.permute(0, 3, 1, 2) if colour else x[:, None]
            out.append(encoder.features(x).numpy())
    return np.concatenate(out).astype(np.float32)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", choices=("kanji", "icons", "fashion", "folder"))
    parser.add_argument("--out", required=True, help="the .npz to write")
    parser.add_argument("--cache-dir", default=None,
                        help="the loaders' cache of rendered images")
    parser.add_argument("--themes", default=None,
                        help="icons: comma-separated icon themes (default: the "
                        "loader's ten)")
    parser.add_argument("--root", default=None,
                        help="folder: the tree root/<class>/<image files>")
    parser.add_argument("--image-size", type=int, default=64,
                        help="folder: the side images are resized to (default 64, "
                        "as the icons; photos keep more at 224, slower)")
    args = parser.parse_args(argv)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)  # before the slow part
    themes = None if args.themes is None else args.themes.split(",")
    torch.set_num_threads(1)
    start = time.perf_counter()
    X, y, g = images(args.name, args.cache_dir, themes, args.root, args.image_size)
    Z = features(X)
    np.savez(args.out, Z=Z, y=y, g=g)
    print(f"{args.name}: {Z.shape} features of {X.shape} images in "
          f"{time.perf_counter() - start:.0f} s -> {args.out}")


if __name__ == "__main__":
    main()
