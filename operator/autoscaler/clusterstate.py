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


# Node-group backoff after a failed scale-up: upstream's utils/backoff/exponential_backoff.go
# with the defaults of --initial-node-group-backoff-duration, --max-node-group-backoff-duration
# and --node-group-backoff-reset-timeout (config/flags/flags.go); OpenShift has no fields.
INITIAL_BACKOFF = 5 * 60.0
MAX_BACKOFF = 30 * 60.0
BACKOFF_RESET_TIMEOUT = 3 * 60 * 60.0


def next_backoff(length: float | None, until: float | None, last_failure: float | None,
                 now: float) -> tuple[float, float]:
    """A group's backoff (length, until) after a scale-up failure at ``now``, given its previous
    one (``None``s when it has none). As upstream's ``exponentialBackoff.Backoff``: the first
    failure backs off ``INITIAL_BACKOFF``; a failure after the backoff ended doubles the
    previous length up to ``MAX_BACKOFF``; one while still backed off keeps the length (several
    failing requests do not compound); a group whose last failure is older than
    ``BACKOFF_RESET_TIMEOUT`` starts again from ``INITIAL_BACKOFF`` (``RemoveStaleBackoffData``)."""
    if length is None or until is None or (
            last_failure is not None and last_failure + BACKOFF_RESET_TIMEOUT < now):
        duration = INITIAL_BACKOFF
    elif until < now:
        duration = min(MAX_BACKOFF, 2 * length)
    else:
        duration = length
    return duration, now + duration
