"""Cluster-wide resource limits: how many more template nodes fit, and whether a node may go.

Design: as the OpenShift documentation says, totals are counted over *every* node of the cluster
(control-plane and unmanaged nodes included) plus the nodes already asked for but not registered
yet, from node capacity (as upstream's ``GetNodeCoresAndMemory``): cores rounded up per node,
memory in bytes against a GiB limit, GPUs per type (the extended resource named by the limit's
``type``). A scale-up is capped so that no maximum is passed; a scale-down never takes a total
below its minimum. A cluster already outside a range is not corrected, only not made worse.
``maxNodesTotal: 0`` (or unset) means no node-count cap, as upstream's ``GetCappedNewNodeCount``
(cluster-autoscaler core/scaleup/orchestrator/orchestrator.go) caps only when it is above 0.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from berthmaster.operator.autoscaler.config import ResourceLimits
from berthmaster.operator.autoscaler.resources import CPU, MEMORY, node_capacity

GIB = float(2**30)
GPU_LABEL = "cluster-api/accelerator"
NODES_LIMIT_REASON = "max total nodes in cluster reached"


@dataclass(frozen=True)
class Totals:
    nodes: int = 0
    cores: int = 0
    memory: float = 0.0  # bytes
    gpus: Mapping[str, float] = field(default_factory=dict)

    def plus(self, other: Totals, times: int = 1) -> Totals:
        gpus = dict(self.gpus)
        for kind, count in other.gpus.items():
            gpus[kind] = gpus.get(kind, 0.0) + count * times
        return Totals(self.nodes + other.nodes * times, self.cores + other.cores * times,
                      self.memory + other.memory * times, gpus)

    def minus(self, other: Totals) -> Totals:
        return self.plus(Totals(-other.nodes, -other.cores, -other.memory,
                                {k: -v for k, v in other.gpus.items()}))


def node_totals(node: Mapping[str, Any], gpu_types: Iterable[str] = ()) -> Totals:
    capacity = node_capacity(node)
    labels = (node.get("metadata") or {}).get("labels") or {}
    gpus: dict[str, float] = {}
    for kind in gpu_types:
        if capacity.get(kind):
            gpus[kind] = float(capacity[kind])
        elif labels.get(GPU_LABEL) == kind:
            # OpenShift labels GPU nodes with their GPU type; count the node's GPU devices.
            gpus[kind] = float(sum(v for k, v in capacity.items() if k.endswith("/gpu")))
    cores = -(-capacity.get(CPU, 0) // 1000)  # millicores -> whole cores, rounded up
    return Totals(1, cores, float(capacity.get(MEMORY, 0)), gpus)


def cluster_totals(nodes: Iterable[Mapping[str, Any]], limits: ResourceLimits,
                   upcoming: Iterable[tuple[Mapping[str, Any], int]] = ()) -> Totals:
    """Totals over every node, plus ``count`` copies of each upcoming template node."""
    types = [gpu.type for gpu in limits.gpus]
    total = Totals()
    for node in nodes:
        total = total.plus(node_totals(node, types))
    for template, count in upcoming:
        if count > 0:
            total = total.plus(node_totals(template, types), count)
    return total


@dataclass(frozen=True)
class Headroom:
    """How many more copies of a template node the limits allow (None: unlimited), and the
    limits that set that number."""

    nodes: int | None
    binding: tuple[str, ...] = ()

    def reason(self) -> str:
        """Upstream's words for the binding limits."""
        resources = [name for name in self.binding if name != "nodes"]
        if resources:
            return f"max cluster {', '.join(resources)} limit reached"
        return NODES_LIMIT_REASON


def headroom(totals: Totals, template: Mapping[str, Any], limits: ResourceLimits) -> Headroom:
    one = node_totals(template, [gpu.type for gpu in limits.gpus])
    caps: dict[str, int] = {}
    if limits.max_nodes_total:  # 0: no limit (upstream caps only when > 0)
        caps["nodes"] = limits.max_nodes_total - totals.nodes
    if limits.cores is not None and one.cores > 0:
        caps["cpu"] = math.floor((limits.cores.max - totals.cores) / one.cores)
    if limits.memory_gib is not None and one.memory > 0:
        caps["memory"] = math.floor((limits.memory_gib.max * GIB - totals.memory) / one.memory)
    for gpu in limits.gpus:
        per_node = one.gpus.get(gpu.type, 0.0)
        if per_node > 0:
            caps[gpu.type] = math.floor((gpu.max - totals.gpus.get(gpu.type, 0.0)) / per_node)
    if not caps:
        return Headroom(None)
    allowed = max(0, min(caps.values()))
    binding = tuple(name for name, cap in caps.items() if max(0, cap) == allowed)
    return Headroom(allowed, binding)


def removal_blocked_by(totals: Totals, node: Mapping[str, Any],
                       limits: ResourceLimits) -> list[str]:
    """The minimums removing ``node`` would go below (upstream: MinimalResourceLimitExceeded)."""
    after = totals.minus(node_totals(node, [gpu.type for gpu in limits.gpus]))
    one = node_totals(node, [gpu.type for gpu in limits.gpus])
    below = []
    if limits.cores is not None and one.cores > 0 and after.cores < limits.cores.min:
        below.append("cpu")
    if limits.memory_gib is not None and one.memory > 0 \
            and after.memory < limits.memory_gib.min * GIB:
        below.append("memory")
    for gpu in limits.gpus:
        if one.gpus.get(gpu.type, 0.0) > 0 and after.gpus.get(gpu.type, 0.0) < gpu.min:
            below.append(gpu.type)
    return below
