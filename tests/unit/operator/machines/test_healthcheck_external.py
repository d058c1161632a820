"""MachineHealthCheck external remediation decisions and the request built from a template.

Upstream: openshift/machine-api-operator pkg/controller/machinehealthcheck/
machinehealthcheck_controller.go (``remediate``: a check with ``remediationTemplate`` remediates
every unhealthy target externally; ``cleanEMR``: healthy targets' requests are deleted;
``internalRemediation`` / ``remediationStrategyExternal``: metal3's annotation strategy;
``healthCheckTargets``: an annotated Machine is not healthy) and pkg/util/external/util.go
(``GenerateTemplate``); annotation names from openshift/api machine/v1beta1.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from berthmaster.operator.machines import healthcheck as mhc
from berthmaster.operator.machines.healthcheck import (
    Target,
    TemplateRef,
    build_remediation_request,
    decide_health_check,
    parse_spec,
)
from tests.unit.operator.machines.test_healthcheck import NOW, check, machine, node

TEMPLATE_REF = {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                "kind": "Metal3RemediationTemplate", "name": "metal3-remediation-template"}
REF = TemplateRef(**{"api_version": TEMPLATE_REF["apiVersion"], "kind": TEMPLATE_REF["kind"],
                     "name": TEMPLATE_REF["name"]})


def names(targets: list[Target]) -> list[str]:
    return [t.name for t in targets]


def sick(name: str, **kwargs: Any) -> Target:
    return Target(machine(name, phase="Running", node="n", **kwargs),
                  node("False", timedelta(minutes=10)))


def well(name: str, **kwargs: Any) -> Target:
    return Target(machine(name, phase="Running", node="n", **kwargs), node())


def strategy_check(**spec: Any) -> dict[str, Any]:
    body = check(**spec)
    body["metadata"]["annotations"] = {mhc.REMEDIATION_STRATEGY: "external-baremetal"}
    return body


def test_a_template_hands_unhealthy_machines_to_external_remediation() -> None:
    """``remediate``: with remediationTemplate, every unhealthy target (owned or not) gets a
    request and none is deleted; the healthy ones are where requests get cleaned up."""
    body = check(remediationTemplate=TEMPLATE_REF)
    spec = parse_spec(body)
    assert spec.remediation_template == REF
    decision = decide_health_check(body, spec, [sick("a"), sick("b", owned=False), well("c")],
                                   NOW)
    assert names(decision.external) == ["a", "b"]
    assert decision.delete == [] and decision.no_controller == []
    assert names(decision.recovered) == ["c"]


def test_without_a_template_nothing_is_external() -> None:
    decision = decide_health_check(check(), parse_spec(check()), [sick("a"), well("c")], NOW)
    assert names(decision.delete) == ["a"]
    assert decision.external == [] and decision.recovered == []


def test_metal3_strategy_annotates_instead_of_deleting() -> None:
    """``internalRemediation``: with the check's remediation-strategy external-baremetal, an
    unhealthy Machine that has not Failed is annotated (once), a Failed one is deleted, and an
    annotated Machine is not counted healthy (``healthCheckTargets``)."""
    body = strategy_check()
    spec = parse_spec(body)
    annotated = well("done", annotations={mhc.EXTERNAL_REMEDIATION_ANNOTATION: ""})
    failed = Target(machine("failed", phase="Failed", node="n"), node())
    decision = decide_health_check(body, spec, [sick("a"), annotated, failed,
                                                sick("again", annotations={
                                                    mhc.EXTERNAL_REMEDIATION_ANNOTATION: ""})],
                                   NOW)
    assert names(decision.annotate) == ["a"]
    assert names(decision.delete) == ["failed"]
    assert decision.healthy == 0


@pytest.mark.parametrize(("ref", "group_kind", "request_kind"), [
    (REF, "Metal3RemediationTemplate.infrastructure.cluster.x-k8s.io", "Metal3Remediation"),
    (TemplateRef("v1", "ConfigMap", "x"), "ConfigMap", "ConfigMap"),
])
def test_template_ref(ref: TemplateRef, group_kind: str, request_kind: str) -> None:
    assert ref.group_kind == group_kind
    assert ref.request_kind == request_kind


def test_the_request_is_the_templates_spec_template_owned_by_the_machine() -> None:
    """pkg/util/external/util.go GenerateTemplate and the controller's externalRemediation:
    spec.template, server fields dropped, named after the Machine, in its namespace, owned by
    it, annotated with what it was cloned from; apiVersion and kind from the template."""
    template = {"apiVersion": TEMPLATE_REF["apiVersion"], "kind": "Metal3RemediationTemplate",
                "metadata": {"name": "metal3-remediation-template", "namespace": "ns"},
                "spec": {"template": {
                    "metadata": {"labels": {"team": "infra"}, "uid": "stale",
                                 "resourceVersion": "9", "finalizers": ["f"]},
                    "spec": {"strategy": {"type": "Reboot", "retryLimit": 1,
                                          "timeout": "300s"}}}}}
    target = machine("worker-0", phase="Running", node="n")
    request = build_remediation_request(template, REF, target)
    assert request == {
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "Metal3Remediation",
        "metadata": {
            "name": "worker-0", "namespace": target["metadata"]["namespace"],
            "labels": {"team": "infra"},
            "annotations": {
                "machine.openshift.io/cloned-from-name": "metal3-remediation-template",
                "machine.openshift.io/cloned-from-groupkind":
                    "Metal3RemediationTemplate.infrastructure.cluster.x-k8s.io"},
            "ownerReferences": [{"apiVersion": "machine.openshift.io/v1beta1",
                                 "kind": "Machine", "name": "worker-0",
                                 "uid": target["metadata"]["uid"]}]},
        "spec": {"strategy": {"type": "Reboot", "retryLimit": 1, "timeout": "300s"}}}


def test_a_template_without_spec_template_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"missing Spec\.Template on Metal3RemediationTemplate"):
        build_remediation_request({"kind": "Metal3RemediationTemplate",
                                   "metadata": {"name": "t"}, "spec": {}}, REF, machine("m"))
