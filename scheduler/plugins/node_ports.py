"""PodFitsHostPorts (aliases PodFitsPorts, NodePorts): no host-port conflict on the node.

Two host ports conflict when protocol and port are equal and either address is the wildcard
``0.0.0.0`` or both addresses are equal (upstream's HostPortInfo semantics).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from berthmaster.scheduler.model import PodView
from berthmaster.scheduler.plugins.base import Predicate, PrefilterResult, Status, unschedulable
from berthmaster.scheduler.snapshot import NodeInfo, Snapshot

NAME = "PodFitsHostPorts"
ALIASES = ("PodFitsPorts", "NodePorts")
REASON = "node(s) didn't have free ports for the requested pod ports"
_FAIL = unschedulable(REASON)
WILDCARD = "0.0.0.0"


def conflicts(wanted: tuple[tuple[str, str, int], ...],
              used: Mapping[tuple[str, str, int], int]) -> bool:
    if not used:
        return False
    for ip, proto, port in wanted:
        if (ip, proto, port) in used:
            return True
        if ip == WILDCARD:
            if any(p == port and pr == proto for (_, pr, p) in used):
                return True
        elif (WILDCARD, proto, port) in used:
            return True
    return False


def fits(pod: PodView, node: NodeInfo) -> bool:
    return not conflicts(pod.host_ports, node.used_ports)


@dataclass
class NodePorts(Predicate):
    NAME = NAME
    ALIASES = ALIASES
    EVENTS = ("Pod/Delete", "Node/Add")

    def prefilter(self, pod: PodView, snapshot: Snapshot) -> PrefilterResult:
        if not pod.host_ports:
            return None
        wanted = pod.host_ports

        def check(node: NodeInfo) -> Status | None:
            return _FAIL if conflicts(wanted, node.used_ports) else None

        return check
