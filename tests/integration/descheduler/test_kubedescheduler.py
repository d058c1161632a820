"""OpenShift 4's KubeDescheduler on the real API server: CRD rules, Predictive and Automatic
runs through the Descheduler pipeline, bad specs reported and run nothing.

The operator runs as under the chart (test_desched_operator's fixture, with this module's
``crd``), its namespace (``$POD_NAMESPACE``) the test's
``namespace``, where the KubeDescheduler ``cluster`` lives and its runs go. The workload lives
in a namespace of its own: the operator's namespace is protected, as upstream protects its
own openshift-* namespace. Without a scheduler here a run's Job pod never starts, so the test
runs the pass as the Job's command says, with the policy from the ConfigMap the Job mounts.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from berthmaster.foundation.kube import CORE, KubeClient, KubeError, group_path, resource_path
from berthmaster.foundation.times import parse_rfc3339
from berthmaster.scheduler.descheduler.metrics import parse_termination_message
from tests.integration.descheduler.kit import (
    events_for,
    remaining,
    run_pass,
    tainted_node_scene,
    wait_running,
)
from tests.integration.descheduler.test_desched_operator import (  # noqa: F401 (a fixture)
    condition,
    run_operator,
)
from tests.support.crds import install_crd
from tests.support.namespaces import fresh_namespace
from tests.support.waiting import wait_for

ROOT = Path(__file__).resolve().parents[3]
CRD = ROOT / "deploy/crds/operator.openshift.io_kubedeschedulers.yaml"
# the deschedulers capability needs the Descheduler CRD too (the operator's preflight)
DESCHEDULER_CRD = ROOT / "deploy/crds/berthmaster.io_deschedulers.yaml"
SAMPLE = ROOT / "tests/unit/descheduler/samples/kubedescheduler-cluster.yaml"
API = group_path("operator.openshift.io", "v1")
BATCH = group_path("batch", "v1")
CONFIG_MAP = "kubedescheduler-cluster-descheduler-policy-configmap"


@pytest.fixture
def crd(cluster: Any) -> None:
    install_crd(cluster, CRD)
    install_crd(cluster, DESCHEDULER_CRD)


@pytest.fixture
async def workload(kube: KubeClient, namespace: str) -> AsyncIterator[str]:
    async with fresh_namespace(kube, f"{namespace}-work") as name:
        yield name


def kube_descheduler(namespace: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "operator.openshift.io/v1", "kind": "KubeDescheduler",
            "metadata": {"name": "cluster", "namespace": namespace},
            "spec": {"deschedulingIntervalSeconds": 3600, **spec}}


async def kd_events(kube: KubeClient, namespace: str) -> list[dict[str, Any]]:
    found, _ = await kube.list_all(resource_path(CORE, "events", namespace),
                                   fieldSelector="involvedObject.kind=KubeDescheduler")
    return found


async def runs(kube: KubeClient, namespace: str) -> list[dict[str, Any]]:
    jobs, _ = await kube.list_all(resource_path(BATCH, "jobs", namespace),
                                  labelSelector="operator.openshift.io/kubedescheduler=cluster")
    return jobs


async def test_crd_refuses_what_upstream_refuses(kube: KubeClient, namespace: str,
                                                 crd: None) -> None:
    """pkg/apis/descheduler/v1/types_descheduler.go: the singleton name, the profile enum and
    the profile pairs that may not be enabled together are refused by the API server."""
    path = resource_path(API, "kubedeschedulers", namespace)
    cases = [
        ({**kube_descheduler(namespace, profiles=["AffinityAndTaints"]),
          "metadata": {"name": "other", "namespace": namespace}},
         "kubedescheduler is a singleton, .metadata.name must be 'cluster'"),
        (kube_descheduler(namespace, profiles=["SoftTopologyAndDuplicates",
                                               "TopologyAndDuplicates"]),
         "cannot declare SoftTopologyAndDuplicates and TopologyAndDuplicates profiles "
         "simultaneously"),
        (kube_descheduler(namespace, profiles=["Nope"]), "Unsupported value: \"Nope\""),
        (kube_descheduler(namespace, profiles=["AffinityAndTaints"], mode="Sometimes"),
         "Unsupported value: \"Sometimes\""),
    ]
    for body, words in cases:
        with pytest.raises(KubeError) as refused:
            await kube.create(path, body)
        assert words in str(refused.value), refused.value
    # the documented example is accepted as it is
    sample = yaml.safe_load(SAMPLE.read_text())
    sample["metadata"]["namespace"] = namespace
    created = await kube.create(path, sample)
    assert created["spec"]["mode"] == "Predictive"
    await kube.delete(resource_path(API, "kubedeschedulers", namespace, "cluster"))


async def test_predictive_reports_and_automatic_evicts(
    kube: KubeClient, namespace: str, workload: str, nodes: Any, cluster: Any, operator: None,
    tmp_path: Path,
) -> None:
    """target_config_reconciler.go: Predictive (the default mode) runs the descheduler with
    --dry-run, which counts what it would evict in descheduler_pods_evicted_total and evicts
    nothing (kubernetes-sigs/descheduler pkg/descheduler/descheduler.go); Automatic evicts.
    Changing the mode replaces the unfinished run of the old spec, as upstream's rollout."""
    node, _owner = await tainted_node_scene(kube, workload, nodes)
    await wait_running(kube, workload, ["intruder", "welcome"])

    path = resource_path(API, "kubedeschedulers", namespace, "cluster")
    await kube.create(resource_path(API, "kubedeschedulers", namespace), kube_descheduler(
        namespace, profiles=["AffinityAndTaints"],
        profileCustomizations={"namespaces": {"included": [workload]}}))

    async def run_of(generation: int) -> dict[str, Any] | None:
        for job in await runs(kube, namespace):
            labels = job["metadata"]["labels"]
            if labels.get("operator.openshift.io/kubedescheduler-generation") == str(generation):
                return job
        return None

    first = await wait_for(lambda: run_of(1), timeout=60, what="the first run's Job")
    command = first["spec"]["template"]["spec"]["containers"][0]["command"]
    assert "--dry-run" in command
    healthy = condition(await kube.get(path), "TargetConfigControllerDegraded")
    assert healthy is not None and healthy["status"] == "False", healthy
    assert any(e["reason"] == "DeschedulerRunStarted" for e in await kd_events(kube, namespace))
    config_map = await kube.get(resource_path(CORE, "configmaps", namespace, CONFIG_MAP))
    policy = yaml.safe_load(config_map["data"]["policy.yaml"])
    assert [p["name"] for p in policy["profiles"]] == ["AffinityAndTaints"]

    termination_log = tmp_path / "termination-log"
    termination_log.touch()
    dry = await run_pass(cluster.kubeconfig, config_map["data"]["policy.yaml"], dry_run=True,
                         termination_log=str(termination_log))
    assert dry.code == 0, dry.output
    assert "[dry-run] RemovePodsViolatingNodeTaints: would evict" in dry.output
    assert await remaining(kube, workload) == {"intruder", "welcome"}
    assert not await events_for(kube, workload)
    assert parse_termination_message(termination_log.read_text()) == {
        ("success", "RemovePodsViolatingNodeTaints", "AffinityAndTaints", workload, node): 1}

    await kube.patch(path, {"spec": {"mode": "Automatic"}}, kind="merge")
    second = await wait_for(lambda: run_of(2), timeout=60, what="the Automatic run's Job")
    assert "--dry-run" not in second["spec"]["template"]["spec"]["containers"][0]["command"]

    async def first_stopped() -> bool:
        return all(j["metadata"]["name"] != first["metadata"]["name"]
                   or j["metadata"].get("deletionTimestamp") for j in await runs(kube, namespace))

    await wait_for(first_stopped, timeout=60, what="the Predictive run stopped")
    evicting = await run_pass(cluster.kubeconfig, config_map["data"]["policy.yaml"])
    assert evicting.code == 0, evicting.output
    assert await remaining(kube, workload) == {"welcome"}
    assert [e["reason"] for e in await events_for(kube, workload)] == [
        "RemovePodsViolatingNodeTaints"]


