"""ClusterState.pods_on: read once per node, yet evictions made later in the pass still count."""

from __future__ import annotations

from berthmaster.scheduler.descheduler.context import ClusterState
from tests.support.builders import make_node, make_pod


def test_pods_on_drops_pods_evicted_after_the_first_listing() -> None:
    running = make_pod("running", node_name="a")
    other = make_pod("other", node_name="a")
    failed = make_pod("failed", node_name="a", phase="Failed")
    state = ClusterState([make_node("a")], [running, other, failed])
    assert state.pods_on("a") == [running, other]
    assert state.pods_on("a", include_terminal=True) == [running, other, failed]
    state.evicted.add(running["metadata"]["uid"])
    assert state.pods_on("a") == [other]
    assert state.pods_on("a", include_terminal=True) == [other, failed]
    assert state.pods_on("nowhere") == []
