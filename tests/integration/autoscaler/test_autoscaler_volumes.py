"""The autoscaler's scale-down keeps the node a pod's local volume pins it to.

cluster-autoscaler/simulator/cluster.go (SimulateNodeRemoval, findPlaceFor): a node is removed
only if every pod that must move can be scheduled elsewhere, as the scheduler framework's
filters judge it — VolumeBinding among them, so a pod whose claim is bound to a PV with node
affinity to its node moves nowhere and the node stays ``NoPlaceToMovePods``. Here the operator
(a subprocess, with the fixtures of test_autoscaler.py) watches the volume objects and runs the
placement engine's default profile (operator/autoscaler/loop.py ``default_placement``).
"""

from __future__ import annotations

import re
from typing import Any

from berthmaster.foundation.kube import CORE, KubeClient, resource_path
from tests.integration.autoscaler.test_autoscaler import (
    AUTOSCALING,
    JSON,
    MACHINES,
    apply,
    cluster_autoscaler,
    crds,  # noqa: F401 (a fixture)
    events_for,
    machine_autoscaler,
    machine_set,
    operator,  # noqa: F401 (a fixture)
    pinned_replica_set,
    pod,
    scheduler,  # noqa: F401 (a fixture)
    start_scale_down,
)
from tests.support.builders import claim_volume
from tests.support.volumes import PinnedVolumes
from tests.support.waiting import wait_for


async def test_a_node_whose_pod_a_local_volume_pins_is_not_scaled_down(
        cluster: Any, operator: Any, scheduler: Any, kube: KubeClient,  # noqa: F811
        namespace: str, volumes: PinnedVolumes) -> None:
    """Three nodes of one MachineSet: ``keeper`` holds a pod that may not be evicted (it stays
    and is where pods can move), ``pinned`` a pod whose claim is bound to a local PV pinned to
    it, ``free`` the same pod without the claim. ``free`` goes; ``pinned`` stays, reported
    ``NoPlaceToMovePods`` (upstream's UnremovableReason) in ``status.unremovableNodes`` and in
    ``cluster_autoscaler_unremovable_nodes_count``, loop after loop."""
    pool = f"vols-{namespace}"
    assert apply(cluster, machine_set(pool, namespace, replicas=3)).returncode == 0
    assert apply(cluster, machine_autoscaler("ma", namespace, pool, 0, 3)).returncode == 0

    async def machines() -> list[JSON]:
        items, _ = await kube.list_all(resource_path(MACHINES, "machines", namespace))
        return items

    async def registered() -> list[str] | None:
        names = sorted(((m.get("status") or {}).get("nodeRef") or {}).get("name", "")
                       for m in await machines())
        return names if len(names) == 3 and all(names) else None

    keeper, pinned, free = await wait_for(registered, timeout=90,
                                          what="three Machines with their Nodes")
    await volumes.claim_on("data", pinned)
    for obj in (
        pinned_replica_set("keep", namespace, keeper,
                           {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}),
        pinned_replica_set("db", namespace, pinned, volumes=[claim_volume("data")]),
        pinned_replica_set("web", namespace, free),
    ):
        result = apply(cluster, obj)
        assert result.returncode == 0, result.stderr

    await start_scale_down(kube, cluster, namespace, pods=3, movable="web")
    ca_path = resource_path(AUTOSCALING, "clusterautoscalers", name="default")
    try:
        async def unremovable() -> dict[str, JSON]:
            status = (await kube.get(ca_path)).get("status") or {}
            return {n["name"]: n for n in status.get("unremovableNodes") or []}

        async def pinned_reported() -> dict[str, JSON] | None:
            found = await unremovable()
            return found if pinned in found and keeper in found else None

        found = await wait_for(pinned_reported, timeout=60,
                               what="the pinned and the keeper nodes reported unremovable")
        assert found[pinned]["reason"] == "NoPlaceToMovePods", found
        assert "no other node for pod " + namespace + "/db-" in found[pinned]["message"]
        assert found[keeper]["reason"] == "BlockedByPod", found

        async def left() -> list[str] | None:
            names = sorted(((m.get("status") or {}).get("nodeRef") or {}).get("name", "")
                           for m in await machines()
                           if not m["metadata"].get("deletionTimestamp"))
            return names if free not in names else None

        # The free node goes (its Machine deleted), the pinned one stays.
        assert await wait_for(left, timeout=90, what="the free node's Machine deleted") == \
            sorted([keeper, pinned])
        status = (await kube.get(ca_path))["status"]
        assert status["lastScaleDown"]["nodes"] == [free]

        async def judged_again() -> dict[str, JSON] | None:
            # a loop after the scale-down (its record is there) still keeps the pinned node
            current = (await kube.get(ca_path)).get("status") or {}
            ms = await kube.get(resource_path(MACHINES, "machinesets", namespace, pool))
            if ms["spec"]["replicas"] != 2 or current.get("unneededNodes") != 0:
                return None
            reasons = {n["name"]: n for n in current.get("unremovableNodes") or []}
            return reasons if pinned in reasons else None

        later = await wait_for(judged_again, timeout=60,
                               what="a later loop: no unneeded node, pinned still unremovable")
        assert later[pinned]["reason"] == "NoPlaceToMovePods"
        assert pinned in {m["status"]["nodeRef"]["name"] for m in await machines()}
    finally:
        await kube.delete(ca_path)


