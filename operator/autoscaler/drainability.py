"""Whether one pod lets its node go: move it, ignore it, or keep the node (and why).

Design: upstream cluster-autoscaler's drainability rules (simulator/drainability/rules/rules.go
``Default``), in its order, with its reason names (utils/drain ``BlockingPodReason``) and
messages:

- mirror (static) pods, terminal pods, pods already being deleted, DaemonSet pods and
  expendable pods (priority below ``podPriorityThreshold``) are ignored: they go with the node
  and need no new place;
- ``cluster-autoscaler.kubernetes.io/safe-to-evict: "true"`` makes a pod movable whatever else it
  is (only its PodDisruptionBudget still counts);
- then the blocking rules, first match wins: ``NotReplicated`` (rules/replicated: no controller,
  or a controller of a kind other than ReplicationController, ReplicaSet, Job or StatefulSet,
  as with upstream's default ``--skip-nodes-with-custom-controller-pods=true``),
  ``UnmovableKubeSystemPod`` (rules/system: a kube-system pod no PDB covers, younger than
  ``--blocking-system-pod-distruption-timeout``, one hour, counted from the pod's
  creationTimestamp; an older one is evicted like any other; upstream's
  ``--skip-nodes-with-system-pods`` defaults to true and OpenShift has no field for either),
  ``NotSafeToEvictAnnotation`` (``safe-to-evict: "false"``),
  ``LocalStorageRequested`` (emptyDir or hostPath, unless listed in
  ``safe-to-evict-local-volumes``; only when ``skipNodesWithLocalStorage``) and ``NotEnoughPdb``
  (a PDB with no disruption left, counting the other pods of the same node).

Before all of them but the mirror and terminating pods, upstream's ``ControllerNotFound``
(rules/replicacount, enabled by the default ``--skip-nodes-with-custom-controller-pods=true``):
a pod whose controlling ReplicationController, ReplicaSet, Job, StatefulSet (``apps``) or
DaemonSet (``apps``, for a DaemonSet pod) no longer exists keeps its node, since nothing would
recreate it. The controllers are the :class:`Controllers` the loop lists (or watches); without
them (``None``) the rule is skipped, as upstream's with no listers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from berthmaster.foundation.keys import key_of
from berthmaster.foundation.times import parse_rfc3339
from berthmaster.operator.autoscaler.config import AutoscalerConfig
from berthmaster.scheduler.model import label_selector
from berthmaster.scheduler.pods import (
    controller_kind,
    controller_of,
    is_daemonset_pod,
    is_mirror_pod,
)

JSON = dict[str, Any]

SAFE_TO_EVICT_KEY = "cluster-autoscaler.kubernetes.io/safe-to-evict"
SAFE_TO_EVICT_LOCAL_VOLUMES_KEY = "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes"

# upstream's drain.BlockingPodReason names
NOT_SAFE_TO_EVICT = "NotSafeToEvictAnnotation"
NOT_REPLICATED = "NotReplicated"
UNMOVABLE_KUBE_SYSTEM = "UnmovableKubeSystemPod"
LOCAL_STORAGE = "LocalStorageRequested"
NOT_ENOUGH_PDB = "NotEnoughPdb"
CONTROLLER_NOT_FOUND = "ControllerNotFound"

# (kind, namespace, name) of every ReplicationController, ReplicaSet, Job, StatefulSet and
# DaemonSet that exists
Controllers = frozenset[tuple[str, str, str]]
# rules/replicacount: the kinds it looks up, its message, and the not-found error of the
# kind's lister (``errors.NewNotFound(<group>.Resource("<singular>"), name)``).
_CHECKED = {
    "ReplicationController": (None, "replication controller for {pod} is not available, err: {err}",
                              "replicationcontroller"),
    "ReplicaSet": (None, "replication controller for {pod} is not available, err: {err}",
                   "replicaset.apps"),
    "Job": (None, "job for {pod} is not available: err: {err}", "job.batch"),
    "StatefulSet": ("apps", "statefulset for {pod} is not available: err: {err}",
                    "statefulset.apps"),
    "DaemonSet": ("apps", "daemonset for {pod} is not present, err: {err}", "daemonset.apps"),
}

# --blocking-system-pod-distruption-timeout (config/flags/flags.go; the spelling is upstream's)
BLOCKING_SYSTEM_POD_DISRUPTION_TIMEOUT = 60 * 60.0

# rules/replicated ``replicatedKind``: the controllers that recreate an evicted pod elsewhere
REPLICATED_KINDS = frozenset({"ReplicationController", "ReplicaSet", "Job", "StatefulSet"})


@dataclass(frozen=True)
class Verdict:
    action: Literal["move", "ignore", "block"]
    reason: str = ""
    message: str = ""


MOVE = Verdict("move")
IGNORE = Verdict("ignore")


def _meta(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    return pod.get("metadata") or {}


def local_storage_volumes(pod: Mapping[str, Any]) -> list[str]:
    allowed = {v.strip() for v in str((_meta(pod).get("annotations") or {}).get(
        SAFE_TO_EVICT_LOCAL_VOLUMES_KEY, "")).split(",") if v.strip()}
    return [str(v.get("name")) for v in (pod.get("spec") or {}).get("volumes") or []
            if ("emptyDir" in v or "hostPath" in v) and v.get("name") not in allowed]


class PdbBudget:
    """Disruptions left per PodDisruptionBudget while one node's pods are counted against them."""

    def __init__(self, pdbs: Sequence[Mapping[str, Any]]):
        self._pdbs = [(p, label_selector((p.get("spec") or {}).get("selector"))) for p in pdbs]
        self._left = {self._key(p): int((p.get("status") or {}).get("disruptionsAllowed", 0))
                      for p in pdbs}

    @staticmethod
    def _key(pdb: Mapping[str, Any]) -> str:
        return key_of(pdb)

    def matching(self, pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        namespace = _meta(pod).get("namespace")
        labels = _meta(pod).get("labels") or {}
        return [pdb for pdb, selector in self._pdbs
                if _meta(pdb).get("namespace") == namespace and selector.matches(labels)]

    def save(self) -> dict[str, int]:
        return dict(self._left)

    def restore(self, saved: Mapping[str, int]) -> None:
        self._left = dict(saved)

    def take(self, pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """Count one disruption for ``pod``; the PDB that has none left, if any."""
        pdbs = self.matching(pod)
        for pdb in pdbs:
            if self._left[self._key(pdb)] < 1:
                return pdb
        for pdb in pdbs:
            self._left[self._key(pdb)] -= 1
        return None


# What the loop lists (or watches) for ControllerNotFound: kind -> (API path, plural).
CONTROLLER_KINDS = {"ReplicationController": ("/api/v1", "replicationcontrollers"),
                    "ReplicaSet": ("/apis/apps/v1", "replicasets"),
                    "Job": ("/apis/batch/v1", "jobs"),
                    "StatefulSet": ("/apis/apps/v1", "statefulsets"),
                    "DaemonSet": ("/apis/apps/v1", "daemonsets")}


def controllers_of(by_kind: Mapping[str, Sequence[Mapping[str, Any]]]) -> Controllers:
    """The existing controllers, from the objects listed per kind."""
    return frozenset((kind, str(_meta(o).get("namespace")), str(_meta(o).get("name")))
                     for kind, objects in by_kind.items() for o in objects)


def controller_not_found(pod: Mapping[str, Any], controllers: Controllers | None
                         ) -> Verdict | None:
    """rules/replicacount ``Drainable``: the pod's controller is gone (pure)."""
    ref = controller_of(pod)
    if controllers is None or ref is None:
        return None
    kind = str(ref.get("kind"))
    checked = _CHECKED.get(kind)
    if checked is None or (kind == "DaemonSet") != is_daemonset_pod(pod):
        return None
    group, message, resource = checked
    if group is not None and str(ref.get("apiVersion") or "").rpartition("/")[0] != group:
        return None  # upstream has no lister for that group
    if (kind, str(_meta(pod).get("namespace")), str(ref.get("name"))) in controllers:
        return None
    err = f'{resource} "{ref.get("name")}" not found'
    return Verdict("block", CONTROLLER_NOT_FOUND, message.format(pod=key_of(pod), err=err))


def classify(pod: Mapping[str, Any], config: AutoscalerConfig, budget: PdbBudget,
             priority: int, now: float | None = None,
             controllers: Controllers | None = None) -> Verdict:
    """The pod's verdict; ``now`` (wall clock) dates kube-system pods (None: they never age);
    ``controllers``: what exists, for ControllerNotFound (None: not checked)."""
    meta = _meta(pod)
    annotations = meta.get("annotations") or {}
    name = key_of(pod)
    if is_mirror_pod(pod):
        return IGNORE
    if meta.get("deletionTimestamp"):
        return IGNORE
    gone = controller_not_found(pod, controllers)  # rules.go: before daemonset and terminal
    if gone is not None:
        return gone
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return IGNORE
    if priority < config.pod_priority_threshold:
        return IGNORE  # expendable: killed with the node, never moved, never blocking
    if is_daemonset_pod(pod):
        return IGNORE  # rules/daemonset, before safe-to-evict
    if annotations.get(SAFE_TO_EVICT_KEY) != "true":
        blocked = _blocking_rule(pod, config, budget, now)
        if blocked is not None:
            return blocked
    if budget.take(pod) is not None:
        return Verdict("block", NOT_ENOUGH_PDB,
                       f"not enough pod disruption budget to move {name}")
    return MOVE


def _young(pod: Mapping[str, Any], now: float | None) -> bool:
    """Created less than the system-pod timeout before ``now`` (unknown: young)."""
    created = parse_rfc3339(_meta(pod).get("creationTimestamp"))
    return now is None or created is None or \
        now - created.timestamp() < BLOCKING_SYSTEM_POD_DISRUPTION_TIMEOUT


def _blocking_rule(pod: Mapping[str, Any], config: AutoscalerConfig,
                   budget: PdbBudget, now: float | None) -> Verdict | None:
    """Upstream's blocking rules before the PDB one, in rules.go's order."""
    meta = _meta(pod)
    short = str(meta.get("name"))  # upstream's system, notsafetoevict, localstorage messages
    if controller_kind(pod) not in REPLICATED_KINDS:
        return Verdict("block", NOT_REPLICATED, f"{key_of(pod)} is not replicated")
    if meta.get("namespace") == "kube-system" and not budget.matching(pod) and _young(pod, now):
        return Verdict("block", UNMOVABLE_KUBE_SYSTEM,
                       f"non-daemonset, non-mirrored, non-pdb-assigned kube-system pod "
                       f"present: {short}")
    if (meta.get("annotations") or {}).get(SAFE_TO_EVICT_KEY) == "false":
        return Verdict("block", NOT_SAFE_TO_EVICT,
                       f"pod annotated as not safe to evict present: {short}")
    if config.skip_nodes_with_local_storage and local_storage_volumes(pod):
        return Verdict("block", LOCAL_STORAGE, f"pod with local storage present: {short}")
    return None
