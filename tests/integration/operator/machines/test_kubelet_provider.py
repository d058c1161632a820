"""Machines that are real kubelets on this host, on the real API server.

The operator runs as a process on the host (``BERTHMASTER_MACHINE_PROVIDERS=kubelet``, the
cluster's CA from ``BERTHMASTER_KUBELET_PKI``), as the provider requires; kube-scheduler (the
dev cluster's default-scheduler configuration: only nodes labelled ``berthmaster.io/node:
kubelet``) places the pods, which really run in each node's containerd (the pause image the
provider imports). Needs root, containerd, runc and the CNI plugins (``hack/docker-up.sh``) and
the kubelet (built here when missing, as ``berthmaster dev up --kubelets 1`` builds it), so the
file is marked ``long``: ``make test-long`` runs it, and CI runs that as root after
``hack/docker-up.sh``; nothing here is skipped there.

Upstream behaviour checked: machine-api-operator pkg/controller/machineset/controller.go (a
MachineSet creates Machines up to its replicas and replaces a deleted one), pkg/controller/
machine/controller.go (preDrain hooks hold the drain; the drain evicts the Node's pods; the
instance is deleted, then the Node), pkg/controller/machinehealthcheck/
machinehealthcheck_controller.go (a Node Ready=Unknown longer than the condition's timeout
has its Machine deleted), kubernetes pkg/controller/nodelifecycle (a Node whose kubelet stops
renewing its lease goes Ready=Unknown after --node-monitor-grace-period).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from berthmaster.foundation.kube import CORE, KubeClient, group_path, resource_path
from berthmaster.operator.machines import api
from berthmaster.operator.machines.healthcheck import mhc_path
from berthmaster.tooling.devcluster import build, host_nodes
from berthmaster.tooling.devcluster import kubelet as node
from berthmaster.tooling.devcluster.cluster import RunningCluster
from berthmaster.tooling.devcluster.images import PAUSE_IMAGE
from berthmaster.tooling.devcluster.ports import free_port
from berthmaster.tooling.kubelet_provider import provider_id
from tests.integration.operator.machines.conftest import (
    OperatorProcess,
    condition,
    get_machine,
    machine_events,
    set_hooks,
)
from tests.support.waiting import wait_for

pytestmark = pytest.mark.long

HOOK = ("hold-for-test", "kubelet-test")
CRDS = Path(__file__).resolve().parents[4] / "deploy" / "crds"
AUTOSCALING = group_path("autoscaling.openshift.io", "v1")
AUTOSCALING_BETA = group_path("autoscaling.openshift.io", "v1beta1")
APPS = "/apis/apps/v1"


def kubelet_machineset(name: str, replicas: int) -> dict[str, Any]:
    labels = {api.MACHINESET_LABEL: name}
    return {"apiVersion": api.API_VERSION, "kind": "MachineSet", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {
                         "metadata": {"labels": {"node-role.kubernetes.io/worker": ""}},
                         "providerSpec": {"value": {
                             "apiVersion": "berthmaster.io/v1alpha1",
                             "kind": "KubeletMachineProviderSpec", "maxPods": 20}}}}}}


def pause_deployment(name: str, replicas: int) -> dict[str, Any]:
    """Pods that really run: the pause process, one per node when nodes allow."""
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {
                         "terminationGracePeriodSeconds": 1,
                         "affinity": {"podAntiAffinity": {
                             "preferredDuringSchedulingIgnoredDuringExecution": [{
                                 "weight": 100, "podAffinityTerm": {
                                     "labelSelector": {"matchLabels": labels},
                                     "topologyKey": "kubernetes.io/hostname"}}]}},
                         "containers": [{"name": "pause", "image": PAUSE_IMAGE,
                                         "imagePullPolicy": "Never"}]}}}}


@pytest.fixture(scope="module")
def host_ready() -> None:
    problems = host_nodes.host_problems()
    if build.missing_binaries(("kubelet",)):
        build.build_node()
        problems = host_nodes.host_problems()
    assert not problems, "this host cannot run real kubelets: " + "; ".join(problems)


@pytest.fixture(scope="module")
def scheduler(machine_api: RunningCluster, tmp_path_factory: pytest.TempPathFactory
              ) -> Iterator[None]:
    """kube-scheduler as the dev cluster's default scheduler (real nodes only)."""
    work = tmp_path_factory.mktemp("scheduler")
    config = work / "kube-scheduler.yaml"
    config.write_text(yaml.safe_dump(node.default_scheduler_config(machine_api.kubeconfig)))
    with (work / "kube-scheduler.log").open("ab") as log:
        process = subprocess.Popen(
            [str(build.binary_path("kube-scheduler")), f"--config={config}",
             f"--authentication-kubeconfig={machine_api.kubeconfig}",
             f"--authorization-kubeconfig={machine_api.kubeconfig}",
             "--bind-address=127.0.0.1", f"--secure-port={free_port()}"],
            stdout=log, stderr=subprocess.STDOUT)
    try:
        yield
    finally:
        process.terminate()
        process.wait(timeout=30)


