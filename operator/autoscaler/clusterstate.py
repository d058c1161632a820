"""Whether the cluster is healthy enough to autoscale: upstream cluster-autoscaler's rule.

Design: one pure decision, made once per loop from the nodes the loop lists, which both stops
the loop from scaling and sets ``cluster_autoscaler_cluster_safe_to_autoscale``. Upstream
(cluster-autoscaler ``clusterstate.ClusterStateRegistry.IsClusterHealthy``, called from
``core.StaticAutoscaler.RunOnce``) refuses to autoscale when more nodes are unready than
``--ok-total-unready-count`` (3) and than ``--max-total-unready-percentage`` (45 %) of all
nodes ("Cluster is unhealthy").

An empty cluster, or one with no ready node, is autoscaled: upstream's ``actOnEmptyCluster``
stops there ("Cluster has no ready nodes.") only when ``--scale-up-from-zero`` is off, and that
flag defaults to true (OpenShift's operator does not set it), so MachineSets can grow from zero.

A node still starting (registered, carrying a startup taint) is not counted as unready, as
upstream's NotStarted nodes are not; OpenShift's ClusterAutoscaler has no field for either
threshold, so upstream's defaults apply.
"""

from __future__ import annotations

MAX_TOTAL_UNREADY_PERCENTAGE = 45.0
OK_TOTAL_UNREADY_COUNT = 3

UNHEALTHY = "Cluster is unhealthy"


def unsafe_to_autoscale(total: int, unready: int) -> str | None:
    """Why the cluster may not be autoscaled now (upstream's message), or None when it may.

    ``total`` counts every registered node, ``unready`` those neither Ready nor starting."""
    if unready > OK_TOTAL_UNREADY_COUNT and \
            unready > MAX_TOTAL_UNREADY_PERCENTAGE / 100.0 * total:
        return UNHEALTHY
    return None
