"""The operator turns a Descheduler resource into its objects and reports in its status.

The operator runs here as it does under the chart: its namespace (``$POD_NAMESPACE``, here the
test's namespace) is where every run goes and the only one it reads policy ConfigMaps from;
``$BERTHMASTER_DESCHEDULER_IMAGES`` is the administrator's allow-list (docs/security.md).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from berthmaster.foundation.kube import CORE, KubeClient, KubeError, group_path, resource_path
from tests.support.crds import install_crd
from tests.support.operator_process import running_operator
from tests.support.waiting import wait_for

ROOT = Path(__file__).resolve().parents[3]
CRD = ROOT / "deploy/crds/berthmaster.io_deschedulers.yaml"
DESCHEDULERS = resource_path(group_path("berthmaster.io", "v1alpha1"), "deschedulers")
RBAC = group_path("rbac.authorization.k8s.io", "v1")
BATCH = group_path("batch", "v1")
ALLOWED_EXTRA_IMAGE = "registry.example.org/descheduler:v2"
GOOD_POLICY = {"apiVersion": "descheduler/v1alpha1", "kind": "DeschedulerPolicy",
               "strategies": {"RemoveDuplicates": {"enabled": True}}}


@pytest.fixture
def crd(cluster: Any) -> None:
    install_crd(cluster, CRD)


@pytest.fixture(name="operator")  # a name other modules can import it by (test_kubedescheduler)
async def run_operator(cluster: Any, crd: None, namespace: str, tmp_path: Path
                       ) -> AsyncIterator[None]:
    async with running_operator(
            str(cluster.kubeconfig), ["--only", "deschedulers"], tmp_path / "operator.log",
            env={"BERTHMASTER_IMAGE": "example.org/berthmaster:test",
                 "BERTHMASTER_DESCHEDULER_IMAGES": ALLOWED_EXTRA_IMAGE,
                 "BERTHMASTER_DESCHEDULER_SERVICE_ACCOUNT": "chart-descheduler",
                 "POD_NAMESPACE": namespace}):
        yield


async def get(kube: KubeClient, path: str) -> dict[str, Any] | None:
    return await kube.get_if_exists(path)


def condition(obj: dict[str, Any] | None, type_: str) -> dict[str, Any] | None:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == type_:
            return dict(c)
    return None


async def test_descheduler_becomes_a_configmap_and_a_job_in_the_operator_namespace(
    kube: KubeClient, namespace: str, operator: None
) -> None:
    """No ServiceAccount, ClusterRole or binding per Descheduler any more: the Job runs as the
    chart's account (templates/descheduler-rbac.yaml), at no priority class by default, in the
    operator's namespace even when spec.namespace names kube-system (what the CRD used to
    default it to): that is ignored with a NamespaceIgnored Warning event."""
    name = f"once-{namespace}"
    await kube.create(DESCHEDULERS, {
        "apiVersion": "berthmaster.io/v1alpha1", "kind": "Descheduler",
        "metadata": {"name": name},
        "spec": {"namespace": "kube-system", "policy": GOOD_POLICY, "dryRun": True}})
    path = resource_path(group_path("berthmaster.io", "v1alpha1"), "deschedulers", None, name)
    try:
        valid = await wait_for(lambda: _true(kube, path, "PolicyValid"), timeout=60,
                               what="PolicyValid=True")
        assert valid["reason"] == "Valid"
        allowed = await _true(kube, path, "SpecAllowed")
        assert allowed is not None and allowed["reason"] == "NamespaceIgnored"
        assert "spec.namespace 'kube-system' is ignored" in allowed["message"]
        assert any(e.get("reason") == "NamespaceIgnored" and e["type"] == "Warning"
                   for e in await events_of(kube, name))
        job = await wait_for(lambda: get(kube, resource_path(
            BATCH, "jobs", namespace, f"{name}-descheduler-job-1")), what="Job")
        pod = job["spec"]["template"]["spec"]
        assert "priorityClassName" not in pod
        assert pod["serviceAccountName"] == "chart-descheduler"
        assert pod["containers"][0]["image"] == "example.org/berthmaster:test"
        assert "--dry-run" in pod["containers"][0]["command"]
        config_map = await get(kube, resource_path(
            CORE, "configmaps", namespace, f"{name}-descheduler-policy-configmap"))
        assert config_map and "RemoveDuplicates" in config_map["data"]["policy.yaml"]
        assert await get(kube, resource_path(RBAC, "clusterroles", None,
                                             f"{name}-descheduler-cluster-role")) is None
        assert await get(kube, resource_path(CORE, "serviceaccounts", namespace,
                                             f"{name}-descheduler-sa")) is None

        async def run_reported() -> bool:
            status = ((await get(kube, path)) or {}).get("status") or {}
            return status.get("lastJobName") == f"{name}-descheduler-job-1" and status.get(
                "lastRunOutcome") in ("Pending", "Running")

        await wait_for(run_reported, timeout=60, what="status.lastJobName and lastRunOutcome")
        # No finalizer: deleting a Descheduler never waits for the operator.
        assert not ((await get(kube, path)) or {})["metadata"].get("finalizers")
    finally:
        await kube.delete(path)
    # deleting the resource lets the garbage collector remove what it owned
    await wait_for(lambda: _gone(kube, resource_path(
        CORE, "configmaps", namespace, f"{name}-descheduler-policy-configmap")),
        timeout=60, what="policy ConfigMap garbage-collected")


async def refused(kube: KubeClient, path: str) -> dict[str, Any]:
    async def spec_refused() -> dict[str, Any] | None:
        found = condition(await get(kube, path), "SpecAllowed")
        return found if found and found["status"] == "False" else None

    return await wait_for(spec_refused, timeout=60, what="SpecAllowed=False")


async def events_of(kube: KubeClient, name: str) -> list[dict[str, Any]]:
    events, _ = await kube.list_all(resource_path(CORE, "events", None),
                                    fieldSelector=f"involvedObject.name={name}")
    return events


async def test_an_image_outside_the_allow_list_runs_nothing(
    kube: KubeClient, namespace: str, operator: None
) -> None:
    """spec.image must be the operator's image or one the administrator listed
    (descheduler.allowedImages); anything else: a condition and a Warning event naming the
    field and the Helm value to set, and no Job. An allowed extra image does run."""
    name = f"img-{namespace}"
    await kube.create(DESCHEDULERS, {
        "apiVersion": "berthmaster.io/v1alpha1", "kind": "Descheduler",
        "metadata": {"name": name},
        "spec": {"policy": GOOD_POLICY, "image": "evil.example.org/miner:latest"}})
    path = resource_path(group_path("berthmaster.io", "v1alpha1"), "deschedulers", None, name)
    try:
        found = await refused(kube, path)
        assert found["reason"] == "ImageNotAllowed"
        assert "spec.image 'evil.example.org/miner:latest' is not an allowed" in found["message"]
        assert "descheduler.allowedImages" in found["message"]
        ready = condition(await get(kube, path), "Ready")
        assert ready is not None and ready["status"] == "False"
        # The refusal is recorded before anything is created, so nothing was.
        jobs, _ = await kube.list_all(resource_path(BATCH, "jobs", namespace),
                                      labelSelector=f"berthmaster.io/descheduler={name}")
        assert jobs == []
        warnings = [e for e in await events_of(kube, name)
                    if e.get("reason") == "ImageNotAllowed"]
        assert warnings and warnings[0]["type"] == "Warning"
        assert "descheduler.allowedImages" in warnings[0]["message"]

        await kube.patch(path, {"spec": {"image": ALLOWED_EXTRA_IMAGE}})
        job = await wait_for(lambda: get(kube, resource_path(
            BATCH, "jobs", namespace, f"{name}-descheduler-job-2")), what="the allowed Job")
        assert job["spec"]["template"]["spec"]["containers"][0]["image"] == ALLOWED_EXTRA_IMAGE
    finally:
        await kube.delete(path)


async def test_a_policy_configmap_in_another_namespace_is_refused_unread(
    kube: KubeClient, namespace: str, operator: None
) -> None:
    """The operator reads policy ConfigMaps only in its own namespace: one named in another
    namespace is refused with a condition saying where to put it, and its content (here a
    tenant's secret-looking data, not a policy) never reaches the status."""
    other = f"{namespace}-tenant"
    await kube.create(resource_path(CORE, "namespaces"), {
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": other}})
    await kube.create(resource_path(CORE, "configmaps", other), {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "app-settings"},
        "data": {"policy.yaml": "database_password: hunter2-tenant-secret\n"}})
    name = f"cm-{namespace}"
    await kube.create(DESCHEDULERS, {
        "apiVersion": "berthmaster.io/v1alpha1", "kind": "Descheduler",
        "metadata": {"name": name},
        "spec": {"policyConfigMap": {"name": "app-settings", "namespace": other}}})
    path = resource_path(group_path("berthmaster.io", "v1alpha1"), "deschedulers", None, name)
    try:
        found = await refused(kube, path)
        assert found["reason"] == "PolicyConfigMapNotAllowed"
        assert f"spec.policyConfigMap.namespace {other!r} is not allowed" in found["message"]
        assert f"{namespace!r}" in found["message"]
        descheduler = await get(kube, path)
        assert "hunter2" not in str(descheduler)
        assert "PolicyValid" not in str(descheduler)  # never read, never parsed
        jobs, _ = await kube.list_all(resource_path(BATCH, "jobs", namespace),
                                      labelSelector=f"berthmaster.io/descheduler={name}")
        assert jobs == []
    finally:
        await kube.delete(path)
        await kube.delete(resource_path(CORE, "namespaces", None, other))


async def test_a_broken_policy_configmap_is_reported_by_position_not_content(
    kube: KubeClient, namespace: str, operator: None
) -> None:
    name = f"yaml-{namespace}"
    await kube.create(resource_path(CORE, "configmaps", namespace), {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "broken"},
        "data": {"policy.yaml": "kind: DeschedulerPolicy\n  token: [s3cr3t-value\n"}})
    await kube.create(DESCHEDULERS, {
        "apiVersion": "berthmaster.io/v1alpha1", "kind": "Descheduler",
        "metadata": {"name": name}, "spec": {"policyConfigMap": {"name": "broken"}}})
    path = resource_path(group_path("berthmaster.io", "v1alpha1"), "deschedulers", None, name)
    try:
        async def invalid() -> dict[str, Any] | None:
            found = condition(await get(kube, path), "PolicyValid")
            return found if found and found["status"] == "False" else None

        found = await wait_for(invalid, timeout=60, what="PolicyValid=False")
        assert found["message"] == (
            f"ConfigMap {namespace}/broken key 'policy.yaml': not valid YAML or JSON at line 2, "
            "column 8; fix the policy file there")
        assert "s3cr3t" not in str(await get(kube, path))
        assert all("s3cr3t" not in str(e) for e in await events_of(kube, name))
    finally:
        await kube.delete(path)


async def test_invalid_policy_is_rejected_before_any_job(
    kube: KubeClient, namespace: str, operator: None
) -> None:
    name = f"bad-{namespace}"
    await kube.create(DESCHEDULERS, {
        "apiVersion": "berthmaster.io/v1alpha1", "kind": "Descheduler",
        "metadata": {"name": name},
        "spec": {"namespace": namespace, "policy": {
            "apiVersion": "descheduler/v1alpha1", "kind": "DeschedulerPolicy",
            "strategies": {"LowNodeUtilization": {"enabled": True, "params": {
                "nodeResourceUtilizationThresholds": {"thresholds": {"cpu": 120},
                                                      "targetThresholds": {"cpu": 50}}}}}}}})
    path = resource_path(group_path("berthmaster.io", "v1alpha1"), "deschedulers", None, name)
    try:
        async def rejected() -> dict[str, Any] | None:
            found = condition(await get(kube, path), "PolicyValid")
            return found if found and found["status"] == "False" else None

        invalid = await wait_for(rejected, timeout=60, what="PolicyValid=False")
        assert invalid["reason"] == "InvalidPolicy"
        assert "cpu threshold not in [0, 100] range" in invalid["message"]
        jobs, _ = await kube.list_all(resource_path(BATCH, "jobs", namespace))
        assert jobs == []
        events, _ = await kube.list_all(resource_path(CORE, "events", None),
                                        fieldSelector=f"involvedObject.name={name}")
        assert any(e.get("reason") == "InvalidPolicy" for e in events)
    finally:
        await kube.delete(path)


async def test_crd_rejects_policy_and_configmap_together(kube: KubeClient, crd: None) -> None:
    with pytest.raises(KubeError) as caught:
        await kube.create(DESCHEDULERS, {
            "apiVersion": "berthmaster.io/v1alpha1", "kind": "Descheduler",
            "metadata": {"name": "both"},
            "spec": {"policy": GOOD_POLICY, "policyConfigMap": {"name": "x"}}})
    assert caught.value.status == 422
    assert "set exactly one of spec.policy" in caught.value.message


async def _true(kube: KubeClient, path: str, type_: str) -> dict[str, Any] | None:
    found = condition(await get(kube, path), type_)
    return found if found and found["status"] == "True" else None


async def _gone(kube: KubeClient, path: str) -> bool:
    return await get(kube, path) is None


async def test_cron_and_pod_options_reach_the_cron_job(
    kube: KubeClient, namespace: str, operator: None
) -> None:
    """The descheduler chart's CronJob and pod options (kubernetes-sigs/descheduler
    charts/descheduler/templates/cronjob.yaml), set on the Descheduler, are on the CronJob the
    API server stores (it validates the time zone and the pod fields); suspend toggles."""
    name = f"cron-{namespace}"
    tolerations = [{"key": "dedicated", "operator": "Equal", "value": "ops",
                    "effect": "NoSchedule"}]
    await kube.create(DESCHEDULERS, {
        "apiVersion": "berthmaster.io/v1alpha1", "kind": "Descheduler",
        "metadata": {"name": name},
        "spec": {"namespace": namespace, "policy": GOOD_POLICY, "schedule": "0 3 * * *",
                 "suspend": True, "timeZone": "Europe/Paris", "startingDeadlineSeconds": 200,
                 "successfulJobsHistoryLimit": 1, "failedJobsHistoryLimit": 2,
                 "priorityClassName": "", "nodeSelector": {"kubernetes.io/os": "linux"},
                 "tolerations": tolerations, "imagePullSecrets": [{"name": "registry"}]}})
    path = resource_path(group_path("berthmaster.io", "v1alpha1"), "deschedulers", None, name)
    cron_path = resource_path(BATCH, "cronjobs", namespace, f"{name}-descheduler-cronjob")
    try:
        cron = await wait_for(lambda: get(kube, cron_path), timeout=60, what="CronJob")
        spec = cron["spec"]
        assert (spec["suspend"], spec["timeZone"], spec["startingDeadlineSeconds"],
                spec["successfulJobsHistoryLimit"], spec["failedJobsHistoryLimit"]) == (
            True, "Europe/Paris", 200, 1, 2)
        pod = spec["jobTemplate"]["spec"]["template"]["spec"]
        assert "priorityClassName" not in pod
        assert pod["nodeSelector"] == {"kubernetes.io/os": "linux"}
        assert pod["tolerations"] == tolerations
        assert pod["imagePullSecrets"] == [{"name": "registry"}]

        await kube.patch(path, {"spec": {"suspend": False}})

        async def resumed() -> bool:
            return ((await get(kube, cron_path)) or {}).get("spec", {}).get("suspend") is False

        await wait_for(resumed, timeout=60, what="CronJob resumed")
    finally:
        await kube.delete(path)


async def test_crd_refuses_cron_settings_without_a_schedule(kube: KubeClient, crd: None) -> None:
    with pytest.raises(KubeError) as caught:
        await kube.create(DESCHEDULERS, {
            "apiVersion": "berthmaster.io/v1alpha1", "kind": "Descheduler",
            "metadata": {"name": "suspended-once"},
            "spec": {"policy": GOOD_POLICY, "suspend": True}})
    assert caught.value.status == 422
    assert "are CronJob settings: set spec.schedule, or remove them" in caught.value.message


async def test_an_api_error_that_is_not_transient_is_not_retried(
    kube: KubeClient, namespace: str, operator: None, tmp_path: Path
) -> None:
    """A Job the API server refuses as invalid (422: its name, and so its pods' job-name label,
    is longer than 63 characters) fails the handler permanently, logged as such, instead of
    kopf's retry every minute for ever (the operator retries only what is
    transient: operator/retrying.py).
    kopf/_core/actions/execution.py ``execute_handler_once``: PermanentError "failed
    permanently", TemporaryError "failed temporarily", any other exception "failed with an
    exception and will try again in 60 seconds" (what this test saw before the change)."""
    name = f"long-{namespace}-" + "x" * 34  # its Job: 66 characters
    await kube.create(DESCHEDULERS, {
        "apiVersion": "berthmaster.io/v1alpha1", "kind": "Descheduler",
        "metadata": {"name": name},
        "spec": {"namespace": namespace, "policy": GOOD_POLICY, "dryRun": True}})
    path = resource_path(group_path("berthmaster.io", "v1alpha1"), "deschedulers", None, name)
    log = tmp_path / "operator.log"
    try:
        line = await wait_for(lambda: next(
            (x for x in log.read_text().splitlines()
             if "descheduler_reconcile" in x and "failed" in x and name in x), None),
            timeout=60, what="the handler's failure logged")
        assert "failed permanently" in line, line
        assert "422" in line and "(not transient: not retried until the object changes)" in line
        assert "will try again" not in log.read_text()
    finally:
        await kube.delete(path)
