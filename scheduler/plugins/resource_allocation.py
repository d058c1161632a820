"""NodeResourcesFit's score (LeastAllocated, MostAllocated, RequestedToCapacityRatio) and
NodeResourcesBalancedAllocation, as kube-scheduler 1.35 computes them on 0..100.

Upstream: pkg/scheduler/framework/plugins/noderesources/ (resource_allocation.go,
least_allocated.go, most_allocated.go, requested_to_capacity_ratio.go, balanced_allocation.go).

- **The fit strategies** read each configured resource (default cpu and memory, weight 1 each)
  requested on the node *with* the incoming pod against allocatable. cpu and memory are the
  *non-zero* requests (a container without a request counts 100m / 200Mi, so request-less
  pods still spread: ``useRequested`` false). The node's totals count pod-level requests and
  in-place resizes (:mod:`berthmaster.scheduler.pod_resources`), the pod being placed only its
  containers: upstream builds these scorers without the feature gates. Another resource is
  skipped when the pod does not request it or the node has none. The per-resource scores are
  averaged by weight with integer division: least ``(alloc - req) * 100 // alloc``, most
  ``req * 100 // alloc`` (both 0 past capacity), RequestedToCapacityRatio a piecewise-linear
  function of ``req * 100 // alloc`` through the configured shape (utilization 0..100 ->
  score 0..10, scaled by 10).
- **BalancedAllocation** reads the *real* requests (``useRequested`` true), caps each fraction
  at 1 and scores ``(1 - std) * 100`` (for two resources std is ``|f1 - f2| / 2``); a
  best-effort pod (no request of any configured resource) is skipped (PreScore's Skip, a
  constant here).

The Policy priorities map onto these (v1.22 legacy_registry.go): LeastRequestedPriority and
MostRequestedPriority are NodeResourcesFit's strategies over cpu and memory, weight 1 each;
BalancedResourceAllocation is BalancedAllocation over cpu and memory.

Each reads the node's own totals and what the pod requests of the configured resources, so
each is node-local (``local_key``): the engine reuses a node's score until the node changes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from berthmaster.scheduler.model import CPU, MEMORY, PodView
from berthmaster.scheduler.plugins.base import MAX_PRIORITY, Priority
from berthmaster.scheduler.snapshot import NodeInfo, Snapshot

LEAST_NAME = "LeastRequestedPriority"
LEAST_ALIASES = ("NodeResourcesLeastAllocated",)
MOST_NAME = "MostRequestedPriority"
MOST_ALIASES = ("NodeResourcesMostAllocated",)
RATIO_NAME = "RequestedToCapacityRatioPriority"
RATIO_ALIASES = ("RequestedToCapacityRatio",)
FIT_NAME = "NodeResourcesFit"
BALANCED_NAME = "BalancedResourceAllocation"
BALANCED_ALIASES = ("NodeResourcesBalancedAllocation",)

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"
STRATEGIES = (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO)
# apis/config/v1/defaults.go: defaultResourceSpec
DEFAULT_RESOURCES: tuple[tuple[str, int], ...] = ((CPU, 1), (MEMORY, 1))
MAX_CUSTOM_PRIORITY_SCORE = 10  # config.MaxCustomPriorityScore: a shape's score scale
# scalar (extended) resources are those outside the native ones (schedutil.IsScalarResourceName)
_NATIVE = frozenset((CPU, MEMORY, "ephemeral-storage", "pods"))


def least_requested(requested: int, capacity: int) -> int:
    if capacity == 0 or requested > capacity:
        return 0
    return (capacity - requested) * MAX_PRIORITY // capacity


def most_requested(requested: int, capacity: int) -> int:
    """most_allocated.go, mostRequestedScore: more than the capacity (the non-zero defaults of
    pods without requests can get there) counts as the capacity, a full node, unlike
    least_allocated.go's leastRequestedScore, where it scores 0."""
    if capacity == 0:
        return 0
    return min(requested, capacity) * MAX_PRIORITY // capacity


def broken_linear(shape: Sequence[tuple[int, int]]) -> Callable[[int], int]:
    """requested_to_capacity_ratio.go's buildBrokenLinearFunction over ``shape`` (utilization,
    score) points already scaled to 0..100."""

    def fn(p: int) -> int:
        for i, (utilization, score) in enumerate(shape):
            if p <= utilization:
                if i == 0:
                    return shape[0][1]
                u0, s0 = shape[i - 1]
                return s0 + go_div((score - s0) * (p - u0), utilization - u0)
        return shape[-1][1]

    return fn


