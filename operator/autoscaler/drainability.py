"""Whether one pod lets its node go: move it, ignore it, or keep the node (and why).

Design: upstream cluster-autoscaler's drainability rules, in its order, with its reason names
(``BlockingPodReason``) and messages:

- mirror (static) pods, terminal pods, DaemonSet pods and expendable pods (priority below
  ``podPriorityThreshold``) are ignored: they go with the node and need no new place;
- ``cluster-autoscaler.kubernetes.io/safe-to-evict: "true"`` makes a pod movable whatever else it
  is (only its PodDisruptionBudget still counts); ``"false"`` keeps the node;
- a pod without a controller, a kube-system pod no PDB covers, and a pod with local storage
  (emptyDir or hostPath, unless listed in ``safe-to-evict-local-volumes``; only when
  ``skipNodesWithLocalStorage``) keep the node;
- a pod whose PDB has no disruption left (counting the other pods of the same node) keeps it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from berthmaster.operator.autoscaler.config import AutoscalerConfig
from berthmaster.scheduler.model import label_selector
from berthmaster.scheduler.pods import controller_kind, is_daemonset_pod, is_mirror_pod, pod_ref

JSON = dict[str, Any]

SAFE_TO_EVICT_KEY = "cluster-autoscaler.kubernetes.io/safe-to-evict"
SAFE_TO_EVICT_LOCAL_VOLUMES_KEY = "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes"

# upstream's drain.BlockingPodReason names
NOT_SAFE_TO_EVICT = "NotSafeToEvictAnnotation"
NOT_REPLICATED = "NotReplicated"
UNMOVABLE_KUBE_SYSTEM = "UnmovableKubeSystemPod"
LOCAL_STORAGE = "LocalStorageRequested"
NOT_ENOUGH_PDB = "NotEnoughPdb"


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
        return pod_ref(pdb)

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


def classify(pod: Mapping[str, Any], config: AutoscalerConfig, budget: PdbBudget,
             priority: int) -> Verdict:
    meta = _meta(pod)
    annotations = meta.get("annotations") or {}
    name = pod_ref(pod)
    if is_mirror_pod(pod):
        return IGNORE
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return IGNORE
    if meta.get("deletionTimestamp"):
        return IGNORE
    if priority < config.pod_priority_threshold:
        return IGNORE  # expendable: killed with the node, never moved, never blocking
    safe = annotations.get(SAFE_TO_EVICT_KEY)
    if safe != "true":
        if is_daemonset_pod(pod):
            return IGNORE
        if safe == "false":
            return Verdict("block", NOT_SAFE_TO_EVICT,
                           f"pod annotated as not safe to evict present: {name}")
        if controller_kind(pod) is None:
            return Verdict("block", NOT_REPLICATED, f"{name} is not replicated")
        if meta.get("namespace") == "kube-system" and not budget.matching(pod):
            return Verdict("block", UNMOVABLE_KUBE_SYSTEM,
                           f"non-daemonset, non-mirrored, non-pdb-assigned kube-system pod "
                           f"present: {name}")
        if config.skip_nodes_with_local_storage and local_storage_volumes(pod):
            return Verdict("block", LOCAL_STORAGE, f"pod with local storage present: {name}")
    if budget.take(pod) is not None:
        return Verdict("block", NOT_ENOUGH_PDB,
                       f"not enough pod disruption budget to move {name}")
    return MOVE
