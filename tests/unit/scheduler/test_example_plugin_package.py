"""examples/plugins/licensed-nodes stays a working package: its own tests (on
berthmaster.scheduler.testing) pass with the package discoverable as ``pip install`` makes it
(a dist-info with its entry point on the path: tests/support/plugins.py), and its
pyproject.toml declares the entry point those tests rely on."""

from __future__ import annotations

import os
import subprocess
import tomllib
from pathlib import Path

from berthmaster.tooling.python import PYTHON
from tests.support import plugins

REPO = Path(__file__).resolve().parents[3]


def test_the_pyproject_declares_the_entry_point() -> None:
    project = tomllib.loads((plugins.EXAMPLE / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["berthmaster.plugins"] == plugins.EXAMPLE_ENTRY_POINTS


def test_the_examples_own_tests_pass(tmp_path: Path) -> None:
    site = tmp_path / "site"
    plugins.write_distribution(site, "berthmaster-licensed-nodes", plugins.EXAMPLE_ENTRY_POINTS)
    environment = {**os.environ,
                   "PYTHONPATH": os.pathsep.join([str(site), str(plugins.EXAMPLE / "src")])}
    result = subprocess.run(
        [*PYTHON, "-m", "pytest", str(plugins.EXAMPLE / "tests"), "-q",
         "-p", "no:cacheprovider"],
        cwd=REPO, capture_output=True, text=True, timeout=120, env=environment, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 passed" in result.stdout
