"""The configurable ``serviceAffinity`` predicate and ``serviceAntiAffinity`` priority.

serviceAffinity (checkServiceAffinity), labels L: the pod must land on a node whose values for
L equal those the pod's service already uses. Values come first from the pod's nodeSelector;
the missing ones from the node of the first already-placed pod of the pod's first service. With
neither, any node fits (the first pod picks the domain for the rest).

serviceAntiAffinity, label l: nodes without l score 0; the others score
100 * (service pods - service pods in the node's l-domain) / service pods, 100 when the service
has no pods yet, so the service spreads across l's values.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from berthmaster.scheduler.model import PodView
from berthmaster.scheduler.plugins.base import (
    MAX_PRIORITY,
    Predicate,
    PrefilterResult,
    Priority,
    Status,
    unresolvable,
)
from berthmaster.scheduler.snapshot import NodeInfo, Snapshot

NAME = "checkServiceAffinity"
ALIASES = ("CheckServiceAffinity", "ServiceAffinity")
ARGUMENT = "serviceAffinity"
PRIORITY_NAME = "ServiceAntiAffinityPriority"
PRIORITY_ALIASES = ("ServiceAntiAffinity",)
PRIORITY_ARGUMENT = "serviceAntiAffinity"
REASON = "node(s) didn't match service affinity"
_FAIL = unresolvable(REASON)


def service_peers(pod: PodView, snapshot: Snapshot) -> list[PodView] | None:
    """Placed pods of the pod's first service (None when the pod belongs to no service)."""
    keys = sorted(k for k in snapshot.services if k.startswith(pod.namespace + "/")
                  and snapshot.selector_of("Service", k).matches(pod.labels))
    if not keys:
        return None
    selector = snapshot.selector_of("Service", keys[0])
    peers = [p for p in snapshot.pods_matching(selector, (pod.namespace,)) if p.uid != pod.uid]
    peers.sort(key=lambda p: (p.created, p.key))
    return peers


def affinity_labels(pod: PodView, labels: Sequence[str], snapshot: Snapshot) -> dict[str, str]:
    wanted = {k: pod.node_selector[k] for k in labels if k in pod.node_selector}
    if len(wanted) < len(labels):
        peers = service_peers(pod, snapshot)
        if peers:
            node = snapshot.node(peers[0].node_name)
            if node is not None:
                for k in labels:
                    if k not in wanted and k in node.labels:
                        wanted[k] = node.labels[k]
    return wanted


@dataclass
class ServiceAffinity(Predicate):
    NAME = NAME
    ALIASES = ALIASES
    EVENTS = ("Pod/Add", "Service/Add", "Node/UpdateNodeLabel")
    labels: list[str] = field(default_factory=list)

    def prefilter(self, pod: PodView, snapshot: Snapshot) -> PrefilterResult:
        wanted = tuple(affinity_labels(pod, self.labels, snapshot).items())
        if not wanted:
            return None

        def check(node: NodeInfo) -> Status | None:
            labels = node.labels
            for k, v in wanted:
                if labels.get(k) != v:
                    return _FAIL
            return None

        return check


@dataclass
class ServiceAntiAffinity(Priority):
    NAME = PRIORITY_NAME
    ALIASES = PRIORITY_ALIASES
    label: str = ""

    def scores(self, pod: PodView, snapshot: Snapshot,
               nodes: Sequence[NodeInfo]) -> list[int] | int:
        label = self.label
        if label not in snapshot.label_index:
            return 0
        peers = service_peers(pod, snapshot) or []
        counts: dict[str, int] = {}
        total = 0
        for p in peers:
            node = snapshot.node(p.node_name)
            if node is not None and label in node.labels:
                counts[node.labels[label]] = counts.get(node.labels[label], 0) + 1
                total += 1
        out = []
        for n in nodes:
            v = n.labels.get(label)
            if v is None:
                out.append(0)
            elif total == 0:
                out.append(MAX_PRIORITY)
            else:
                out.append(int(MAX_PRIORITY * (total - counts.get(v, 0)) / total))
        return out
