"""MachineHealthCheck external remediation on a real control plane: a remediation request made
from the template (and cleaned up when the Machine recovers), a template kind no CRD serves,
and metal3's annotation strategy.

The remediation kinds are a test CRD pair (``TestRemediationTemplate`` / ``TestRemediation``)
standing for a provider's, such as metal3's Metal3RemediationTemplate / Metal3Remediation: the
controller treats any kind alike. Upstream: openshift/machine-api-operator
pkg/controller/machinehealthcheck/machinehealthcheck_controller.go (``externalRemediation``,
``cleanEMR``, ``remediationStrategyExternal``) and pkg/util/external/util.go.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from berthmaster.foundation.kube import CORE, KubeClient, group_path, resource_path
from berthmaster.operator.machines import api
from berthmaster.operator.machines.healthcheck import mhc_path
from berthmaster.tooling.devcluster.cluster import RunningCluster
from tests.integration.operator.machines.conftest import (
    OperatorPool,
    OperatorProcess,
    condition,
    get_machine,
    machine_events,
    running_operator,
)
from tests.integration.operator.machines.test_healthchecks import (
    health_check,
    node_of,
    workers,
)
from tests.integration.operator.machines.test_machinesets import settle
from tests.support.chaos import NODE_NOT_READY, label, make_node_not_ready, wait_node_ready
from tests.support.waiting import wait_for

GROUP = "remediation.berthmaster.test"
API_VERSION = f"{GROUP}/v1"
REQUESTS = resource_path(group_path(GROUP, "v1"), "testremediations")


def crd(kind: str, plural: str) -> dict[str, Any]:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{GROUP}"},
            "spec": {"group": GROUP, "scope": "Namespaced",
                     "names": {"kind": kind, "plural": plural, "singular": plural[:-1]},
                     "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                         "openAPIV3Schema": {"type": "object",
                                             "x-kubernetes-preserve-unknown-fields": True}}}]}}


@pytest.fixture
def remediation_crds(machine_api: RunningCluster, tmp_path: Path) -> RunningCluster:
    manifest = tmp_path / "crds.yaml"
    manifest.write_text(yaml.safe_dump_all([crd("TestRemediationTemplate",
                                                 "testremediationtemplates"),
                                            crd("TestRemediation", "testremediations")]))
    applied = machine_api.kubectl("apply", "-f", str(manifest))
    assert applied.returncode == 0, applied.stderr
    for name in ("testremediationtemplates", "testremediations"):
        ready = machine_api.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                                    f"crd/{name}.{GROUP}")
        assert ready.returncode == 0, ready.stderr
    return machine_api


@pytest.fixture
def health_operator(operator_pool: OperatorPool,
                    request: pytest.FixtureRequest) -> Iterator[OperatorProcess]:
    yield from running_operator(operator_pool, request,
                                capabilities=("machines", "machinehealthchecks"))


def template_ref(kind: str = "TestRemediationTemplate") -> dict[str, str]:
    return {"apiVersion": API_VERSION, "kind": kind, "name": "reboot"}


async def reason_of(kube: KubeClient, namespace: str, name: str, reason: str
                    ) -> dict[str, Any] | None:
    return (await machine_events(kube, namespace, name)).get(reason)


async def mhc_condition(kube: KubeClient, namespace: str, type_: str, status: str
                        ) -> dict[str, Any]:
    async def reached() -> dict[str, Any] | None:
        found = condition(await kube.get(mhc_path(namespace, "mhc")), type_)
        return found if found.get("status") == status else None

    return await wait_for(reached, timeout=60, what=f"{type_}={status}")


async def test_an_unhealthy_machine_gets_a_request_and_recovery_removes_it(
        kube: KubeClient, namespace: str, remediation_crds: RunningCluster,
        health_operator: OperatorProcess) -> None:
    """externalRemediation: the request is the template's spec.template, named after the
    Machine, owned by it, annotated with its origin; the Machine is not deleted. cleanEMR:
    once the Machine is healthy again the request is deleted."""
    await kube.create(resource_path(group_path(GROUP, "v1"), "testremediationtemplates",
                                    namespace), {
        "apiVersion": API_VERSION, "kind": "TestRemediationTemplate",
        "metadata": {"name": "reboot"},
        "spec": {"template": {"spec": {"strategy": {"type": "Reboot", "timeout": "300s"}}}}})
    name = f"{namespace}-w"
    await kube.create(api.machineset_path(namespace), workers(name, 2))
    first, _ = await settle(kube, namespace, name, 2)
    await kube.create(mhc_path(namespace), health_check(
        "mhc", name, remediationTemplate=template_ref()))
    machine_name = first["metadata"]["name"]
    node = node_of(first)

    await make_node_not_ready(kube, node)
    request = await wait_for(lambda: kube.get_if_exists(
        resource_path(group_path(GROUP, "v1"), "testremediations", namespace, machine_name)),
        timeout=60, what="the remediation request")
    assert request["spec"] == {"strategy": {"type": "Reboot", "timeout": "300s"}}
    assert request["metadata"]["ownerReferences"] == [{
        "apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine", "name": machine_name,
        "uid": first["metadata"]["uid"]}]
    assert request["metadata"]["annotations"] == {
        "machine.openshift.io/cloned-from-name": "reboot",
        "machine.openshift.io/cloned-from-groupkind": f"TestRemediationTemplate.{GROUP}"}
    available = await mhc_condition(kube, namespace, "ExternalRemediationRequestAvailable",
                                    "True")
    assert available["type"] == "ExternalRemediationRequestAvailable"
    machine = await get_machine(kube, namespace, machine_name)
    assert machine is not None and not api.deleting(machine)
    assert "MachineDeleted" not in await machine_events(kube, namespace, machine_name)

    await label(kube, resource_path(CORE, "nodes", name=node), {NODE_NOT_READY: None})
    await wait_node_ready(kube, node, "True")

    async def cleaned() -> bool:
        requests, _ = await kube.list_all(resource_path(group_path(GROUP, "v1"),
                                                        "testremediations", namespace))
        return not [r for r in requests if not r["metadata"].get("deletionTimestamp")]

    await wait_for(cleaned, timeout=60, what="the request deleted after recovery")
    assert await get_machine(kube, namespace, machine_name) is not None


async def test_a_template_kind_without_a_crd_is_reported_and_deletes_nothing(
        kube: KubeClient, namespace: str, machine_api: RunningCluster,
        health_operator: OperatorProcess) -> None:
    """A remediationTemplate naming a kind the API server does not serve: the
    ExternalRemediationTemplateAvailable condition (reason ExternalRemediationTemplateNotFound,
    as upstream) naming the field and the fix, a Warning event, and no Machine deleted."""
    name = f"{namespace}-w"
    await kube.create(api.machineset_path(namespace), workers(name, 2))
    first, _ = await settle(kube, namespace, name, 2)
    await kube.create(mhc_path(namespace), health_check("mhc", name, remediationTemplate={
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "Metal3RemediationTemplate", "name": "metal3"}))
    await make_node_not_ready(kube, node_of(first))

    found = await mhc_condition(kube, namespace, "ExternalRemediationTemplateAvailable", "False")
    assert found["reason"] == "ExternalRemediationTemplateNotFound"
    assert "spec.remediationTemplate" in found["message"]
    assert "no kind Metal3RemediationTemplate in infrastructure.cluster.x-k8s.io/v1beta1" in \
        found["message"]
    event = await wait_for(lambda: reason_of(kube, namespace, "mhc",
                                             "ExternalRemediationTemplateNotFound"),
                           timeout=30, what="the Warning event on the check")
    assert event["type"] == "Warning"
    machine = await get_machine(kube, namespace, first["metadata"]["name"])
    assert machine is not None and not api.deleting(machine)
    assert "MachineDeleted" not in await machine_events(kube, namespace,
                                                        first["metadata"]["name"])


async def test_metal3_strategy_annotates_the_machine(
        kube: KubeClient, namespace: str, health_operator: OperatorProcess) -> None:
    """remediationStrategyExternal: the check annotated
    machine.openshift.io/remediation-strategy: external-baremetal annotates the unhealthy
    Machine host.metal3.io/external-remediation (event ExternalAnnotationAdded) instead of
    deleting it."""
    name = f"{namespace}-w"
    await kube.create(api.machineset_path(namespace), workers(name, 2))
    first, _ = await settle(kube, namespace, name, 2)
    check = health_check("mhc", name)
    check["metadata"]["annotations"] = {
        "machine.openshift.io/remediation-strategy": "external-baremetal"}
    await kube.create(mhc_path(namespace), check)
    await make_node_not_ready(kube, node_of(first))
    machine_name = first["metadata"]["name"]

    async def annotated() -> dict[str, Any] | None:
        machine = await get_machine(kube, namespace, machine_name)
        annotations = ((machine or {}).get("metadata") or {}).get("annotations") or {}
        return machine if "host.metal3.io/external-remediation" in annotations else None

    machine = await wait_for(annotated, timeout=60, what="the metal3 annotation")
    assert not api.deleting(machine)
    added = await wait_for(lambda: reason_of(kube, namespace, machine_name,
                                             "ExternalAnnotationAdded"),
                           timeout=30, what="the ExternalAnnotationAdded event")
    assert added["message"] == (
        f"Requesting external remediation of node associated with machine "
        f"{namespace}/mhc/{machine_name}/{node_of(first)}")