def state_dir(cluster: RunningCluster) -> Path:
    return cluster.root / "kubelet-machines"


def host_operator(machine_api: RunningCluster, tmp_path: Path, request: pytest.FixtureRequest,
                  capabilities: tuple[str, ...], args: tuple[str, ...] = (),
                  env: dict[str, str] | None = None) -> Iterator[OperatorProcess]:
    """The operator on the host with the kubelet provider; afterwards, every node it started
    is gone (the test deleted its MachineSets; anything left is removed here and fails)."""
    process = OperatorProcess(
        str(machine_api.kubeconfig), tmp_path / "operator.log", capabilities, args,
        env={"BERTHMASTER_MACHINE_PROVIDERS": "kubelet",
             "BERTHMASTER_KUBELET_PKI": str(machine_api.root / "pki"),
             "BERTHMASTER_KUBELET_STATE": str(state_dir(machine_api)), **(env or {})})
    process.start()
    try:
        yield process
    finally:
        process.stop()
        nodes = host_nodes.HostNodes(state_dir(machine_api))
        report = getattr(request.node, "rep_call", None)
        if report is not None and report.failed:
            print("---- operator log (tail) ----\n" + process.log()[-8000:])
            print(machine_api.kubectl("get", "machines,nodes,pods", "-A", "-o", "wide").stdout)
            for layout in nodes.layouts().values():
                log = layout.root / "logs" / "kubelet.log"
                if log.exists():
                    print(f"---- {log} (tail) ----\n" + log.read_text(errors="replace")[-3000:])
        left = sorted(nodes.layouts())
        for name in left:
            nodes.remove(name)
        assert not left, f"real nodes left behind by the test: {left}"


@pytest.fixture
def real_operator(machine_api: RunningCluster, host_ready: None, scheduler: None,
                  tmp_path: Path, request: pytest.FixtureRequest
                  ) -> Iterator[OperatorProcess]:
    yield from host_operator(machine_api, tmp_path, request,
                             ("machines", "machinehealthchecks"))


@pytest.fixture
def operator_without_ca(machine_api: RunningCluster, tmp_path: Path,
                        request: pytest.FixtureRequest) -> Iterator[OperatorProcess]:
    yield from host_operator(machine_api, tmp_path, request, ("machines",),
                             env={"BERTHMASTER_KUBELET_PKI": ""})


@pytest.fixture
def autoscaling_operator(machine_api: RunningCluster, host_ready: None, scheduler: None,
                         tmp_path: Path, request: pytest.FixtureRequest
                         ) -> Iterator[OperatorProcess]:
    for crd in ("autoscaling.openshift.io_clusterautoscalers.yaml",
                "autoscaling.openshift.io_machineautoscalers.yaml"):
        applied = machine_api.kubectl("apply", "--server-side", "-f", str(CRDS / crd))
        assert applied.returncode == 0, applied.stderr
    for crd in ("clusterautoscalers", "machineautoscalers"):
        established = machine_api.kubectl("wait", "--for=condition=Established",
                                          f"crd/{crd}.autoscaling.openshift.io",
                                          "--timeout=60s")
        assert established.returncode == 0, established.stderr
    yield from host_operator(machine_api, tmp_path, request, ("machines", "autoscaler"),
                             env={"BERTHMASTER_AUTOSCALER_SCAN_INTERVAL": "2"})


async def machines_of(kube: KubeClient, namespace: str, machineset: str
                      ) -> list[dict[str, Any]]:
    items, _ = await kube.list_all(api.machine_path(namespace),
                                   labelSelector=f"{api.MACHINESET_LABEL}={machineset}")
    return items


def ready(node_object: dict[str, Any] | None) -> bool:
    return condition(node_object, "Ready").get("status") == "True"