async def test_an_unsupported_profile_is_reported_and_runs_nothing(
    kube: KubeClient, namespace: str, operator: None
) -> None:
    """KubeVirtRelieveAndMigrate passes the CRD but needs KubeVirt and Prometheus
    (target_config_reconciler.go manageConfigMap refuses it without them), and both
    thresholdPriority fields together pass the CRD but not defaultEvictorOverrides:
    TargetConfigControllerDegraded=True naming both, a Warning event each, no ConfigMap, no
    Job. Fixing the spec clears the condition and starts a run; breaking it again stops the
    run."""
    path = resource_path(API, "kubedeschedulers", namespace, "cluster")
    await kube.create(resource_path(API, "kubedeschedulers", namespace), kube_descheduler(
        namespace, profiles=["KubeVirtRelieveAndMigrate", "AffinityAndTaints"],
        profileCustomizations={"thresholdPriority": 10, "thresholdPriorityClassName": "x"}))

    async def degraded() -> dict[str, Any] | None:
        found = condition(await kube.get_if_exists(path), "TargetConfigControllerDegraded")
        return found if found and found["status"] == "True" else None

    found = await wait_for(degraded, timeout=60, what="TargetConfigControllerDegraded=True")
    assert found["reason"] == "UnsupportedProfile"
    assert "KubeVirtRelieveAndMigrate can only be used when KubeVirt" in found["message"]
    assert "thresholdPriority and thresholdPriorityClassName" in found["message"]
    warnings = {e["reason"] for e in await kd_events(kube, namespace) if e["type"] == "Warning"}
    assert warnings == {"UnsupportedProfile", "InvalidProfileCustomizations"}
    assert await kube.get_if_exists(resource_path(CORE, "configmaps", namespace,
                                                  CONFIG_MAP)) is None
    assert await runs(kube, namespace) == []

    await kube.patch(path, {"spec": {"profiles": ["AffinityAndTaints"],
                                     "profileCustomizations": {"thresholdPriority": 10,
                                                               "thresholdPriorityClassName": ""}}},
                     kind="merge")

    async def healthy() -> bool:
        found = condition(await kube.get(path), "TargetConfigControllerDegraded")
        return bool(found and found["status"] == "False") and bool(await runs(kube, namespace))

    await wait_for(healthy, timeout=60, what="Degraded=False and a run")

    # invalid again: the unfinished run stops too (upstream scales its descheduler to zero)
    await kube.patch(path, {"spec": {"profiles": ["KubeVirtRelieveAndMigrate"]}}, kind="merge")

    async def stopped() -> bool:
        return all(j["metadata"].get("deletionTimestamp") for j in await runs(kube, namespace))

    await wait_for(stopped, timeout=60, what="the run stopped")
    await wait_for(degraded, timeout=60, what="TargetConfigControllerDegraded=True again")


