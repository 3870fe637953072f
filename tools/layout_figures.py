"""Print the package's layout figures: size, root modules, imports across roles.

Run from the repository root::

    python tools/layout_figures.py            # the figures
    python tools/layout_figures.py --details  # and every offending line

The figures are those the layout is held to: lines of code under
``sklearn_flowr/``, modules at the package root, the longest modules, imports
of another subpackage's private module (the ``_core`` maths excepted),
assignments to another object's underscore attributes, classes named
``*Config`` and how many numpydoc entries document ``sigma``.
"""

import argparse
import ast
import re
from pathlib import Path

PACKAGE = "sklearn_flowr"
SHARED_MATHS = "_core"
MAX_MODULE_LINES = 500
SIGMA_ENTRY = re.compile(r"^\s*(\w+\s*,\s*)*sigma(\s*,\s*\w+)*\s+:\s")


def modules(root):
    return sorted(p for p in (root / PACKAGE).rglob("*.py"))


def role_of(parts):
    """The subpackage a module belongs to; root modules share the package's."""
    return parts[1] if len(parts) > 2 else parts[0]


def resolve(module_parts, node):
    """The dotted parts of the module a ``from ... import`` names."""
    if node.level == 0:
        return (node.module or "").split(".")
    package = list(module_parts[:-1])
    base = package[: len(package) - (node.level - 1)]
    return base + (node.module.split(".") if node.module else [])


def private_imports(root, path):
    parts = path.relative_to(root).with_suffix("").parts
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        target = resolve(parts, node)
        if not target or target[0] != PACKAGE:
            continue
        is_subpackage = len(target) > 1 and (root / PACKAGE / target[1]).is_dir()
        target_role = target[1] if is_subpackage else PACKAGE
        if len(target) >= 2 and target[1] == SHARED_MATHS:
            continue
        if target_role == role_of(parts):
            continue
        private_module = any(p.startswith("_") and not p.startswith("__")
                             for p in target[1:])
        private_name = any(a.name.startswith("_") for a in node.names)
        if private_module or private_name:
            found.append(f"{path.relative_to(root)}:{node.lineno}: "
                         f"from {'.'.join(target)} import "
                         f"{', '.join(a.name for a in node.names)}")
    return found


def foreign_underscore_writes(root, path):
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        for target in targets:
            if (isinstance(target, ast.Attribute)
                    and target.attr.startswith("_")
                    and not target.attr.startswith("__")
                    and not (isinstance(target.value, ast.Name)
                             and target.value.id in ("self", "cls"))):
                found.append(f"{path.relative_to(root)}:{node.lineno}: "
                             f"{ast.unparse(target)} = ...")
    return found


def measure(root):
    """The layout's figures for the repository at ``root``, as a dict."""
    root = Path(root).resolve()
    files = modules(root)
    lines = {p: len(p.read_text().splitlines()) for p in files}
    root_modules = [p for p in files if p.parent == root / PACKAGE]
    long_modules = sorted((n, p) for p, n in lines.items() if n > MAX_MODULE_LINES)
    imports = [f for p in files for f in private_imports(root, p)]
    writes = [f for p in files for f in foreign_underscore_writes(root, p)]
    configs = [f"{p.relative_to(root)}:{n.lineno}: class {n.name}"
               for p in files for n in ast.walk(ast.parse(p.read_text()))
               if isinstance(n, ast.ClassDef) and n.name.endswith("Config")]
    sigma_docs = [f"{p.relative_to(root)}:{i}" for p in files
                  for i, line in enumerate(p.read_text().splitlines(), 1)
                  if SIGMA_ENTRY.match(line)]
    return dict(lines=lines, root_modules=root_modules, long_modules=long_modules,
                private_imports=imports, foreign_writes=writes,
                config_classes=configs, sigma_docs=sigma_docs)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=".", help="repository root")
    parser.add_argument("--details", action="store_true",
                        help="list each offending import, write and module")
    args = parser.parse_args(argv)
    root = Path(args.root).resolve()
    figures = measure(root)
    lines, root_modules = figures["lines"], figures["root_modules"]
    long_modules, imports = figures["long_modules"], figures["private_imports"]
    writes, configs = figures["foreign_writes"], figures["config_classes"]
    sigma_docs = figures["sigma_docs"]
    files = list(lines)
    longest = max(lines.items(), key=lambda item: item[1])
    print(f"lines in {PACKAGE}/:                 {sum(lines.values())}")
    print(f"modules:                            {len(files)}")
    print(f"modules at the package root:        {len(root_modules)}")
    print(f"longest module:                     {longest[1]} "
          f"({longest[0].relative_to(root)})")
    print(f"modules over {MAX_MODULE_LINES} lines:             {len(long_modules)}")
    print(f"cross-subpackage private imports:   {len(imports)}")
    print(f"writes to another object's _attrs:  {len(writes)}")
    print(f"*Config classes:                    {len(configs)}")
    print(f"numpydoc entries for sigma:         {len(sigma_docs)}")
    if args.details:
        for title, rows in [
            ("root modules", [str(p.relative_to(root)) for p in root_modules]),
            ("long modules", [f"{n} {p.relative_to(root)}" for n, p in long_modules]),
            ("private imports", imports), ("foreign writes", writes),
            ("config classes", configs), ("sigma entries", sigma_docs)]:
            print(f"\n{title}:")
            for row in rows:
                print(f"  {row}")


if __name__ == "__main__":
    main()
