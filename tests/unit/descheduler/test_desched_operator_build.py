"""The Descheduler resource's children, built without a cluster, and its status decisions."""

from __future__ import annotations

from typing import Any

import yaml

from berthmaster.operator.deschedulers import build
from berthmaster.operator.deschedulers.build import policy_text
from berthmaster.operator.deschedulers.runs import RunSettings
from berthmaster.operator.deschedulers.status import condition, merge_conditions, run_outcome
from berthmaster.scheduler.descheduler.policy import parse_policy_text

SETTINGS = RunSettings(namespace="bm-system", service_account="bm-descheduler",
                       default_image="bm:1.0", allowed_images=frozenset({"bm:1.0", "example/bm:1"}),
                       system_critical=False)
CRITICAL = RunSettings(**{**SETTINGS.__dict__, "system_critical": True})
POLICY = {"apiVersion": "descheduler/v1alpha1", "kind": "DeschedulerPolicy",
          "strategies": {"RemoveDuplicates": {"enabled": True}}}


def descheduler(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "berthmaster.io/v1alpha1", "kind": "Descheduler",
            "metadata": {"name": "nightly", "uid": "u-1", "generation": 3},
            "spec": {"policy": POLICY, **spec}}


def build_children(body: dict[str, Any], text: str) -> list[dict[str, Any]]:
    return build.build_children(body, text, SETTINGS)


def build_job(body: dict[str, Any], settings: RunSettings = SETTINGS) -> dict[str, Any]:
    return build.build_job(body, settings)


def build_cron_job(body: dict[str, Any]) -> dict[str, Any]:
    return build.build_cron_job(body, SETTINGS)


def test_run_once_children_are_owned_in_the_operator_namespace_and_in_order() -> None:
    """Only the policy ConfigMap and the Job: the account and its ClusterRole are the chart's
    (templates/descheduler-rbac.yaml), so the operator writes no RBAC."""
    children = build_children(descheduler(namespace="elsewhere"), policy_text(POLICY))
    assert [c["kind"] for c in children] == ["ConfigMap", "Job"]
    for child in children:
        (owner,) = child["metadata"]["ownerReferences"]
        assert owner == {"apiVersion": "berthmaster.io/v1alpha1", "kind": "Descheduler",
                         "name": "nightly", "uid": "u-1", "controller": True,
                         "blockOwnerDeletion": True}
        assert child["metadata"]["labels"] == {"berthmaster.io/descheduler": "nightly"}
        assert child["metadata"]["namespace"] == "bm-system"
    config_map = children[0]
    assert parse_policy_text(config_map["data"]["policy.yaml"]).strategies[0].name == (
        "RemoveDuplicates")


def test_job_runs_the_policy_file_as_the_chart_account_at_no_priority_by_default() -> None:
    job = build_job(descheduler(dryRun=True, image="example/bm:1",
                                resources={"requests": {"cpu": "100m"}}))
    assert job["metadata"]["name"] == "nightly-descheduler-job-3"
    pod = job["spec"]["template"]
    assert "annotations" not in pod["metadata"]
    spec = pod["spec"]
    assert "priorityClassName" not in spec
    assert spec["restartPolicy"] == "Never"
    assert spec["serviceAccountName"] == "bm-descheduler"
    (container,) = spec["containers"]
    assert container["command"] == ["berthmaster", "deschedule", "--policy-config-file",
                                    "/policy-dir/policy.yaml", "--dry-run"]
    assert container["image"] == "example/bm:1"
    assert container["resources"] == {"requests": {"cpu": "100m"}}
    assert spec["volumes"] == [
        {"name": "policy-volume", "configMap": {"name": "nightly-descheduler-policy-configmap"}},
        {"name": "tmp", "emptyDir": {}},
    ]
    assert build_job(descheduler())["spec"]["template"]["spec"]["containers"][0]["image"] == (
        "bm:1.0")


def test_job_is_critical_only_with_the_administrators_opt_in() -> None:
    """The upstream descheduler chart's default priorityClassName, system-cluster-critical
    (kubernetes-sigs/descheduler charts/descheduler/values.yaml), with the opt-in only."""
    pod = build_job(descheduler(), CRITICAL)["spec"]["template"]
    assert pod["metadata"]["annotations"] == {"scheduler.alpha.kubernetes.io/critical-pod": "true"}
    assert pod["spec"]["priorityClassName"] == "system-cluster-critical"


def test_job_pod_meets_the_restricted_pod_security_profile() -> None:
    pod = build_job(descheduler())["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["securityContext"] == {"allowPrivilegeEscalation": False,
                                            "readOnlyRootFilesystem": True,
                                            "capabilities": {"drop": ["ALL"]}}


