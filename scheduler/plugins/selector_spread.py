"""SelectorSpreadPriority (alias ServiceSpreadingPriority; kube-scheduler: SelectorSpread).

The services, replication controllers, ReplicaSets and StatefulSets selecting the pod define
its peers (pods in its namespace matched by all of those selectors). Nodes with fewer peers
score higher; when nodes carry zone labels, two thirds of the score comes from the zone's
count, so peers spread across zones as well as nodes. Counts are over the scored nodes, as
upstream.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from berthmaster.scheduler.model import LabelSelector, PodView, zone_key
from berthmaster.scheduler.plugins.base import MAX_PRIORITY, Priority
from berthmaster.scheduler.snapshot import NodeInfo, Snapshot

NAME = "SelectorSpreadPriority"
ALIASES = ("ServiceSpreadingPriority", "SelectorSpread")
ZONE_WEIGHTING = 2.0 / 3.0
def peer_counts(pod: PodView, selectors: Sequence[LabelSelector], snapshot: Snapshot
                ) -> dict[str, int]:
    """node name -> number of the pod's peers counted there."""
    counts: dict[str, int] = {}
    for p in snapshot.pods_matching(selectors[0], (pod.namespace,)):
        if p.deleting or p.uid == pod.uid:
            continue
        if all(s.matches(p.labels) for s in selectors[1:]):
            counts[p.node_name] = counts.get(p.node_name, 0) + 1
    return counts


@dataclass
class SelectorSpread(Priority):
    NAME = NAME
    ALIASES = ALIASES

    def scores(self, pod: PodView, snapshot: Snapshot,
               nodes: Sequence[NodeInfo]) -> list[int] | int:
        selectors = snapshot.controller_selectors(pod)
        if not selectors:
            return MAX_PRIORITY
        counts = peer_counts(pod, selectors, snapshot)
        per_node = [counts.get(n.name, 0) for n in nodes]
        zones = [zone_key(n.labels) for n in nodes]
        by_zone: dict[str, int] = {}
        for z, c in zip(zones, per_node, strict=True):
            if z:
                by_zone[z] = by_zone.get(z, 0) + c
        max_node = max(per_node, default=0)
        max_zone = max(by_zone.values(), default=0)
        out = []
        for z, c in zip(zones, per_node, strict=True):
            score = float(MAX_PRIORITY)
            if max_node > 0:
                score = MAX_PRIORITY * ((max_node - c) / max_node)
            if by_zone and z:
                zone_score = float(MAX_PRIORITY)
                if max_zone > 0:
                    zone_score = MAX_PRIORITY * ((max_zone - by_zone[z]) / max_zone)
                score = score * (1.0 - ZONE_WEIGHTING) + ZONE_WEIGHTING * zone_score
            out.append(int(score))
        return out
