"""The autoscaler on the local control plane: CRD validation, MachineAutoscaler annotations,
scale-up of a kwok MachineSet for pending pods, limits, and scale-down through the Machine.

The operator runs as a subprocess (``berthmaster operator --only machines --only autoscaler``)
with a 2 s scan interval, and kube-scheduler places the pods (it marks them Unschedulable, which
is what the autoscaler reacts to, and binds them once the new nodes are Ready).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from berthmaster.foundation.kube import CORE, KubeClient, KubeError, group_path, resource_path
from berthmaster.tooling.processes import terminate
from berthmaster.tooling.python import BERTHMASTER_CLI
from tests.support.waiting import wait_for

ROOT = Path(__file__).resolve().parents[3]
CRDS = ROOT / "deploy" / "crds"
AUTOSCALING = group_path("autoscaling.openshift.io", "v1")
AUTOSCALING_BETA = group_path("autoscaling.openshift.io", "v1beta1")
MACHINES = group_path("machine.openshift.io", "v1beta1")
MIN_KEY = "machine.openshift.io/cluster-api-autoscaler-node-group-min-size"
OWNER_KEY = "autoscaling.openshift.io/machineautoscaler"
FINALIZER = "machinetarget.autoscaling.openshift.io"
MAX_KEY = "machine.openshift.io/cluster-api-autoscaler-node-group-max-size"
JSON = dict[str, Any]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


METRICS_PORT = _free_port()
# The operator's namespace (--autoscaler-namespace): the only one the Priority expander's
# ConfigMap is read from.
OPERATOR_NAMESPACE = "berthmaster-autoscaler-it"
PRIORITY_CONFIGMAP = "cluster-autoscaler-priority-expander"


@pytest.fixture(scope="module")
def crds(cluster: Any) -> None:
    for name in ("autoscaling.openshift.io_clusterautoscalers.yaml",
                 "autoscaling.openshift.io_machineautoscalers.yaml",
                 "machine.openshift.io_machines.yaml", "machine.openshift.io_machinesets.yaml"):
        result = cluster.kubectl("apply", "--server-side", "-f", str(CRDS / name))
        assert result.returncode == 0, result.stderr
    for crd in ("clusterautoscalers.autoscaling.openshift.io",
                "machineautoscalers.autoscaling.openshift.io",
                "machines.machine.openshift.io", "machinesets.machine.openshift.io"):
        result = cluster.kubectl("wait", "--for=condition=Established", f"crd/{crd}",
                                 "--timeout=60s")
        assert result.returncode == 0, result.stderr


@pytest.fixture(scope="module")
def operator(cluster: Any, crds: None, tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[subprocess.Popen[bytes]]:
    log = tmp_path_factory.mktemp("autoscaler") / "operator.log"
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig),
           "BERTHMASTER_AUTOSCALER_SCAN_INTERVAL": "2"}
    with log.open("wb") as out:
        process = subprocess.Popen(
            [*BERTHMASTER_CLI, "operator", "--kubeconfig",
             str(cluster.kubeconfig), "--only", "machines", "--only", "autoscaler",
             "--standalone", "--liveness", "",
             "--metrics-bind-address", f"127.0.0.1:{METRICS_PORT}",
             "--autoscaler-namespace", OPERATOR_NAMESPACE],
            stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        yield process
    finally:
        terminate(process, 20)
        print(log.read_text()[-6000:])


@pytest.fixture(scope="module")
def scheduler(cluster: Any, tmp_path_factory: pytest.TempPathFactory
              ) -> Iterator[subprocess.Popen[bytes]]:
    log = tmp_path_factory.mktemp("scheduler") / "kube-scheduler.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(cluster.binary("kube-scheduler")), "--kubeconfig", str(cluster.kubeconfig),
             "--authentication-kubeconfig", str(cluster.kubeconfig),
             "--authorization-kubeconfig", str(cluster.kubeconfig),
             "--leader-elect=false", "--secure-port=0"], stdout=out, stderr=subprocess.STDOUT)
    try:
        yield process
    finally:
        process.terminate()
        process.wait(timeout=20)


def apply(cluster: Any, obj: JSON) -> subprocess.CompletedProcess[str]:
    if obj.get("kind") == "ClusterAutoscaler":
        _wait_until_not_terminating(cluster, obj["metadata"]["name"])
    result: subprocess.CompletedProcess[str] = cluster.kubectl("apply", "-f", "-",
                                                               input=json.dumps(obj))
    return result


def _wait_until_not_terminating(cluster: Any, name: str, timeout: float = 120) -> None:
    """A previous test's ClusterAutoscaler may still be deleting: its timer's kopf finalizer
    is removed only once the operator stops the timer. Applying over it would change an
    object about to vanish, and the test would run with no ClusterAutoscaler at all."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = cluster.kubectl("get", "clusterautoscalers.autoscaling.openshift.io", name,
                                "-o", "json", "--ignore-not-found")
        text = found.stdout.strip()
        if found.returncode == 0 and (
                not text or not json.loads(text)["metadata"].get("deletionTimestamp")):
            return
        time.sleep(0.5)
    raise AssertionError(f"ClusterAutoscaler {name} still terminating after {timeout:.0f}s")


