"""Resource amounts as the placement engine counts them: ``{resource: int}`` with cpu in
millicores and everything else in whole units (bytes for memory and storage).

Design: no second quantity parser or request rule in the project; node allocatable/capacity
and pod requests (init containers, sidecars, overhead) come from the engine's model views.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from berthmaster.scheduler.model import CPU, MEMORY, NodeView, PodView, resource_list

Amounts = dict[str, int]
__all__ = ["CPU", "MEMORY", "Amounts", "node_allocatable", "node_capacity", "pod_requests"]


def node_allocatable(node: Mapping[str, Any]) -> Amounts:
    return dict(NodeView.from_dict(dict(node)).allocatable)


def node_capacity(node: Mapping[str, Any]) -> Amounts:
    status = node.get("status") or {}
    name = (node.get("metadata") or {}).get("name", "")
    return resource_list(status.get("capacity") or status.get("allocatable"),
                         f"node {name}: status.capacity")


def pod_requests(pod: Mapping[str, Any]) -> Amounts:
    return dict(PodView.from_dict(dict(pod)).requests)
