"""LeastRequestedPriority, MostRequestedPriority and BalancedResourceAllocation.

All three look at the cpu and memory requested on the node *with* the incoming pod, using the
non-zero requests (a container without requests counts as 100m cpu / 200Mi memory, so
request-less pods still spread), against allocatable, on the seed's 0..10 scale:

- least: ((allocatable - requested) * 10 / allocatable), averaged over cpu and memory;
- most: (requested * 10 / allocatable), averaged; 0 for an over-committed resource;
- balanced: 10 * (1 - |cpu fraction - memory fraction|); 0 when either fraction reaches 1.

Each reads the node's own totals and the pod's non-zero cpu and memory requests alone, so each
is node-local (``local_key``): the engine reuses a node's score until the node changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from berthmaster.scheduler.model import PodView
from berthmaster.scheduler.plugins.base import MAX_PRIORITY, Priority
from berthmaster.scheduler.snapshot import NodeInfo, Snapshot

LEAST_NAME = "LeastRequestedPriority"
LEAST_ALIASES = ("NodeResourcesLeastAllocated",)
MOST_NAME = "MostRequestedPriority"
MOST_ALIASES = ("NodeResourcesMostAllocated",)
BALANCED_NAME = "BalancedResourceAllocation"
BALANCED_ALIASES = ("NodeResourcesBalancedAllocation",)


def least_requested(requested: int, capacity: int) -> int:
    if capacity == 0 or requested > capacity:
        return 0
    return (capacity - requested) * MAX_PRIORITY // capacity


def most_requested(requested: int, capacity: int) -> int:
    if capacity == 0 or requested > capacity:
        return 0
    return requested * MAX_PRIORITY // capacity


def balanced(cpu: int, cpu_cap: int, mem: int, mem_cap: int) -> int:
    cpu_fraction = cpu / cpu_cap if cpu_cap else 1.0
    mem_fraction = mem / mem_cap if mem_cap else 1.0
    if cpu_fraction >= 1 or mem_fraction >= 1:
        return 0
    return int((1 - abs(cpu_fraction - mem_fraction)) * MAX_PRIORITY)


def nonzero_requests_key(pod: PodView) -> str:
    """All three priorities read of the pod: its non-zero cpu and memory requests."""
    return f"{pod.nonzero_cpu}/{pod.nonzero_memory}"


@dataclass
class _ResourcePriority(Priority):
    def local_key(self, pod: PodView) -> str | None:
        return nonzero_requests_key(pod)


@dataclass
class LeastRequested(_ResourcePriority):
    NAME = LEAST_NAME
    ALIASES = LEAST_ALIASES

    def scores(self, pod: PodView, snapshot: Snapshot,
               nodes: Sequence[NodeInfo]) -> list[int] | int:
        cpu, mem = pod.nonzero_cpu, pod.nonzero_memory
        out = []
        for n in nodes:
            c, cc = n.nonzero_cpu + cpu, n.alloc_cpu
            m, mc = n.nonzero_memory + mem, n.alloc_memory
            cs = (cc - c) * 10 // cc if cc and c <= cc else 0
            ms = (mc - m) * 10 // mc if mc and m <= mc else 0
            out.append((cs + ms) // 2)
        return out


@dataclass
class MostRequested(_ResourcePriority):
    NAME = MOST_NAME
    ALIASES = MOST_ALIASES

    def scores(self, pod: PodView, snapshot: Snapshot,
               nodes: Sequence[NodeInfo]) -> list[int] | int:
        cpu, mem = pod.nonzero_cpu, pod.nonzero_memory
        return [(most_requested(n.nonzero_cpu + cpu, n.alloc_cpu)
                 + most_requested(n.nonzero_memory + mem, n.alloc_memory)) // 2 for n in nodes]


@dataclass
class BalancedAllocation(_ResourcePriority):
    NAME = BALANCED_NAME
    ALIASES = BALANCED_ALIASES

    def scores(self, pod: PodView, snapshot: Snapshot,
               nodes: Sequence[NodeInfo]) -> list[int] | int:
        cpu, mem = pod.nonzero_cpu, pod.nonzero_memory
        out = []
        for n in nodes:
            cc, mc = n.alloc_cpu, n.alloc_memory
            if not cc or not mc:
                out.append(0)
                continue
            cf = (n.nonzero_cpu + cpu) / cc
            mf = (n.nonzero_memory + mem) / mc
            out.append(0 if cf >= 1 or mf >= 1 else int((1 - abs(cf - mf)) * 10))
        return out
