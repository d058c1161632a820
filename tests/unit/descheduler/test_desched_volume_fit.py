"""nodeFit judges volumes (scheduler/descheduler/fit.py): a pod whose claim is bound to a local
volume pinned to its node fits no other node, so nodeFit keeps it.

Upstream's descheduler nodeFit (pkg/descheduler/node/node.go NodeFit, PodFitsAnyOtherNode)
checks node selector and affinity, taints, requests, schedulability and anti-affinity, but no
volumes: this rule is a berthmaster addition (docs/descheduler.md), made by running the
scheduler's default profile, whose VolumeBinding filter checks a bound volume's node affinity
(kube-scheduler pkg/scheduler/framework/plugins/volumebinding/binder.go FindPodVolumes).
"""

from __future__ import annotations

from typing import Any

from berthmaster.scheduler.descheduler.cycle import ClusterObjects, plan_pass, prepare
from berthmaster.scheduler.descheduler.fit import EngineFit
from berthmaster.scheduler.descheduler.policy import parse_policy
from berthmaster.scheduler.volume_objects import VolumeObjects
from tests.support.builders import (
    claim_volume,
    make_claim,
    make_storage_class,
    make_volume,
)
from tests.unit.descheduler.builders import NOW, make_node, make_pod

JSON = dict[str, Any]


def policy(node_fit: bool) -> Any:
    return parse_policy({
        "apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
        "profiles": [{"name": "p", "pluginConfig": [
            {"name": "DefaultEvictor", "args": {"nodeFit": node_fit}},
            {"name": "RemoveDuplicates", "args": {}}],
            "plugins": {"balance": {"enabled": ["RemoveDuplicates"]}}}]})


def evicted(pods: list[JSON], volumes: VolumeObjects, node_fit: bool = True) -> list[str]:
    """RemoveDuplicates over nodes ``a`` (the duplicates) and ``b`` (empty)."""
    chosen = policy(node_fit)
    state = prepare(ClusterObjects([make_node("a"), make_node("b")], pods, volumes=volumes),
                    chosen, now=NOW)
    return [key.split("/", 1)[1] for tally in plan_pass(state, chosen) for key in tally.evicted]


def duplicates(owner: str, **kw: Any) -> list[JSON]:
    return [make_pod(f"{owner}-{i}", "a", owner=owner, cpu="100m", **kw) for i in range(2)]


PINNED = VolumeObjects(
    persistent_volumes=(make_volume("pv-a", node="a", claim=("default", "data")),),
    persistent_volume_claims=(make_claim("data", volume="pv-a"),),
    storage_classes=(make_storage_class(),))


def test_node_fit_keeps_a_pod_pinned_by_its_local_volume() -> None:
    """The duplicate whose claim's volume admits node ``a`` only fits nowhere else: kept; the
    otherwise identical duplicate without a claim fits ``b``: evicted."""
    pods = [*duplicates("pinned", volumes=[claim_volume("data")]), *duplicates("free")]
    gone = evicted(pods, PINNED)
    assert len(gone) == 1 and gone[0].startswith("free-")


def test_remove_duplicates_counts_one_feasible_node_for_pinned_duplicates() -> None:
    """RemoveDuplicates counts the nodes an owner's pods could run on with the same engine
    (strategies/duplicates.py), so even without nodeFit pinned duplicates have one feasible
    node and stay (upstream's getTargetNodes in removeduplicates.go counts by tolerations, node
    selector and node affinity only, and would evict one)."""
    pods = duplicates("pinned", volumes=[claim_volume("data")])
    assert evicted(pods, PINNED, node_fit=False) == []


def test_a_volume_that_admits_the_other_node_lets_the_pod_go() -> None:
    """The same pod on a volume with no node affinity (network storage) fits ``b``."""
    roaming = VolumeObjects(
        persistent_volumes=(make_volume("pv-n", claim=("default", "data")),),
        persistent_volume_claims=(make_claim("data", volume="pv-n"),),
        storage_classes=(make_storage_class(),))
    pods = duplicates("pinned", volumes=[claim_volume("data")])
    assert len(evicted(pods, roaming)) == 1


def test_pod_fits_any_other_node_honours_the_volume_node_affinity() -> None:
    """PodFitsAnyOtherNode as EngineFit answers it (the DefaultEvictor's nodeFit)."""
    pinned = make_pod("db", "a", volumes=[claim_volume("data")])
    free = make_pod("web", "a")
    fit = EngineFit([make_node("a"), make_node("b")], [pinned, free], volumes=PINNED)
    assert fit.any_node(pinned, ["a", "b"], exclude="a") is False
    assert fit.any_node(free, ["a", "b"], exclude="a") is True
    assert fit(pinned, "a") is True