def cluster_autoscaler(spec: JSON, name: str = "default") -> JSON:
    return {"apiVersion": "autoscaling.openshift.io/v1", "kind": "ClusterAutoscaler",
            "metadata": {"name": name}, "spec": spec}


def machine_set(name: str, namespace: str, replicas: int = 0, cpu: str = "2") -> JSON:
    labels = {"machine.openshift.io/cluster-api-machineset": name}
    return {
        "apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels}, "spec": {
                     "metadata": {"labels": {"pool": name}},
                     "providerSpec": {"value": {
                         "apiVersion": "berthmaster.io/v1alpha1",
                         "kind": "KwokMachineProviderSpec",
                         "capacity": {"cpu": cpu, "memory": "4Gi", "pods": "110"}}}}}},
    }


def machine_autoscaler(name: str, namespace: str, target: str, low: int, high: int) -> JSON:
    return {"apiVersion": "autoscaling.openshift.io/v1beta1", "kind": "MachineAutoscaler",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"minReplicas": low, "maxReplicas": high,
                     "scaleTargetRef": {"apiVersion": "machine.openshift.io/v1beta1",
                                        "kind": "MachineSet", "name": target}}}


def pod(name: str, namespace: str, cpu: str, pool: str, owner: JSON | None = None) -> JSON:
    meta: JSON = {"name": name, "namespace": namespace, "labels": {"app": name}}
    if owner:
        meta["ownerReferences"] = [owner]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {
        "nodeSelector": {"pool": pool},
        "containers": [{"name": "c", "image": "busybox",
                        "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]}}


def replica_set(name: str, namespace: str, replicas: int, cpu: str, pool: str) -> JSON:
    template = pod(name, namespace, cpu, pool)
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": template["spec"]}}}


def scrape_metrics() -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{METRICS_PORT}/metrics") as answer:
        return str(answer.read().decode())


async def machine_set_annotations(kube: KubeClient, namespace: str, name: str) -> dict[str, str]:
    obj = await kube.get(resource_path(MACHINES, "machinesets", namespace, name))
    return dict((obj.get("metadata") or {}).get("annotations") or {})


async def events_for(kube: KubeClient, namespace: str, name: str, reason: str) -> list[JSON]:
    items, _ = await kube.list_all(resource_path(CORE, "events", namespace),
                                   fieldSelector=f"involvedObject.name={name},reason={reason}")
    return items


# ------------------------------------------------------------------------------- CRD rules


@pytest.mark.parametrize(("obj", "message"), [
    (cluster_autoscaler({}, name="other"), "only a ClusterAutoscaler named 'default'"),
    (cluster_autoscaler({"resourceLimits": {"cores": {"min": 9, "max": 8}}}),
     "cores.min must be less than or equal to cores.max"),
    (cluster_autoscaler({"resourceLimits": {"memory": {"min": 9, "max": 8}}}),
     "memory.min must be less than or equal to memory.max"),
    (cluster_autoscaler({"scaleDown": {"unneededTime": "ten minutes"}}), "unneededTime"),
    (cluster_autoscaler({"scaleDown": {"utilizationThreshold": "1.5"}}), "utilizationThreshold"),
    # validator.go validateScaleDownConfig: strictly below 1
    (cluster_autoscaler({"scaleDown": {"utilizationThreshold": "1"}}), "utilizationThreshold"),
    (cluster_autoscaler({"scaleDown": {"cordonNodeBeforeTerminating": "yes"}}),
     "Unsupported value"),
    (cluster_autoscaler({"enforceNodeGroupMinSize": "On"}), "Unsupported value"),
    (cluster_autoscaler({"expanders": ["Cheapest"]}), "Unsupported value"),
    (machine_autoscaler("m", "default", "w", 3, 2), "minReplicas must be less than or equal"),
])
def test_the_api_server_rejects_invalid_resources(cluster: Any, crds: None, obj: JSON,
                                                  message: str) -> None:
    result = apply(cluster, obj)
    assert result.returncode != 0
    assert message in result.stderr


async def test_defaults_are_upstreams(cluster: Any, crds: None, kube: KubeClient) -> None:
    assert apply(cluster, cluster_autoscaler({"scaleDown": {"enabled": False}})).returncode == 0
    try:
        obj = await kube.get(resource_path(AUTOSCALING, "clusterautoscalers", name="default"))
        assert obj["spec"]["podPriorityThreshold"] == -10
        assert obj["spec"]["enforceNodeGroupMinSize"] == "Disabled"  # the operator CRD's default
        assert obj["spec"]["scaleDown"] == {
            "enabled": False, "delayAfterAdd": "10m", "delayAfterDelete": "10s",
            "delayAfterFailure": "3m", "unneededTime": "10m", "utilizationThreshold": "0.5"}
    finally:
        await kube.delete(resource_path(AUTOSCALING, "clusterautoscalers", name="default"))


async def test_openshift_fields_are_stored_not_pruned(cluster: Any, crds: None,
                                                       kube: KubeClient) -> None:
    """The fields of openshift/cluster-autoscaler-operator's ClusterAutoscalerSpec
    (pkg/apis/autoscaling/v1) that the schema used to drop silently."""
    spec = {"scaleUp": {"newPodScaleUpDelay": "30s"},
            "scaleDown": {"enabled": True, "cordonNodeBeforeTerminating": "Enabled"},
            "enforceNodeGroupMinSize": "Enabled", "logVerbosity": 4,
            "startupTaints": ["node.example.com/initializing"]}
    assert apply(cluster, cluster_autoscaler(spec)).returncode == 0
    try:
        obj = await kube.get(resource_path(AUTOSCALING, "clusterautoscalers", name="default"))
        assert obj["spec"]["scaleUp"] == spec["scaleUp"]
        assert obj["spec"]["scaleDown"]["cordonNodeBeforeTerminating"] == "Enabled"
        assert obj["spec"]["enforceNodeGroupMinSize"] == "Enabled"
        assert obj["spec"]["logVerbosity"] == 4
        assert obj["spec"]["startupTaints"] == ["node.example.com/initializing"]
    finally:
        await kube.delete(resource_path(AUTOSCALING, "clusterautoscalers", name="default"))


@pytest.mark.parametrize("sample", ["autoscaler-clusterautoscaler.yaml",
                                    "autoscaler-machineautoscaler.yaml",
                                    "autoscaler-priority-expander.yaml"])
def test_samples_are_accepted(cluster: Any, crds: None, sample: str) -> None:
    for namespace in ("openshift-machine-api", "berthmaster"):
        cluster.kubectl("create", "namespace", namespace)
    result = cluster.kubectl("apply", "--dry-run=server", "-f",
                             str(ROOT / "deploy" / "samples" / sample))
    assert result.returncode == 0, result.stderr


# ------------------------------------------------------------------ MachineAutoscaler


async def test_machineautoscaler_marks_its_target_and_cleans_up(
        cluster: Any, operator: Any, kube: KubeClient, namespace: str) -> None:
    for name in ("first", "second"):
        assert apply(cluster, machine_set(name, namespace)).returncode == 0
    assert apply(cluster, machine_autoscaler("ma", namespace, "first", 1, 4)).returncode == 0

    async def marked(name: str, low: str, high: str) -> bool:
        notes = await machine_set_annotations(kube, namespace, name)
        return notes.get(MIN_KEY) == low and notes.get(MAX_KEY) == high

    await wait_for(lambda: marked("first", "1", "4"), timeout=30, what="first annotated 1..4")
    ma_path = resource_path(AUTOSCALING_BETA, "machineautoscalers", namespace, "ma")

    async def last_target() -> str | None:
        status = (await kube.get(ma_path)).get("status") or {}
        return (status.get("lastTargetRef") or {}).get("name")

    await wait_for(lambda: _eq(last_target(), "first"), timeout=30, what="lastTargetRef first")
    # upstream's finalizer (machineautoscaler_controller.go MachineTargetFinalizer), not kopf's;
    # kopf writes it in a request of its own after the status, so it is waited for
    async def finalizers() -> list[str]:
        return list((await kube.get(ma_path))["metadata"].get("finalizers") or [])

    await wait_for(finalizers, timeout=30, what="the MachineAutoscaler's finalizer")
    assert await finalizers() == [FINALIZER]
    assert (await machine_set_annotations(kube, namespace, "first"))[OWNER_KEY] == f"{namespace}/ma"
    # kopf's own writes (this status and finalizer) name the operator: the API server takes the
    # User-Agent's name as the field manager (apiserver pkg/endpoints/handlers/rest.go
    # prefixFromUserAgent), and the operator's kopf session sends berthmaster-operator/<version>
    # (operator/client.py ``login``), not kopf/<version>
    fields = (await kube.get(ma_path))["metadata"]["managedFields"]
    managers = {entry["manager"] for entry in fields}
    assert "berthmaster-operator" in managers
    assert not [m for m in managers if m.startswith("kopf")], managers

    # A second MachineAutoscaler of the same MachineSet is refused and the target left alone
    # (machinetarget.go SetOwner -> ErrTargetAlreadyOwned, event FailedSetOwner).
    assert apply(cluster, machine_autoscaler("intruder", namespace, "first", 2, 9)).returncode == 0

    async def refused() -> list[JSON]:
        return await events_for(kube, namespace, "intruder", "FailedSetOwner")

    events = await wait_for(refused, timeout=30, what="FailedSetOwner on the intruder")
    assert events[0]["message"] == (
        "Error setting target owner: already owned by another MachineAutoscaler")
    assert events[0]["type"] == "Warning"
    assert await marked("first", "1", "4")
    assert (await machine_set_annotations(kube, namespace, "first"))[OWNER_KEY] == f"{namespace}/ma"
    intruder_path = resource_path(AUTOSCALING_BETA, "machineautoscalers", namespace, "intruder")
    await kube.delete(intruder_path)

    async def intruder_gone() -> bool:
        try:
            await kube.get(intruder_path)
        except KubeError as error:
            return error.not_found
        return False

    await wait_for(intruder_gone, timeout=30, what="the refused MachineAutoscaler deleted")
    assert await marked("first", "1", "4")  # its deletion does not release another's target

    # Drift: an edited or removed annotation is put back by the MachineSet watch.
    await kube.patch(resource_path(MACHINES, "machinesets", namespace, "first"),
                     {"metadata": {"annotations": {MIN_KEY: None, MAX_KEY: "99"}}})
    await wait_for(lambda: marked("first", "1", "4"), timeout=30, what="first re-annotated 1..4")

    # Retarget: the previous MachineSet loses the annotations, the new one gets them.
    assert apply(cluster, machine_autoscaler("ma", namespace, "second", 0, 2)).returncode == 0
    await wait_for(lambda: marked("second", "0", "2"), timeout=30, what="second annotated 0..2")
    await wait_for(lambda: _eq(last_target(), "second"), timeout=30, what="lastTargetRef second")

    async def released(name: str) -> bool:
        notes = await machine_set_annotations(kube, namespace, name)
        return MIN_KEY not in notes and MAX_KEY not in notes

    await wait_for(lambda: released("first"), timeout=30, what="first released")
    await kube.delete(ma_path)
    await wait_for(lambda: released("second"), timeout=30, what="second released on delete")

    async def ma_gone() -> bool:
        try:
            await kube.get(ma_path)
        except KubeError as error:
            return error.not_found
        return False

    await wait_for(ma_gone, timeout=30, what="the MachineAutoscaler gone once its finalizer left")


# ------------------------------------------------------------------ scaling


async def test_pending_pods_grow_the_machineset_within_max_and_idle_nodes_go(
        cluster: Any, operator: Any, scheduler: Any, kube: KubeClient, namespace: str) -> None:
    pool = f"pool-{namespace}"
    assert apply(cluster, machine_set(pool, namespace)).returncode == 0
    assert apply(cluster, machine_autoscaler("ma", namespace, pool, 0, 2)).returncode == 0
    assert apply(cluster, cluster_autoscaler({
        "resourceLimits": {"maxNodesTotal": 20},
        "scaleDown": {"enabled": True, "delayAfterAdd": "1s", "delayAfterDelete": "1s",
                      "delayAfterFailure": "1s", "unneededTime": "8s"}})).returncode == 0
    try:
        await _scale_up_then_down(kube, cluster, namespace, pool)
    finally:
        await kube.delete(resource_path(AUTOSCALING, "clusterautoscalers", name="default"))


async def _scale_up_then_down(kube: KubeClient, cluster: Any, namespace: str, pool: str) -> None:
    ms_path = resource_path(MACHINES, "machinesets", namespace, pool)
    # Two 1500m pods on 2-core machines need exactly two machines; a third cannot be helped
    # past maxReplicas 2 and is told so.
    assert apply(cluster, replica_set("web", namespace, 1, "1500m", pool)).returncode == 0
    bare = pod("bare", namespace, "1500m", pool)  # no controller: it will keep its node
    await kube.create(resource_path(CORE, "pods", namespace), bare)

    async def replicas() -> int:
        return int((await kube.get(ms_path))["spec"].get("replicas") or 0)

    await wait_for(lambda: _eq(replicas(), 2), timeout=60, what="MachineSet scaled to 2")

    async def running(name_prefix: str, count: int) -> bool:
        pods, _ = await kube.list_all(resource_path(CORE, "pods", namespace))
        ready = [p for p in pods if p["metadata"]["name"].startswith(name_prefix)
                 and p.get("status", {}).get("phase") == "Running"]
        return len(ready) == count

    await wait_for(lambda: running("web", 1), timeout=90, what="web pod running on a new node")
    await wait_for(lambda: running("bare", 1), timeout=90, what="bare pod running on a new node")
    triggered = await events_for(kube, namespace, "bare", "TriggeredScaleUp")
    assert triggered and triggered[0]["message"].startswith("pod triggered scale-up: [{")
    assert triggered[0]["source"]["component"] == "cluster-autoscaler"

    await kube.create(resource_path(CORE, "pods", namespace), pod("extra", namespace, "1500m",
                                                                  pool))

    async def told_max() -> bool:
        found = await events_for(kube, namespace, "extra", "NotTriggerScaleUp")
        return any("max node group size reached" in e["message"] for e in found)

    await wait_for(told_max, timeout=60, what="NotTriggerScaleUp max node group size reached")
    assert await replicas() == 2
    await kube.delete(resource_path(CORE, "pods", namespace, "extra"))

    # The ReplicaSet goes: its node is idle and is removed through its Machine; the bare pod's
    # node stays (NotReplicated).
    machines, _ = await kube.list_all(resource_path(MACHINES, "machines", namespace))
    assert len(machines) == 2
    bare_node = (await kube.get(resource_path(CORE, "pods", namespace, "bare")))["spec"]["nodeName"]
    await kube.delete(resource_path(group_path("apps", "v1"), "replicasets", namespace, "web"))
    await wait_for(lambda: _eq(replicas(), 1), timeout=90, what="MachineSet scaled down to 1")

    async def machines_left() -> list[str]:
        items, _ = await kube.list_all(resource_path(MACHINES, "machines", namespace))
        return [m["metadata"]["name"] for m in items]

    await wait_for(lambda: _len_eq(machines_left(), 1), timeout=90, what="one Machine deleted")
    status = (await kube.get(resource_path(AUTOSCALING, "clusterautoscalers", name="default")))
    assert status["status"]["lastScaleDown"]["nodes"]
    exposition = await asyncio.to_thread(scrape_metrics)
    assert "cluster_autoscaler_scaled_up_nodes_total 2.0" in exposition
    assert 'cluster_autoscaler_scaled_down_nodes_total{reason="empty"} 1.0' in exposition
    assert bare_node not in status["status"]["lastScaleDown"]["nodes"]
    node = await kube.get(resource_path(CORE, "nodes", name=bare_node))
    assert node["metadata"]["name"] == bare_node
    with contextlib.suppress(KubeError):
        await kube.delete(resource_path(CORE, "pods", namespace, "bare"))


async def _eq(value: Any, expected: Any) -> bool:
    return bool(await value == expected)


async def _len_eq(value: Any, expected: int) -> bool:
    return len(await value) == expected


def priority_configmap(namespace: str, priorities: str) -> JSON:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": PRIORITY_CONFIGMAP, "namespace": namespace},
            "data": {"priorities": priorities}}


async def test_priority_expander_reads_its_own_namespace_and_survives_a_bad_configmap(
        cluster: Any, operator: Any, scheduler: Any, kube: KubeClient, namespace: str) -> None:
    """kubernetes/autoscaler cluster-autoscaler/expander/priority/priority.go: the ConfigMap
    comes from a ConfigMapNamespaceLister on the autoscaler's own namespace, and a pattern
    that does not compile is "Can't compile regexp rule for priority %d and rule %s: %v".
    Upstream then offers no option at all; here the scale-up still happens (the expanders
    after Priority, here the final random choice, decide) and a Warning names the problem."""
    spot, steady = f"spot-{namespace}", f"steady-{namespace}"
    for name in (spot, steady):
        body = machine_set(name, namespace)
        body["spec"]["template"]["spec"]["metadata"]["labels"]["shared"] = namespace
        assert apply(cluster, body).returncode == 0
        assert apply(cluster, machine_autoscaler(f"ma-{name}", namespace, name, 0, 2)
                     ).returncode == 0
    cluster.kubectl("create", "namespace", OPERATOR_NAMESPACE)  # may exist already
    own = resource_path(CORE, "configmaps", OPERATOR_NAMESPACE, PRIORITY_CONFIGMAP)
    with contextlib.suppress(KubeError):
        await kube.delete(own)
    # A decoy outside the operator's namespace asks for the spot set: it counts for nothing.
    await kube.create(resource_path(CORE, "configmaps", namespace),
                      priority_configmap(namespace, f"50:\n  - {spot}\n"))
    # The operator's own: a lookbehind, which Python's re takes and RE2 (Go's regexp) refuses.
    await kube.create(resource_path(CORE, "configmaps", OPERATOR_NAMESPACE),
                      priority_configmap(OPERATOR_NAMESPACE, "10:\n  - '(?<=steady)-'\n"))
    assert apply(cluster, cluster_autoscaler({"expanders": ["Priority"],
                                              "resourceLimits": {"maxNodesTotal": 20}})
                 ).returncode == 0

    def shared_pod(name: str) -> JSON:
        body = pod(name, namespace, "1500m", pool="")
        body["spec"]["nodeSelector"] = {"shared": namespace}
        return body

    async def replicas() -> dict[str, int]:
        return {name: int((await kube.get(resource_path(MACHINES, "machinesets", namespace,
                                                        name)))["spec"].get("replicas") or 0)
                for name in (spot, steady)}

    async def total(count: int) -> bool:
        return sum((await replicas()).values()) == count

    async def running(name: str) -> bool:
        found = await kube.get(resource_path(CORE, "pods", namespace, name))
        return bool(found.get("status", {}).get("phase") == "Running")

    async def warned() -> JSON | None:
        found = await events_for(kube, "default", "default", "PriorityConfigMapInvalid")
        return found[0] if found else None

    try:
        await kube.create(resource_path(CORE, "pods", namespace), shared_pod("first"))
        event = await wait_for(warned, timeout=60, what="PriorityConfigMapInvalid warning")
        assert event["type"] == "Warning"
        assert event["involvedObject"]["kind"] == "ClusterAutoscaler"
        assert event["message"].startswith(
            f"ConfigMap {OPERATOR_NAMESPACE}/{PRIORITY_CONFIGMAP} key priorities: ")
        assert ("Can't compile regexp rule for priority 10 and rule (?<=steady)-: invalid perl "
                "operator: (?<=") in event["message"]
        await wait_for(lambda: total(1), timeout=60, what="a MachineSet grown despite it")

        # Fixed: steady has the priority; the decoy's higher one for spot is not read.
        await kube.patch(own, {"data": {"priorities": f"10:\n  - {steady}\n1:\n  - .*\n"}})
        await wait_for(lambda: running("first"), timeout=90, what="first pod running")
        before = await replicas()
        await kube.create(resource_path(CORE, "pods", namespace), shared_pod("second"))
        await wait_for(lambda: total(2), timeout=60, what="a second node for the second pod")
        after = await replicas()
        assert after == {spot: before[spot], steady: before[steady] + 1}
    finally:
        await kube.delete(resource_path(AUTOSCALING, "clusterautoscalers", name="default"))
        with contextlib.suppress(KubeError):
            await kube.delete(own)


async def test_machineset_that_never_provisions_is_backed_off(
        cluster: Any, operator: Any, scheduler: Any, kube: KubeClient, namespace: str) -> None:
    pool = f"broken-{namespace}"
    broken = machine_set(pool, namespace)
    # An unknown providerSpec field: the kwok provider refuses to create the instance.
    broken["spec"]["template"]["spec"]["providerSpec"]["value"]["bogus"] = True
    assert apply(cluster, broken).returncode == 0
    assert apply(cluster, machine_autoscaler("ma", namespace, pool, 0, 3)).returncode == 0
    assert apply(cluster, cluster_autoscaler({"maxNodeProvisionTime": "6s",
                                              "scaleDown": {"enabled": False}})).returncode == 0
    try:
        await kube.create(resource_path(CORE, "pods", namespace),
                          pod("waiting", namespace, "1", pool, owner=None))
        ms_path = resource_path(MACHINES, "machinesets", namespace, pool)

        async def timed_out() -> list[JSON]:
            return await events_for(kube, namespace, pool, "ScaleUpTimedOut")

        found = await wait_for(timed_out, timeout=90, what="ScaleUpTimedOut on the MachineSet")
        assert found[0]["type"] == "Warning"

        async def backed_off() -> bool:
            ca = await kube.get(resource_path(AUTOSCALING, "clusterautoscalers", name="default"))
            conditions = {c["type"]: c for c in (ca.get("status") or {}).get("conditions") or []}
            return conditions.get("ScaleUp", {}).get("reason") == "Backoff"

        await wait_for(backed_off, timeout=30, what="ScaleUp condition Backoff")

        async def given_back() -> bool:
            return int((await kube.get(ms_path))["spec"].get("replicas") or 0) == 0

        await wait_for(given_back, timeout=30, what="unregistered replicas given back")

        async def told_backoff() -> bool:
            found = await events_for(kube, namespace, "waiting", "NotTriggerScaleUp")
            return any("in backoff after failed scale-up" in e["message"] for e in found)

        await wait_for(told_backoff, timeout=30, what="pod told about the backoff")
    finally:
        await kube.delete(resource_path(AUTOSCALING, "clusterautoscalers", name="default"))


def pinned_replica_set(name: str, namespace: str, node: str, annotations: JSON | None = None,
                       volumes: list[JSON] | None = None) -> JSON:
    spec: JSON = {"nodeName": node,
                  "containers": [{"name": "c", "image": "busybox", "resources": {
                      "requests": {"cpu": "100m", "memory": "64Mi"}}}]}
    if volumes:
        spec["volumes"] = volumes
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name},
                                               "annotations": annotations or {}},
                                  "spec": spec}}}