async def ready_nodes(kube: KubeClient, namespace: str, machineset: str, count: int
                      ) -> list[str] | None:
    """The Nodes of ``count`` Running, undeleted Machines of the set, when all are Ready."""
    names = []
    for machine in await machines_of(kube, namespace, machineset):
        status = machine.get("status") or {}
        if status.get("phase") == api.FAILED:
            raise RuntimeError(f"machine {machine['metadata']['name']} Failed: "
                               f"{status.get('errorMessage')}")
        ref = status.get("nodeRef") or {}
        if machine["metadata"].get("deletionTimestamp") or not ref:
            continue
        found = await kube.get_if_exists(api.node_path(ref["name"]))
        if ready(found) and (found or {}).get("spec", {}).get("providerID") == \
                provider_id(machine):
            names.append(str(ref["name"]))
    return sorted(names) if len(names) == count else None


async def running_pods(kube: KubeClient, namespace: str, app: str, count: int
                       ) -> dict[str, str] | None:
    """pod -> node of ``count`` Running, undeleted pods of ``app``."""
    items, _ = await kube.list_all(resource_path(CORE, "pods", namespace),
                                   labelSelector=f"app={app}")
    running = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in items
               if (p.get("status") or {}).get("phase") == "Running"
               and not p["metadata"].get("deletionTimestamp")}
    return running if len(running) == count else None


def node_processes(cluster: RunningCluster, name: str) -> list[int]:
    return host_nodes.HostNodes(state_dir(cluster)).processes(name)


async def delete_machineset(kube: KubeClient, namespace: str, name: str) -> None:
    await kube.delete(api.machineset_path(namespace, name))

    async def none_left() -> bool:
        return not await machines_of(kube, namespace, name)

    await wait_for(none_left, timeout=180, what=f"the Machines of {name} deleted")


async def test_machineset_scales_to_two_real_nodes_that_run_pods(
        kube: KubeClient, namespace: str, machine_api: RunningCluster,
        real_operator: OperatorProcess) -> None:
    name = f"{namespace}-real"
    await kube.create(api.machineset_path(namespace), kubelet_machineset(name, 0))
    scaled = time.monotonic()
    await kube.patch(api.machineset_path(namespace, name), {"spec": {"replicas": 2}})
    nodes = await wait_for(lambda: ready_nodes(kube, namespace, name, 2), timeout=240,
                           what="2 real Nodes Ready", interval=0.5)
    print(f"MachineSet scale-up to 2 Ready real Nodes: {time.monotonic() - scaled:.1f}s")
    for machine in await machines_of(kube, namespace, name):
        assert machine["status"]["phase"] == "Running"
        assert machine["spec"]["providerID"].startswith("berthmaster-kubelet://")
        assert machine["metadata"]["annotations"][api.INSTANCE_STATE] == "running"
        found = await kube.get(api.node_path(machine["status"]["nodeRef"]["name"]))
        assert found["status"]["nodeInfo"]["kubeletVersion"] != "fake"
        assert found["metadata"]["labels"]["node-role.kubernetes.io/worker"] == ""
        assert node_processes(machine_api, machine["metadata"]["name"])

    await kube.create(f"{APPS}/namespaces/{namespace}/deployments", pause_deployment("p", 2))
    pods = await wait_for(lambda: running_pods(kube, namespace, "p", 2), timeout=120,
                          what="2 pods Running", interval=0.5)
    assert sorted(pods.values()) == nodes, pods

    await delete_machineset(kube, namespace, name)
    for machine_name in nodes:
        assert not node_processes(machine_api, machine_name)
        assert host_nodes.HostNodes(state_dir(machine_api)).find(machine_name) is None
        assert not host_nodes.node_cgroups(machine_name)


