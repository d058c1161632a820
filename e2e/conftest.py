"""End-to-end fixtures: a kind cluster with berthmaster installed by the chart.

The suite needs Docker and kind. Where either is missing (or the Docker daemon does not
answer), only test_environment.py runs: it skips with the reason, which pytest prints as one
line (``SKIPPED [1] e2e/test_environment.py:..: e2e needs Docker and kind: ...``), and the
other tests are deselected; nothing runs
and nothing pretends to pass. Where both exist but the cluster is not there, the tests fail and
say to run ``make -C e2e e2e`` (which creates it, builds and loads the image, installs the
chart). kubectl talks to the cluster through the context ``kind-<cluster>``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

ROOT = Path(__file__).resolve().parent.parent
CLUSTER = os.environ.get("BERTHMASTER_E2E_CLUSTER", "berthmaster-e2e")
CONTEXT = os.environ.get("BERTHMASTER_E2E_CONTEXT", f"kind-{CLUSTER}")
NAMESPACE = os.environ.get("BERTHMASTER_E2E_NAMESPACE", "berthmaster-system")
SCHEDULER = os.environ.get("BERTHMASTER_E2E_SCHEDULER", "berthmaster")
T = TypeVar("T")


def why_not_runnable() -> str | None:
    """None when Docker and kind are usable, else what is missing."""
    for tool in ("docker", "kind"):
        if shutil.which(tool) is None:
            return f"{tool} is not on PATH"
    try:
        subprocess.run(["docker", "info"], capture_output=True, check=True, timeout=30)
    except (subprocess.SubprocessError, OSError):
        return "the Docker daemon does not answer (`docker info` failed)"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without Docker and kind, run only the environment check (which skips, saying why)."""
    if why_not_runnable() is None:
        return
    gate = [item for item in items if item.name == "test_docker_and_kind_are_available"]
    others = [item for item in items if item not in gate]
    if others:
        config.hook.pytest_deselected(items=others)
    items[:] = gate


def kubectl_binary() -> str:
    found = shutil.which("kubectl")
    if found:
        return found
    from berthmaster.devcluster.build import binary_path

    return str(binary_path("kubectl"))


class Kind:
    """kubectl against the kind cluster, with JSON in and out."""

    def run(self, *args: str, input: str | None = None, check: bool = True
            ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run([kubectl_binary(), "--context", CONTEXT, *args], input=input,
                                capture_output=True, text=True, timeout=120, check=False)
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)}:\n{result.stderr}")
        return result

    def get(self, *args: str) -> dict[str, Any]:
        found: dict[str, Any] = json.loads(self.run("get", *args, "-o", "json").stdout)
        return found

    def items(self, *args: str) -> list[dict[str, Any]]:
        return list(self.get(*args)["items"])

    def apply(self, text: str, namespace: str | None = None) -> None:
        scope = ["-n", namespace] if namespace else []
        self.run("apply", *scope, "-f", "-", input=text)

    def exists(self, *args: str) -> bool:
        return self.run("get", *args, check=False).returncode == 0


@pytest.fixture(scope="session")
def kind() -> Kind:
    client = Kind()
    probe = client.run("get", "deployments", "-n", NAMESPACE, "-o", "name", check=False)
    if probe.returncode != 0 or "scheduler" not in probe.stdout:
        pytest.fail(f"berthmaster is not installed on kind cluster {CLUSTER!r} (context "
                    f"{CONTEXT}, namespace {NAMESPACE}): run `make -C e2e e2e`\n{probe.stderr}")
    return client


@pytest.fixture
def namespace(kind: Kind) -> Iterator[str]:
    name = f"e2e-{uuid.uuid4().hex[:6]}"
    kind.run("create", "namespace", name)
    try:
        yield name
    finally:
        kind.run("delete", "namespace", name, "--wait=false", check=False)


def wait_for(probe: Callable[[], T | None], what: str, timeout: float = 120) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(1)
