"""Make kwok's fake pods fail or restart and its fake nodes turn NotReady, for integration tests.

The local control plane's kwok loads kwok's chaos Stages and berthmaster's restart Stage
(``berthmaster/tooling/devcluster/build.py`` ``KWOK_STAGE_DIRS`` and
``berthmaster/tooling/devcluster/data/kwok-stages.yaml``). Each acts only on an object carrying its
label, reading details from annotations; kwok then writes the status a kubelet would have
written. These helpers set the labels and annotations on an existing pod or node and wait for
kwok to have acted, so a test starts from the state it asked for.
"""

from __future__ import annotations

from typing import Any

from berthmaster.foundation.kube import CORE, KubeClient, resource_path
from tests.support.waiting import wait_for

# kwok's sigs.k8s.io/kwok kustomize/stage/pod/chaos/pod-container-running-failed.yaml
POD_FAILED = "pod-container-running-failed.stage.kwok.x-k8s.io"
# kwok's kustomize/stage/node/chaos/node-not-ready.yaml
NODE_NOT_READY = "node-not-ready.stage.kwok.x-k8s.io"
# berthmaster's container-restarts Stage
RESTARTS = "berthmaster.io/kwok-restarts"
RESTART_COUNT = "berthmaster.io/kwok-restart-count"
WAITING_REASON = "berthmaster.io/kwok-waiting-reason"


async def label(kube: KubeClient, path: str, labels: dict[str, str | None],
                annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """Merge-patch labels (``None`` removes one) and annotations onto the object at ``path``."""
    metadata: dict[str, Any] = {"labels": labels}
    if annotations:
        metadata["annotations"] = annotations
    return await kube.patch(path, {"metadata": metadata})


async def fail_pod(kube: KubeClient, namespace: str, name: str, reason: str = "",
                   exit_code: int | None = None) -> dict[str, Any]:
    """Turn a Running pod Failed (its containers terminated with ``reason`` and ``exit_code``,
    kwok's defaults ``containerFailed`` and 1 when not given); returns the Failed pod."""
    annotations = {}
    if reason:
        annotations[f"{POD_FAILED}/reason"] = reason
    if exit_code is not None:
        annotations[f"{POD_FAILED}/exit-code"] = str(exit_code)
    path = resource_path(CORE, "pods", namespace, name)
    await label(kube, path, {POD_FAILED: "true"}, annotations)

    async def failed() -> dict[str, Any] | None:
        pod = await kube.get(path)
        return pod if (pod.get("status") or {}).get("phase") == "Failed" else None

    return await wait_for(failed, timeout=60, what=f"pod {namespace}/{name} Failed")


async def restart_pod(kube: KubeClient, namespace: str, name: str, count: int,
                      waiting_reason: str = "") -> dict[str, Any]:
    """Give a Running pod's containers ``count`` restarts (and, with ``waiting_reason`` such as
    ``CrashLoopBackOff``, leave them waiting with that reason); returns the pod once kwok has."""
    annotations = {RESTART_COUNT: str(count)}
    if waiting_reason:
        annotations[WAITING_REASON] = waiting_reason
    path = resource_path(CORE, "pods", namespace, name)
    await label(kube, path, {RESTARTS: "true"}, annotations)

    async def restarted() -> dict[str, Any] | None:
        pod = await kube.get(path)
        statuses = (pod.get("status") or {}).get("containerStatuses") or []
        if not statuses or any(s.get("restartCount") != count for s in statuses):
            return None
        waiting = [((s.get("state") or {}).get("waiting") or {}).get("reason") for s in statuses]
        if waiting_reason and waiting != [waiting_reason] * len(statuses):
            return None
        return pod

    return await wait_for(restarted, timeout=60,
                          what=f"pod {namespace}/{name} with {count} restarts")


def ready_status(node: dict[str, Any]) -> str:
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return str(condition.get("status"))
    return ""


async def wait_node_ready(kube: KubeClient, name: str, status: str) -> dict[str, Any]:
    """Wait until the node's Ready condition has ``status`` ("True", "False"); returns it."""
    path = resource_path(CORE, "nodes", name=name)

    async def reached() -> dict[str, Any] | None:
        node = await kube.get(path)
        return node if ready_status(node) == status else None

    return await wait_for(reached, timeout=60, what=f"node {name} Ready={status}")


async def make_node_not_ready(kube: KubeClient, name: str) -> dict[str, Any]:
    """kwok reports the node Ready=False (reason ``nodeFailed``) while the label stays."""
    await label(kube, resource_path(CORE, "nodes", name=name), {NODE_NOT_READY: "true"})
    return await wait_node_ready(kube, name, "False")


async def make_node_unreachable(kube: KubeClient, name: str, timeout: float = 30) -> None:
    """Make a kwok node unreachable as a dead kubelet leaves it.

    kwok stops managing the node (its ``kwok.x-k8s.io/node`` annotation removed), so nothing
    writes the node's status any more; then the Ready condition is set ``Unknown`` with the
    node-lifecycle controller's reason and message. (The controller would do that itself after
    its grace period, but kwok v0.8 keeps renewing the Lease of a node it stopped managing, so
    the controller keeps believing the node alive.) Nothing sets Ready back to True afterwards.
    """
    path = resource_path(CORE, "nodes", None, name)
    await kube.patch(path, {"metadata": {"annotations": {"kwok.x-k8s.io/node": None}}})
    await kube.patch(resource_path(CORE, "nodes", None, name, "status"), {"status": {
        "conditions": [{"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
                        "message": "Kubelet stopped posting node status."}]}}, kind="strategic")

    async def unknown() -> bool:
        node = await kube.get(path)
        return any(c.get("type") == "Ready" and c.get("status") == "Unknown"
                   for c in (node.get("status") or {}).get("conditions") or [])

    await wait_for(unknown, timeout=timeout, what=f"node {name} Ready=Unknown")
