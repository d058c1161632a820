"""KubeDescheduler profiles -> DeschedulerPolicy, as openshift/cluster-kube-descheduler-operator
pkg/operator/target_config_reconciler.go writes it (``manageConfigMap`` and the ``*Profile``
functions), and the run decisions of operator/deschedulers/kubedescheduler.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from berthmaster.operator.deschedulers import kubedescheduler as kd
from berthmaster.operator.deschedulers.profiles import (
    CONFLICTS,
    KubeDeschedulerInvalid,
    expand,
    protected_namespaces,
)
from berthmaster.operator.deschedulers.runs import RunSettings
from berthmaster.scheduler.descheduler.policy import parse_policy

SAMPLE = Path(__file__).parent / "samples" / "kubedescheduler-cluster.yaml"
PROTECTED = ["kube-system", "hypershift", "openshift", "openshift-monitoring"]
EXCLUDE = {"exclude": PROTECTED}
EVICTOR = {"name": "DefaultEvictor",
           "args": {"ignorePvcPods": True, "evictLocalStoragePods": False}}
FILTER = {"filter": {"enabled": ["DefaultEvictor"]}}
SETTINGS = RunSettings(namespace="bm-system", service_account="bm-descheduler",
                       default_image="bm:1.0", allowed_images=frozenset({"bm:1.0"}),
                       system_critical=False)


def spec(*profiles: str, **more: Any) -> dict[str, Any]:
    return {"deschedulingIntervalSeconds": 3600, "profiles": list(profiles), **more}


def only_profile(*profiles: str, **more: Any) -> dict[str, Any]:
    policy = expand(spec(*profiles, **more), PROTECTED)
    parse_policy(policy, "expanded")  # berthmaster's descheduler runs what the expansion writes
    (profile,) = policy["profiles"]
    return dict(profile)


def configs(profile: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c["args"] for c in profile["pluginConfig"]}


def test_affinity_and_taints() -> None:
    """affinityAndTaintsProfile: the three deschedule plugins, node affinity limited to the
    required type, every plugin excluding the protected namespaces, PVC pods ignored."""
    assert only_profile("AffinityAndTaints") == {
        "name": "AffinityAndTaints",
        "pluginConfig": [
            {"name": "RemovePodsViolatingInterPodAntiAffinity", "args": {"namespaces": EXCLUDE}},
            {"name": "RemovePodsViolatingNodeTaints", "args": {"namespaces": EXCLUDE}},
            {"name": "RemovePodsViolatingNodeAffinity",
             "args": {"nodeAffinityType": ["requiredDuringSchedulingIgnoredDuringExecution"],
                      "namespaces": EXCLUDE}},
            EVICTOR],
        "plugins": {**FILTER, "deschedule": {"enabled": [
            "RemovePodsViolatingInterPodAntiAffinity", "RemovePodsViolatingNodeTaints",
            "RemovePodsViolatingNodeAffinity"]}}}


@pytest.mark.parametrize(("name", "constraints"), [
    ("TopologyAndDuplicates", ["DoNotSchedule"]),  # topologyAndDuplicatesProfile
    ("SoftTopologyAndDuplicates", ["DoNotSchedule", "ScheduleAnyway"]),  # softTopology...
])
def test_topology_and_duplicates(name: str, constraints: list[str]) -> None:
    """target_config_reconciler.go topologyAndDuplicatesProfile / softTopologyAndDuplicates
    Profile: two balance plugins; the soft variant also counts ScheduleAnyway constraints."""
    assert only_profile(name) == {
        "name": name,
        "pluginConfig": [
            {"name": "RemovePodsViolatingTopologySpreadConstraint",
             "args": {"constraints": constraints, "namespaces": EXCLUDE}},
            {"name": "RemoveDuplicates", "args": {"namespaces": EXCLUDE}},
            EVICTOR],
        "plugins": {**FILTER, "balance": {"enabled": [
            "RemovePodsViolatingTopologySpreadConstraint", "RemoveDuplicates"]}}}


def test_lifecycle_and_utilization_defaults() -> None:
    """lifecycleAndUtilizationProfile: PodLifeTime 24 h, 100 restarts counting init
    containers, LowNodeUtilization 20/50 % of cpu, memory and pods with the protected
    namespaces not evictable."""
    assert only_profile("LifecycleAndUtilization") == {
        "name": "LifecycleAndUtilization",
        "pluginConfig": [
            {"name": "PodLifeTime", "args": {"maxPodLifeTimeSeconds": 86400,
                                             "namespaces": EXCLUDE}},
            {"name": "RemovePodsHavingTooManyRestarts",
             "args": {"podRestartThreshold": 100, "includingInitContainers": True,
                      "namespaces": EXCLUDE}},
            {"name": "LowNodeUtilization",
             "args": {"thresholds": {"cpu": 20, "memory": 20, "pods": 20},
                      "targetThresholds": {"cpu": 50, "memory": 50, "pods": 50},
                      "evictableNamespaces": EXCLUDE}},
            EVICTOR],
        "plugins": {**FILTER,
                    "deschedule": {"enabled": ["PodLifeTime", "RemovePodsHavingTooManyRestarts"]},
                    "balance": {"enabled": ["LowNodeUtilization"]}}}


@pytest.mark.parametrize("name", ["LongLifecycle", "DevPreviewLongLifecycle"])
def test_long_lifecycle_is_lifecycle_without_pod_lifetime(name: str) -> None:
    """target_config_reconciler.go longLifecycleProfile: LifecycleAndUtilization minus its first
    plugin (PodLifeTime), named LongLifecycle, for the deprecated DevPreviewLongLifecycle too."""
    profile = only_profile(name)
    assert profile["name"] == "LongLifecycle"
    assert list(configs(profile)) == ["RemovePodsHavingTooManyRestarts", "LowNodeUtilization",
                                      "DefaultEvictor"]
    assert profile["plugins"]["deschedule"] == {"enabled": ["RemovePodsHavingTooManyRestarts"]}


@pytest.mark.parametrize(("level", "threshold"), [
    (None, 20), ("", 20), ("Minimal", 10), ("Modest", 20), ("Moderate", 30)])
def test_compact_and_scale(level: str | None, threshold: int) -> None:
    """target_config_reconciler.go compactAndScaleProfile: HighNodeUtilization at 20 % (or the
    devHighNodeUtilizationThresholds level), the excluded namespaces not evictable."""
    customizations = {} if level is None else {
        "profileCustomizations": {"devHighNodeUtilizationThresholds": level}}
    profile = only_profile("CompactAndScale", **customizations)
    assert configs(profile)["HighNodeUtilization"] == {
        "thresholds": dict.fromkeys(("cpu", "memory", "pods"), threshold),
        "evictableNamespaces": EXCLUDE}
    assert profile["plugins"]["balance"] == {"enabled": ["HighNodeUtilization"]}


@pytest.mark.parametrize(("extra", "evictor"), [
    ([], {"ignorePvcPods": True, "evictLocalStoragePods": False}),
    (["EvictPodsWithPVC"], {"ignorePvcPods": False, "evictLocalStoragePods": False}),
    (["EvictPodsWithLocalStorage"], {"ignorePvcPods": True, "evictLocalStoragePods": True}),
    (["EvictPodsWithPVC", "EvictPodsWithLocalStorage"],
     {"ignorePvcPods": False, "evictLocalStoragePods": True}),
])
def test_evict_pods_with_pvc_and_local_storage_set_every_evictor(
        extra: list[str], evictor: dict[str, Any]) -> None:
    """manageConfigMap: the two profiles add no profile of their own; they set ignorePvcPods
    and evictLocalStoragePods in every other profile's DefaultEvictor."""
    policy = expand(spec(*extra, "AffinityAndTaints", "TopologyAndDuplicates"), PROTECTED)
    assert [p["name"] for p in policy["profiles"]] == ["AffinityAndTaints",
                                                       "TopologyAndDuplicates"]
    assert all(configs(p)["DefaultEvictor"] == evictor for p in policy["profiles"])


