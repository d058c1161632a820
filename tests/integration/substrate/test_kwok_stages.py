"""The local control plane's kwok runs the chaos Stages and berthmaster's restart Stage.

Each Stage acts on labelled objects only: pods and nodes without the label keep kwok's ordinary
behaviour (Running with no restarts, Ready), which every other integration test relies on.
"""

from __future__ import annotations

import asyncio
from typing import Any

from berthmaster.foundation.kube import CORE, KubeClient, resource_path
from tests.integration.conftest import NodeFactory
from tests.support.chaos import (
    NODE_NOT_READY,
    fail_pod,
    label,
    make_node_not_ready,
    ready_status,
    restart_pod,
    wait_node_ready,
)
from tests.support.waiting import wait_for


async def running_pods(kube: KubeClient, namespace: str, node: str,
                       *names: str) -> dict[str, dict[str, Any]]:
    for name in names:
        await kube.create(resource_path(CORE, "pods", namespace), {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"nodeName": node,
                     "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"},
                                    {"name": "sidecar", "image": "registry.k8s.io/pause:3.10"}]}})

    async def all_running() -> dict[str, dict[str, Any]] | None:
        found = {}
        for name in names:
            pod = await kube.get(resource_path(CORE, "pods", namespace, name))
            if (pod.get("status") or {}).get("phase") != "Running":
                return None
            found[name] = pod
        return found

    return await wait_for(all_running, timeout=60, what=f"pods {names} Running")


def container_states(pod: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in (pod.get("status") or {}).get("containerStatuses") or []}


async def test_chaos_label_fails_a_pod_with_the_annotated_reason(
    kube: KubeClient, namespace: str, nodes: NodeFactory
) -> None:
    node = (await nodes.create())["metadata"]["name"]
    await running_pods(kube, namespace, node, "doomed", "bystander")

    failed = await fail_pod(kube, namespace, "doomed", reason="OOMKilled", exit_code=137)

    for status in container_states(failed).values():
        terminated = status["state"]["terminated"]
        assert (terminated["reason"], terminated["exitCode"]) == ("OOMKilled", 137), status
    bystander = await kube.get(resource_path(CORE, "pods", namespace, "bystander"))
    assert bystander["status"]["phase"] == "Running"
    assert all(s["restartCount"] == 0 and "running" in s["state"]
               for s in container_states(bystander).values())


async def test_restart_stage_counts_restarts_and_then_leaves_the_pod_alone(
    kube: KubeClient, namespace: str, nodes: NodeFactory
) -> None:
    node = (await nodes.create())["metadata"]["name"]
    await running_pods(kube, namespace, node, "flapping", "looping", "steady")

    flapping = await restart_pod(kube, namespace, "flapping", 5)
    looping = await restart_pod(kube, namespace, "looping", 7, waiting_reason="CrashLoopBackOff")

    assert flapping["status"]["phase"] == "Running"
    for status in container_states(flapping).values():
        assert status["restartCount"] == 5 and status["ready"] is True
        assert "running" in status["state"]
        assert status["lastState"]["terminated"]["reason"] == "Error"
    assert looping["status"]["phase"] == "Running"
    assert {c["type"]: c["status"] for c in looping["status"]["conditions"]}["Ready"] == "False"
    for status in container_states(looping).values():
        assert status["restartCount"] == 7 and status["ready"] is False
        assert status["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    steady = await kube.get(resource_path(CORE, "pods", namespace, "steady"))
    assert [s["restartCount"] for s in container_states(steady).values()] == [0, 0]

    # The Stage renders the same status when it sees its own write: kwok skips that patch, so
    # the pods settle instead of being re-patched for as long as they carry the label.
    versions = {name: pod["metadata"]["resourceVersion"]
                for name, pod in (("flapping", flapping), ("looping", looping))}
    await asyncio.sleep(4)
    for name, version in versions.items():
        pod = await kube.get(resource_path(CORE, "pods", namespace, name))
        assert pod["metadata"]["resourceVersion"] == version, f"{name} was patched again"


async def test_node_chaos_label_turns_a_node_not_ready_until_removed(
    kube: KubeClient, nodes: NodeFactory
) -> None:
    sick = (await nodes.create())["metadata"]["name"]
    healthy = (await nodes.create())["metadata"]["name"]

    node = await make_node_not_ready(kube, sick)

    (ready,) = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
    assert ready["reason"] == "nodeFailed"
    assert ready_status(await kube.get(resource_path(CORE, "nodes", name=healthy))) == "True"
    await label(kube, resource_path(CORE, "nodes", name=sick), {NODE_NOT_READY: None})
    await wait_node_ready(kube, sick, "True")
