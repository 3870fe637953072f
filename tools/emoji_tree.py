"""An image-folder tree of emoji drawn by several vendors, from the npm
packages ``emoji-datasource-<vendor>``, for ``tools/extract_features.py folder``.

Each package (a ``.tgz`` as ``npm pack`` saves it) holds one PNG per emoji in
the vendor's style (``package/img/<vendor>/<size>/<codepoints>.png``). The
tree has one folder per emoji that every given vendor draws, named by its
code points, holding one image per vendor (``<vendor>.png``), so a split of
``benchmarks/frozen_features.py`` holds out one vendor's style. Skin-tone
variants (code points U+1F3FB-U+1F3FF) are left out: they differ from their
base emoji by colour only. Nothing is downloaded here and nothing from the
archives runs: the PNG members are read by name and written under ``--out``.

Run::

    for v in apple facebook google twitter; do
        npm pack emoji-datasource-$v@16.0.0
    done
    python tools/emoji_tree.py emoji-datasource-*.tgz --out emoji-tree
"""

import argparse
import re
import tarfile
from pathlib import Path

_PACKAGE = re.compile(r"emoji-datasource-([a-z]+)")
_CODEPOINTS = re.compile(r"[0-9a-f]{2,6}(-[0-9a-f]{2,6})*")
SKIN_TONES = ("1f3fb", "1f3fc", "1f3fd", "1f3fe", "1f3ff")


def vendor_of(archive):
    """The vendor a package's file name names."""
    match = _PACKAGE.search(Path(archive).name)
    if match is None:
        raise ValueError(f"{archive!r} is not named emoji-datasource-<vendor>"
                         "[-version].tgz, as npm pack saves it.")
    return match.group(1)


def vendor_images(archive, size=64):
    """``{code points: PNG bytes}`` of one package and its vendor's name."""
    vendor = vendor_of(archive)
    prefix = f"package/img/{vendor}/{size}/"
    images = {}
    with tarfile.open(archive, "r:gz") as tar:
        for member in tar:
            name = member.name
            if not (member.isfile() and name.startswith(prefix)
                    and name.endswith(".png")):
                continue
            codepoints = name[len(prefix):-len(".png")]
            if _CODEPOINTS.fullmatch(codepoints):
                images[codepoints] = tar.extractfile(member).read()
    if not images:
        raise ValueError(f"{archive!r} holds no {prefix}*.png.")
    return vendor, images


def build_tree(archives, out, size=64):
    """Write ``out/<code points>/<vendor>.png`` for the emoji every archive's
    vendor draws, skin tones left out; the number of emoji."""
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise ValueError(f"--out {str(out)!r} is not empty: its old folders "
                         "would be read as emoji too. Give a new folder.")
    vendors, sources = {}, {}
    for archive in archives:
        vendor, images = vendor_images(archive, size)
        if vendor in vendors:
            raise ValueError(f"{sources[vendor]!r} and {archive!r} are both "
                             f"{vendor}'s: give each vendor once.")
        vendors[vendor], sources[vendor] = images, archive
    if len(vendors) < 2:
        raise ValueError("Give two or more vendors' packages: a class needs "
                         "several renderings.")
    common = set.intersection(*(set(images) for images in vendors.values()))
    kept = sorted(c for c in common if not any(t in c.split("-") for t in SKIN_TONES))
    for codepoints in kept:
        folder = out / codepoints
        folder.mkdir(parents=True, exist_ok=True)
        for vendor, images in vendors.items():
            (folder / f"{vendor}.png").write_bytes(images[codepoints])
    return len(kept)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("archives", nargs="+",
                        help="emoji-datasource-<vendor>-<version>.tgz files")
    parser.add_argument("--out", required=True, help="the tree's root folder")
    parser.add_argument("--size", type=int, default=64,
                        help="the packages' image size to read (default 64)")
    args = parser.parse_args(argv)
    count = build_tree(args.archives, args.out, args.size)
    vendors = sorted(vendor_of(archive) for archive in args.archives)
    print(f"{count} emoji x {len(vendors)} vendors ({', '.join(vendors)}) "
          f"-> {args.out}")


if __name__ == "__main__":
    main()
