"""What a Descheduler may run (operator/deschedulers/runs.py) and how a bad policy ConfigMap is
reported (handlers.check_policy): by ConfigMap, key and position, never by its content."""

from __future__ import annotations

from typing import Any

import pytest

from berthmaster.foundation.errors import PolicyError
from berthmaster.operator.deschedulers.handlers import check_policy
from berthmaster.operator.deschedulers.runs import (
    DEFAULT_IMAGE,
    DEFAULT_SERVICE_ACCOUNT,
    IMAGE_NOT_ALLOWED,
    POLICY_CONFIG_MAP_NOT_ALLOWED,
    PRIORITY_CLASS_NOT_ALLOWED,
    RunSettings,
    namespace_notice,
    refusals,
)

SETTINGS = RunSettings.from_environment({
    "POD_NAMESPACE": "bm-system", "BERTHMASTER_IMAGE": "registry.local/berthmaster:0.1.0",
    "BERTHMASTER_DESCHEDULER_IMAGES": "registry.local/descheduler:v2, ,other@sha256:ab",
    "BERTHMASTER_DESCHEDULER_SERVICE_ACCOUNT": "bm-berthmaster-descheduler"})


def descheduler(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "nightly"}, "spec": {"policy": {}, **spec}}


def test_settings_come_from_the_charts_environment() -> None:
    assert RunSettings(
        namespace="bm-system", service_account="bm-berthmaster-descheduler",
        default_image="registry.local/berthmaster:0.1.0",
        allowed_images=frozenset({"registry.local/berthmaster:0.1.0",
                                  "registry.local/descheduler:v2", "other@sha256:ab"}),
        system_critical=False) == SETTINGS
    bare = RunSettings.from_environment({})
    assert (bare.namespace, bare.service_account, bare.allowed_images, bare.system_critical) == (
        "berthmaster", DEFAULT_SERVICE_ACCOUNT, frozenset({DEFAULT_IMAGE}), False)
    assert RunSettings.from_environment(
        {"BERTHMASTER_DESCHEDULER_SYSTEM_CRITICAL": "true"}).system_critical


@pytest.mark.parametrize(("spec", "reasons"), [
    ({}, []),
    ({"namespace": "bm-system"}, []),
    ({"image": "registry.local/berthmaster:0.1.0"}, []),
    ({"image": "registry.local/descheduler:v2"}, []),
    ({"image": "evil.example/miner:latest"}, [IMAGE_NOT_ALLOWED]),
    ({"image": "registry.local/berthmaster:0.1.1"}, [IMAGE_NOT_ALLOWED]),
    ({"namespace": "kube-system"}, []),  # ignored, with a notice
    ({"policyConfigMap": {"name": "p"}}, []),
    ({"policyConfigMap": {"name": "p", "namespace": "bm-system"}}, []),
    ({"policyConfigMap": {"name": "p", "namespace": "tenant-a"}}, [POLICY_CONFIG_MAP_NOT_ALLOWED]),
    ({"priorityClassName": "system-cluster-critical"}, [PRIORITY_CLASS_NOT_ALLOWED]),
    ({"priorityClassName": "system-node-critical"}, [PRIORITY_CLASS_NOT_ALLOWED]),
    ({"priorityClassName": "descheduling"}, []),
    ({"policyConfigMap": {"name": "p", "namespace": "kube-system"}, "image": "x:1"},
     [POLICY_CONFIG_MAP_NOT_ALLOWED, IMAGE_NOT_ALLOWED]),
])
def test_refusals(spec: dict[str, Any], reasons: list[str]) -> None:
    assert [r.reason for r in refusals(descheduler(**spec), SETTINGS)] == reasons


def test_system_classes_with_the_opt_in() -> None:
    critical = RunSettings(**{**SETTINGS.__dict__, "system_critical": True})
    assert refusals(descheduler(priorityClassName="system-cluster-critical"), critical) == []
    assert critical.priority_class({}) == "system-cluster-critical"
    assert SETTINGS.priority_class({}) == ""


