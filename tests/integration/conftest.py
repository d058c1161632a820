"""Fixtures for integration tests: one real control plane per test session.

``cluster`` starts etcd, kube-apiserver, kube-controller-manager and kwok once per pytest session
(building them first if the binary cache is empty) and stops them at the end; ``kube`` is an
admin client; ``namespace`` gives each test a fresh namespace; ``nodes`` creates kwok-managed
fake nodes that are Ready before the test sees them and deleted after it. Every test in this
folder is marked ``integration``.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any

import pytest

from berthmaster.foundation.kube import CORE, KubeClient, KubeError, resource_path
from berthmaster.tooling.devcluster.cluster import ControlPlane, RunningCluster
from berthmaster.tooling.devcluster.nodes import fake_node
from tests.support.namespaces import fresh_namespace
from tests.support.volumes import PinnedVolumes
from tests.support.waiting import wait_for


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "/integration/" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def cluster() -> Iterator[RunningCluster]:
    plane = ControlPlane(f"pytest-{os.getpid()}", say=lambda line: print(line, flush=True))
    running = plane.up()
    try:
        yield running
    finally:
        plane.down(quiet=True)


@pytest.fixture(scope="session")
async def kube(cluster: RunningCluster) -> AsyncIterator[KubeClient]:
    client = await KubeClient.from_kubeconfig(str(cluster.kubeconfig))
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture(scope="module", autouse=True)
async def leave_nodes_as_found(kube: KubeClient) -> AsyncIterator[None]:
    """Each test module leaves the cluster's nodes as it found them.

    Strategies such as RemoveDuplicates or LowNodeUtilization look at every node of the
    cluster, so nodes another module made (a MachineSet's kwok nodes, say) must not outlive it.
    Runs after the module's own fixtures (operators, schedulers) have stopped.
    """
    before = {n["metadata"]["name"]
              for n in (await kube.get(resource_path(CORE, "nodes"))).get("items", [])}
    yield
    for node in (await kube.get(resource_path(CORE, "nodes"))).get("items", []):
        if node["metadata"]["name"] not in before:
            with contextlib.suppress(KubeError):
                await kube.delete(resource_path(CORE, "nodes", name=node["metadata"]["name"]))


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


@pytest.fixture
async def namespace(kube: KubeClient) -> AsyncIterator[str]:
    async with fresh_namespace(kube, unique("t")) as name:
        yield name


LIFECYCLE_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


class NodeFactory:
    """Creates Ready kwok fake nodes and remembers them for clean-up."""

    def __init__(self, kube: KubeClient):
        self.kube = kube
        self.created: list[str] = []

    async def create(
        self,
        name: str | None = None,
        labels: Mapping[str, str] | None = None,
        taints: Sequence[Mapping[str, Any]] | None = None,
        capacity: Mapping[str, str] | None = None,
        zone: str | None = None,
        unschedulable: bool = False,
        wait_ready: bool = True,
    ) -> dict[str, Any]:
        node_name = name or unique("node")
        body = fake_node(node_name, labels=labels, taints=taints, capacity=capacity, zone=zone,
                         unschedulable=unschedulable)
        created = await self.kube.create(resource_path(CORE, "nodes"), body)
        self.created.append(node_name)
        if wait_ready:
            return await wait_for(lambda: self.ready(node_name), timeout=60,
                                  what=f"node {node_name} Ready")
        return created

    async def ready(self, name: str) -> dict[str, Any] | None:
        """The node once Ready and rid of the node-lifecycle controller's ``not-ready`` /
        ``unreachable`` taints (it removes them a moment after Ready turns True; until then a
        scheduler rightly reports the taint instead of what a test is about)."""
        node = await self.kube.get(resource_path(CORE, "nodes", name=name))
        if any(t.get("key") in LIFECYCLE_TAINTS for t in node.get("spec", {}).get("taints") or []):
            return None
        for condition in node.get("status", {}).get("conditions") or []:
            if condition.get("type") == "Ready" and condition.get("status") == "True":
                return node
        return None

    async def delete_all(self) -> None:
        for name in self.created:
            try:
                await self.kube.delete(resource_path(CORE, "nodes", name=name))
            except KubeError as error:
                if not error.not_found:
                    raise


@pytest.fixture
async def nodes(kube: KubeClient) -> AsyncIterator[NodeFactory]:
    factory = NodeFactory(kube)
    try:
        yield factory
    finally:
        await factory.delete_all()


@pytest.fixture
async def volumes(kube: KubeClient, namespace: str) -> AsyncIterator[PinnedVolumes]:
    """Local PersistentVolumes and their claims in the test's namespace, removed on leaving
    (tests/support/volumes.py)."""
    made = PinnedVolumes(kube, namespace)
    try:
        yield made
    finally:
        await made.remove_all()

