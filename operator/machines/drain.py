"""Which pods a node drain evicts, which it leaves, and how a failed drain is reported.

The drain mirrors ``kubectl drain --force --ignore-daemonsets --delete-emptydir-data``, the
options upstream's machine controller passes to the kubectl drain library:

- DaemonSet pods and mirror (static) pods are left alone: their controllers would only recreate
  them, and the node is about to go anyway;
- pods using emptyDir are evicted (their scratch data goes with the node);
- pods with no controller are evicted too (``--force``);
- every eviction goes through the Eviction API, so PodDisruptionBudgets decide: a 429 answer
  leaves the pod in place, the drain reports ``DrainError`` and the controller retries with
  backoff;
- on an unreachable node (Ready=Unknown) pods cannot finish terminating, so, as upstream does,
  evictions ask for a 1 s grace period and pods already terminating for over a second count as
  gone. PDBs are still honoured.

Pure: the controller lists pods and calls the API; this module only decides and words things.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from berthmaster.operator.machines.conditions import parse_time

Pod = dict[str, Any]

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
UNREACHABLE_GRACE_SECONDS = 1
SKIP_WAIT_FOR_DELETE_SECONDS = 1
PDB_MESSAGE = "Cannot evict pod as it would violate the pod's disruption budget."


@dataclass(frozen=True)
class DrainPlan:
    evict: list[Pod] = field(default_factory=list)
    ignored: list[tuple[Pod, str]] = field(default_factory=list)  # (pod, why)


def pod_ref(pod: Pod) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def controller_of(pod: Pod) -> dict[str, Any] | None:
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return dict(ref)
    return None


def is_daemonset_pod(pod: Pod) -> bool:
    owner = controller_of(pod)
    return owner is not None and owner.get("kind") == "DaemonSet"


def is_mirror_pod(pod: Pod) -> bool:
    return MIRROR_ANNOTATION in ((pod.get("metadata") or {}).get("annotations") or {})


def node_is_unreachable(node: dict[str, Any]) -> bool:
    """Upstream's test: the node's Ready condition is Unknown (the kubelet stopped reporting)."""
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready" and condition.get("status") == "Unknown":
            return True
    return False


def terminating_long_enough(pod: Pod, now: datetime, seconds: int) -> bool:
    deleted_at = parse_time((pod.get("metadata") or {}).get("deletionTimestamp"))
    return deleted_at is not None and now - deleted_at > timedelta(seconds=seconds)


def plan_drain(pods: list[Pod], *, unreachable: bool, now: datetime) -> DrainPlan:
    """Split the pods bound to a node into those to evict and those the drain leaves."""
    plan = DrainPlan()
    for pod in pods:
        if is_mirror_pod(pod):
            plan.ignored.append((pod, "mirror pod"))
        elif is_daemonset_pod(pod):
            plan.ignored.append((pod, "DaemonSet-managed"))
        elif unreachable and terminating_long_enough(pod, now, SKIP_WAIT_FOR_DELETE_SECONDS):
            plan.ignored.append((pod, "terminating on an unreachable node"))
        else:
            plan.evict.append(pod)
    return plan


def eviction_body(pod: Pod, *, unreachable: bool) -> dict[str, Any]:
    """The policy/v1 Eviction to POST to ``pods/<name>/eviction``."""
    meta = pod.get("metadata") or {}
    body: dict[str, Any] = {
        "apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": meta.get("name"), "namespace": meta.get("namespace")},
    }
    if unreachable:
        body["deleteOptions"] = {"gracePeriodSeconds": UNREACHABLE_GRACE_SECONDS}
    return body


def eviction_error(pod: Pod, message: str) -> str:
    meta = pod.get("metadata") or {}
    return f'error when evicting pods/"{meta.get("name")}" -n "{meta.get("namespace")}": {message}'


def still_terminating_error(pods: list[Pod]) -> str:
    names = ", ".join(pod_ref(p) for p in pods)
    return f"timed out waiting for pods to be deleted: {names}"


def drain_failure(errors: list[str]) -> str:
    return "; ".join(errors)


# Drain timeout (berthmaster, beyond upstream): an annotation holding a Go-style duration.
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s)")
_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def parse_duration(text: str) -> timedelta:
    """``"90s"``, ``"5m"``, ``"1h30m"`` -> timedelta; ValueError says what is accepted."""
    stripped = text.strip()
    if not stripped or _DURATION.sub("", stripped):
        raise ValueError(f"{text!r} is not a duration; use a number with a unit, "
                         "such as 90s, 5m or 1h30m")
    return timedelta(seconds=sum(float(n) * _UNITS[u] for n, u in _DURATION.findall(stripped)))


def format_duration(delta: timedelta) -> str:
    """Go's ``time.Duration.String()`` for whole seconds: ``5m0s``, ``1h30m0s``, ``45s``."""
    seconds = int(delta.total_seconds())
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"
