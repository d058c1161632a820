"""A PodGroup's status from its pods: pure, as scheduler-plugins' PodGroup controller
(kubernetes-sigs/scheduler-plugins pkg/controllers/podgroup_controller.go, Reconcile,
getCurrentPodStats, fillOccupiedObj) decides it.

The phase moves: "" -> ``Pending``; ``Pending`` -> ``Scheduling`` once the group has
``minMember`` pods (``occupiedBy`` is then the first pod's owners, ``namespace/name`` sorted and
comma-joined); afterwards ``running``, ``succeeded`` and ``failed`` count the pods by phase and
the phase is ``Pending`` (too few pods), ``Scheduling``, ``Running`` (running + succeeded reach
minMember), ``Failed`` (some failed, and failed + running + succeeded reach minMember) or
``Finished`` (succeeded reach minMember). ``Finished`` and ``Failed`` are final.
berthmaster also fills ``scheduled``, the pods bound to a node, and moves a group whose
``minMember`` pods are all bound but not yet running to ``Scheduled``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

JSON = dict[str, Any]
Obj = Mapping[str, Any]

PENDING, SCHEDULING, SCHEDULED = "Pending", "Scheduling", "Scheduled"
RUNNING, FINISHED, FAILED = "Running", "Finished", "Failed"
FINAL = (FINISHED, FAILED)


def _phase_of(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "")


def occupied_by(pod: Obj) -> str | None:
    """fillOccupiedObj: the pod's owners as ``namespace/name``, sorted, comma-joined."""
    meta = pod.get("metadata") or {}
    refs = sorted(f"{meta.get('namespace', '')}/{ref.get('name', '')}"
                  for ref in meta.get("ownerReferences") or ())
    return ",".join(refs) or None


def decide_status(group: Obj, pods: Sequence[Obj]) -> JSON:
    """The status ``group`` should have given its ``pods`` (those labelled with its name in
    its namespace); only the fields the controller owns."""
    status: JSON = dict(group.get("status") or {})
    phase = str(status.get("phase") or "")
    if phase in FINAL:
        return status
    wanted = int((group.get("spec") or {}).get("minMember") or 0)
    status["scheduled"] = sum(1 for p in pods if (p.get("spec") or {}).get("nodeName"))
    if phase == "":
        status["phase"] = PENDING
        return status
    if phase == PENDING:
        if len(pods) >= wanted:
            status["phase"] = SCHEDULING
            if pods:
                owners = occupied_by(pods[0])
                if owners:
                    status["occupiedBy"] = owners
        return status
    phases = [_phase_of(p) for p in pods]
    running, succeeded, failed = (phases.count(RUNNING), phases.count("Succeeded"),
                                  phases.count(FAILED))
    status.update(running=running, succeeded=succeeded, failed=failed)
    if len(pods) < wanted:
        status["phase"] = PENDING
        return status
    if succeeded + running < wanted:
        status["phase"] = SCHEDULED if status["scheduled"] >= wanted else SCHEDULING
    if succeeded + running >= wanted:
        status["phase"] = RUNNING
    if failed and failed + running + succeeded >= wanted:
        status["phase"] = FAILED
    if succeeded >= wanted:
        status["phase"] = FINISHED
    return status


def settle(group: Obj, pods: Sequence[Obj]) -> JSON:
    """:func:`decide_status` until it stops changing (the controller takes one step per
    reconcile; one reconcile here takes them all)."""
    current: Obj = group
    for _ in range(4):
        status = decide_status(current, pods)
        if status == (current.get("status") or {}):
            return status
        current = {**current, "status": status}
    return dict(current.get("status") or {})
