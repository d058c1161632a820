"""MachineHealthChecks on a real control plane, with kwok Machines and kwok's node-not-ready stage.

The operator runs as a subprocess with the ``machines`` and ``machinehealthchecks`` capabilities
(the second alone where a test plays the machine controller itself). kwok's node-not-ready
stage turns a labelled Node Ready=False with ``lastTransitionTime`` at the Node's creation, so a
short unhealthy timeout is due at once and a long one is not: no test waits on a clock.

Upstream: openshift/machine-api-operator pkg/controller/machinehealthcheck/
machinehealthcheck_controller.go (Reconcile, needsRemediation, isAllowedRemediation,
internalRemediation and their events and conditions).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from berthmaster.foundation.kube import CORE, KubeClient, resource_path
from berthmaster.foundation.times import format_rfc3339
from berthmaster.operator.machines import api
from berthmaster.operator.machines.healthcheck import mhc_path
from berthmaster.tooling.devcluster.cluster import RunningCluster
from tests.integration.operator.machines.conftest import (
    OperatorPool,
    OperatorProcess,
    condition,
    get_machine,
    kwok_machine,
    machine_events,
    own_running_operator,
    running_operator,
    set_hooks,
)
from tests.integration.operator.machines.test_machinesets import machines_of, settle
from tests.support.chaos import NODE_NOT_READY, label, make_node_not_ready, wait_node_ready
from tests.support.waiting import wait_for

HOOK = ("hold-for-test", "mhc-test")


def workers(name: str, replicas: int, *, pre_drain: list[tuple[str, str]] = ()
            ) -> dict[str, Any]:
    labels = {api.MACHINESET_LABEL: name}
    template = kwok_machine("unused", pre_drain=pre_drain)
    return {"apiVersion": api.API_VERSION, "kind": "MachineSet", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": template["spec"]}}}


def health_check(name: str, machineset: str, *, timeout: str = "1s",
                 **spec: Any) -> dict[str, Any]:
    return {"apiVersion": api.API_VERSION, "kind": "MachineHealthCheck",
            "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": {api.MACHINESET_LABEL: machineset}},
                     "unhealthyConditions": [
                         {"type": "Ready", "status": "False", "timeout": timeout},
                         {"type": "Ready", "status": "Unknown", "timeout": timeout}],
                     **spec}}


@pytest.fixture
def health_operator(operator_pool: OperatorPool,
                    request: pytest.FixtureRequest) -> Iterator[OperatorProcess]:
    yield from running_operator(operator_pool, request,
                                capabilities=("machines", "machinehealthchecks"))


@pytest.fixture
def own_health_operator(operator_pool: OperatorPool, tmp_path: Path,
                        request: pytest.FixtureRequest) -> Iterator[OperatorProcess]:
    yield from own_running_operator(operator_pool, tmp_path, request,
                                    capabilities=("machines", "machinehealthchecks"))


@pytest.fixture
def checks_only(operator_pool: OperatorPool,
                request: pytest.FixtureRequest) -> Iterator[OperatorProcess]:
    yield from running_operator(operator_pool, request,
                                capabilities=("machinehealthchecks",))


async def check_status(kube: KubeClient, namespace: str, name: str, **wanted: Any
                       ) -> dict[str, Any]:
    """Wait until the check's status has every ``wanted`` field (and ``allowed``: condition)."""
    allowed = wanted.pop("allowed", None)

    async def reached() -> dict[str, Any] | None:
        check = await kube.get(mhc_path(namespace, name))
        status = check.get("status") or {}
        if any(status.get(key) != value for key, value in wanted.items()):
            return None
        if allowed is not None and condition(check, "RemediationAllowed").get("status") != allowed:
            return None
        return check

    return await wait_for(reached, timeout=60, what=f"MachineHealthCheck {name} {wanted} "
                          f"RemediationAllowed={allowed}")


async def gone(kube: KubeClient, namespace: str, name: str) -> None:
    async def absent() -> bool:
        return await get_machine(kube, namespace, name) is None

    await wait_for(absent, timeout=90, what=f"machine {name} gone")


def node_of(machine: dict[str, Any]) -> str:
    return str(machine["status"]["nodeRef"]["name"])


