"""Which pods a node drain evicts, which it leaves, and how a failed drain is reported.

The drain mirrors ``kubectl drain --force --ignore-daemonsets --delete-emptydir-data`` with a
20 s timeout, the options upstream's machine drain controller passes to the kubectl drain
library:

- DaemonSet pods (whose controller owner reference is a DaemonSet, kubectl's
  ``daemonSetFilter``) and mirror (static) pods are left alone: their controllers would only
  recreate them, and the node is about to go anyway;
- pods using emptyDir are evicted (their scratch data goes with the node);
- pods with no controller are evicted too (``--force``);
- every eviction goes through the Eviction API, so PodDisruptionBudgets decide: a 429 answer is
  retried within the attempt's global timeout (kubectl's eviction loop), and a pod still refused
  when it runs out is reported as ``global timeout reached: 20s``; the controller then retries
  the whole drain with backoff;
- on an unreachable node (Ready=Unknown) pods cannot finish terminating, so, as upstream does,
  evictions ask for a 1 s grace period and pods already terminating for over a second count as
  gone. PDBs are still honoured;
- a failed attempt is retried as upstream's drain rate limiter retries a reconcile that returned
  an error: after 5 s, doubling per consecutive failure, at most 1000 s; a fixed 20 s requeue
  (upstream's RequeueAfterError) makes controller-runtime forget the item's failures, so the
  backoff after it starts again at 5 s (:func:`after_failure`);
- a control-plane node is not drained while another control-plane node is cordoned (upstream's
  ``isDrainAllowed``): the other may be being drained, and draining two at once can break etcd
  quorum. A node already cordoned goes on draining, so an interrupted drain can finish.

Pure: the controller lists pods and calls the API; this module only decides and words things,
in the words of the kubectl drain library and the machine-api-operator.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from berthmaster.foundation.durations import format_go_duration
from berthmaster.foundation.times import parse_rfc3339
from berthmaster.scheduler.pods import is_daemonset_pod, is_mirror_pod

Pod = dict[str, Any]

UNREACHABLE_GRACE_SECONDS = 1
SKIP_WAIT_FOR_DELETE_SECONDS = 1
CONTROL_PLANE_LABELS = ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master")
# upstream's RequeueAfterError for a drain that may not start now (or a failed cordon)
REQUEUE_AFTER = timedelta(seconds=20)
# upstream's newDrainRateLimiter (drain_controller.go): per-item exponential 5 s .. 1000 s
BACKOFF_BASE_SECONDS = 5.0
BACKOFF_CAP_SECONDS = 1000.0
NAMESPACE_TERMINATING_CAUSE = "NamespaceTerminating"


@dataclass(frozen=True)
class DrainFailure:
    """Why a drain attempt did not finish; ``requeue_after`` replaces the backoff when set."""

    message: str
    requeue_after: timedelta | None = None


@dataclass(frozen=True)
class DrainPlan:
    evict: list[Pod] = field(default_factory=list)
    ignored: list[tuple[Pod, str]] = field(default_factory=list)  # (pod, why)


def node_is_unreachable(node: dict[str, Any]) -> bool:
    """Upstream's test: the node's Ready condition is Unknown (the kubelet stopped reporting)."""
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready" and condition.get("status") == "Unknown":
            return True
    return False


def terminating_long_enough(pod: Pod, now: datetime, seconds: int) -> bool:
    deleted_at = parse_rfc3339((pod.get("metadata") or {}).get("deletionTimestamp"))
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


def global_timeout_error(pod: Pod, timeout: timedelta) -> str:
    """kubectl drain's evictPods once its context is done while a pod is still refused."""
    reached = format_go_duration(timeout.total_seconds())
    return eviction_error(pod, f"global timeout reached: {reached}")


def wait_error(pod: Pod, message: str) -> str:
    meta = pod.get("metadata") or {}
    return (f'error when waiting for pod "{meta.get("name")}" in namespace '
            f'"{meta.get("namespace")}" to terminate: {message}')


def wait_timeout_error(pod: Pod) -> str:
    """An evicted pod still there when the attempt's timeout ends (Go's context error)."""
    return wait_error(pod, "context deadline exceeded")


def aggregate(errors: list[str]) -> str:
    """apimachinery's ``utilerrors.NewAggregate(...).Error()``: one error as it is, several as
    ``[a, b]`` with repeats dropped."""
    unique = list(dict.fromkeys(errors))
    if len(unique) == 1:
        return unique[0]
    return "[" + ", ".join(unique) + "]"


