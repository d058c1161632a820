"""NodePreferAvoidPodsPriority (kube-scheduler: NodePreferAvoidPods).

A node's ``scheduler.alpha.kubernetes.io/preferAvoidPods`` annotation lists controllers whose
pods it would rather not run. Pods controlled by a listed ReplicationController or ReplicaSet
score 0 there, everything else 100; the default policy weighs it 10000, so it dominates.
Pods owned by other kinds of controllers are ignored, as the seed says.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from berthmaster.scheduler.model import PodView
from berthmaster.scheduler.plugins.base import MAX_PRIORITY, Priority
from berthmaster.scheduler.snapshot import PREFER_AVOID_PODS_ANNOTATION, NodeInfo, Snapshot

NAME = "NodePreferAvoidPodsPriority"
ALIASES = ("NodePreferAvoidPods",)
CONTROLLER_KINDS = ("ReplicationController", "ReplicaSet")


def avoided(pod: PodView, node: NodeInfo) -> bool:
    if pod.controller is None or pod.controller[0] not in CONTROLLER_KINDS:
        return False
    raw = node.view.annotations.get(PREFER_AVOID_PODS_ANNOTATION)
    if not raw:
        return False
    try:
        entries = json.loads(raw).get("preferAvoidPods") or []
    except (ValueError, AttributeError):
        return False
    kind, _, uid = pod.controller
    for entry in entries:
        ctl = ((entry or {}).get("podSignature") or {}).get("podController") or {}
        if ctl.get("kind") == kind and ctl.get("uid") == uid:
            return True
    return False


@dataclass
class NodePreferAvoidPods(Priority):
    NAME = NAME
    ALIASES = ALIASES

    def scores(self, pod: PodView, snapshot: Snapshot,
               nodes: Sequence[NodeInfo]) -> list[int] | int:
        if not snapshot.avoid_pods_nodes or pod.controller is None \
                or pod.controller[0] not in CONTROLLER_KINDS:
            return MAX_PRIORITY
        flagged = snapshot.avoid_pods_nodes
        return [0 if n.name in flagged and avoided(pod, n) else MAX_PRIORITY for n in nodes]