async def test_not_ready_node_machine_is_replaced(
        kube: KubeClient, namespace: str, health_operator: OperatorProcess) -> None:
    name = f"{namespace}-w"
    await kube.create(api.machineset_path(namespace), workers(name, 2))
    first, second = await settle(kube, namespace, name, 2)
    await kube.create(mhc_path(namespace), health_check("mhc", name))
    await check_status(kube, namespace, "mhc", expectedMachines=2, currentHealthy=2,
                       remediationsAllowed=2, allowed="True")

    await make_node_not_ready(kube, node_of(first))
    await gone(kube, namespace, first["metadata"]["name"])
    replaced = await settle(kube, namespace, name, 2)
    assert second["metadata"]["name"] in [m["metadata"]["name"] for m in replaced]
    check = await check_status(kube, namespace, "mhc", expectedMachines=2, currentHealthy=2)
    assert check["spec"]["maxUnhealthy"] == "100%"  # the CRD's default, as upstream
    assert check["spec"]["nodeStartupTimeout"] == "10m"
    events = await machine_events(kube, namespace, first["metadata"]["name"])
    assert events["MachineDeleted"]["message"] == (
        f"Machine {namespace}/mhc/{first['metadata']['name']}/{node_of(first)} has been "
        "remediated by requesting to delete Machine object")
    assert events["MachineDeleted"]["source"]["component"] == "machinehealthcheck-controller"


async def test_node_that_recovers_in_time_is_left_alone(
        kube: KubeClient, namespace: str, health_operator: OperatorProcess) -> None:
    name = f"{namespace}-w"
    await kube.create(api.machineset_path(namespace), workers(name, 2))
    first, _ = await settle(kube, namespace, name, 2)
    await kube.create(mhc_path(namespace), health_check("mhc", name, timeout="1h"))
    await check_status(kube, namespace, "mhc", expectedMachines=2, currentHealthy=2)

    node = node_of(first)
    await make_node_not_ready(kube, node)
    # Matching an unhealthy condition, not yet for long enough: not healthy, not remediated.
    await check_status(kube, namespace, "mhc", expectedMachines=2, currentHealthy=1,
                       remediationsAllowed=1, allowed="True")
    events = await wait_for(lambda: _reason(kube, namespace, first, "DetectedUnhealthy"),
                            timeout=30, what="DetectedUnhealthy event")
    assert events["message"] == (f"Machine {namespace}/mhc/{first['metadata']['name']}/{node} "
                                 f"has unhealthy node {node}")

    await label(kube, resource_path(CORE, "nodes", name=node), {NODE_NOT_READY: None})
    await wait_node_ready(kube, node, "True")
    await check_status(kube, namespace, "mhc", expectedMachines=2, currentHealthy=2)
    machine = await get_machine(kube, namespace, first["metadata"]["name"])
    assert machine is not None and not api.deleting(machine)
    assert "MachineDeleted" not in await machine_events(kube, namespace,
                                                        first["metadata"]["name"])


async def _reason(kube: KubeClient, namespace: str, machine: dict[str, Any],
                  reason: str) -> dict[str, Any] | None:
    return (await machine_events(kube, namespace, machine["metadata"]["name"])).get(reason)


