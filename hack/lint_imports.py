"""Check the import layers (the import-linter contracts in pyproject.toml) on the installed layout.

grimp, which builds import-linter's graph, finds a package by walking its folder; through the
editable install it would see only berthmaster/ and miss berthmaster.scheduler and
berthmaster.operator (setup.py maps them from other folders). So this builds the installed
layout as symlinks (hack/installed_layout.py) in .importlinter-tree/ and runs import-linter
from inside it (import-linter puts its working directory first on sys.path; the checkout's own
berthmaster/ folder would otherwise be the package it reads). Usage: hack/lint_imports.py [--contract ID ...] [--verbose].
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from pathlib import Path

# run as a script: PYTHONSAFEPATH=1 keeps hack/ off sys.path, so add it for the sibling module
sys.path.insert(0, str(Path(__file__).resolve().parent))
import installed_layout  # noqa: E402

ROOT = installed_layout.ROOT


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contract", action="append", default=[], help="check only this id")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    tree = ROOT / ".importlinter-tree"
    package = installed_layout.build(tree)
    # import-linter puts the working directory first on sys.path; the editable install's finder
    # is appended to sys.meta_path, so that path entry wins
    os.chdir(tree)
    sys.path.insert(0, str(tree))
    spec = importlib.util.find_spec("berthmaster")
    if spec is None or spec.origin is None or Path(spec.origin).parent != package:
        raise SystemExit(f"berthmaster resolves to {spec and spec.origin}, not {package}: "
                         "the import graph would miss berthmaster.scheduler/operator")
    from importlinter.cli import lint_imports

    return lint_imports(config_filename=str(ROOT / "pyproject.toml"),
                        limit_to_contracts=tuple(args.contract), no_cache=True,
                        verbose=args.verbose)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
