"""MaxCSIVolumeCountPred (NodeVolumeLimits): per-driver limits from the node's CSINode.

The predicate is driven as the engine drives it (``prefilter`` once, then the per-node check)
on snapshots built from plain objects; then the pieces around it: the snapshot and
``simulate`` hold CSINodes, the cache names CSINode events by action, and those events wake a
pod the predicate rejected.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from berthmaster.cli import main
from berthmaster.scheduler.daemon import hints
from berthmaster.scheduler.daemon.cache import (
    ADDED,
    DELETED,
    MODIFIED,
    RESOURCES,
    ClusterCache,
)
from berthmaster.scheduler.daemon.queue import UNSCHEDULABLE, SchedulingQueue
from berthmaster.scheduler.engine import Engine
from berthmaster.scheduler.model import PodView
from berthmaster.scheduler.plugins import registry
from berthmaster.scheduler.plugins.base import Status
from berthmaster.scheduler.plugins.csi_volume_limits import (
    CSILimits,
    csi_volumes,
    driver_limits,
)
from berthmaster.scheduler.policy import default_policy, load_policy
from berthmaster.scheduler.preemption import choose_preemption
from berthmaster.scheduler.simulate import load_inputs
from berthmaster.scheduler.snapshot import Snapshot
from tests.support.builders import make_node, make_pod

REASON = "node(s) exceed max volume count"
EBS = "ebs.csi.aws.com"
NFS = "nfs.csi.k8s.io"


def csi_node(node: str, **counts: int | None) -> dict[str, Any]:
    """A CSINode for ``node``; ``counts`` maps driver (``_`` for ``.``) to its count."""
    drivers = []
    for key, count in counts.items():
        driver: dict[str, Any] = {"name": key.replace("_", "."), "nodeID": node}
        if count is not None:
            driver["allocatable"] = {"count": count}
        drivers.append(driver)
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
            "metadata": {"name": node}, "spec": {"drivers": drivers}}


EBS_KEY = EBS.replace(".", "_")
NFS_KEY = NFS.replace(".", "_")


def csi_pv(name: str, handle: str, driver: str = EBS) -> dict[str, Any]:
    return {"kind": "PersistentVolume", "metadata": {"name": name},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                     "csi": {"driver": driver, "volumeHandle": handle}}}


def claim(name: str, volume: str | None = None, storage_class: str | None = None,
          owner_uid: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": "1Gi"}}}
    if volume:
        spec["volumeName"] = volume
    if storage_class:
        spec["storageClassName"] = storage_class
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if volume:  # bound, as the PV controller leaves it (isPVCFullyBound)
        meta["annotations"] = {"pv.kubernetes.io/bind-completed": "yes"}
    if owner_uid:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "x",
                                    "uid": owner_uid, "controller": True}]
    return {"kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec}


def uses(*claims: str) -> list[dict[str, Any]]:
    return [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}}
            for i, c in enumerate(claims)]


def pod(name: str, *claims: str, node: str | None = None, **kw: Any) -> dict[str, Any]:
    return make_pod(name, volumes=kw.pop("volumes", uses(*claims)), node_name=node, **kw)


# Three EBS volumes a..c (claims ca..cc), a second PV with a's handle (claim ca2), and an NFS one.
VOLUMES = {
    "persistent_volumes": [csi_pv("pa", "vol-a"), csi_pv("pb", "vol-b"), csi_pv("pc", "vol-c"),
                           csi_pv("pa2", "vol-a"), csi_pv("pn", "share-1", NFS)],
    "persistent_volume_claims": [claim("ca", "pa"), claim("cb", "pb"), claim("cc", "pc"),
                                 claim("ca2", "pa2"), claim("cn", "pn")],
}


def verdict(new: dict[str, Any], existing: list[dict[str, Any]] = (), *,
            csi: dict[str, Any] | None = None, node: str = "n",
            **objects: Any) -> tuple[str, ...] | None:
    """None when ``new`` fits node ``node``, else the rejection reasons."""
    merged = {k: list(v) for k, v in VOLUMES.items()}
    for key, extra in objects.items():
        merged[key] = merged.get(key, []) + list(extra)
    snap = Snapshot.build(nodes=[make_node(node)], pods=existing,
                          csi_nodes=[csi] if csi else [], **merged)
    result = CSILimits().prefilter(PodView.from_dict(new), snap)
    if result is None:
        return None
    assert not isinstance(result, Status), "the predicate never rejects every node up front"
    node_info = snap.node(node)
    assert node_info is not None
    status = result(node_info)
    return None if status is None else status.reasons


# ------------------------------------------------------------------------- the predicate
def test_registered_under_the_policy_name_and_the_plugin_alias() -> None:
    assert registry.PREDICATES["MaxCSIVolumeCountPred"] is CSILimits
    assert registry.PREDICATES["NodeVolumeLimits"] is CSILimits
    assert CSILimits().name == "MaxCSIVolumeCountPred"


def test_default_policy_does_not_list_it() -> None:
    assert not any(isinstance(p, CSILimits) for p in default_policy().predicates)


def test_over_the_limit_is_rejected_with_upstreams_reason() -> None:
    assert verdict(pod("p", "cb"), [pod("o", "ca", node="n")], csi=csi_node("n", **{EBS_KEY: 1})
                   ) == (REASON,)
    assert REASON == "node(s) exceed max volume count"


def test_within_the_limit_fits() -> None:
    existing = [pod("o", "ca", node="n")]
    assert verdict(pod("p", "cb"), existing, csi=csi_node("n", **{EBS_KEY: 2})) is None
    # the pod's own volumes count too: two new ones on top of one attached exceed 2
    assert verdict(pod("p", "cb", "cc"), existing, csi=csi_node("n", **{EBS_KEY: 2})) == (REASON,)


def test_a_limit_of_zero_rejects_any_volume_of_that_driver() -> None:
    assert verdict(pod("p", "ca"), csi=csi_node("n", **{EBS_KEY: 0})) == (REASON,)


def test_limits_are_per_driver() -> None:
    csi = csi_node("n", **{EBS_KEY: 1, NFS_KEY: 1})
    existing = [pod("o", "ca", node="n")]
    # EBS is full, NFS is not: an NFS volume still fits
    assert verdict(pod("p", "cn"), existing, csi=csi) is None
    assert verdict(pod("p", "cb"), existing, csi=csi) == (REASON,)
    # an NFS volume in use does not count against EBS
    assert verdict(pod("p", "ca"), [pod("o", "cn", node="n")], csi=csi) is None
    # one of each on an empty node
    assert verdict(pod("p", "ca", "cn"), csi=csi) is None


def test_a_driver_without_a_count_is_unlimited() -> None:
    csi = csi_node("n", **{EBS_KEY: None, NFS_KEY: 0})
    existing = [pod("o", "ca", "cb", node="n")]
    assert verdict(pod("p", "cc"), existing, csi=csi) is None
    assert verdict(pod("p", "cn"), csi=csi) == (REASON,)


def test_no_csinode_means_unlimited() -> None:
    existing = [pod("o", "ca", "cb", node="n")]
    assert verdict(pod("p", "cc"), existing) is None
    # another node's CSINode does not apply
    assert verdict(pod("p", "cc"), existing, csi=csi_node("m", **{EBS_KEY: 1})) is None


def test_volumes_are_distinct_by_driver_and_handle() -> None:
    csi = csi_node("n", **{EBS_KEY: 1})
    # two PVs with the same driver and handle are one volume: nothing new is attached
    assert verdict(pod("p", "ca2"), [pod("o", "ca", node="n")], csi=csi) is None
    # the same handle under another driver is another volume
    objects = {"persistent_volumes": [csi_pv("px", "vol-a", NFS)],
               "persistent_volume_claims": [claim("cx", "px")]}
    assert verdict(pod("p", "cx"), [pod("o", "cn", node="n")],
                   csi=csi_node("n", **{NFS_KEY: 1}), **objects) == (REASON,)


def test_a_volume_shared_by_pods_counts_once() -> None:
    csi = csi_node("n", **{EBS_KEY: 2})
    # the new pod reuses the claim already on the node
    assert verdict(pod("p", "ca"), [pod("o", "ca", node="n")],
                   csi=csi_node("n", **{EBS_KEY: 1})) is None
    # two pods sharing a volume use one of the two slots; one more volume fits, two do not
    existing = [pod("o1", "ca", node="n"), pod("o2", "ca", node="n")]
    assert verdict(pod("p", "cb"), existing, csi=csi) is None
    assert verdict(pod("p", "cb", "cc"), existing, csi=csi) == (REASON,)
    # a pod listing the same claim twice uses one volume
    assert verdict(pod("p", "cb", "cb"), [pod("o", "ca", node="n")], csi=csi) is None


def test_pods_on_other_nodes_and_terminal_pods_do_not_count() -> None:
    csi = csi_node("n", **{EBS_KEY: 1})
    assert verdict(pod("p", "cb"), [pod("o", "ca", node="elsewhere")], csi=csi) is None
    assert verdict(pod("p", "cb"), [pod("o", "ca", node="n", phase="Succeeded")],
                   csi=csi) is None


def test_unbound_or_missing_claims_are_not_counted() -> None:
    csi = csi_node("n", **{EBS_KEY: 1})
    existing = [pod("o", "ca", node="n")]
    # unbound, no storage class: nothing to count
    assert verdict(pod("p", "loose"), existing, csi=csi,
                   persistent_volume_claims=[claim("loose")]) is None
    # unbound with a class that is not in the cluster: nothing to count either
    assert verdict(pod("p", "loose"), existing, csi=csi,
                   persistent_volume_claims=[claim("loose", storage_class="gone")]) is None
    # missing altogether: skipped, not rejected (CheckVolumeBinding reports it)
    assert verdict(pod("p", "nowhere"), existing, csi=csi) is None
    # an existing pod's missing or unbound claim does not count against the new pod
    assert verdict(pod("p", "ca"), [pod("o", "nowhere", "loose", node="n")], csi=csi,
                   persistent_volume_claims=[claim("loose")]) is None


def test_unbound_claim_of_a_known_class_counts_against_its_provisioner() -> None:
    ssd = {"kind": "StorageClass", "metadata": {"name": "ssd"}, "provisioner": EBS,
           "volumeBindingMode": "WaitForFirstConsumer"}
    csi = csi_node("n", **{EBS_KEY: 1})
    assert verdict(pod("p", "later"), [pod("o", "ca", node="n")], csi=csi,
                   storage_classes=[ssd],
                   persistent_volume_claims=[claim("later", storage_class="ssd")]) == (REASON,)
    assert verdict(pod("p", "later"), csi=csi, storage_classes=[ssd],
                   persistent_volume_claims=[claim("later", storage_class="ssd")]) is None


def test_volumes_that_are_not_csi_are_left_to_the_other_limits() -> None:
    ebs_in_tree = {"kind": "PersistentVolume", "metadata": {"name": "old"},
                   "spec": {"awsElasticBlockStore": {"volumeID": "vol-old"}}}
    csi = csi_node("n", **{EBS_KEY: 1})
    existing = [pod("o", "ca", node="n")]
    assert verdict(pod("p", "cold"), existing, csi=csi, persistent_volumes=[ebs_in_tree],
                   persistent_volume_claims=[claim("cold", "old")]) is None
    inline_ebs = [{"name": "d", "awsElasticBlockStore": {"volumeID": "vol-x"}}]
    assert verdict(pod("p", volumes=inline_ebs), existing, csi=csi) is None


def test_inline_csi_volumes_are_not_counted() -> None:
    """As upstream: CSI ephemeral (inline ``csi``) volumes are mounted, not attached."""
    inline = [{"name": "scratch", "csi": {"driver": EBS, "volumeAttributes": {"size": "1"}}}]
    csi = csi_node("n", **{EBS_KEY: 1})
    assert verdict(pod("p", volumes=inline), [pod("o", "ca", node="n")], csi=csi) is None
    assert verdict(pod("p", "cb"), [pod("o", volumes=inline, node="n")], csi=csi) is None


def test_generic_ephemeral_volume_counts_through_its_claim() -> None:
    template = [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}}}]
    csi = csi_node("n", **{EBS_KEY: 1})
    existing = [pod("o", "ca", node="n")]
    # the claim is "<pod>-<volume>", controlled by the pod
    owned = {"persistent_volumes": [csi_pv("pe", "vol-e")],
             "persistent_volume_claims": [claim("p-scratch", "pe", owner_uid="uid-p")]}
    new = pod("p", volumes=template, uid="uid-p")
    assert verdict(new, existing, csi=csi, **owned) == (REASON,)
    assert verdict(new, csi=csi, **owned) is None
    # a claim of that name the pod does not control is not the pod's volume
    foreign = {"persistent_volumes": [csi_pv("pe", "vol-e")],
               "persistent_volume_claims": [claim("p-scratch", "pe", owner_uid="someone")]}
    assert verdict(new, existing, csi=csi, **foreign) is None
    # not created yet: nothing to count
    assert verdict(new, existing, csi=csi) is None


def test_a_pod_without_claims_is_skipped_before_any_node() -> None:
    snap = Snapshot.build(nodes=[make_node("n")], csi_nodes=[csi_node("n", **{EBS_KEY: 0})])
    assert CSILimits().prefilter(PodView.from_dict(make_pod("p")), snap) is None
    assert CSILimits().prefilter(PodView.from_dict(pod("p", "nowhere")), snap) is None


def test_csi_volumes_and_driver_limits() -> None:
    snap = Snapshot.build(**VOLUMES)
    got = csi_volumes(PodView.from_dict(pod("p", "ca", "ca2", "cn")), snap)
    assert got == {(EBS, "pv", "vol-a"): EBS, (NFS, "pv", "share-1"): NFS}
    assert driver_limits(None) == {}
    assert driver_limits(csi_node("n", **{EBS_KEY: 3, NFS_KEY: None})) == {EBS: 3}
    assert driver_limits({"metadata": {"name": "n"}, "spec": {}}) == {}


# ------------------------------------------------------------------------- through the engine
POLICY = """
kind: Policy
apiVersion: v1
predicates:
- name: MaxCSIVolumeCountPred
priorities:
- {name: LeastRequestedPriority, weight: 1}
"""


def test_engine_message_and_placement_with_a_policy_listing_it() -> None:
    snap = Snapshot.build(nodes=[make_node("full"), make_node("free")],
                          pods=[pod("o", "ca", node="full")],
                          csi_nodes=[csi_node("full", **{EBS_KEY: 1}),
                                     csi_node("free", **{EBS_KEY: 1})], **VOLUMES)
    engine = Engine(load_policy(POLICY, "test"), seed=0)
    assert engine.schedule(pod("p", "cb"), snap).node == "free"
    snap.upsert_pod(pod("q", "cc", node="free"))
    decision = engine.schedule(pod("p", "cb"), snap)
    assert decision.node is None
    assert decision.message == "0/2 nodes are available: 2 node(s) exceed max volume count."
    assert set(engine.unschedulable_events(decision)) >= {
        "Pod/Delete", "CSINode/Add", "CSINode/Update"}


def test_preemption_can_free_a_volume_slot() -> None:
    snap = Snapshot.build(nodes=[make_node("n")],
                          pods=[pod("low", "ca", node="n", priority=1)],
                          csi_nodes=[csi_node("n", **{EBS_KEY: 1})], **VOLUMES)
    engine = Engine(load_policy(POLICY, "test"), seed=0)
    chosen = choose_preemption(pod("high", "cb", priority=100), snap, engine)
    assert chosen is not None
    assert chosen.node == "n"
    assert [v["metadata"]["name"] for v in chosen.victims] == ["low"]


# ------------------------------------------------------------------------- snapshot, simulate
def test_snapshot_holds_csinodes_by_node_name() -> None:
    snap = Snapshot()
    snap.upsert("CSINode", csi_node("n", **{EBS_KEY: 1}))
    assert driver_limits(snap.csi_nodes["n"]) == {EBS: 1}
    assert snap.copy().csi_nodes.keys() == {"n"}
    snap.remove("CSINode", csi_node("n"))
    assert snap.csi_nodes == {}


def test_simulate_reads_csinodes_from_the_cluster_file(tmp_path: Path, capsys: Any) -> None:
    objects = [make_node("n"), csi_node("n", **{EBS_KEY: 1}), *VOLUMES["persistent_volumes"],
               *VOLUMES["persistent_volume_claims"], pod("o", "ca", node="n")]
    cluster, policy, pods = tmp_path / "cluster.yaml", tmp_path / "policy.yaml", tmp_path / "p.yaml"
    cluster.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": objects}))
    policy.write_text(POLICY)
    pods.write_text(yaml.safe_dump_all([pod("shares", "ca2"), pod("adds", "cb")]))
    snapshot, _ = load_inputs(str(cluster), None)
    assert driver_limits(snapshot.csi_nodes["n"]) == {EBS: 1}
    assert main(["simulate", "--cluster", str(cluster), "--pods", str(pods), "--policy",
                 str(policy), "-o", "json"]) == 0
    placements = {p["pod"]: p for p in json.loads(capsys.readouterr().out)["placements"]}
    assert placements["default/shares"]["node"] == "n"
    assert placements["default/adds"]["node"] is None
    assert placements["default/adds"]["message"].startswith(
        "0/1 nodes are available: 1 node(s) exceed max volume count.")


# ------------------------------------------------------------------------- events and the queue
def test_the_cache_watches_csinodes_and_names_their_events_by_action() -> None:
    (resource,) = [r for r in RESOURCES if r.kind == "CSINode"]
    assert resource.path == "/apis/storage.k8s.io/v1/csinodes"
    assert [resource.event_for(e) for e in (ADDED, MODIFIED, DELETED)] == [
        "CSINode/Add", "CSINode/Update", "CSINode/Delete"]
    # the other kinds keep one event for any change
    (classes,) = [r for r in RESOURCES if r.kind == "StorageClass"]
    assert classes.event_for(MODIFIED) == "StorageClass/Add"


@pytest.mark.parametrize(("event", "helps"), [
    ("CSINode/Add", True), ("CSINode/Update", True), ("CSINode/Delete", True),
    ("StorageClass/Add", False), ("PersistentVolume/Add", False),
])
def test_csinode_events_wake_only_pods_this_predicate_rejected(event: str, helps: bool) -> None:
    rejected = pod("p", "cb")
    registered = frozenset(CSILimits.EVENTS)
    assert hints.could_help(rejected, hints.ClusterEvent(event), registered) is helps


def test_a_csinode_change_moves_the_parked_pod() -> None:
    cache = ClusterCache(kube=None, snapshot=Snapshot(), queue=SchedulingQueue(),  # type: ignore[arg-type]
                         scheduler_name="berthmaster")
    cache.apply("CSINode", ADDED, csi_node("n", **{EBS_KEY: 1}), None, initial=True)
    waiting = pod("p", "cb", scheduler_name="berthmaster")
    cache.apply("Pod", ADDED, waiting, None)
    info = cache.queue.pop_nowait()
    assert info is not None
    cache.queue.requeue(info, True, hint_events=frozenset(CSILimits.EVENTS))
    assert info.where == UNSCHEDULABLE
    cache.apply("StorageClass", ADDED, {"metadata": {"name": "x"}, "provisioner": "y"}, None)
    assert info.where == UNSCHEDULABLE
    raised = csi_node("n", **{EBS_KEY: 5})
    cache.apply("CSINode", MODIFIED, raised, csi_node("n", **{EBS_KEY: 1}))
    assert info.where != UNSCHEDULABLE
    assert driver_limits(cache.snapshot.csi_nodes["n"]) == {EBS: 5}