async def test_max_unhealthy_stops_a_mass_remediation(
        kube: KubeClient, namespace: str, health_operator: OperatorProcess) -> None:
    name = f"{namespace}-w"
    await kube.create(api.machineset_path(namespace), workers(name, 3))
    machines = await settle(kube, namespace, name, 3)
    # Both Nodes NotReady before the check exists, so its first decision sees both due (made
    # due one by one, the first would rightly be remediated while the second was Ready).
    sick = machines[:2]
    for machine in sick:
        await make_node_not_ready(kube, node_of(machine))
    await kube.create(mhc_path(namespace), health_check("mhc", name, maxUnhealthy=1))
    check = await check_status(kube, namespace, "mhc", expectedMachines=3, currentHealthy=1,
                               remediationsAllowed=0, allowed="False")
    restricted = condition(check, "RemediationAllowed")
    assert restricted["reason"] == "TooManyUnhealthy"
    assert restricted["severity"] == "Warning"
    assert restricted["message"] == (
        "Remediation is not allowed, the number of not started or unhealthy machines exceeds "
        "maxUnhealthy (total: 3, unhealthy: 2, maxUnhealthy: 1)")
    # The status above and the decision not to delete are one reconcile's: nothing was deleted.
    for machine in sick:
        found = await get_machine(kube, namespace, machine["metadata"]["name"])
        assert found is not None and not api.deleting(found)
    async def restricted_event() -> dict[str, Any] | None:
        # posted right after the status write the wait above saw
        return (await machine_events(kube, namespace, "mhc")).get("RemediationRestricted")

    await wait_for(restricted_event, timeout=30, what="RemediationRestricted event")
    events = await machine_events(kube, namespace, "mhc")
    assert events["RemediationRestricted"]["type"] == "Warning"
    assert events["RemediationRestricted"]["message"] == (
        "Remediation restricted due to exceeded number of unhealthy machines "
        "(total: 3, unhealthy: 2, maxUnhealthy: 1)")

    # One Node recovers: back within maxUnhealthy, the other Machine is remediated.
    await label(kube, resource_path(CORE, "nodes", name=node_of(sick[0])), {NODE_NOT_READY: None})
    await gone(kube, namespace, sick[1]["metadata"]["name"])
    survivor = await get_machine(kube, namespace, sick[0]["metadata"]["name"])
    assert survivor is not None and not api.deleting(survivor)
    await settle(kube, namespace, name, 3)
    await check_status(kube, namespace, "mhc", expectedMachines=3, currentHealthy=3,
                       allowed="True")


async def test_hooked_machine_waits_for_its_hooks_and_a_restart_resumes(
        kube: KubeClient, namespace: str, own_health_operator: OperatorProcess) -> None:
    """Remediation is a deletion: the preDrain hook holds it; the operator is SIGKILLed while
    it is held and the hook removed while it is down; the restarted operator finishes the
    deletion without a second MachineDeleted, and the MachineSet replaces the Machine."""
    name = f"{namespace}-w"
    await kube.create(api.machineset_path(namespace), workers(name, 2, pre_drain=[HOOK]))
    first, _ = await settle(kube, namespace, name, 2)
    machine_name = first["metadata"]["name"]
    await kube.create(mhc_path(namespace), health_check("mhc", name))
    await make_node_not_ready(kube, node_of(first))

    async def held() -> dict[str, Any] | None:
        machine = await get_machine(kube, namespace, machine_name)
        drainable = condition(machine, api.DRAINABLE)
        if machine is None or (machine.get("status") or {}).get("phase") != api.DELETING:
            return None
        if drainable.get("reason") != api.HOOK_PRESENT:
            return None
        # held, and the controller has acted on the hold (not only marked the deletion)
        blocked = "DrainBlocked" in await machine_events(kube, namespace, machine_name)
        return machine if blocked else None

    machine = await wait_for(held, timeout=60, what=f"machine {machine_name} held by its hook")
    assert api.deleting(machine)

    own_health_operator.kill()
    await set_hooks(kube, namespace, machine_name, "preDrain", [])
    own_health_operator.start()

    await gone(kube, namespace, machine_name)
    await settle(kube, namespace, name, 2)
    await check_status(kube, namespace, "mhc", expectedMachines=2, currentHealthy=2)
    events = await machine_events(kube, namespace, machine_name)  # asserts no duplicates
    assert events["MachineDeleted"]["count"] == 1
    assert "DrainBlocked" in events


async def test_machine_whose_node_vanished_is_replaced(
        kube: KubeClient, namespace: str, health_operator: OperatorProcess) -> None:
    """The Node deleted outside the Machine API: the machine controller marks the Machine
    Failed (its instance is gone), and a Failed Machine is unhealthy."""
    name = f"{namespace}-w"
    await kube.create(api.machineset_path(namespace), workers(name, 2))
    first, _ = await settle(kube, namespace, name, 2)
    await kube.create(mhc_path(namespace), health_check("mhc", name, timeout="1h"))
    await check_status(kube, namespace, "mhc", expectedMachines=2, currentHealthy=2)
    await kube.delete(api.node_path(node_of(first)))
    await gone(kube, namespace, first["metadata"]["name"])
    await settle(kube, namespace, name, 2)
    await check_status(kube, namespace, "mhc", expectedMachines=2, currentHealthy=2)
    events = await machine_events(kube, namespace, first["metadata"]["name"])
    assert "MachineDeleted" in events


