"""The children tooling and tests start (berthmaster/tooling/python.py) import the standard
library's ``operator`` even when started from the checkout's root without ``PYTHONSAFEPATH``,
where the checkout's ``operator/`` folder would otherwise shadow it. The probes run with
``-S``: a ``site`` that imports ``operator`` on its way (Python 3.11's does, through
``collections``) hides the shadowing for the rest of that process, so only the modules imported
before it would show it; without ``site`` every import goes through ``sys.path``."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from berthmaster.tooling.python import BERTHMASTER_CLI, PYTHON

ROOT = Path(__file__).resolve().parents[3]
PROBE = "import operator; print(operator.__file__)"


def _without_safe_path() -> dict[str, str]:
    return {key: value for key, value in os.environ.items() if key != "PYTHONSAFEPATH"}


def test_the_checkout_root_would_shadow_operator_without_the_flag() -> None:
    assert (ROOT / "operator" / "__init__.py").exists()
    bare = subprocess.run([PYTHON[0], "-S", "-c", PROBE], cwd=ROOT, env=_without_safe_path(),
                          capture_output=True, text=True, timeout=60, check=True)
    assert Path(bare.stdout.strip()).parent == ROOT / "operator"


def test_a_child_python_imports_the_standard_librarys_operator() -> None:
    child = subprocess.run([*PYTHON, "-S", "-c", PROBE], cwd=ROOT, env=_without_safe_path(),
                           capture_output=True, text=True, timeout=60, check=True)
    assert Path(child.stdout.strip()).parent != ROOT / "operator"


def test_the_cli_starts_from_the_checkout_root_without_the_variable() -> None:
    child = subprocess.run([*BERTHMASTER_CLI, "version"], cwd=ROOT, env=_without_safe_path(),
                           capture_output=True, text=True, timeout=120, check=False)
    assert child.returncode == 0, child.stderr
