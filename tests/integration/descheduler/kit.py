"""Helpers for the descheduler's integration tests: owned pods on kwok nodes, running a pass.

Pods are created already bound (``spec.nodeName`` set to a kwok fake node), so kwok makes them
Running without a scheduler. Each carries a controller owner reference to a ConfigMap made for
the purpose: a real object (the garbage collector would delete pods whose owner does not
exist) that no controller manages (a ReplicaSet's controller would release or delete them).
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from dataclasses import dataclass
from typing import Any

import yaml

from berthmaster.foundation.kube import CORE, KubeClient, KubeError, group_path, resource_path
from berthmaster.tooling.python import BERTHMASTER_CLI
from tests.support import builders
from tests.support.builders import for_create
from tests.support.waiting import wait_for


async def make_owner(kube: KubeClient, namespace: str, name: str) -> dict[str, Any]:
    owner = await kube.create(resource_path(CORE, "configmaps", namespace), {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}})
    return {"apiVersion": "v1", "kind": "ConfigMap", "name": name,
            "uid": owner["metadata"]["uid"], "controller": True}


async def make_pod(kube: KubeClient, namespace: str, name: str, node: str,
                   owner: dict[str, Any] | None, cpu: str | None = None,
                   labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    """Create tests/support/builders.make_pod bound to ``node`` and controlled by ``owner`` (a
    reference from :func:`make_owner`; ``None``: a bare pod); extra keywords are spec fields."""
    body = for_create(builders.make_pod(name, node_name=node, cpu=cpu,
                                        labels=labels or {"app": "demo"},
                                        image="registry.k8s.io/pause:3.9", spec=spec))
    if owner:
        body["metadata"]["ownerReferences"] = [owner]
    return await kube.create(resource_path(CORE, "pods", namespace), body)


async def tainted_node_scene(kube: KubeClient, namespace: str, nodes: Any
                             ) -> tuple[str, dict[str, Any]]:
    """A node tainted ``dedicated=gpu:NoSchedule`` (and an untainted one) running an owned pod
    that does not tolerate the taint (``intruder``) and one that does (``welcome``); the tainted
    node's name and the owner reference."""
    tainted = await nodes.create(taints=[{"key": "dedicated", "value": "gpu",
                                          "effect": "NoSchedule"}])
    await nodes.create()
    node = tainted["metadata"]["name"]
    owner = await make_owner(kube, namespace, "owner")
    await make_pod(kube, namespace, "intruder", node, owner)
    await make_pod(kube, namespace, "welcome", node, owner, tolerations=[
        {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}])
    return node, owner


async def busy_node_scene(kube: KubeClient, namespace: str, nodes: Any, idle: int
                          ) -> tuple[dict[str, Any], list[str]]:
    """A 10-cpu node running eight owned pods requesting 1 cpu each (80% by requests) beside
    ``idle`` empty nodes of the same size, all Running; the busy node and the pods' names."""
    capacity = {"cpu": "10", "memory": "32Gi", "pods": "10"}
    hot = await nodes.create(capacity=capacity)
    for _ in range(idle):
        await nodes.create(capacity=capacity)
    names = [f"p{i}" for i in range(8)]
    for i, name in enumerate(names):
        owner = await make_owner(kube, namespace, f"owner-{i}")
        await make_pod(kube, namespace, name, hot["metadata"]["name"], owner, cpu="1")
    await wait_running(kube, namespace, names)
    return hot, names


async def wait_running(kube: KubeClient, namespace: str, names: list[str]) -> None:
    async def running() -> bool:
        for name in names:
            pod = await kube.get(resource_path(CORE, "pods", namespace, name))
            if (pod.get("status") or {}).get("phase") != "Running":
                return False
        return True

    await wait_for(running, timeout=60, what=f"pods {names} Running")


async def remaining(kube: KubeClient, namespace: str) -> set[str]:
    """Pods still there and not being deleted."""
    pods, _ = await kube.list_all(resource_path(CORE, "pods", namespace))
    return {p["metadata"]["name"] for p in pods if not p["metadata"].get("deletionTimestamp")}


async def events_for(kube: KubeClient, namespace: str) -> list[dict[str, Any]]:
    events, _ = await kube.list_all(resource_path(group_path("events.k8s.io", "v1"), "events",
                                                  namespace))
    return [e for e in events if e.get("action") == "Descheduled"]


@dataclass
class PassResult:
    code: int
    output: str


async def run_pass(kubeconfig: str, policy: dict[str, Any] | str, dry_run: bool = False,
                   termination_log: str | None = None, *flags: str) -> PassResult:
    """``berthmaster deschedule`` as a separate process, as the Job runs it (``flags`` added)."""
    text = policy if isinstance(policy, str) else yaml.safe_dump(policy)
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as handle:
        handle.write(text)
    args = [*BERTHMASTER_CLI, "deschedule", "--policy-config-file",
            handle.name, "--kubeconfig", kubeconfig, *flags]
    if dry_run:
        args.append("--dry-run")
    env = {**os.environ, "BERTHMASTER_TERMINATION_LOG": termination_log} if termination_log \
        else None
    process = await asyncio.create_subprocess_exec(
        *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, env=env)
    out, _ = await asyncio.wait_for(process.communicate(), timeout=120)
    return PassResult(process.returncode or 0, out.decode())


def v1alpha2(plugin: str, args: dict[str, Any], point: str = "deschedule",
             evictor: dict[str, Any] | None = None, **top: Any) -> dict[str, Any]:
    config = [{"name": plugin, "args": args}]
    if evictor:
        config.insert(0, {"name": "DefaultEvictor", "args": evictor})
    return {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy", **top,
            "profiles": [{"name": "test", "pluginConfig": config,
                          "plugins": {point: {"enabled": [plugin]}}}]}


async def ignore_missing(coro: Any) -> None:
    try:
        await coro
    except KubeError as error:
        if not error.not_found:
            raise