async def test_a_finished_run_is_reported_and_the_next_starts_an_interval_after_it_started(
    kube: KubeClient, namespace: str, nodes: Any, operator: None
) -> None:
    """The descheduler's --descheduling-interval loop (wait.NonSlidingUntil,
    kubernetes-sigs/descheduler pkg/descheduler/descheduler.go): the next run starts
    deschedulingIntervalSeconds after the previous one started, once it has finished. The run's
    pod is bound to a kwok node here (no scheduler), which completes it as a Job's pod; the
    finished Predictive run is reported in a WouldEvict event and in the status."""
    await kube.create(resource_path(CORE, "serviceaccounts", namespace), {
        "apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "chart-descheduler"}})  # the operator fixture's run account
    node = (await nodes.create())["metadata"]["name"]
    interval = 2
    await kube.create(resource_path(API, "kubedeschedulers", namespace), kube_descheduler(
        namespace, deschedulingIntervalSeconds=interval, profiles=["AffinityAndTaints"],
        profileCustomizations={"namespaces": {"included": [f"{namespace}-nothing-here"]}}))
    first = await wait_for(lambda: first_run(kube, namespace), timeout=60, what="a run")
    name = first["metadata"]["name"]

    async def run_pod() -> dict[str, Any] | None:
        pods, _ = await kube.list_all(resource_path(CORE, "pods", namespace),
                                      labelSelector=f"batch.kubernetes.io/job-name={name}")
        return pods[0] if pods else None

    pod = await wait_for(run_pod, timeout=60, what="the run's pod")
    await kube.create(resource_path(CORE, "pods", namespace, pod["metadata"]["name"],
                                    "binding"), {
        "apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod["metadata"]["name"]},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node}})

    async def reported() -> dict[str, Any] | None:
        return next((e for e in await kd_events(kube, namespace)
                     if e["reason"] == "WouldEvict"), None)

    event = await wait_for(reported, timeout=90, what="the WouldEvict event")
    assert event["message"] == (f"Predictive run {name} would evict 0 pod(s); set spec.mode: "
                                "Automatic to evict")

    async def second_run() -> dict[str, Any] | None:
        return next((j for j in await runs(kube, namespace) if j["metadata"]["name"] != name),
                    None)

    second = await wait_for(second_run, timeout=60, what="the next run")
    finished = await kube.get(resource_path(BATCH, "jobs", namespace, name))
    started = parse_rfc3339(finished["status"]["startTime"])
    created = parse_rfc3339(second["metadata"]["creationTimestamp"])
    assert started is not None and created is not None
    # both stamps are whole seconds: one second of slack for the truncation
    assert (created - started).total_seconds() >= interval - 1, (started, created)
    assert any(c["type"] == "Complete" and c["status"] == "True"
               for c in finished["status"].get("conditions") or [])


async def first_run(kube: KubeClient, namespace: str) -> dict[str, Any] | None:
    found = await runs(kube, namespace)
    return found[0] if found else None


async def test_conflicting_and_unknown_profiles_stored_before_the_rules_run_nothing(
    kube: KubeClient, namespace: str, cluster: Any, operator: None, tmp_path: Path
) -> None:
    """A KubeDescheduler stored before the CRD's rules (here: under a copy of the CRD without
    the profile enum and CEL rules, then the real CRD applied again) still reaches the operator
    with conflicting and unknown profiles: TargetConfigControllerDegraded=True naming each
    problem, one Warning event per problem, no ConfigMap and no run (target_config_reconciler.go
    manageConfigMap refuses unknown profiles; types_descheduler.go lists the conflicts)."""
    relaxed = yaml.safe_load(CRD.read_text())
    profiles = relaxed["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"][
        "spec"]["properties"]["profiles"]
    profiles.pop("x-kubernetes-validations")
    profiles["items"].pop("enum")
    relaxed_file = tmp_path / "relaxed-crd.yaml"
    relaxed_file.write_text(yaml.safe_dump(relaxed))
    body = kube_descheduler(namespace, profiles=[
        "SoftTopologyAndDuplicates", "TopologyAndDuplicates", "Nope"])
    try:
        applied = cluster.kubectl("apply", "-f", str(relaxed_file))
        assert applied.returncode == 0, applied.stderr

        async def stored() -> bool:  # the API server takes the relaxed schema in a moment
            try:
                await kube.create(resource_path(API, "kubedeschedulers", namespace), body)
            except KubeError as error:
                return bool(error.conflict)  # 409: an earlier attempt was stored
            return True

        await wait_for(stored, timeout=30, what="the KubeDescheduler stored")
    finally:
        restored = cluster.kubectl("apply", "-f", str(CRD))
        assert restored.returncode == 0, restored.stderr
    path = resource_path(API, "kubedeschedulers", namespace, "cluster")

    async def degraded() -> dict[str, Any] | None:
        found = condition(await kube.get_if_exists(path), "TargetConfigControllerDegraded")
        return found if found and found["status"] == "True" else None

    found = await wait_for(degraded, timeout=60, what="TargetConfigControllerDegraded=True")
    assert "Profile 'Nope' not recognized" in found["message"]
    assert ("cannot declare SoftTopologyAndDuplicates and TopologyAndDuplicates profiles "
            "simultaneously") in found["message"]

    async def warned() -> set[str]:
        reasons = {e["reason"] for e in await kd_events(kube, namespace)
                   if e["type"] == "Warning"}
        return reasons if {"UnknownProfile", "ProfileConflict"} <= reasons else set()

    await wait_for(warned, timeout=30, what="a Warning event per problem")
    assert await kube.get_if_exists(resource_path(CORE, "configmaps", namespace,
                                                  CONFIG_MAP)) is None
    assert await runs(kube, namespace) == []
