"""The Descheduler resource's children, built without a cluster, and its status decisions."""

from __future__ import annotations

from typing import Any

import yaml

from berthmaster.operator.deschedulers.build import (
    build_children,
    build_cluster_role,
    build_cron_job,
    build_job,
    policy_text,
)
from berthmaster.operator.deschedulers.status import condition, merge_conditions, run_outcome
from berthmaster.scheduler.descheduler.policy import parse_policy_text

POLICY = {"apiVersion": "descheduler/v1alpha1", "kind": "DeschedulerPolicy",
          "strategies": {"RemoveDuplicates": {"enabled": True}}}


def descheduler(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "berthmaster.io/v1alpha1", "kind": "Descheduler",
            "metadata": {"name": "nightly", "uid": "u-1", "generation": 3},
            "spec": {"namespace": "kube-system", "policy": POLICY, **spec}}


def test_run_once_children_are_owned_and_in_order() -> None:
    children = build_children(descheduler(), policy_text(POLICY))
    assert [c["kind"] for c in children] == [
        "ConfigMap", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Job"]
    for child in children:
        (owner,) = child["metadata"]["ownerReferences"]
        assert owner == {"apiVersion": "berthmaster.io/v1alpha1", "kind": "Descheduler",
                         "name": "nightly", "uid": "u-1", "controller": True,
                         "blockOwnerDeletion": True}
        assert child["metadata"]["labels"] == {"berthmaster.io/descheduler": "nightly"}
    config_map = children[0]
    assert parse_policy_text(config_map["data"]["policy.yaml"]).strategies[0].name == (
        "RemoveDuplicates")
    binding = children[3]
    assert binding["roleRef"]["name"] == children[2]["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "nightly-descheduler-sa",
                                    "namespace": "kube-system"}]


def test_job_is_critical_and_runs_the_policy_file() -> None:
    job = build_job(descheduler(dryRun=True, image="example/bm:1",
                                resources={"requests": {"cpu": "100m"}}))
    assert job["metadata"]["name"] == "nightly-descheduler-job-3"
    pod = job["spec"]["template"]
    assert pod["metadata"]["annotations"] == {"scheduler.alpha.kubernetes.io/critical-pod": "true"}
    spec = pod["spec"]
    assert spec["priorityClassName"] == "system-cluster-critical"
    assert spec["restartPolicy"] == "Never"
    assert spec["serviceAccountName"] == "nightly-descheduler-sa"
    (container,) = spec["containers"]
    assert container["command"] == ["berthmaster", "deschedule", "--policy-config-file",
                                    "/policy-dir/policy.yaml", "--dry-run"]
    assert container["image"] == "example/bm:1"
    assert container["resources"] == {"requests": {"cpu": "100m"}}
    assert spec["volumes"] == [
        {"name": "policy-volume", "configMap": {"name": "nightly-descheduler-policy-configmap"}},
        {"name": "tmp", "emptyDir": {}},
    ]


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


def test_cluster_role_holds_the_seed_rules() -> None:
    rules = build_cluster_role(descheduler())["rules"]
    assert rules[:3] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "watch", "list"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "watch", "list", "delete"]},
        {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
    ]
    assert any(r["resources"] == ["events"] for r in rules)


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
    assert default["priorityClassName"] == "system-cluster-critical"
    spec = build_job(descheduler(priorityClassName="descheduling", **PLACEMENT))[
        "spec"]["template"]["spec"]
    assert {key: spec[key] for key in PLACEMENT} == PLACEMENT
    assert spec["priorityClassName"] == "descheduling"
    assert "priorityClassName" not in build_job(descheduler(priorityClassName=""))[
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