@pytest.mark.parametrize(("customizations", "threshold"), [
    ({"thresholdPriority": 1000}, {"value": 1000}),
    ({"thresholdPriorityClassName": "important"}, {"name": "important"}),
])
def test_threshold_priority_reaches_the_evictor(customizations: dict[str, Any],
                                                threshold: dict[str, Any]) -> None:
    """target_config_reconciler.go defaultEvictorOverrides."""
    profile = only_profile("AffinityAndTaints", profileCustomizations=customizations)
    assert configs(profile)["DefaultEvictor"]["priorityThreshold"] == threshold


def test_included_namespaces_replace_the_exclusion_except_for_utilization() -> None:
    """manageConfigMap and setExcludedNamespacesForLowNodeUtilizationPlugin: an inclusion
    replaces the protected exclusion, but LowNodeUtilization takes no inclusion and falls back to
    excluding the protected namespaces."""
    profile = only_profile("LifecycleAndUtilization", profileCustomizations={
        "namespaces": {"included": ["team-a", "team-b"]}})
    args = configs(profile)
    assert args["PodLifeTime"]["namespaces"] == {"include": ["team-a", "team-b"]}
    assert args["RemovePodsHavingTooManyRestarts"]["namespaces"] == {
        "include": ["team-a", "team-b"]}
    assert args["LowNodeUtilization"]["evictableNamespaces"] == EXCLUDE