def test_an_image_refusal_names_the_field_the_value_and_the_value_to_set() -> None:
    (refusal,) = refusals(descheduler(image="evil.example/miner:latest"), SETTINGS)
    assert refusal.message == (
        "Descheduler nightly: spec.image 'evil.example/miner:latest' is not an allowed "
        "descheduler image (allowed: other@sha256:ab, registry.local/berthmaster:0.1.0, "
        "registry.local/descheduler:v2); remove spec.image to run "
        "registry.local/berthmaster:0.1.0, or have the cluster administrator add "
        "'evil.example/miner:latest' to the Helm value descheduler.allowedImages")


def test_a_configmap_namespace_refusal_says_where_to_put_it() -> None:
    (refusal,) = refusals(descheduler(policyConfigMap={"name": "p", "namespace": "tenant-a"}),
                          SETTINGS)
    assert "spec.policyConfigMap.namespace 'tenant-a' is not allowed" in refusal.message
    assert "create ConfigMap p there" in refusal.message and "'bm-system'" in refusal.message


SECRET_TEXT = "password: hunter2\n  token: [unclosed\n"


def test_yaml_errors_give_the_position_and_not_the_content() -> None:
    with pytest.raises(PolicyError) as raised:
        check_policy(SECRET_TEXT, "ConfigMap bm-system/p key 'policy.yaml'")
    (problem,) = raised.value.problems
    assert problem == "not valid YAML or JSON at line 2, column 8; fix the policy file there"
    assert "hunter2" not in str(raised.value) and "unclosed" not in str(raised.value)
    assert "ConfigMap bm-system/p key 'policy.yaml'" in str(raised.value)


def test_valid_yaml_that_is_no_policy_is_a_policy_error() -> None:
    with pytest.raises(PolicyError):
        check_policy("apiVersion: descheduler/v1alpha1\nkind: Other\n", "spec.policy")
    check_policy("apiVersion: descheduler/v1alpha1\nkind: DeschedulerPolicy\nstrategies:\n"
                 "  RemoveDuplicates: {enabled: true}\n",
                 "spec.policy")


def test_another_spec_namespace_is_ignored_with_a_notice() -> None:
    """The CRD used to default spec.namespace to kube-system: such resources keep running, in
    the operator's namespace."""
    assert namespace_notice(descheduler(), SETTINGS) is None
    assert namespace_notice(descheduler(namespace="bm-system"), SETTINGS) is None
    assert namespace_notice(descheduler(namespace="kube-system"), SETTINGS) == (
        "Descheduler nightly: spec.namespace 'kube-system' is ignored: descheduler runs go in "
        "the operator's namespace 'bm-system' (remove spec.namespace)")


def job(name: str, started: str, **status: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "bm-system"},
            "status": {"startTime": started, **status}}


def test_the_newest_run_is_reported_once() -> None:
    from berthmaster.operator.deschedulers.handlers import run_report
    from berthmaster.operator.deschedulers.status import newest_run

    old = job("d-job-1", "2026-01-01T00:00:00Z", succeeded=1)
    new = job("d-job-2", "2026-01-02T00:00:00Z", active=1)
    assert newest_run([new, old]) is new and newest_run([]) is None
    update = run_report(new, {})
    assert update == {"lastJobName": "d-job-2", "lastRunOutcome": "Running",
                      "lastRunTime": "2026-01-02T00:00:00Z"}
    assert run_report(new, update) is None  # nothing changed: no write
    assert run_report(old, update) is None  # an older run reporting late
    done = run_report(job("d-job-2", "2026-01-02T00:00:00Z", failed=1), update)
    assert done is not None and done["lastRunOutcome"] == "Failed"
    assert done["conditions"][0]["reason"] == "JobFailed"