def go_div(a: int, b: int) -> int:
    """Go's integer division: truncated toward zero (Python's ``//`` floors)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def balanced(fractions: Sequence[float]) -> int:
    """balancedResourceScorer: (1 - the fractions' standard deviation) * 100, truncated."""
    capped = [min(f, 1.0) for f in fractions]
    std = 0.0
    if len(capped) == 2:
        std = abs((capped[0] - capped[1]) / 2)
    elif len(capped) > 2:
        mean = sum(capped) / len(capped)
        std = math.sqrt(sum((f - mean) * (f - mean) for f in capped) / len(capped))
    return int((1 - std) * MAX_PRIORITY)


def _pod_request(pod: PodView, resource: str, nonzero: bool) -> int:
    """resource_allocation.go, calculatePodResourceRequest. NodeResourcesFit's scorers
    (``nonzero``) count the pod being placed without its pod-level requests (their
    ``enablePodLevelResources`` is never set: fit.go, nodeResourceStrategyTypeMap), whereas the
    node's totals and BalancedAllocation count them: ``PodView.scored``
    (scheduler/pod_resources.py)."""
    if nonzero:
        scored = pod.scored
        if scored is not None:
            return scored.get(resource, 0)
        if resource == CPU:
            return pod.nonzero_cpu
        if resource == MEMORY:
            return pod.nonzero_memory
    return pod.requests.get(resource, 0)


def _node_requested(node: NodeInfo, resource: str, nonzero: bool) -> int:
    if resource == CPU:
        return node.nonzero_cpu if nonzero else node.req_cpu
    if resource == MEMORY:
        return node.nonzero_memory if nonzero else node.req_memory
    return node.requested.get(resource, 0)


def allocated(pod: PodView, node: NodeInfo, resources: Sequence[tuple[str, int]],
              nonzero: bool) -> list[tuple[int, int, int]]:
    """(requested with the pod, allocatable, weight) per resource the node has and the pod
    counts for (resource_allocation.go, calculateResourceAllocatableRequest)."""
    out = []
    for name, weight in resources:
        request = _pod_request(pod, name, nonzero)
        if request == 0 and name not in _NATIVE:
            continue  # an extended resource the pod does not ask for is not scored
        alloc = node.allocatable.get(name, 0)
        if alloc == 0:
            continue
        out.append((_node_requested(node, name, nonzero) + request, alloc, weight))
    return out


def fit_score(strategy: str, parts: Sequence[tuple[int, int, int]],
              shape: Callable[[int], int] | None = None) -> int:
    """The weighted average of the per-resource scores (integer division, as upstream)."""
    total = weights = 0
    for requested, alloc, weight in parts:
        if strategy == LEAST_ALLOCATED:
            score = least_requested(requested, alloc)
        elif strategy == MOST_ALLOCATED:
            score = most_requested(requested, alloc)
        else:
            assert shape is not None
            score = shape(MAX_PRIORITY if requested > alloc else requested * MAX_PRIORITY // alloc)
            if score <= 0:
                continue  # only positive scores count, with their weight
        total += score * weight
        weights += weight
    if weights == 0:
        return 0
    if strategy == REQUESTED_TO_CAPACITY_RATIO:
        return math.floor(total / weights + 0.5)  # math.Round(nodeScore / weightSum)
    return total // weights


@dataclass
class _ResourcePriority(Priority):
    resources: tuple[tuple[str, int], ...] = DEFAULT_RESOURCES
    NONZERO = True

    def local_key(self, pod: PodView) -> str | None:
        asked = [str(_pod_request(pod, name, self.NONZERO)) for name, _ in self.resources]
        return "/".join(asked)


@dataclass
class NodeResourcesFitScore(_ResourcePriority):
    """NodeResourcesFit's Score with its ``scoringStrategy``."""

    NAME = FIT_NAME
    strategy: str = LEAST_ALLOCATED
    shape: tuple[tuple[int, int], ...] = ()
    _shape_fn: Callable[[int], int] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.strategy == REQUESTED_TO_CAPACITY_RATIO:
            # scaled from 0..10 to 0..100 (requested_to_capacity_ratio.go)
            scaled = [(u, s * (MAX_PRIORITY // MAX_CUSTOM_PRIORITY_SCORE)) for u, s in self.shape]
            self._shape_fn = broken_linear(scaled)

    def scores(self, pod: PodView, snapshot: Snapshot,
               nodes: Sequence[NodeInfo]) -> list[int] | int:
        strategy, resources, shape = self.strategy, self.resources, self._shape_fn
        return [fit_score(strategy, allocated(pod, n, resources, True), shape) for n in nodes]


@dataclass
class LeastRequested(NodeResourcesFitScore):
    NAME = LEAST_NAME
    ALIASES = LEAST_ALIASES
    strategy: str = LEAST_ALLOCATED


@dataclass
class MostRequested(NodeResourcesFitScore):
    NAME = MOST_NAME
    ALIASES = MOST_ALIASES
    strategy: str = MOST_ALLOCATED


@dataclass
class BalancedAllocation(_ResourcePriority):
    NAME = BALANCED_NAME
    ALIASES = BALANCED_ALIASES
    NONZERO = False

    def scores(self, pod: PodView, snapshot: Snapshot,
               nodes: Sequence[NodeInfo]) -> list[int] | int:
        resources = self.resources
        if all(_pod_request(pod, name, False) == 0 for name, _ in resources):
            return 0  # a best-effort pod: PreScore's Skip
        return [balanced([r / a for r, a, _ in allocated(pod, n, resources, False)])
                for n in nodes]