async def test_deleting_a_hooked_machine_drains_running_pods_then_stops_the_kubelet(
        kube: KubeClient, namespace: str, machine_api: RunningCluster,
        real_operator: OperatorProcess) -> None:
    name = f"{namespace}-drain"
    await kube.create(api.machineset_path(namespace), kubelet_machineset(name, 2))
    nodes = await wait_for(lambda: ready_nodes(kube, namespace, name, 2), timeout=240,
                           what="2 real Nodes Ready", interval=0.5)
    await kube.create(f"{APPS}/namespaces/{namespace}/deployments", pause_deployment("d", 2))
    pods = await wait_for(lambda: running_pods(kube, namespace, "d", 2), timeout=120,
                          what="2 pods Running", interval=0.5)
    victim = nodes[0]
    on_victim = [pod for pod, where in pods.items() if where == victim]
    assert on_victim, pods
    await set_hooks(kube, namespace, victim, "preDrain", [HOOK])
    await kube.delete(api.machine_path(namespace, victim))

    async def held() -> dict[str, Any] | None:
        machine = await get_machine(kube, namespace, victim)
        return machine if condition(machine, api.DRAINABLE).get("status") == "False" else None

    await wait_for(held, timeout=60, what=f"machine {victim} held by its preDrain hook")
    still = await kube.get(resource_path(CORE, "pods", namespace, name=on_victim[0]))
    assert still["status"]["phase"] == "Running" and not still["metadata"].get(
        "deletionTimestamp")
    assert node_processes(machine_api, victim)

    await set_hooks(kube, namespace, victim, "preDrain", [])

    async def moved() -> dict[str, str] | None:
        now = await running_pods(kube, namespace, "d", 2)
        if now is None or victim in now.values() or set(now) & set(on_victim):
            return None
        return now

    after = await wait_for(moved, timeout=180, what="the drained pods running elsewhere",
                           interval=0.5)
    assert victim not in after.values()
    async def machine_gone() -> bool:
        return await get_machine(kube, namespace, victim) is None

    await wait_for(machine_gone, timeout=120, what=f"machine {victim} deleted")
    assert not node_processes(machine_api, victim)
    assert host_nodes.HostNodes(state_dir(machine_api)).find(victim) is None
    assert not host_nodes.node_cgroups(victim)  # no container process is left
    assert await kube.get_if_exists(api.node_path(victim)) is None

    await delete_machineset(kube, namespace, name)


async def test_killed_kubelet_is_replaced_by_a_machine_health_check(
        kube: KubeClient, namespace: str, machine_api: RunningCluster,
        real_operator: OperatorProcess) -> None:
    name = f"{namespace}-mhc"
    await kube.create(api.machineset_path(namespace), kubelet_machineset(name, 1))
    first = (await wait_for(lambda: ready_nodes(kube, namespace, name, 1), timeout=240,
                            what="1 real Node Ready", interval=0.5))[0]
    await kube.create(mhc_path(namespace), {
        "apiVersion": api.API_VERSION, "kind": "MachineHealthCheck",
        "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {api.MACHINESET_LABEL: name}},
                 "unhealthyConditions": [
                     {"type": "Ready", "status": "False", "timeout": "1s"},
                     {"type": "Ready", "status": "Unknown", "timeout": "1s"}]}})

    layout = host_nodes.HostNodes(state_dir(machine_api)).find(first)
    assert layout is not None
    kubelets = node.pids_with_argument(f"--config={layout.kubelet_config}")
    assert len(kubelets) == 1, kubelets
    killed = time.monotonic()
    os.kill(kubelets[0], signal.SIGKILL)

    async def not_ready() -> bool:
        found = await kube.get_if_exists(api.node_path(first))
        return found is None or condition(found, "Ready").get("status") != "True"

    await wait_for(not_ready, timeout=180, what=f"Node {first} NotReady", interval=0.5)
    print(f"kubelet kill to Node NotReady: {time.monotonic() - killed:.1f}s")

    async def replaced() -> list[str] | None:
        nodes = await ready_nodes(kube, namespace, name, 1)
        return nodes if nodes and nodes != [first] else None

    await wait_for(replaced, timeout=300, what="a Ready replacement Node", interval=0.5)
    print(f"kubelet kill to Ready replacement Node: {time.monotonic() - killed:.1f}s")

    async def first_gone() -> bool:
        return await get_machine(kube, namespace, first) is None

    await wait_for(first_gone, timeout=300, what=f"machine {first} deleted")
    assert not node_processes(machine_api, first)
    assert not host_nodes.node_cgroups(first)
    await kube.delete(mhc_path(namespace, name))
    await delete_machineset(kube, namespace, name)


