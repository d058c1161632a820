"""Run mypy over the installed layout of the package.

scheduler/ and operator/ are installed as berthmaster.scheduler and berthmaster.operator, a
mapping mypy cannot express. This builds a throw-away tree of symlinks in that layout
(.typecheck/berthmaster/{..., scheduler, operator}, hack/installed_layout.py) and type-checks
it, so error paths still point at the real files.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

# run as a script: PYTHONSAFEPATH=1 keeps hack/ off sys.path, so add it for the sibling module
sys.path.insert(0, str(Path(__file__).resolve().parent))
import installed_layout  # noqa: E402

ROOT = installed_layout.ROOT


def main() -> int:
    tree = ROOT / ".typecheck"
    package = installed_layout.build(tree)
    command = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
               str(package)]
    return subprocess.call(command, cwd=tree)


if __name__ == "__main__":
    sys.exit(main())
