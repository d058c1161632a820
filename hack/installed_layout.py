"""The installed layout of the package as a tree of symlinks, for tools that read paths.

setup.py installs the top-level scheduler/ and operator/ folders as ``berthmaster.scheduler``
and ``berthmaster.operator``. Tools that find modules by walking a package's folder (mypy,
grimp under import-linter) cannot see that mapping through the editable install, so this builds
``<tree>/berthmaster/{..., scheduler, operator}`` from symlinks: the tools walk the installed
layout while their messages still name the real files. The mapping is read from setup.py's
``MAPPING`` literal, so it is written in one place.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def package_mapping() -> dict[str, str]:
    """setup.py's ``MAPPING`` (package name -> folder), read without running setup.py."""
    module = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    for node in module.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id == "MAPPING"):
            mapping = ast.literal_eval(node.value)
            assert isinstance(mapping, dict)
            return {str(name): str(folder) for name, folder in mapping.items()}
    raise SystemExit("setup.py: no MAPPING = {...} literal; hack/installed_layout.py reads it")


def build(tree: Path) -> Path:
    """Replace ``tree`` with the installed layout; return the root package's folder in it."""
    shutil.rmtree(tree, ignore_errors=True)
    mapping = package_mapping()
    # parents before children, so a mapped subpackage lands inside its parent's folder
    for name in sorted(mapping, key=lambda package: package.count(".")):
        target = tree.joinpath(*name.split("."))
        source = ROOT / mapping[name]
        if "." in name:
            target.symlink_to(source)
            continue
        target.mkdir(parents=True)
        for entry in source.iterdir():
            if entry.name != "__pycache__":
                (target / entry.name).symlink_to(entry)
    return tree / "berthmaster"