async def test_a_delayed_claim_scales_up_only_where_it_can_be_provisioned(
        cluster: Any, operator: Any, scheduler: Any, kube: KubeClient,  # noqa: F811
        namespace: str, nodes: Any, volumes: PinnedVolumes) -> None:
    """Scale-up with kube-scheduler's VolumeBinding on template nodes (volumebinding/binder.go
    FindPodVolumes, checkVolumeProvisions): ``dyn``'s unbound WaitForFirstConsumer claim is of
    a class with a provisioner, so a template node of the MachineSet can take it and the pod
    triggers a scale-up; ``static``'s claim can bind only to an Available local PV pinned to an
    existing node with no room for the pod, which no template node matches, so it is told
    ``NotTriggerScaleUp`` in the scheduler's words and no node is added for it."""
    pool = f"grow-{namespace}"
    assert apply(cluster, machine_set(pool, namespace)).returncode == 0
    assert apply(cluster, machine_autoscaler("ma", namespace, pool, 0, 2)).returncode == 0
    outside = (await nodes.create(capacity={"cpu": "1", "memory": "4Gi", "pods": "110"})
               )["metadata"]["name"]
    dynamic = await volumes.provisioning_class("csi.example.com")
    await volumes.pending_claim("fresh", dynamic)
    await volumes.available_on("disk", outside)
    await volumes.pending_claim("wants-local")
    dyn = pod("dyn", namespace, "1500m", pool)
    dyn["spec"]["volumes"] = [claim_volume("fresh")]
    static = pod("static", namespace, "1500m", pool)
    del static["spec"]["nodeSelector"]  # its volume decides where it may run
    static["spec"]["volumes"] = [claim_volume("wants-local")]
    for body in (dyn, static):
        await kube.create(resource_path(CORE, "pods", namespace), body)
    assert apply(cluster, cluster_autoscaler({"resourceLimits": {"maxNodesTotal": 20},
                                              "scaleDown": {"enabled": False}})).returncode == 0
    ca_path = resource_path(AUTOSCALING, "clusterautoscalers", name="default")
    try:
        async def triggered() -> list[JSON]:
            return await events_for(kube, namespace, "dyn", "TriggeredScaleUp")

        found = await wait_for(triggered, timeout=60, what="TriggeredScaleUp for dyn")
        assert f"{namespace}/{pool} 0->1" in found[0]["message"], found[0]["message"]

        async def told() -> list[JSON]:
            return await events_for(kube, namespace, "static", "NotTriggerScaleUp")

        found = await wait_for(told, timeout=60, what="NotTriggerScaleUp for static")
        # one count per node group judged (cluster-autoscaler's reasons per node group): the
        # session's cluster may still hold another test's MachineAutoscaler, so at least this
        # test's group, each for the same reason
        told_why = re.fullmatch(r"pod didn't trigger scale-up: (\d+) node\(s\) didn't find "
                                r"available persistent volumes to bind", found[0]["message"])
        assert told_why is not None and int(told_why.group(1)) >= 1, found[0]["message"]
        assert not await events_for(kube, namespace, "static", "TriggeredScaleUp")
        ms = await kube.get(resource_path(MACHINES, "machinesets", namespace, pool))
        assert ms["spec"]["replicas"] == 1
    finally:
        await kube.delete(ca_path)