def requeue_message(delay: timedelta) -> str:
    """upstream's ``RequeueAfterError.Error()``."""
    return f"requeue in: {format_go_duration(delay.total_seconds())}"


def namespace_terminating(status_body: dict[str, Any]) -> bool:
    """A 403 Status caused by the pod's namespace terminating (kubectl retries those)."""
    causes = (status_body.get("details") or {}).get("causes") or []
    return any(cause.get("type") == NAMESPACE_TERMINATING_CAUSE for cause in causes)


def is_control_plane_node(node: dict[str, Any]) -> bool:
    labels = (node.get("metadata") or {}).get("labels") or {}
    return any(label in labels for label in CONTROL_PLANE_LABELS)


def is_cordoned(node: dict[str, Any]) -> bool:
    return bool((node.get("spec") or {}).get("unschedulable"))


def must_check_control_plane_peers(node: dict[str, Any]) -> bool:
    """A drain of a not yet cordoned control-plane node needs the other nodes' state first."""
    return not is_cordoned(node) and is_control_plane_node(node)


def cordoned_control_plane_node(nodes: list[dict[str, Any]]) -> str | None:
    """The name of a cordoned control-plane node among ``nodes`` (it may be being drained)."""
    for other in nodes:
        if is_control_plane_node(other) and is_cordoned(other):
            return str((other.get("metadata") or {}).get("name"))
    return None


def drain_not_permitted() -> DrainFailure:
    return DrainFailure(f"drain not permitted: {requeue_message(REQUEUE_AFTER)}", REQUEUE_AFTER)


def cordon_failed() -> DrainFailure:
    return DrainFailure(requeue_message(REQUEUE_AFTER), REQUEUE_AFTER)


def node_drained_message(node_name: str) -> str:
    """The ``Deleted`` event upstream's drainNode posts once a drain has finished."""
    return f'Node "{node_name}" drained'


def backoff_delay(failures: int, base: float = BACKOFF_BASE_SECONDS,
                  cap: float = BACKOFF_CAP_SECONDS) -> float:
    """client-go's ItemExponentialFailureRateLimiter: ``base * 2**(failures - 1)``, capped."""
    return float(min(cap, base * 2 ** max(0, failures - 1)))


def after_failure(failure: DrainFailure, failures: int, base: float = BACKOFF_BASE_SECONDS,
                  cap: float = BACKOFF_CAP_SECONDS) -> tuple[float, int]:
    """The delay before the next attempt and the new count of consecutive backed-off failures:
    a fixed requeue resets the count (controller-runtime forgets the item on RequeueAfter)."""
    if failure.requeue_after is not None:
        return failure.requeue_after.total_seconds(), 0
    return backoff_delay(failures + 1, base, cap), failures + 1


# -- the per-pod loop's decisions (kubectl drain's evictPods and waitForDelete, k8s.io/kubectl
#    pkg/drain/drain.go); node_drain.NodeDrainer does the requests and the waiting

GONE = "gone"  # the pod is not there any more: nothing to wait for
RETRY = "retry"  # refused for now (a PDB's 429, a terminating namespace's 403): try again
REFUSED = "refused"  # any other answer: this pod's error for the attempt


def eviction_answer(status: int, body: dict[str, Any]) -> str:
    """What an error answer to an eviction means: 404 :data:`GONE`; 429 (a
    PodDisruptionBudget) or a 403 for a terminating namespace :data:`RETRY`; else
    :data:`REFUSED`."""
    if status == 404:
        return GONE
    if status == 429 or (status == 403 and namespace_terminating(body)):
        return RETRY
    return REFUSED


def evicted_pod_gone(evicted: Pod, current: Pod | None, *, unreachable: bool,
                     now: datetime) -> bool:
    """Whether the pod an eviction was made for is gone: not found, replaced by a new pod of
    the same name (another uid), or — on an unreachable node — terminating for longer than
    :data:`SKIP_WAIT_FOR_DELETE_SECONDS` (kubectl's ``SkipWaitForDeleteTimeoutSeconds``)."""
    if current is None:
        return True
    if (current.get("metadata") or {}).get("uid") != (evicted.get("metadata") or {}).get("uid"):
        return True
    return unreachable and terminating_long_enough(current, now, SKIP_WAIT_FOR_DELETE_SECONDS)


def pause(interval: float, deadline: float, now: float) -> float:
    """How long to wait before the next try: ``interval``, cut short at the deadline."""
    return max(0.0, min(interval, deadline - now))
