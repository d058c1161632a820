"""End-to-end fixtures: a cluster (kind, or the local control plane with a real kubelet) with
berthmaster installed by the chart from its image.

``make e2e`` (e2e/run.py) sets the cluster up and runs this suite with
``BERTHMASTER_E2E_KUBECONFIG`` pointing at it and ``BERTHMASTER_E2E_MODE`` saying which kind of
cluster it is. Without them only test_environment.py runs: it skips with the reason, which
pytest prints as one line, and the other tests are deselected; nothing runs and nothing
pretends to pass. The chart's lifecycle test (upgrade, uninstall) runs last: it removes what the
others use.
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
KUBECONFIG = os.environ.get("BERTHMASTER_E2E_KUBECONFIG", "")
MODE = os.environ.get("BERTHMASTER_E2E_MODE", "")
NAMESPACE = os.environ.get("BERTHMASTER_E2E_NAMESPACE", "berthmaster-system")
IMAGE = os.environ.get("BERTHMASTER_E2E_IMAGE", "berthmaster:e2e")
SCHEDULER = os.environ.get("BERTHMASTER_E2E_SCHEDULER", "berthmaster")
T = TypeVar("T")
LAST = ("test_lifecycle.py",)


def why_not_runnable() -> str | None:
    """None when a cluster was set up for the suite, else why not."""
    if KUBECONFIG and Path(KUBECONFIG).is_file():
        return None
    return os.environ.get("BERTHMASTER_E2E_UNAVAILABLE") or (
        "no cluster was set up (BERTHMASTER_E2E_KUBECONFIG is not set)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without a cluster, run only the environment check (which skips, saying why); with one,
    run the chart's lifecycle last."""
    if why_not_runnable() is None:
        items.sort(key=lambda item: Path(str(item.fspath)).name in LAST)
        return
    gate = [item for item in items if item.name == "test_a_cluster_is_available"]
    others = [item for item in items if item not in gate]
    if others:
        config.hook.pytest_deselected(items=others)
    items[:] = gate


def kubectl_binary() -> str:
    found = shutil.which("kubectl")
    if found:
        return found
    from berthmaster.tooling.devcluster.build import binary_path

    return str(binary_path("kubectl"))


def helm_binary() -> str:
    found = shutil.which("helm")
    if found:
        return found
    from berthmaster.tooling.devcluster.build import binary_path

    return str(binary_path("helm"))


class Kind:
    """kubectl against the e2e cluster, with JSON in and out (named for the kind cluster it
    first ran on; the real-kubelet cluster answers the same way)."""

    def run(self, *args: str, input: str | None = None, check: bool = True
            ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run([kubectl_binary(), "--kubeconfig", KUBECONFIG, *args],
                                input=input, capture_output=True, text=True, timeout=120,
                                check=False)
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

    def helm(self, *args: str) -> subprocess.CompletedProcess[str]:
        result = subprocess.run([helm_binary(), "--kubeconfig", KUBECONFIG, *args],
                                capture_output=True, text=True, timeout=600, check=False)
        if result.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)}:\n{result.stderr}")
        return result

    def raw(self, path: str) -> str:
        """GET a path of the API server (a Service's proxy, say), as text."""
        return self.run("get", "--raw", path).stdout


@pytest.fixture(scope="session")
def kind() -> Kind:
    client = Kind()
    probe = client.run("get", "deployments", "-n", NAMESPACE, "-o", "name", check=False)
    if probe.returncode != 0 or "scheduler" not in probe.stdout:
        pytest.fail(f"berthmaster is not installed in namespace {NAMESPACE} of the cluster at "
                    f"{KUBECONFIG}: run `make e2e`\n{probe.stderr}")
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