def test_excluded_namespaces_add_to_the_protected_ones() -> None:
    """manageConfigMap: excluded namespaces are appended to the protected list."""
    profile = only_profile("CompactAndScale", profileCustomizations={
        "namespaces": {"excluded": ["batch"]}})
    assert configs(profile)["HighNodeUtilization"]["evictableNamespaces"] == {
        "exclude": [*PROTECTED, "batch"]}


@pytest.mark.parametrize(("customizations", "lifetime", "low", "high"), [
    ({"podLifetime": "48h"}, 172800, 20, 50),
    ({"podLifetime": "1h30m"}, 5400, 20, 50),
    ({"devLowNodeUtilizationThresholds": "Low"}, 86400, 10, 30),
    ({"devLowNodeUtilizationThresholds": "Medium"}, 86400, 20, 50),
    ({"devLowNodeUtilizationThresholds": "High"}, 86400, 40, 70),
    # lifecycle ignores the deviation thresholds (getLowNodeUtilizationThresholds ignoreDynamic)
    ({"devDeviationThresholds": "AsymmetricLow"}, 86400, 20, 50),
])
def test_lifecycle_customizations(customizations: dict[str, Any], lifetime: int, low: int,
                                  high: int) -> None:
    """target_config_reconciler.go lifecycleAndUtilizationProfile and
    getLowNodeUtilizationThresholds."""
    args = configs(only_profile("LifecycleAndUtilization",
                                profileCustomizations=customizations))
    assert args["PodLifeTime"]["maxPodLifeTimeSeconds"] == lifetime
    assert args["LowNodeUtilization"]["thresholds"] == dict.fromkeys(("cpu", "memory", "pods"),
                                                                     low)
    assert args["LowNodeUtilization"]["targetThresholds"] == dict.fromkeys(
        ("cpu", "memory", "pods"), high)


def test_eviction_limits() -> None:
    """target_config_reconciler.go setEvictionsLimits: total and per node on the policy, and
    the per-node limit on every LowNodeUtilization too."""
    policy = expand(spec("LifecycleAndUtilization", "AffinityAndTaints",
                         evictionLimits={"total": 10, "node": 2}), PROTECTED)
    assert policy["maxNoOfPodsToEvictTotal"] == 10
    assert policy["maxNoOfPodsToEvictPerNode"] == 2
    assert configs(policy["profiles"][0])["LowNodeUtilization"]["evictionLimits"] == {"node": 2}


