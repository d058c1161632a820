"""Fake nodes for the local control plane: pure builders of Node objects kwok will manage.

A fake node is an ordinary ``v1/Node`` carrying the annotation kwok is told to select
(``kwok.x-k8s.io/node: fake``); kwok then keeps it Ready with heartbeats and turns pods bound to
it Running, so scheduling, drains, evictions and PodDisruptionBudgets behave as on a real
cluster. Capacity doubles as allocatable. The zone, when given, becomes the well-known
``topology.kubernetes.io/zone`` label; a cloud-style zone (``us-east-1a``) also gives the region
label (``us-east-1``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from berthmaster.tooling.devcluster.cluster import FAKE_NODE_ANNOTATION, FAKE_NODE_VALUE

DEFAULT_CAPACITY = {"cpu": "4", "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi"}
ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"


def fake_node(
    name: str,
    *,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, Any]] | None = None,
    capacity: Mapping[str, str] | None = None,
    zone: str | None = None,
    unschedulable: bool = False,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The Node object to POST for one kwok-managed fake node."""
    all_labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "type": "kwok",
    }
    if zone:
        all_labels[ZONE_LABEL] = zone
        cloud_style = re.fullmatch(r"(.*\d)[a-z]", zone)  # us-east-1a -> region us-east-1
        if cloud_style:
            all_labels[REGION_LABEL] = cloud_style.group(1)
    all_labels.update(labels or {})
    resources = {**DEFAULT_CAPACITY, **(capacity or {})}
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = [dict(t) for t in taints]
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": all_labels,
            "annotations": {FAKE_NODE_ANNOTATION: FAKE_NODE_VALUE,
                            "node.alpha.kubernetes.io/ttl": "0", **(annotations or {})},
        },
        "spec": spec,
        "status": {"capacity": dict(resources), "allocatable": dict(resources),
                   "nodeInfo": {"kubeletVersion": "fake", "architecture": "amd64",
                                "operatingSystem": "linux"}},
    }


def kind_workers(config: Mapping[str, Any], prefix: str = "e2e-worker") -> list[dict[str, Any]]:
    """A kind cluster configuration's workers as fake nodes: the same labels, and the taints
    their kubeadm ``JoinConfiguration`` patches give them (deploy/kind-cluster.yaml is the
    shape both e2e clusters share)."""
    nodes = []
    workers = [n for n in config.get("nodes") or [] if n.get("role") == "worker"]
    for index, worker in enumerate(workers, start=1):
        taints: list[dict[str, Any]] = []
        for patch in worker.get("kubeadmConfigPatches") or []:
            document = yaml.safe_load(patch) or {}
            taints += (document.get("nodeRegistration") or {}).get("taints") or []
        nodes.append(fake_node(f"{prefix}-{index}", labels=worker.get("labels") or {},
                               taints=taints))
    return nodes

