"""Cluster-wide limits: ``maxNodesTotal`` 0 is no limit, as upstream reads it.

cluster-autoscaler core/scaleup/orchestrator/orchestrator.go ``GetCappedNewNodeCount`` caps a
scale-up only when ``MaxNodesTotal > 0``; openshift/cluster-autoscaler-operator
pkg/controller/clusterautoscaler/clusterautoscaler.go passes ``resourceLimits.maxNodesTotal``
unchanged as ``--max-nodes-total`` (validator.go refuses only negative values), so a
ClusterAutoscaler with ``maxNodesTotal: 0`` scales without a node-count cap.
"""

from __future__ import annotations

from berthmaster.operator.autoscaler.config import ResourceLimits
from berthmaster.operator.autoscaler.limits import Headroom, Totals, headroom
from tests.unit.autoscaler.builders import make_node


def test_max_nodes_total_zero_is_no_limit() -> None:
    assert headroom(Totals(nodes=7), make_node("t"), ResourceLimits(max_nodes_total=0)) \
        == Headroom(None)


def test_max_nodes_total_positive_caps() -> None:
    room = headroom(Totals(nodes=7), make_node("t"), ResourceLimits(max_nodes_total=9))
    assert room == Headroom(2, ("nodes",))
