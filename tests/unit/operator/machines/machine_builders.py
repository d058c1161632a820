"""Machine builders for the machines unit tests, and their pods (tests/support/builders.py
builds every Pod and Node)."""

from __future__ import annotations

from typing import Any

from berthmaster.operator.machines import api
from berthmaster.scheduler.pods import MIRROR_ANNOTATION
from tests.support import builders


def make_machine(name: str = "m", *, namespace: str = "ns", pre_drain: list[tuple[str, str]] = (),
                 pre_terminate: list[tuple[str, str]] = (), deleting: bool = False,
                 finalizer: bool = True, phase: str | None = None, node: str | None = None,
                 conditions: list[dict[str, Any]] | None = None,
                 progress: dict[str, Any] | None = None, annotations: dict[str, str] | None = None,
                 created: str = "2026-01-01T00:00:00Z", labels: dict[str, str] | None = None,
                 error_reason: str | None = None, owner_uid: str | None = None,
                 ) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-{name}",
                            "creationTimestamp": created, "resourceVersion": "1",
                            "labels": dict(labels or {}), "annotations": dict(annotations or {})}
    if finalizer:
        meta["finalizers"] = [api.FINALIZER]
    if deleting:
        meta["deletionTimestamp"] = "2026-01-02T00:00:00Z"
    if owner_uid:
        meta["ownerReferences"] = [{"kind": "MachineSet", "name": "ms", "uid": owner_uid,
                                    "controller": True}]
    hooks: dict[str, Any] = {}
    if pre_drain:
        hooks["preDrain"] = [{"name": n, "owner": o} for n, o in pre_drain]
    if pre_terminate:
        hooks["preTerminate"] = [{"name": n, "owner": o} for n, o in pre_terminate]
    status: dict[str, Any] = {"conditions": list(conditions or [])}
    if phase:
        status["phase"] = phase
    if node:
        status["nodeRef"] = {"kind": "Node", "name": node}
    if progress:
        status["deletionProgress"] = dict(progress)
    if error_reason:
        status["errorReason"] = error_reason
    return {"apiVersion": api.API_VERSION, "kind": "Machine", "metadata": meta,
            "spec": {"lifecycleHooks": hooks}, "status": status}


def make_pod(name: str, *, namespace: str = "ns", owner_kind: str | None = "ReplicaSet",
             mirror: bool = False, deleted_at: str | None = None) -> dict[str, Any]:
    """tests/support/builders.make_pod bound to Node ``n``, controlled by an ``owner_kind``
    (``None``: a bare pod); ``mirror`` adds the kubelet's mirror-pod annotation."""
    return builders.make_pod(
        name, namespace, node_name="n", deleted_at=deleted_at,
        owner=(owner_kind, "owner", f"owner-{name}") if owner_kind else None,
        annotations={MIRROR_ANNOTATION: "hash"} if mirror else None)