async def test_each_blocker_keeps_its_node_and_the_idle_one_leaves_through_its_hooks(
        cluster: Any, operator: Any, scheduler: Any, kube: KubeClient, namespace: str) -> None:
    pool = f"hooked-{namespace}"
    hooked = machine_set(pool, namespace, replicas=5)
    hooked["spec"]["template"]["spec"]["lifecycleHooks"] = {
        "preDrain": [{"name": "keep-until-test-says", "owner": "autoscaler-test"}]}
    assert apply(cluster, hooked).returncode == 0
    assert apply(cluster, machine_autoscaler("ma", namespace, pool, 0, 5)).returncode == 0

    async def machines() -> list[JSON]:
        items, _ = await kube.list_all(resource_path(MACHINES, "machines", namespace))
        return items

    async def registered() -> list[str] | None:
        names = sorted(((m.get("status") or {}).get("nodeRef") or {}).get("name", "")
                       for m in await machines())
        return names if len(names) == 5 and all(names) else None

    nodes = await wait_for(registered, timeout=90, what="five Machines with their Nodes")
    a, b, c, d, e = nodes
    await kube.patch(resource_path(CORE, "nodes", name=d), {"metadata": {"annotations": {
        "cluster-autoscaler.kubernetes.io/scale-down-disabled": "true"}}})
    for obj in (
        pinned_replica_set("not-safe", namespace, a,
                           {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}),
        pinned_replica_set("local", namespace, b, volumes=[{"name": "s", "emptyDir": {}}]),
        pinned_replica_set("budgeted", namespace, c),
        {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
         "metadata": {"name": "budgeted", "namespace": namespace},
         "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "budgeted"}}}},
        pinned_replica_set("disabled", namespace, d),
        pinned_replica_set("movable", namespace, e),
    ):
        result = apply(cluster, obj)
        assert result.returncode == 0, result.stderr

    await start_scale_down(kube, cluster, namespace, pods=5, movable="movable")
    ca_path = resource_path(AUTOSCALING, "clusterautoscalers", name="default")
    try:
        async def deleting() -> list[str]:
            return [m["status"]["nodeRef"]["name"] for m in await machines()
                    if m["metadata"].get("deletionTimestamp")]

        assert await wait_for(deleting, timeout=60, what="one Machine being deleted") == [e]

        async def blockers() -> dict[str, str] | None:
            status = (await kube.get(ca_path)).get("status") or {}
            found = {n["name"]: n["reason"] for n in status.get("unremovableNodes") or []}
            return found if {a, b, c, d} <= set(found) else None

        found = await wait_for(blockers, timeout=30, what="the four blocked nodes reported")
        assert (found[a], found[b], found[c], found[d]) == (
            "BlockedByPod", "BlockedByPod", "BlockedByPod", "ScaleDownDisabledAnnotation")
        status = (await kube.get(ca_path))["status"]
        messages = {n["name"]: n["message"] for n in status["unremovableNodes"]}
        assert "NotSafeToEvictAnnotation" in messages[a]
        assert "LocalStorageRequested" in messages[b]
        assert "NotEnoughPdb" in messages[c]
        ms = await kube.get(resource_path(MACHINES, "machinesets", namespace, pool))
        assert ms["spec"]["replicas"] == 4

        # The preDrain hook holds the Machine: its node is still there (the autoscaler itself
        # evicted the movable pod, as upstream's scale-down drains before deleting).
        doomed = next(m for m in await machines() if m["metadata"].get("deletionTimestamp"))
        node = await kube.get(resource_path(CORE, "nodes", name=e))
        assert any(t["key"] == "ToBeDeletedByClusterAutoscaler"
                   for t in node["spec"].get("taints") or [])
        machine_path = resource_path(MACHINES, "machines", namespace, doomed["metadata"]["name"])
        await kube.patch(machine_path, {"spec": {"lifecycleHooks": {"preDrain": None}}})

        async def gone() -> bool:
            return len(await machines()) == 4 and e not in (await registered_names())

        async def registered_names() -> list[str]:
            return [((m.get("status") or {}).get("nodeRef") or {}).get("name", "")
                    for m in await machines()]

        await wait_for(gone, timeout=90, what="the idle node's Machine deleted after its hook")
        # Nothing else goes: every remaining node is blocked; the moved pod runs on one of them.
        assert sorted(await registered_names()) == [a, b, c, d]

        async def moved() -> str | None:
            pods, _ = await kube.list_all(resource_path(CORE, "pods", namespace),
                                          labelSelector="app=movable")
            running = [p for p in pods if p.get("status", {}).get("phase") == "Running"]
            return running[0]["spec"]["nodeName"] if running else None

        assert await wait_for(moved, timeout=60, what="movable pod running again") in (a, b, c, d)
    finally:
        await kube.delete(ca_path)
        for m in await machines():
            await kube.patch(resource_path(MACHINES, "machines", namespace, m["metadata"]["name"]),
                             {"spec": {"lifecycleHooks": {"preDrain": None}}})


async def test_enforce_node_group_min_size_raises_a_short_machineset(
        cluster: Any, operator: Any, kube: KubeClient, namespace: str) -> None:
    """cluster-autoscaler ``ScaleUpToNodeGroupMinSize`` (core/scaleup/orchestrator), switched on
    by OpenShift's ``enforceNodeGroupMinSize: Enabled`` (clusterautoscaler.go AutoscalerArgs ->
    --enforce-node-group-min-size=true): no pod is pending, yet the MachineSet grows to its
    MachineAutoscaler's minReplicas."""
    pool = f"floor-{namespace}"
    assert apply(cluster, machine_set(pool, namespace, replicas=0)).returncode == 0
    assert apply(cluster, machine_autoscaler("ma", namespace, pool, 2, 3)).returncode == 0
    assert apply(cluster, cluster_autoscaler({"enforceNodeGroupMinSize": "Enabled",
                                              "scaleDown": {"enabled": False}})).returncode == 0
    try:
        async def replicas() -> int:
            found = await kube.get(resource_path(MACHINES, "machinesets", namespace, pool))
            return int(found["spec"].get("replicas") or 0)

        await wait_for(lambda: _eq(replicas(), 2), timeout=60, what="MachineSet raised to min 2")
    finally:
        await kube.delete(resource_path(AUTOSCALING, "clusterautoscalers", name="default"))


async def test_scale_down_cordons_and_caps_the_grace_period_of_evicted_pods(
        cluster: Any, operator: Any, kube: KubeClient, namespace: str) -> None:
    """OpenShift's ``scaleDown.cordonNodeBeforeTerminating: Enabled`` and ``maxPodGracePeriod``
    (clusterautoscaler.go AutoscalerArgs -> --cordon-node-before-terminating,
    --max-graceful-termination-sec): the removed node is tainted and cordoned (utils/taints
    ``MarkToBeDeleted``), and its pod is evicted with its 900 s grace period capped at 60 s
    (core/scaledown/actuation/drain.go ``evictPod``). A preDrain hook holds the Machine, so
    the machine controller's own cordon and drain have not run yet."""
    pool = f"capped-{namespace}"
    hooked = machine_set(pool, namespace, replicas=2)
    hooked["spec"]["template"]["spec"]["lifecycleHooks"] = {
        "preDrain": [{"name": "hold", "owner": "autoscaler-test"}]}
    assert apply(cluster, hooked).returncode == 0
    assert apply(cluster, machine_autoscaler("ma", namespace, pool, 0, 2)).returncode == 0

    async def machines() -> list[JSON]:
        items, _ = await kube.list_all(resource_path(MACHINES, "machines", namespace))
        return items

    async def registered() -> list[str] | None:
        names = sorted(((m.get("status") or {}).get("nodeRef") or {}).get("name", "")
                       for m in await machines())
        return names if len(names) == 2 and all(names) else None

    keep, leave = await wait_for(registered, timeout=90, what="two Machines with their Nodes")
    bare = pod("bare", namespace, "100m", pool)  # no controller: keeps its node
    bare["spec"]["nodeName"] = keep
    await kube.create(resource_path(CORE, "pods", namespace), bare)
    movable = pinned_replica_set("movable", namespace, leave)
    movable["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 900
    assert apply(cluster, movable).returncode == 0

    async def pinned() -> JSON | None:
        pods, _ = await kube.list_all(resource_path(CORE, "pods", namespace),
                                      labelSelector="app=movable")
        running = [p for p in pods if p.get("status", {}).get("phase") == "Running"]
        return running[0] if running else None

    first = await wait_for(pinned, timeout=60, what="the movable pod running")
    # Its replacement may go anywhere; every change of the evicted pod is watched from here.
    await kube.patch(resource_path(group_path("apps", "v1"), "replicasets", namespace, "movable"),
                     {"spec": {"template": {"spec": {"nodeName": None}}}})
    _, version = await kube.list_all(resource_path(CORE, "pods", namespace))
    seen: list[JSON] = []

    async def watch() -> None:
        async for event in kube.watch(resource_path(CORE, "pods", namespace), version,
                                      fieldSelector=f"metadata.name={first['metadata']['name']}"):
            seen.append(event)

    watcher = asyncio.create_task(watch())
    assert apply(cluster, cluster_autoscaler({
        "maxPodGracePeriod": 60,
        "scaleDown": {"enabled": True, "delayAfterAdd": "1s", "delayAfterDelete": "1s",
                      "delayAfterFailure": "1s", "unneededTime": "5s",
                      "cordonNodeBeforeTerminating": "Enabled"}})).returncode == 0
    try:
        async def evicted_with() -> int | None:
            for event in seen:
                meta = (event.get("object") or {}).get("metadata") or {}
                if meta.get("deletionTimestamp"):
                    return int(meta.get("deletionGracePeriodSeconds", -1))
            return None

        assert await wait_for(evicted_with, timeout=60, what="the movable pod evicted") == 60
        node = await kube.get(resource_path(CORE, "nodes", name=leave))
        assert node["spec"].get("unschedulable") is True
        assert any(t["key"] == "ToBeDeletedByClusterAutoscaler"
                   for t in node["spec"].get("taints") or [])
        async def deleting() -> list[str]:
            return [m["status"]["nodeRef"]["name"] for m in await machines()
                    if m["metadata"].get("deletionTimestamp")]

        assert await wait_for(deleting, timeout=60, what="its Machine being deleted") == [leave]
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError, KubeError):
            await watcher
        await kube.delete(resource_path(AUTOSCALING, "clusterautoscalers", name="default"))
        for m in await machines():
            await kube.patch(resource_path(MACHINES, "machines", namespace, m["metadata"]["name"]),
                             {"spec": {"lifecycleHooks": {"preDrain": None}}})
        with contextlib.suppress(KubeError):
            await kube.delete(resource_path(CORE, "pods", namespace, "bare"))


async def start_scale_down(kube: KubeClient, cluster: Any, namespace: str, pods: int,
                           movable: str) -> None:
    """Once the ``pods`` pinned pods of the namespace run: free ReplicaSet ``movable``'s
    replacement pods to go anywhere (kube-scheduler places them), then turn on a fast
    scale-down."""
    async def all_running() -> bool:
        found, _ = await kube.list_all(resource_path(CORE, "pods", namespace))
        return len(found) == pods and all(p.get("status", {}).get("phase") == "Running"
                                          for p in found)

    await wait_for(all_running, timeout=60, what=f"{pods} pinned pods running")
    await kube.patch(resource_path(group_path("apps", "v1"), "replicasets", namespace, movable),
                     {"spec": {"template": {"spec": {"nodeName": None}}}})
    assert apply(cluster, cluster_autoscaler({"scaleDown": {
        "enabled": True, "delayAfterAdd": "1s", "delayAfterDelete": "1s",
        "delayAfterFailure": "1s", "unneededTime": "5s"}})).returncode == 0