async def test_machine_without_a_node_is_remediated_after_node_startup_timeout(
        kube: KubeClient, namespace: str, checks_only: OperatorProcess) -> None:
    """No machine controller runs here: the test records what one that never got a Node would
    (phase Provisioning, ``status.lastUpdated``), on a Machine its MachineSet controls."""
    machineset = await kube.create(api.machineset_path(namespace), workers("idle", 0))
    owner = {"apiVersion": api.API_VERSION, "kind": "MachineSet", "name": "idle",
             "uid": machineset["metadata"]["uid"], "controller": True}
    loose_and_owned = []
    for machine_name, owners in (("stuck", [owner]), ("loose", [])):
        body = kwok_machine(machine_name, labels={api.MACHINESET_LABEL: "idle"})
        body["metadata"]["ownerReferences"] = owners
        await kube.create(api.machine_path(namespace), body)
        # no Node a minute after its last update: past the 30s minimum at once
        await kube.patch(api.machine_path(namespace, machine_name, "status"), {"status": {
            "phase": api.PROVISIONING,
            "lastUpdated": format_rfc3339(datetime.now(UTC) - timedelta(minutes=1))}})
        loose_and_owned.append(machine_name)
    await kube.create(mhc_path(namespace),
                      health_check("mhc", "idle", nodeStartupTimeout="30s"))

    await gone(kube, namespace, "stuck")
    events = await wait_for(lambda: _reason(kube, namespace, {"metadata": {"name": "loose"}},
                                            "SkippedNoController"),
                            timeout=30, what="SkippedNoController event")
    assert events["message"] == ("Machine " + namespace + "/mhc/loose/ has no controller "
                                 "owner, skipping remediation")
    loose = await get_machine(kube, namespace, "loose")
    assert loose is not None and not api.deleting(loose)
    assert [m["metadata"]["name"] for m in await machines_of(kube, namespace, "idle")] == [
        "loose"]


@pytest.mark.parametrize(("spec", "words"), [
    ({"maxUnhealthy": "150%"}, "spec.maxUnhealthy"),
    ({"maxUnhealthy": -1}, "maxUnhealthy must not be negative"),
    ({"nodeStartupTimeout": "0abc"}, "nodeStartupTimeout must be"),
    ({"unhealthyConditions": []}, "spec.unhealthyConditions"),
    # the minimum timeouts (CEL rules: the schema's pattern cannot compare durations)
    ({"unhealthyConditions": [{"type": "Ready", "status": "False", "timeout": "0s"}]},
     "unhealthyConditions[].timeout must be at least 1s; a shorter timeout remediates a Node "
     "at the first report of the condition"),
    ({"unhealthyConditions": [{"type": "Ready", "status": "False", "timeout": "500ms"}]},
     "unhealthyConditions[].timeout must be at least 1s"),
    ({"nodeStartupTimeout": "10s"}, 'nodeStartupTimeout must be "0" (no startup check) or at '
                                    "least 30s, as Cluster API's MachineHealthCheck webhook "
                                    "requires"),
    ({"selector": {"matchExpressions": [{"key": "a", "operator": "Maybe"}]}},
     "operator must be In, NotIn, Exists or DoesNotExist"),
])
async def test_the_api_server_refuses_what_the_schema_can_check(
        kube: KubeClient, namespace: str, machine_api: RunningCluster, spec: dict[str, Any],
        words: str) -> None:
    from berthmaster.foundation.kube import KubeError

    with pytest.raises(KubeError) as refused:
        await kube.create(mhc_path(namespace), health_check("bad", "x", **spec))
    assert words in refused.value.message


@pytest.mark.parametrize("spec", [
    {"nodeStartupTimeout": "0"}, {"nodeStartupTimeout": "0s"}, {"nodeStartupTimeout": "30s"},
    {"unhealthyConditions": [{"type": "Ready", "status": "False", "timeout": "1s"}]},
    {"unhealthyConditions": [{"type": "Ready", "status": "False", "timeout": "1.5h"}]},
])
async def test_the_api_server_accepts_timeouts_at_the_minimums(
        kube: KubeClient, namespace: str, machine_api: RunningCluster,
        spec: dict[str, Any]) -> None:
    created = await kube.create(mhc_path(namespace), health_check("ok", "x", **spec))
    assert created["spec"]["maxUnhealthy"] == "100%"  # openshift/api's default, unchanged
    await kube.delete(mhc_path(namespace, "ok"))
