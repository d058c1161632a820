"""Similar node groups: which MachineSets a balanced scale-up spreads its nodes over.

Design: upstream cluster-autoscaler's comparator for the Cluster API provider
(processors/nodegroupset ``CreateClusterAPINodeInfoComparator`` over
``IsCloudProviderNodeInfoSimilar``), on the template nodes of two MachineSets:

- capacity must be equal for every resource except memory, which may differ by
  ``MAX_CAPACITY_MEMORY_DIFFERENCE_RATIO`` (1.5 %) of the larger;
- allocatable may differ by ``MAX_ALLOCATABLE_DIFFERENCE_RATIO`` (5 %) per resource, and so may
  the free room (allocatable minus the requests of the pods already on the template,
  ``MAX_FREE_DIFFERENCE_RATIO``);
- labels must be equal except the per-node and per-zone ones upstream ignores, the
  provider-specific ones its Cluster API comparator ignores, and ``balancingIgnoredLabels``.

Taints are not compared, as upstream: a group whose taints keep the pods away cannot help them,
and the caller only balances over groups that can. Pure.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from berthmaster.operator.autoscaler.resources import (
    MEMORY,
    Amounts,
    node_allocatable,
    node_capacity,
    pod_requests,
)

MAX_ALLOCATABLE_DIFFERENCE_RATIO = 0.05
MAX_FREE_DIFFERENCE_RATIO = 0.05
MAX_CAPACITY_MEMORY_DIFFERENCE_RATIO = 0.015

# upstream's BasicIgnoredLabels
BASIC_IGNORED_LABELS = frozenset({
    "kubernetes.io/hostname",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "beta.kubernetes.io/fluentd-ds-ready",
    "kops.k8s.io/instancegroup",
})
# what upstream's Cluster API comparator ignores on top (provider-specific node labels)
CLUSTER_API_IGNORED_LABELS = frozenset({
    "topology.diskplugin.csi.alibabacloud.com/zone",
    "alpha.eksctl.io/instance-id",
    "alpha.eksctl.io/nodegroup-name",
    "eks.amazonaws.com/nodegroup",
    "k8s.amazonaws.com/eniConfig",
    "lifecycle",
    "topology.ebs.csi.aws.com/zone",
    "topology.disk.csi.azure.com/zone",
    "agentpool",
    "kubernetes.azure.com/agentpool",
    "topology.gke.io/zone",
    "ibm-cloud.kubernetes.io/worker-id",
    "vpc-block-csi-driver-labels",
    "ibm-cloud.kubernetes.io/vpc-instance-id",
})


def within_tolerance(first: float, second: float, ratio: float) -> bool:
    """Upstream's ``resourceListWithinTolerance``: the difference is at most ``ratio`` of the
    larger amount."""
    larger, smaller = max(first, second), min(first, second)
    return larger - smaller <= larger * ratio


def _maps_within(first: Amounts, second: Amounts, ratio: float) -> bool:
    if set(first) != set(second):
        return False  # a resource only one side has
    return all(within_tolerance(first[name], second[name], ratio) for name in first)


def _free(node: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> Amounts:
    allocatable = node_allocatable(node)
    requested: dict[str, int] = {}
    for pod in pods:
        for name, amount in pod_requests(pod).items():
            requested[name] = requested.get(name, 0) + amount
    return {name: allocatable.get(name, 0) - amount for name, amount in requested.items()}


def _labels(node: Mapping[str, Any], ignored: Collection[str]) -> dict[str, str]:
    labels = (node.get("metadata") or {}).get("labels") or {}
    return {k: str(v) for k, v in labels.items()
            if k not in ignored and k not in BASIC_IGNORED_LABELS
            and k not in CLUSTER_API_IGNORED_LABELS}


def similar(first: Mapping[str, Any], second: Mapping[str, Any],
            ignored_labels: Collection[str] = (),
            first_pods: Iterable[Mapping[str, Any]] = (),
            second_pods: Iterable[Mapping[str, Any]] = ()) -> bool:
    """Whether two template nodes are alike enough for their MachineSets to be balanced."""
    capacity = node_capacity(first), node_capacity(second)
    if set(capacity[0]) != set(capacity[1]):
        return False
    for name, amount in capacity[0].items():
        if name == MEMORY:
            if not within_tolerance(amount, capacity[1][name],
                                    MAX_CAPACITY_MEMORY_DIFFERENCE_RATIO):
                return False
        elif amount != capacity[1][name]:
            return False
    if not _maps_within(node_allocatable(first), node_allocatable(second),
                        MAX_ALLOCATABLE_DIFFERENCE_RATIO):
        return False
    free = _free(first, first_pods), _free(second, second_pods)
    if not _maps_within(free[0], free[1], MAX_FREE_DIFFERENCE_RATIO):
        return False
    return _labels(first, ignored_labels) == _labels(second, ignored_labels)
