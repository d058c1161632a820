"""Run mypy over the installed layout of the package.

scheduler/ and operator/ are installed as berthmaster.scheduler and berthmaster.operator, a
mapping mypy cannot express. This builds a throw-away tree of symlinks in that layout
(.typecheck/berthmaster/{..., scheduler, operator}) and type-checks it, so error paths still
point at the real files.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    tree = ROOT / ".typecheck"
    shutil.rmtree(tree, ignore_errors=True)
    package = tree / "berthmaster"
    package.mkdir(parents=True)
    for entry in (ROOT / "berthmaster").iterdir():
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry)
    (package / "scheduler").symlink_to(ROOT / "scheduler")
    (package / "operator").symlink_to(ROOT / "operator")
    command = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
               str(package)]
    return subprocess.call(command, cwd=tree)


if __name__ == "__main__":
    sys.exit(main())