async def test_the_autoscaler_adds_a_real_node_for_a_pending_pod_and_removes_it_idle(
        kube: KubeClient, namespace: str, machine_api: RunningCluster,
        autoscaling_operator: OperatorProcess) -> None:
    """cluster-autoscaler's clusterapi provider from zero (the template's capacity from the
    provider: cloudprovider/clusterapi/clusterapi_unstructured.go) and its scale-down of an
    empty node after unneededTime (core/scaledown/)."""
    name = f"{namespace}-auto"
    machineset = kubelet_machineset(name, 0)
    machineset["spec"]["template"]["spec"]["metadata"]["labels"]["pool"] = name
    await kube.create(api.machineset_path(namespace), machineset)
    await kube.create(resource_path(AUTOSCALING_BETA, "machineautoscalers", namespace), {
        "apiVersion": "autoscaling.openshift.io/v1beta1", "kind": "MachineAutoscaler",
        "metadata": {"name": name},
        "spec": {"minReplicas": 0, "maxReplicas": 1, "scaleTargetRef": {
            "apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet",
            "name": name}}})
    await kube.create(resource_path(AUTOSCALING, "clusterautoscalers"), {
        "apiVersion": "autoscaling.openshift.io/v1", "kind": "ClusterAutoscaler",
        "metadata": {"name": "default"},
        "spec": {"scaleDown": {"enabled": True, "delayAfterAdd": "1s",
                               "delayAfterDelete": "1s", "delayAfterFailure": "1s",
                               "unneededTime": "5s"}}})
    try:
        pending = pause_deployment("auto", 1)
        pending["spec"]["template"]["spec"]["nodeSelector"] = {"pool": name}
        pending["spec"]["template"]["spec"]["containers"][0]["resources"] = {
            "requests": {"cpu": "100m", "memory": "16Mi"}}
        created = time.monotonic()
        await kube.create(f"{APPS}/namespaces/{namespace}/deployments", pending)
        pods = await wait_for(lambda: running_pods(kube, namespace, "auto", 1), timeout=240,
                              what="the pending pod running on a new real node", interval=0.5)
        print(f"pending pod to Running on an autoscaled real node: "
              f"{time.monotonic() - created:.1f}s")
        (added,) = pods.values()
        assert (await ready_nodes(kube, namespace, name, 1)) == [added]

        await kube.delete(f"{APPS}/namespaces/{namespace}/deployments/auto")

        async def scaled_in() -> bool:
            return not await machines_of(kube, namespace, name)

        await wait_for(scaled_in, timeout=240, what="the idle real node removed", interval=0.5)
        assert not node_processes(machine_api, added)
        assert not host_nodes.node_cgroups(added)
        assert await kube.get_if_exists(api.node_path(added)) is None
    finally:
        await kube.delete(resource_path(AUTOSCALING, "clusterautoscalers", name="default"))
    await delete_machineset(kube, namespace, name)


async def test_a_host_that_cannot_run_a_node_fails_the_machine_and_starts_nothing(
        kube: KubeClient, namespace: str, machine_api: RunningCluster,
        operator_without_ca: OperatorProcess) -> None:
    """machine-api-operator pkg/controller/machine/controller.go: an InvalidMachineConfiguration
    from the actuator is terminal (phase Failed, errorReason InvalidConfiguration, a
    FailedCreate event)."""
    template = kubelet_machineset("x", 1)["spec"]["template"]
    await kube.create(api.machine_path(namespace), {
        "apiVersion": api.API_VERSION, "kind": "Machine",
        "metadata": {"name": "lonely"}, "spec": template["spec"]})

    async def failed() -> dict[str, Any] | None:
        machine = await get_machine(kube, namespace, "lonely")
        return machine if (machine or {}).get("status", {}).get("phase") == api.FAILED else None

    machine = await wait_for(failed, timeout=60, what="machine lonely Failed")
    status = machine["status"]
    assert status["errorReason"] == api.INVALID_CONFIGURATION
    assert "$BERTHMASTER_KUBELET_PKI is not set" in status["errorMessage"]
    assert "set it to the folder holding the cluster CA" in status["errorMessage"]
    exists = condition(machine, api.INSTANCE_EXISTS)
    assert (exists["status"], exists["reason"]) == ("False", api.INSTANCE_NOT_CREATED)
    events = await machine_events(kube, namespace, "lonely")
    assert events["FailedCreate"]["type"] == "Warning"
    assert "BERTHMASTER_KUBELET_PKI" in events["FailedCreate"]["message"]
    assert "spec" not in machine or not machine["spec"].get("providerID")
    assert host_nodes.HostNodes(state_dir(machine_api)).find("lonely") is None
    await kube.delete(api.machine_path(namespace, "lonely"))
