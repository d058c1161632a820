"""How a Machine reports trouble, as upstream's machine controllers do: the provider cannot be
asked (InstanceExists Unknown), the instance vanished (phase Failed with the
``machine.openshift.io/instance-state: Unknown`` annotation), the Node cannot be read for its
drain (DrainRequeued)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml

from berthmaster.foundation.kube import CORE, KubeClient, resource_path
from berthmaster.operator.machines import api
from berthmaster.operator.machines.controller import MachineController
from berthmaster.operator.machines.providers.kwok import KIND, KwokProvider
from berthmaster.tooling.devcluster.cluster import RunningCluster
from tests.integration.operator.machines.conftest import (
    OperatorProcess,
    condition,
    get_machine,
    kwok_machine,
    machine_events,
    running_machine,
)
from tests.support.waiting import wait_for


async def default_account_client(kube: KubeClient, cluster: RunningCluster, namespace: str,
                                 folder: Path) -> KubeClient:
    """A client that authenticates as the namespace's ``default`` ServiceAccount, which no RBAC
    rule lets read Nodes: the API server answers 403 to every Node request it makes."""
    issued = await kube.create(
        resource_path(CORE, "serviceaccounts", namespace, "default", "token"),
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
         "spec": {"expirationSeconds": 3600}})
    admin = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    config = {"apiVersion": "v1", "kind": "Config",
              "clusters": [{"name": "local", "cluster": admin["clusters"][0]["cluster"]}],
              "users": [{"name": "default", "user": {"token": issued["status"]["token"]}}],
              "contexts": [{"name": "default",
                            "context": {"cluster": "local", "user": "default"}}],
              "current-context": "default"}
    path = folder / "default.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return await KubeClient.from_kubeconfig(str(path))


async def test_a_provider_that_cannot_be_asked_makes_instance_exists_unknown(
        kube: KubeClient, namespace: str, machine_api: RunningCluster, tmp_path: Path) -> None:
    """openshift/machine-api-operator pkg/controller/machine/controller.go, Reconcile: when
    ``actuator.Exists`` fails, InstanceExists becomes Unknown with reason
    ``ErrorCheckingProvider`` and message ``Failed to check if machine exists: <error>``, the
    status is patched and the error returned (retried with backoff). The kwok provider here
    asks the API server with credentials that may not read Nodes: a real 403."""
    name = f"{namespace}-blind"
    blind = await default_account_client(kube, machine_api, namespace, tmp_path)
    try:
        controller = MachineController(kube, {KIND: KwokProvider(blind)})
        await kube.create(api.machine_path(namespace), kwok_machine(name))
        # status.authoritativeAPI, the Paused condition (each a write the watch would bring
        # back), then the finalizer
        assert [await controller.reconcile((namespace, name)) for _ in range(3)] == [
            None, None, 0.0]
        with pytest.raises(Exception, match="forbidden"):
            await controller.reconcile((namespace, name))
    finally:
        await blind.close()
    machine = await get_machine(kube, namespace, name)
    exists = condition(machine, "InstanceExists")
    assert {k: exists.get(k) for k in ("status", "reason", "severity")} == {
        "status": "Unknown", "reason": "ErrorCheckingProvider", "severity": None}
    assert exists["message"] == (
        f'Failed to check if machine exists: nodes "{name}" is forbidden: User '
        f'"system:serviceaccount:{namespace}:default" cannot get resource "nodes" in API '
        'group "" at the cluster scope')
    assert machine is not None and not (machine.get("status") or {}).get("phase")
    assert api.INSTANCE_STATE not in (machine["metadata"].get("annotations") or {})
    await kube.patch(api.machine_path(namespace, name), {"metadata": {"finalizers": None}})
    await kube.delete(api.machine_path(namespace, name))


async def test_an_instance_deleted_outside_the_machine_api_fails_the_machine(
        kube: KubeClient, namespace: str, operator: OperatorProcess,
        cleanup_nodes: list[str]) -> None:
    """controller.go, Reconcile: a provisioned Machine whose instance is gone goes Failed with
    errorMessage ``can't find created instance`` (no errorReason: a plain error) and
    InstanceExists False / InstanceMissing; updateStatus first annotates a Failed Machine
    ``machine.openshift.io/instance-state: Unknown`` (patchFailedMachineInstanceAnnotation).
    A kwok instance is its Node, so deleting the Node is the instance vanishing."""
    name = f"{namespace}-vanished"
    cleanup_nodes.append(name)
    await kube.create(api.machine_path(namespace), kwok_machine(name))
    await running_machine(kube, namespace, name)
    await kube.delete(api.node_path(name))

    async def failed() -> dict[str, Any] | None:
        machine = await get_machine(kube, namespace, name)
        return machine if (machine or {}).get("status", {}).get("phase") == "Failed" else None

    machine = await wait_for(failed, timeout=60, what="machine Failed")
    assert machine["status"]["errorMessage"] == "can't find created instance"
    assert "errorReason" not in machine["status"]
    exists = condition(machine, "InstanceExists")
    assert (exists["status"], exists["reason"], exists["message"]) == (
        "False", "InstanceMissing", "Instance not found on provider")
    assert machine["metadata"]["annotations"][api.INSTANCE_STATE] == "Unknown"

    await kube.delete(api.machine_path(namespace, name))

    async def gone() -> bool:
        return await get_machine(kube, namespace, name) is None
    await wait_for(gone, timeout=60, what="failed machine deleted")


async def test_a_node_that_cannot_be_read_requeues_the_drain(
        kube: KubeClient, namespace: str, machine_api: RunningCluster, tmp_path: Path,
        cleanup_nodes: list[str]) -> None:
    """openshift/machine-api-operator pkg/controller/machine/drain_controller.go, drainNode:
    an error reading the Machine's Node (other than not found) fails the attempt with
    ``unable to get node "<name>": <error>``, reported as DrainRequeued and Drained False /
    DrainError, and retried. Here the controller's credentials may manage Machines and
    events in the namespace but not read Nodes: a real 403."""
    name = f"{namespace}-nonode"
    cleanup_nodes.append(name)
    await kube.create(api.machine_path(namespace), kwok_machine(name))
    admin = MachineController(kube, {KIND: KwokProvider(kube)})
    for _ in range(10):
        await admin.reconcile((namespace, name))
    await running_machine(kube, namespace, name, timeout=30)
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    await kube.create(resource_path(rbac, "roles", namespace), {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "machines-only"},
        "rules": [{"apiGroups": [api.GROUP], "resources": ["machines", "machines/status"],
                   "verbs": ["get", "list", "watch", "update", "patch"]},
                  {"apiGroups": [""], "resources": ["events"],
                   "verbs": ["get", "create", "patch"]}]})
    await kube.create(resource_path(rbac, "rolebindings", namespace), {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "machines-only"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                    "name": "machines-only"},
        "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": namespace}]})
    await kube.delete(api.machine_path(namespace, name))
    blind = await default_account_client(kube, machine_api, namespace, tmp_path)
    try:
        controller = MachineController(blind, {KIND: KwokProvider(blind)})
        for _ in range(3):  # MarkDeleting, then the drain attempt
            if (await controller.reconcile((namespace, name)) or 0.0) > 0:
                break
    finally:
        await blind.close()
    machine = await get_machine(kube, namespace, name)
    refused = (f'unable to get node "{name}": nodes "{name}" is forbidden: User '
               f'"system:serviceaccount:{namespace}:default" cannot get resource "nodes" in '
               'API group "" at the cluster scope')
    drained = condition(machine, "Drained")
    assert (drained["status"], drained["reason"], drained["message"]) == (
        "False", "DrainError", f"could not drain machine: {refused}")
    events = await machine_events(kube, namespace, name)
    assert events["DrainRequeued"]["message"] == f"Node drain requeued: {refused}"
    for _ in range(20):  # the full controller finishes the deletion
        if await get_machine(kube, namespace, name) is None:
            return
        await admin.reconcile((namespace, name))
        await asyncio.sleep(0.2)
    await kube.patch(api.machine_path(namespace, name), {"metadata": {"finalizers": None}})