def test_schedule_makes_a_cron_job() -> None:
    children = build_children(descheduler(schedule="*/10 * * * *"), "x")
    cron = children[-1]
    assert cron["kind"] == "CronJob" and cron["spec"]["schedule"] == "*/10 * * * *"
    assert cron == build_cron_job(descheduler(schedule="*/10 * * * *"))
    assert "--dry-run" not in cron["spec"]["jobTemplate"]["spec"]["template"]["spec"][
        "containers"][0]["command"]


def test_run_outcome_from_job_status() -> None:
    assert run_outcome({}) == "Pending"
    assert run_outcome({"status": {"active": 1, "startTime": "t"}}) == "Running"
    assert run_outcome({"status": {"conditions": [{"type": "Complete", "status": "True"}]}}) == (
        "Succeeded")
    assert run_outcome({"status": {"conditions": [{"type": "Failed", "status": "True"}]}}) == (
        "Failed")


def test_condition_keeps_transition_time_while_unchanged() -> None:
    first = condition([], "PolicyValid", True, "Valid", "ok")
    again = condition([{**first, "lastTransitionTime": "2020-01-01T00:00:00Z"}], "PolicyValid",
                      True, "Valid", "ok")
    assert again["lastTransitionTime"] == "2020-01-01T00:00:00Z"
    flipped = condition([again], "PolicyValid", False, "InvalidPolicy", "bad")
    assert flipped["lastTransitionTime"] != "2020-01-01T00:00:00Z"
    merged = merge_conditions([again, {"type": "Ready", "status": "True"}], flipped)
    assert [c["type"] for c in merged] == ["Ready", "PolicyValid"]


def test_crd_and_samples_are_valid_yaml_and_sample_policies_parse() -> None:
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    crd = yaml.safe_load((root / "deploy/crds/berthmaster.io_deschedulers.yaml").read_text())
    assert crd["spec"]["group"] == "berthmaster.io"
    samples = sorted((root / "deploy/samples").glob("descheduler*.yaml"))
    assert samples
    for sample in samples:
        for document in yaml.safe_load_all(sample.read_text()):
            if document and document.get("kind") == "Descheduler" and "policy" in document["spec"]:
                parse_policy_text(policy_text(document["spec"]["policy"]), str(sample))
            if document and document.get("kind") == "ConfigMap":
                for text in document["data"].values():
                    parse_policy_text(text, str(sample))


PLACEMENT = {"nodeSelector": {"node-role.kubernetes.io/control-plane": ""},
             "tolerations": [{"key": "node-role.kubernetes.io/control-plane",
                              "operator": "Exists", "effect": "NoSchedule"}],
             "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                 "nodeSelectorTerms": [{"matchExpressions": [
                     {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]}]}}},
             "imagePullSecrets": [{"name": "registry"}]}


def test_pod_options_come_from_the_spec() -> None:
    """What the descheduler chart offers for its pod (kubernetes-sigs/descheduler
    charts/descheduler/templates/cronjob.yaml: nodeSelector, tolerations, affinity,
    imagePullSecrets, priorityClassName)."""
    default = build_job(descheduler())["spec"]["template"]["spec"]
    for key in PLACEMENT:
        assert key not in default
    assert build_job(descheduler(), CRITICAL)["spec"]["template"]["spec"][
        "priorityClassName"] == "system-cluster-critical"
    spec = build_job(descheduler(priorityClassName="descheduling", **PLACEMENT))[
        "spec"]["template"]["spec"]
    assert {key: spec[key] for key in PLACEMENT} == PLACEMENT
    assert spec["priorityClassName"] == "descheduling"
    assert "priorityClassName" not in build_job(descheduler(priorityClassName=""), CRITICAL)[
        "spec"]["template"]["spec"]


def test_cron_job_options_come_from_the_spec() -> None:
    """charts/descheduler/templates/cronjob.yaml: suspend, timeZone, startingDeadlineSeconds,
    successfulJobsHistoryLimit, failedJobsHistoryLimit."""
    default = build_cron_job(descheduler(schedule="@hourly"))["spec"]
    assert (default["suspend"], default["successfulJobsHistoryLimit"],
            default["failedJobsHistoryLimit"]) == (False, 3, 3)
    assert "timeZone" not in default and "startingDeadlineSeconds" not in default
    cron = build_cron_job(descheduler(
        schedule="0 3 * * *", suspend=True, timeZone="Europe/Paris", startingDeadlineSeconds=200,
        successfulJobsHistoryLimit=0, failedJobsHistoryLimit=5, **PLACEMENT))["spec"]
    assert (cron["suspend"], cron["timeZone"], cron["startingDeadlineSeconds"],
            cron["successfulJobsHistoryLimit"], cron["failedJobsHistoryLimit"]) == (
        True, "Europe/Paris", 200, 0, 5)
    pod = cron["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["tolerations"] == PLACEMENT["tolerations"]
