"""The pass-level shortcuts of ClusterState (context.py) against the plain walks they replace.

``pods_on`` answers a node none of whose pods was evicted yet with a copy of a ready list
(NodePods.live); ``protection`` works ``protection_reasons`` out once per pod and settings.
Both must answer exactly as the plain versions — the filtered walk of upstream's
ListPodsOnANode and a fresh protection_reasons call — whatever was evicted, in any order.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from berthmaster.scheduler.descheduler.context import (
    TERMINAL_PHASES,
    ClusterState,
    protection_key,
    uid,
)
from berthmaster.scheduler.descheduler.protection import EvictorSettings, protection_reasons
from tests.support.builders import make_node, make_pod

NODES = ("a", "b", "c")
PHASES = ("Running", "Pending", "Succeeded", "Failed", None)


def plain_pods_on(pods: list[dict[str, Any]], node: str, evicted: set[str],
                  include_terminal: bool) -> list[dict[str, Any]]:
    return [p for p in pods if (p.get("spec") or {}).get("nodeName") == node
            and uid(p) not in evicted
            and (include_terminal or (p.get("status") or {}).get("phase") not in TERMINAL_PHASES)]


@settings(max_examples=200)
@given(placed=st.lists(st.tuples(st.sampled_from(NODES), st.sampled_from(PHASES)), max_size=12),
       steps=st.lists(st.tuples(st.integers(0, 11), st.sampled_from(NODES), st.booleans()),
                      max_size=12))
def test_pods_on_equals_the_plain_walk_whatever_was_evicted(
        placed: list[tuple[str, str | None]], steps: list[tuple[int, str, bool]]) -> None:
    pods = [make_pod(f"p{i}", node_name=node, phase=phase) for i, (node, phase) in
            enumerate(placed)]
    state = ClusterState([make_node(n) for n in NODES], pods)
    evicted: set[str] = set()
    for index, node, include_terminal in steps:
        # ask first (so the node's lists are built), then evict, then ask again
        assert state.pods_on(node, include_terminal) == plain_pods_on(
            pods, node, evicted, include_terminal)
        if index < len(pods):
            evicted.add(uid(pods[index]))
            state.evicted.add(uid(pods[index]))
        assert state.pods_on(node, include_terminal) == plain_pods_on(
            pods, node, evicted, include_terminal)


def test_a_returned_list_is_the_callers_own() -> None:
    pod = make_pod("p", node_name="a")
    state = ClusterState([make_node("a")], [pod])
    state.pods_on("a").clear()
    assert state.pods_on("a") == [pod]


SETTINGS = st.builds(
    EvictorSettings, evict_local_storage_pods=st.booleans(), evict_daemonset_pods=st.booleans(),
    evict_system_critical_pods=st.booleans(), ignore_pvc_pods=st.booleans(),
    evict_failed_bare_pods=st.booleans(), protect_resource_claims=st.booleans(),
    no_eviction_policy=st.sampled_from(["", "Mandatory", "Preferred"]))
PODS = st.builds(
    lambda owner, priority, volumes, annotations, phase: make_pod(
        "p", node_name="a", owner=owner, priority=priority, volumes=volumes,
        annotations=annotations, phase=phase),
    st.sampled_from([None, ("ReplicaSet", "rs", "u1"), ("DaemonSet", "ds", "u2")]),
    st.sampled_from([None, 0, 1000, 2_000_000_000]),
    st.sampled_from([[], [{"name": "s", "emptyDir": {}}],
                     [{"name": "c", "persistentVolumeClaim": {"claimName": "x"}}]]),
    st.sampled_from([None, {"descheduler.alpha.kubernetes.io/evict": ""},
                     {"descheduler.alpha.kubernetes.io/prefer-no-eviction": ""},
                     {"kubernetes.io/config.mirror": "x"}]),
    st.sampled_from(["Running", "Failed"]))


@settings(max_examples=300)
@given(asked=st.lists(st.tuples(PODS, SETTINGS, st.sampled_from([None, 0, 500, 5000])),
                      min_size=1, max_size=6))
def test_protection_memo_answers_as_a_fresh_call(
        asked: list[tuple[dict[str, Any], EvictorSettings, int | None]]) -> None:
    state = ClusterState([make_node("a")], [pod for pod, _, _ in asked])
    for _ in range(2):  # the second round is answered from the memo
        for pod, evictor, threshold in asked:
            assert state.protection(pod, evictor, threshold,
                                    protection_key(evictor, threshold)) == protection_reasons(
                pod, evictor, threshold)