def problems_of(spec_: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(KubeDeschedulerInvalid) as caught:
        expand(spec_, PROTECTED)
    return [(p.reason, p.message) for p in caught.value.problems]


@pytest.mark.parametrize(("first", "second"), CONFLICTS)
def test_conflicting_profiles_are_refused(first: str, second: str) -> None:
    """pkg/apis/descheduler/v1/types_descheduler.go: the CEL rules on spec.profiles."""
    found = problems_of(spec(first, second))
    assert ("ProfileConflict", f"spec.profiles: cannot declare {first} and {second} profiles "
            "simultaneously; remove one of them") in found


@pytest.mark.parametrize(("spec_", "reason", "words"), [
    (spec("Nope"), "UnknownProfile", "Profile 'Nope' not recognized"),
    (spec(), "NoProfiles", "at least 1 profile"),
    (spec("EvictPodsWithPVC"), "NoProfiles", "enable at least one other profile"),
    (spec("AffinityAndTaints", "AffinityAndTaints"), "DuplicateProfile", "listed twice"),
    (spec("KubeVirtRelieveAndMigrate"), "UnsupportedProfile", "KubeVirt is properly deployed"),
    ({"profiles": ["AffinityAndTaints"]}, "InvalidDeschedulingInterval", "interval set"),
    (spec("AffinityAndTaints", profileCustomizations={
        "namespaces": {"included": ["a"], "excluded": ["b"]}}),
     "InvalidProfileCustomizations", "combine both included and excluded"),
    (spec("AffinityAndTaints", profileCustomizations={"namespaces": {"included": ["kube-system"]}}),
     "InvalidProfileCustomizations", "Protected namespace kube-system included"),
    (spec("AffinityAndTaints", profileCustomizations={
        "thresholdPriority": 1, "thresholdPriorityClassName": "x"}),
     "InvalidProfileCustomizations", "both thresholdPriority and thresholdPriorityClassName"),
    (spec("LifecycleAndUtilization", profileCustomizations={"podLifetime": "two days"}),
     "InvalidProfileCustomizations", "is not a duration"),
    (spec("LifecycleAndUtilization", profileCustomizations={
        "devActualUtilizationProfile": "PrometheusCPUUsage"}),
     "PrometheusNotConfigured", "set the chart's descheduler.prometheusURL"),
    (spec("LifecycleAndUtilization", profileCustomizations={
        "devActualUtilizationProfile": "Nope"}),
     "InvalidProfileCustomizations", "unknown prometheus profile: Nope"),
])
def test_bad_specs_name_the_field(spec_: dict[str, Any], reason: str, words: str) -> None:
    """target_config_reconciler.go manageConfigMap / defaultEvictorOverrides / sync (interval)
    refuse these; the KubeVirt profiles need KubeVirt and Prometheus (isKubeVirtDeployed,
    isPSIenabled), which berthmaster does not have."""
    found = problems_of(spec_)
    assert any(r == reason and words in m for r, m in found), found


def test_every_problem_is_reported_at_once() -> None:
    found = problems_of({"profiles": ["Nope", "CompactAndScale", "TopologyAndDuplicates"],
                         "profileCustomizations": {"thresholdPriority": 1,
                                                   "thresholdPriorityClassName": "x"}})
    assert {r for r, _ in found} == {"InvalidDeschedulingInterval", "UnknownProfile",
                                     "ProfileConflict", "InvalidProfileCustomizations"}


def test_protected_namespaces() -> None:
    """NewTargetConfigReconciler: kube-system, hypershift, openshift and every openshift-*;
    berthmaster adds its own namespace (where the runs are)."""
    assert protected_namespaces(["default", "openshift-etcd", "kube-system"], "bm-system") == [
        "kube-system", "hypershift", "openshift", "openshift-etcd", "bm-system"]


def test_documented_sample_expands_to_a_policy_the_descheduler_runs() -> None:
    body = yaml.safe_load(SAMPLE.read_text())
    policy = expand(body["spec"], PROTECTED)
    parse_policy(policy, str(SAMPLE))
    assert [p["name"] for p in policy["profiles"]] == [
        "AffinityAndTaints", "TopologyAndDuplicates", "LifecycleAndUtilization"]
    lifecycle = configs(policy["profiles"][2])
    assert lifecycle["PodLifeTime"] == {"maxPodLifeTimeSeconds": 172800,
                                        "namespaces": {"exclude": [*PROTECTED, "my-namespace"]}}
    assert lifecycle["DefaultEvictor"] == {"ignorePvcPods": False, "evictLocalStoragePods": True,
                                           "priorityThreshold": {"name": "my-priority-class-name"}}


def job(name: str, generation: int, started: str, outcome: str | None) -> dict[str, Any]:
    status: dict[str, Any] = {"startTime": started}
    if outcome:
        status["conditions"] = [{"type": outcome, "status": "True"}]
    return {"metadata": {"name": name, "labels": {kd.GENERATION_LABEL: str(generation)}},
            "status": status}


T0 = 1_700_000_000.0  # 2023-11-14T22:13:20Z
STARTED = "2023-11-14T22:13:20Z"


@pytest.mark.parametrize(("jobs", "now", "due"), [
    ([], T0, 0.0),                                              # never ran: now
    ([job("a", 2, STARTED, None)], T0 + 9999, None),            # still running: wait for it
    ([job("a", 2, STARTED, "Complete")], T0 + 1000, 2600.0),    # interval from the last start
    ([job("a", 2, STARTED, "Failed")], T0 + 5000, 0.0),         # overdue: now
    ([job("a", 1, STARTED, "Complete")], T0 + 10, 0.0),         # spec changed: now
])
def test_next_run_is_an_interval_after_the_last_start(jobs: list[dict[str, Any]], now: float,
                                                      due: float | None) -> None:
    """The descheduler's --descheduling-interval loop is wait.NonSlidingUntil
    (kubernetes-sigs/descheduler pkg/descheduler/descheduler.go): the period counts from each
    run's start; a run that outlasts it is followed at once."""
    assert kd.next_run_in(jobs, 3600, 2, now) == due


def test_only_the_three_newest_finished_runs_are_kept() -> None:
    jobs = [job(f"j{i}", 1, f"2023-11-14T22:1{i}:00Z", "Complete") for i in range(5)]
    jobs.append(job("running", 1, "2023-11-14T22:00:00Z", None))
    assert kd.finished_to_prune(jobs) == ["j1", "j0"]


@pytest.mark.parametrize(("mode", "dry"), [(None, True), ("Predictive", True),
                                           ("Automatic", False)])
def test_predictive_runs_dry(mode: str | None, dry: bool) -> None:
    """target_config_reconciler.go manageDeschedulerDeployment: Predictive (the CRD's default)
    adds --dry-run; Automatic evicts."""
    body = {"metadata": {"name": "cluster", "namespace": "bm-system", "uid": "u", "generation": 4},
            "spec": {"mode": mode} if mode else {}}
    built = kd.build_run(body, SETTINGS, T0)
    command = built["spec"]["template"]["spec"]["containers"][0]["command"]
    assert ("--dry-run" in command) is dry
    assert built["metadata"]["name"] == "kubedescheduler-cluster-descheduler-job-4-1700000000"
    assert built["metadata"]["ownerReferences"][0]["kind"] == "KubeDescheduler"
    assert built["metadata"]["labels"] == {"operator.openshift.io/kubedescheduler": "cluster",
                                           kd.GENERATION_LABEL: "4"}


def test_a_finished_run_is_summarised_for_its_event() -> None:
    counts = {("success", "PodLifeTime", "LifecycleAndUtilization", "ns", "n1"): 2,
              ("success", "RemoveDuplicates", "TopologyAndDuplicates", "ns", "n2"): 1,
              ("error", "PodLifeTime", "LifecycleAndUtilization", "ns", "n1"): 4}
    body = {"metadata": {"name": "j"}}
    assert kd.run_summary(body, counts, dry_run=True) == (
        "WouldEvict", "Predictive run j would evict 3 pod(s) (PodLifeTime: 2, "
        "RemoveDuplicates: 1); set spec.mode: Automatic to evict")
    assert kd.run_summary(body, counts, dry_run=False)[0] == "Evicted"


def test_a_changed_spec_stops_the_unfinished_run_of_the_old_one() -> None:
    """Upstream's spec annotation on the descheduler Deployment (target_config_reconciler.go
    sync, ``kubedeschedulers.operator.openshift.io/cluster``) rolls its pod on every change."""
    jobs = [job("old", 1, STARTED, None), job("older", 0, STARTED, "Complete"),
            job("current", 2, STARTED, None)]
    assert kd.superseded(jobs, 2) == ["old"]


PROMETHEUS = "https://prometheus.monitoring.svc:9091"


@pytest.mark.parametrize(("profile", "query"), [
    ("PrometheusCPUUsage", "instance:node_cpu:rate:sum"),
    ("PrometheusMemoryPSIPressure", "rate(node_pressure_memory_waiting_seconds_total[1m])"),
    ("query:avg by (instance) (up)", "avg by (instance) (up)"),
])
def test_actual_utilization_profile_balances_by_prometheus(profile: str, query: str) -> None:
    """target_config_reconciler.go lifecycleAndUtilizationProfile with
    devActualUtilizationProfile (utilizationProfileToPrometheusQuery): LowNodeUtilization by
    the profile's query over MetricResource at the same thresholds, and the Prometheus provider
    (isPrometheusAsMetricsProviderForProfiles) at the configured URL."""
    policy = expand(spec("LifecycleAndUtilization", profileCustomizations={
        "devActualUtilizationProfile": profile, "devLowNodeUtilizationThresholds": "High"}),
        PROTECTED, PROMETHEUS)
    parsed = parse_policy(policy, "expanded")
    assert policy["metricsProviders"] == [{"source": "Prometheus",
                                           "prometheus": {"url": PROMETHEUS}}]
    args = configs(policy["profiles"][0])["LowNodeUtilization"]
    assert args["thresholds"] == {"MetricResource": 40}
    assert args["targetThresholds"] == {"MetricResource": 70}
    assert args["metricsUtilization"] == {"source": "Prometheus", "prometheus": {"query": query}}
    assert parsed.prometheus_queries == (query,)
