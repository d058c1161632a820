"""The demo's Machine story: a MachineSet grows kwok Machines, a Machine waits on its hook, and
a MachineHealthCheck replaces the Machine of a NotReady Node.

Runs against the operator that ``berthmaster demo`` starts beside the cluster. It applies the
Machine CRDs and the hook admission policy from ``deploy/``, creates a two-replica MachineSet
(kwok provider: each Machine's instance is a fake Node), then a Machine carrying a preDrain
hook, deletes it and shows it held with ``Drainable=False`` (``HookPresent``) until the hook is
removed. Last, a MachineHealthCheck watches the MachineSet's Machines; kwok's node-not-ready
stage turns one Node Ready=False and the check deletes its Machine, which the MachineSet
replaces. Everything printed is read back from the API server.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from berthmaster.foundation.kube import CORE, KubeClient, KubeError, group_path, resource_path
from berthmaster.tooling.devcluster.cluster import ClusterError, RunningCluster

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
MACHINE_API = group_path("machine.openshift.io", "v1beta1")
PROVIDER = {"apiVersion": "berthmaster.io/v1alpha1", "kind": "KwokMachineProviderSpec",
            "instanceType": "kwok.small", "capacity": {"cpu": "2", "memory": "8Gi"}}
HOOK = {"name": "demo-drain-hook", "owner": "berthmaster-demo"}
SET_LABEL = "machine.openshift.io/cluster-api-machineset"
NODE_NOT_READY = "node-not-ready.stage.kwok.x-k8s.io"  # kwok's chaos stage (README)


def install_machine_api(cluster: RunningCluster) -> None:
    """Apply the Machine CRDs and the admission policy, and wait until they serve."""
    for manifest in ("crds/machine.openshift.io_machines.yaml",
                     "crds/machine.openshift.io_machinesets.yaml",
                     "crds/machine.openshift.io_machinehealthchecks.yaml",
                     "machine-lifecycle-hooks-policy.yaml"):
        result = cluster.kubectl("apply", "--server-side", "-f", str(DEPLOY / manifest))
        if result.returncode != 0:
            raise ClusterError(f"applying deploy/{manifest} failed: {result.stderr.strip()}")
    result = cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                             "crd/machines.machine.openshift.io",
                             "crd/machinesets.machine.openshift.io",
                             "crd/machinehealthchecks.machine.openshift.io")
    if result.returncode != 0:
        raise ClusterError(f"the Machine CRDs did not become Established: {result.stderr.strip()}")


def machine_set(namespace: str, name: str, replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {SET_LABEL: name}},
            "template": {
                "metadata": {"labels": {SET_LABEL: name}},
                "spec": {
                    # The taint keeps the demo's pods off these Nodes (docs/machines.md's example).
                    "taints": [{"key": "key1", "value": "value1", "effect": "NoExecute"}],
                    "providerSpec": {"value": PROVIDER},
                },
            },
        },
    }


def hooked_machine(namespace: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"lifecycleHooks": {"preDrain": [HOOK]},
                 "taints": [{"key": "key1", "value": "value1", "effect": "NoExecute"}],
                 "providerSpec": {"value": PROVIDER}},
    }


async def _until(check: Callable[[], Awaitable[Any]], what: str, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = await check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise KubeError(0, "Timeout", f"waited {timeout:.0f}s for {what}")
        await asyncio.sleep(0.3)


def _condition(machine: dict[str, Any], kind: str) -> dict[str, Any]:
    for condition in machine.get("status", {}).get("conditions") or []:
        if condition.get("type") == kind:
            return dict(condition)
    return {}


async def machine_story(kube: KubeClient, namespace: str) -> list[str]:
    """Run the story; returns the lines to print."""
    lines: list[str] = []
    machines = resource_path(MACHINE_API, "machines", namespace)

    await kube.create(resource_path(MACHINE_API, "machinesets", namespace),
                      machine_set(namespace, "demo-workers", 2))

    async def set_running() -> list[dict[str, Any]] | None:
        listed = (await kube.get(machines, labelSelector=f"{SET_LABEL}=demo-workers"))["items"]
        running = [m for m in listed if m.get("status", {}).get("phase") == "Running"]
        return listed if len(running) == 2 and len(listed) == 2 else None

    started = time.monotonic()
    members = await _until(set_running, "MachineSet demo-workers to have 2 Running Machines")
    lines.append(f"MachineSet demo-workers: 2/2 Machines Running in "
                 f"{time.monotonic() - started:.1f}s")
    for machine in sorted(members, key=lambda m: m["metadata"]["name"]):
        node = (machine["status"].get("nodeRef") or {}).get("name", "-")
        lines.append(f"  {machine['metadata']['name']:<28} phase Running   node {node}")

    await kube.create(machines, hooked_machine(namespace, "demo-hooked"))
    path = resource_path(MACHINE_API, "machines", namespace, "demo-hooked")

    async def hooked_running() -> bool:
        return bool((await kube.get(path)).get("status", {}).get("phase") == "Running")

    await _until(hooked_running, "Machine demo-hooked to run")
    await kube.delete(path)

    async def held() -> dict[str, Any] | None:
        condition = _condition(await kube.get(path), "Drainable")
        return condition if condition.get("status") == "False" else None

    drainable = await _until(held, "Machine demo-hooked to be held by its preDrain hook")
    lines.append(f"Machine demo-hooked deleted with preDrain hook {HOOK['name']!r}:")
    lines.append(f"  Drainable=False reason {drainable.get('reason')}: "
                 f"{drainable.get('message', '')}")
    await kube.patch(path, {"spec": {"lifecycleHooks": {"preDrain": None}}})
    started = time.monotonic()

    async def gone() -> bool:
        try:
            await kube.get(path)
        except KubeError as error:
            return error.not_found
        return False

    await _until(gone, "Machine demo-hooked to finish deleting after its hook was removed")
    lines.append(f"  hook removed -> drained, instance and Node deleted, Machine gone in "
                 f"{time.monotonic() - started:.1f}s")
    lines += await health_check_story(kube, namespace, members)
    return lines


def health_check(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineHealthCheck",
        "metadata": {"name": "demo-workers", "namespace": namespace},
        "spec": {"selector": {"matchLabels": {SET_LABEL: "demo-workers"}},
                 "maxUnhealthy": 1,
                 "unhealthyConditions": [{"type": "Ready", "status": "False", "timeout": "5s"},
                                         {"type": "Ready", "status": "Unknown",
                                          "timeout": "5s"}]},
    }


async def health_check_story(kube: KubeClient, namespace: str,
                             members: list[dict[str, Any]]) -> list[str]:
    """A MachineHealthCheck replaces the Machine whose Node kwok turns NotReady."""
    checks = resource_path(MACHINE_API, "machinehealthchecks", namespace)
    machines = resource_path(MACHINE_API, "machines", namespace)
    await kube.create(checks, health_check(namespace))
    sick = sorted(members, key=lambda m: m["metadata"]["name"])[0]
    sick_name, node = sick["metadata"]["name"], sick["status"]["nodeRef"]["name"]
    await kube.patch(resource_path(CORE, "nodes", None, node),
                     {"metadata": {"labels": {NODE_NOT_READY: "true"}}})
    started = time.monotonic()

    async def replaced() -> list[dict[str, Any]] | None:
        listed = (await kube.get(machines, labelSelector=f"{SET_LABEL}=demo-workers"))["items"]
        names = [m["metadata"]["name"] for m in listed]
        running = [m for m in listed if m.get("status", {}).get("phase") == "Running"]
        return listed if sick_name not in names and len(running) == 2 == len(listed) else None

    before = {m["metadata"]["name"] for m in members}
    now = await _until(replaced, f"Machine {sick_name} to be replaced", timeout=90)
    elapsed = time.monotonic() - started
    new = sorted(m["metadata"]["name"] for m in now if m["metadata"]["name"] not in before)
    path = resource_path(MACHINE_API, "machinehealthchecks", namespace, "demo-workers")

    async def settled() -> dict[str, Any] | None:
        status = (await kube.get(path)).get("status", {})
        # Both counts: the status written while the old Machine was still going counted it.
        counts = (status.get("expectedMachines"), status.get("currentHealthy"))
        return status if counts == (2, 2) else None

    status = await _until(settled, "MachineHealthCheck demo-workers to count 2 healthy Machines")
    events = (await kube.get(resource_path(CORE, "events", namespace),
                             fieldSelector=f"involvedObject.name={sick_name}"))["items"]
    deleted = [e["message"] for e in events if e.get("reason") == "MachineDeleted"]
    return ["MachineHealthCheck demo-workers (Ready False or Unknown for 5s, maxUnhealthy 1):",
            f"  kwok turned Node {node} NotReady -> Machine {sick_name} deleted, replaced by "
            f"{', '.join(new)} in {elapsed:.1f}s",
            f"  MachineDeleted: {deleted[0] if deleted else '-'}",
            f"  expectedMachines {status.get('expectedMachines')}, currentHealthy "
            f"{status.get('currentHealthy')}"]
