"""Least privilege that depends on values, asked of the real API server with
``kubectl auth can-i --as=system:serviceaccount:<ns>:<account>`` (docs/security.md has the
tables; test_on_the_api_server.py asks them of the default install, test_capability_rbac.py of
each capability alone).

Here: with no Machine provider that owns Nodes (``operator.machineProviders: []``; kwok's
instances are Nodes, other providers' Nodes are the cloud's) the operator may still read Nodes
and cordon them for a drain (kubectl drain's cordon is a patch of ``spec.unschedulable``), but
never create, update or delete one; and whatever the values, the descheduler Jobs' account
reads nothing but what a pass needs.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from berthmaster.tooling.devcluster.cluster import RunningCluster
from tests.integration.chart.chartkit import CRDS, render, to_yaml
from tests.integration.chart.test_on_the_api_server import can_i, kubectl_ok

RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")

# (account, verb, resource[, flags]) -> allowed; {ns} is the release namespace.
WITHOUT_NODE_OWNERS = [
    ("operator", ("get", "nodes"), True),
    ("operator", ("watch", "nodes"), True),
    ("operator", ("patch", "nodes"), True),
    ("operator", ("create", "pods", "--subresource=eviction", "-A"), True),
    ("operator", ("create", "nodes"), False),
    ("operator", ("delete", "nodes"), False),
    ("operator", ("update", "nodes"), False),
    ("operator", ("patch", "nodes", "--subresource=status"), False),
    ("operator", ("create", "clusterroles.rbac.authorization.k8s.io"), False),
    ("operator", ("escalate", "clusterroles.rbac.authorization.k8s.io"), False),
    ("operator", ("bind", "clusterroles.rbac.authorization.k8s.io"), False),
    ("operator", ("get", "configmaps", "-n", "default"), False),
    ("operator", ("get", "configmaps", "-n", "{ns}"), True),
    ("operator", ("create", "jobs.batch", "-n", "{ns}"), True),
    ("operator", ("create", "jobs.batch", "-n", "default"), False),
    ("descheduler", ("create", "pods", "--subresource=eviction", "-A"), True),
    ("descheduler", ("list", "nodes"), True),
    ("descheduler", ("delete", "nodes"), False),
    ("descheduler", ("get", "configmaps", "-n", "{ns}"), False),
    ("descheduler", ("get", "secrets", "-n", "{ns}"), False),
]


@pytest.fixture(scope="module")
def release(cluster: RunningCluster) -> Iterator[tuple[str, str]]:
    """(namespace, object prefix) of a release's RBAC with no Node-owning provider."""
    kubectl_ok(cluster, "apply", "--server-side", "--force-conflicts", "-f", str(CRDS))
    kubectl_ok(cluster, "wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    name = f"lp{uuid.uuid4().hex[:5]}"
    namespace = f"{name}-system"
    kubectl_ok(cluster, "create", "namespace", namespace)
    objects = [obj for obj in render(["scheduler.enabled=false", "operator.machineProviders=null"],
                                     release=name, namespace=namespace)
               if obj["kind"] in RBAC_KINDS]
    manifest = to_yaml(objects)
    kubectl_ok(cluster, "apply", "-f", "-", input=manifest)
    try:
        yield namespace, f"{name}-berthmaster"
    finally:
        cluster.kubectl("delete", "--ignore-not-found", "--wait=false", "-f", "-", input=manifest)
        cluster.kubectl("delete", "namespace", namespace, "--wait=false")


@pytest.mark.parametrize(("account", "question", "expected"), WITHOUT_NODE_OWNERS,
                         ids=[f"{a} {' '.join(q)}" for a, q, _ in WITHOUT_NODE_OWNERS])
def test_without_a_node_owning_provider(
        cluster: RunningCluster, release: tuple[str, str], account: str,
        question: tuple[str, ...], expected: bool) -> None:
    namespace, prefix = release
    asked = [part.format(ns=namespace) for part in question]
    assert can_i(cluster, f"{prefix}-{account}", namespace, *asked) is expected
