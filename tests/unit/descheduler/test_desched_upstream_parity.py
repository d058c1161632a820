"""Behaviour that must match kubernetes-sigs/descheduler exactly.

v1alpha1 policies follow release v0.30.1 (the last that read them); v1alpha2 follows upstream's
current main. Each test names the upstream file and function the behaviour comes from.
"""

from __future__ import annotations

import textwrap
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from berthmaster.foundation.errors import PolicyError
from berthmaster.foundation.problems import Problems
from berthmaster.scheduler.descheduler.context import (
    Candidate,
    ClusterState,
    StrategyContext,
    Tally,
)
from berthmaster.scheduler.descheduler.evictor import (
    EvictionBook,
    build_event,
    drive_planned,
    planned_attempt,
)
from berthmaster.scheduler.descheduler.policy import load_policy_file, parse_policy_text
from berthmaster.scheduler.descheduler.protection import (
    EvictorSettings,
    eviction_order,
    protection_reasons,
)
from berthmaster.scheduler.descheduler.strategies import (
    failed_pods,
    high_node_utilization,
    low_node_utilization,
    pod_lifetime,
)
from tests.unit.descheduler.builders import NOW, make_node, make_pod, plan


def params(module: Any, **args: Any) -> Any:
    problems = Problems()
    parsed = module.parse(args, module.NAME, problems)
    assert not problems, problems.lines()
    return parsed


def v1alpha1(strategies: str) -> str:
    return textwrap.dedent('''
        apiVersion: descheduler/v1alpha1
        kind: DeschedulerPolicy
        strategies:
    ''') + textwrap.indent(textwrap.dedent(strategies), "  ")


# ----------------------------------------------------------------------- item 13

def failed_pod(name: str, age: timedelta) -> dict[str, Any]:
    pod = make_pod(name, "n1", phase="Failed", age=age)
    pod["status"]["containerStatuses"] = [{"name": "c", "state": {"terminated": {
        "reason": "Error", "exitCode": 1}}}]
    return pod


@pytest.mark.parametrize("document", [
    v1alpha1("RemoveFailedPods:\n  enabled: true\n"),
    textwrap.dedent('''
        apiVersion: descheduler/v1alpha2
        kind: DeschedulerPolicy
        profiles:
        - name: p
          plugins: {deschedule: {enabled: [RemoveFailedPods]}}
    '''),
])
def test_remove_failed_pods_min_pod_lifetime_defaults_to_an_hour(document: str) -> None:
    """Upstream removefailedpods/defaults.go SetDefaults_RemoveFailedPodsArgs sets
    MinPodLifetimeSeconds to 3600 when unset; v0.30.1 runs it on v1alpha1 policies too
    (pkg/descheduler/policyconfig.go setDefaults after v1alpha1.V1alpha1ToInternal)."""
    policy = parse_policy_text(document)
    chosen = policy.strategies[0].params
    assert chosen.min_pod_lifetime_seconds == 3600
    pods = [failed_pod("young", timedelta(minutes=30)), failed_pod("old", timedelta(hours=2))]
    got, _ = plan(failed_pods, chosen, [make_node("n1")], pods)
    assert got == ["old"]


def test_remove_failed_pods_age_is_from_creation_not_start() -> None:
    """Upstream removefailedpods/failedpods.go validateCanEvict: the age is
    metav1.Now() - pod.GetCreationTimestamp(); status.startTime plays no part."""
    pod = failed_pod("restarted-late", timedelta(hours=2))
    pod["status"]["startTime"] = (NOW - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    got, _ = plan(failed_pods, params(failed_pods, minPodLifetimeSeconds=3600),
                  [make_node("n1")], [pod])
    assert got == ["restarted-late"]


# ----------------------------------------------------------------------- item 14

V0301_STATES = ["Running", "Pending", "Unknown", "NodeAffinity", "NodeLost", "Shutdown",
                "UnexpectedAdmissionError", "PodInitializing", "ContainerCreating",
                "ImagePullBackOff", "CrashLoopBackOff", "CreateContainerConfigError",
                "ErrImagePull", "CreateContainerError", "InvalidImageName"]


@pytest.mark.parametrize("state", V0301_STATES)
def test_pod_lifetime_accepts_every_v0_30_1_state_in_v1alpha1(state: str) -> None:
    """Upstream v0.30.1 podlifetime/validation.go ValidatePodLifeTimeArgs: the 15 states of
    podLifeTimeAllowedStates (phases, pod reasons, container waiting reasons)."""
    policy = parse_policy_text(v1alpha1(f'''
        PodLifeTime:
          enabled: true
          params:
            podLifeTime: {{maxPodLifeTimeSeconds: 60, states: [{state}]}}
    '''))
    assert policy.strategies[0].params.states == (state,)


def test_pod_lifetime_v1alpha1_rejects_states_v0_30_1_did_not_know() -> None:
    """v0.30.1 ValidatePodLifeTimeArgs refuses a state outside its set (OOMKilled came later)."""
    with pytest.raises(PolicyError, match="states must be one of"):
        parse_policy_text(v1alpha1('''
            PodLifeTime:
              enabled: true
              params:
                podLifeTime: {maxPodLifeTimeSeconds: 60, states: [OOMKilled]}
        '''))


def waiting(name: str, reason: str, age: timedelta = timedelta(hours=2)) -> dict[str, Any]:
    pod = make_pod(name, "n1", age=age)
    pod["status"]["containerStatuses"] = [{"name": "c", "state": {"waiting": {"reason": reason}}}]
    return pod


def test_pod_lifetime_matches_pod_reason_and_container_waiting_reasons() -> None:
    """Upstream podlifetime/pod_lifetime.go New: a state matches the pod's phase, its
    status.reason, or a container's waiting reason (init containers only when
    includingInitContainers is set, in upstream's current main)."""
    evicted_node = make_pod("lost", "n1", age=timedelta(hours=2))
    evicted_node["status"]["reason"] = "NodeLost"
    init_only = make_pod("init", "n1", age=timedelta(hours=2))
    init_only["status"]["initContainerStatuses"] = [
        {"name": "i", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]
    pods = [waiting("looping", "CrashLoopBackOff"), waiting("pulling", "ImagePullBackOff"),
            evicted_node, init_only, make_pod("running", "n1", age=timedelta(hours=3))]
    got, _ = plan(pod_lifetime, params(pod_lifetime, maxPodLifeTimeSeconds=60, states=[
        "CrashLoopBackOff", "NodeLost"]), [make_node("n1")], pods)
    assert sorted(got) == ["looping", "lost"]
    got, _ = plan(pod_lifetime, params(pod_lifetime, maxPodLifeTimeSeconds=60, states=[
        "CrashLoopBackOff"], includingInitContainers=True), [make_node("n1")], pods)
    assert sorted(got) == ["init", "looping"]


# ----------------------------------------------------------------------- item 17

ZONED = [make_node("a1", labels={"zone": "a"}), make_node("b1", labels={"zone": "b"}),
         make_node("c1", labels={"zone": "c", "gpu": "true"}), make_node("bare"),
         make_node("n5", labels={"zone": "a", "rank": "5"})]


@pytest.mark.parametrize(("selector", "selected"), [
    ("zone in (a,b)", ["a1", "b1", "n5"]),
    ("zone in (a, b),!rank", ["a1", "b1"]),
    ("zone notin (a)", ["b1", "c1", "bare"]),   # notin matches a node without the key
    ("!zone", ["bare"]),
    ("zone!=b", ["a1", "c1", "bare", "n5"]),    # != too
    ("zone==c,gpu", ["c1"]),
    ("rank>4", ["n5"]),
    ("rank<4", []),
    ("", ["a1", "b1", "c1", "bare", "n5"]),
])
def test_policy_node_selector_takes_the_full_label_selector_syntax(
    selector: str, selected: list[str]
) -> None:
    """Upstream pkg/descheduler/descheduler.go runs on nodeutil.ReadyNodes(..., nodeSelector),
    which parses the string with k8s.io/apimachinery/pkg/labels Parse (selector.go Parser):
    set-based requirements, '!key', '!=' and integer '>'/'<' included."""
    policy = parse_policy_text(v1alpha1("RemoveDuplicates:\n  enabled: true\n")
                               + f"nodeSelector: {selector!r}\n")
    state = ClusterState(ZONED, [], node_selector=policy.node_selector)
    assert [n["metadata"]["name"] for n in state.nodes] == selected


@pytest.mark.parametrize(("selector", "message"), [
    ("zone in a", "found 'a' expected: '('"),
    ("zone in ()x", "found 'x', expected: ',' or 'end of string'"),
    ("rank>high", "for 'Gt', 'Lt' operators, the value must be an integer"),
    ("zone=a,,b", "found ',', expected: identifier after ','"),
    ("-zone", "name part must consist of alphanumeric characters"),
    ("zone=a b", "found 'b', expected: ',' or 'end of string'"),
])
def test_a_node_selector_that_does_not_parse_is_refused_at_load(selector: str,
                                                                  message: str) -> None:
    """labels.Parse (apimachinery selector.go Parser.parse / parseValues / NewRequirement)
    rejects these; upstream fails the policy instead of selecting nothing."""
    with pytest.raises(PolicyError) as error:
        parse_policy_text(v1alpha1("RemoveDuplicates:\n  enabled: true\n")
                          + f"nodeSelector: {selector!r}\n")
    assert "nodeSelector: " in str(error.value) and message in str(error.value)


# ----------------------------------------------------------------------- item 16

def low_v1alpha1(thresholds: str, targets: str, deviation: bool = False) -> Any:
    policy = parse_policy_text(v1alpha1(f'''
        LowNodeUtilization:
          enabled: true
          params:
            nodeResourceUtilizationThresholds:
              thresholds: {thresholds}
              targetThresholds: {targets}
              useDeviationThresholds: {str(deviation).lower()}
    '''))
    return policy.strategies[0].params


def low_v1alpha2(**args: Any) -> Any:
    return params(low_node_utilization, **args)


def hot_pods(count: int, **extra: Any) -> list[dict[str, Any]]:
    return [make_pod(f"h{i}", "hot", cpu="1", owner=f"o{i}", **extra) for i in range(count)]


@pytest.mark.parametrize("version", ["v1alpha1", "v1alpha2"])
def test_low_node_utilization_pods_bound_the_room_when_not_thresholded(version: str) -> None:
    """Upstream nodeutilization.go evictPodsFromSourceNodes: totalAvailableUsage always holds
    pods, cpu and memory (v0.30.1 fills them in at 100 % in lownodeutilization.go Balance;
    main adds them to extendedResourceNames with capNodeCapacitiesToThreshold = the
    capacity), and continueEvictionCond stops once any of them is used up. The cold node has
    room for one more pod only."""
    chosen = (low_v1alpha1("{cpu: 20}", "{cpu: 50}") if version == "v1alpha1"
              else low_v1alpha2(thresholds={"cpu": 20}, targetThresholds={"cpu": 50}))
    nodes = [make_node("hot", cpu="10"), make_node("cold", cpu="10", pods="2")]
    pods = [*hot_pods(8), make_pod("resident", "cold", owner="r")]
    got, _ = plan(low_node_utilization, chosen, nodes, pods)
    assert len(got) == 1


def test_low_node_utilization_moves_only_pods_tolerating_an_underutilized_nodes_taints() -> None:
    """Upstream nodeutilization.go evictPods skips a pod unless utils.PodToleratesTaints
    (pod.go) finds an underutilized node whose every taint it tolerates."""
    taint = {"key": "dedicated", "value": "batch", "effect": "NoSchedule"}
    nodes = [make_node("hot", cpu="10"), make_node("cold", cpu="10", taints=[taint])]
    tolerant = make_pod("tolerant", "hot", cpu="1", owner="t", tolerations=[
        {"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}])
    got, tally = plan(low_node_utilization,
                      low_v1alpha2(thresholds={"cpu": 20}, targetThresholds={"cpu": 50}),
                      nodes, [*hot_pods(7), tolerant])
    assert got == ["tolerant"]
    assert tally.skipped["pod does not tolerate the taints of any node it could move to"] == 7


def test_low_node_utilization_eviction_limits_per_node() -> None:
    """Upstream main nodeutilization/types.go LowNodeUtilizationArgs.EvictionLimits (node) and
    nodeutilization.go evictPods: at most that many evictions from each source node."""
    nodes = [make_node("hot", cpu="10"), make_node("cold", cpu="10")]
    got, _ = plan(low_node_utilization, low_v1alpha2(
        thresholds={"cpu": 20}, targetThresholds={"cpu": 50}, evictionLimits={"node": 1}),
        nodes, hot_pods(8))
    assert len(got) == 1


def test_low_node_utilization_v1alpha1_deviation_zero_means_the_resource_never_decides() -> None:
    """Upstream v0.30.1 nodeutilization.go getNodeThresholds: with useDeviationThresholds, a
    resource whose low threshold is 0 (MinResourcePercentage, also what Balance fills in for
    an omitted cpu/memory/pods) gets the node capacity as both thresholds. Upstream main
    (assessNodesUsagesAndRelativeThresholds) instead bounds it at the average, so the same
    numbers in v1alpha2 leave the memory-heavy idle node above its low bound."""
    nodes = [make_node("hot", cpu="10", memory="10Gi"), make_node("cold", cpu="10",
                                                                  memory="10Gi"),
             make_node("mid", cpu="10", memory="10Gi")]
    pods = [*hot_pods(8), make_pod("mem", "cold", memory="3Gi", owner="m"),
            *[make_pod(f"m{i}", "mid", cpu="1", owner=f"q{i}") for i in range(4)]]
    old = low_v1alpha1("{cpu: 10, memory: 0}", "{cpu: 10, memory: 0}", deviation=True)
    got, _ = plan(low_node_utilization, old, nodes, pods)
    assert got and all(name.startswith("h") for name in got)
    new = low_v1alpha2(thresholds={"cpu": 10, "memory": 0},
                       targetThresholds={"cpu": 10, "memory": 0}, useDeviationThresholds=True)
    got, _ = plan(low_node_utilization, new, nodes, pods)
    assert got == []


def test_high_node_utilization_a_node_at_its_threshold_is_underutilized() -> None:
    """Upstream highnodeutilization.go Balance classifies with isNodeWithLowUtilization
    (v0.30.1) / isNodeBelowThreshold (main): usage equal to the threshold is not above it."""
    nodes = [make_node("half", cpu="10"), make_node("busy", cpu="10")]
    pods = [make_pod(f"a{i}", "half", cpu="1", owner=f"a{i}") for i in range(5)] + [
        make_pod(f"b{i}", "busy", cpu="1", owner=f"b{i}") for i in range(8)]
    got, _ = plan(high_node_utilization, params(high_node_utilization, thresholds={"cpu": 50}),
                  nodes, pods)
    assert len(got) == 2 and all(name.startswith("a") for name in got)


# ----------------------------------------------------------------------- item 18

CHART_DEFAULT = Path(__file__).parent / "samples" / "upstream-chart-default-policy.yaml"


def test_the_upstream_charts_default_policy_loads() -> None:
    """kubernetes-sigs/descheduler charts/descheduler/values.yaml (main) deschedulerPolicy,
    written out in samples/: DefaultEvictor podProtections (defaultevictor/types.go
    PodProtections; defaultevictor.go getEffectivePodProtections) and the listed plugins."""
    policy = load_policy_file(CHART_DEFAULT)
    assert [s.name for s in policy.strategies] == [
        "RemovePodsHavingTooManyRestarts", "RemovePodsViolatingNodeTaints",
        "RemovePodsViolatingNodeAffinity", "RemovePodsViolatingInterPodAntiAffinity",
        "RemoveDuplicates", "RemovePodsViolatingTopologySpreadConstraint", "LowNodeUtilization"]
    evictor = policy.strategies[0].evictor
    # defaultDisabled PodsWithLocalStorage; extraEnabled PodsWithPVC; the rest as by default
    assert evictor.evict_local_storage_pods and evictor.ignore_pvc_pods
    assert not (evictor.evict_daemonset_pods or evictor.evict_system_critical_pods
                or evictor.evict_failed_bare_pods)
    restarts = policy.strategies[0].params
    assert restarts.pod_restart_threshold == 100 and restarts.including_init_containers


def v1alpha2_policy(evictor: dict[str, Any] | None = None, plugin: str = "PodLifeTime",
                    args: dict[str, Any] | None = None, **top: Any) -> str:
    config: list[dict[str, Any]] = [{"name": plugin, "args": args or {
        "maxPodLifeTimeSeconds": 60}}]
    if evictor is not None:
        config.insert(0, {"name": "DefaultEvictor", "args": evictor})
    return yaml.safe_dump({"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
                           **top, "profiles": [{"name": "p", "pluginConfig": config,
                                                "plugins": {"deschedule": {"enabled": [
                                                    plugin]}}}]})


@pytest.mark.parametrize(("evictor", "message"), [
    ({"podProtections": {"extraEnabled": ["PodsWithLocalStorage"]}},
     "invalid pod protection policy in ExtraEnabled: 'PodsWithLocalStorage'"),
    ({"podProtections": {"defaultDisabled": ["PodsWithPVC"]}},
     "invalid pod protection policy in DefaultDisabled: 'PodsWithPVC'"),
    ({"podProtections": {"defaultDisabled": ["DaemonSetPods", "DaemonSetPods"]}},
     "PodProtections.DefaultDisabled contains duplicate entries"),
    ({"evictLocalStoragePods": True, "podProtections": {"extraEnabled": ["PodsWithPVC"]}},
     "cannot use Deprecated fields alongside PodProtections.ExtraEnabled or "
     "PodProtections.DefaultDisabled"),
    ({"noEvictionPolicy": "Sometimes"},
     'noEvictionPolicy accepts only ["Preferred" "Mandatory"] values'),
])
def test_default_evictor_arguments_are_validated_as_upstream(evictor: dict[str, Any],
                                                             message: str) -> None:
    """Upstream defaultevictor/validation.go ValidateDefaultEvictorArgs."""
    with pytest.raises(PolicyError) as error:
        parse_policy_text(v1alpha2_policy(evictor))
    assert message in str(error.value)


def evictor_of(evictor: dict[str, Any]) -> EvictorSettings:
    return parse_policy_text(v1alpha2_policy(evictor)).strategies[0].evictor


def lifetime_plan(settings: EvictorSettings, pods: list[dict[str, Any]],
                  **state: Any) -> tuple[list[str], Any]:
    cluster = ClusterState([make_node("n1")], pods, now=NOW, **state)
    tally = Tally("PodLifeTime")
    ctx = StrategyContext(cluster, settings, tally)
    drive_planned(pod_lifetime.decide(params(pod_lifetime, maxPodLifeTimeSeconds=60), ctx),
                  planned_attempt(EvictionBook(), ctx))
    return [key.split("/", 1)[1] for key in tally.evicted], tally


def test_default_evictor_namespace_label_selector() -> None:
    """Upstream defaultevictor.go PreEvictionFilter: with a non-empty namespaceLabelSelector
    only pods whose namespace's labels match may go (an unknown namespace matches nothing)."""
    settings = evictor_of({"namespaceLabelSelector": {"matchLabels": {"team": "a"}}})
    pods = [make_pod("in-a", "n1", namespace="a"), make_pod("in-b", "n1", namespace="b"),
            make_pod("nowhere", "n1", namespace="gone")]
    got, tally = lifetime_plan(settings, pods, namespace_labels={"a": {"team": "a"},
                                                                 "b": {"team": "b"}})
    assert got == ["in-a"]
    assert tally.skipped["pod namespace do not match the namespaceLabelSelector filter in the "
                         "policy parameter"] == 2


@pytest.mark.parametrize(("policy", "expected"), [
    ("Mandatory", ["plain"]),
    ("Preferred", ["plain", "shy"]),
    ("", ["plain", "shy"]),
])
def test_default_evictor_no_eviction_policy(policy: str, expected: list[str]) -> None:
    """Upstream defaultevictor.go Filter: with noEvictionPolicy Mandatory a pod annotated
    descheduler.alpha.kubernetes.io/prefer-no-eviction (evictions/utils SoftNoEvictionAnnotationKey)
    is never evicted; otherwise the annotation is only a preference."""
    settings = evictor_of({"noEvictionPolicy": policy} if policy else {})
    pods = [make_pod("shy", "n1", annotations={
        "descheduler.alpha.kubernetes.io/prefer-no-eviction": ""}), make_pod("plain", "n1")]
    got, _ = lifetime_plan(settings, pods)
    assert sorted(got) == expected


def test_preferred_no_eviction_pods_sort_last_among_equals() -> None:
    """Upstream pod/pods.go SortPodsBasedOnPriorityLowToHigh: at equal priority and QoS a
    pod without the prefer-no-eviction annotation comes first."""
    shy = make_pod("shy", "n1", annotations={
        "descheduler.alpha.kubernetes.io/prefer-no-eviction": ""})
    plain = make_pod("plain", "n1")
    assert sorted([shy, plain], key=eviction_order) == [plain, shy]


def test_pod_protections_pods_without_pdb_and_with_resource_claims() -> None:
    """Upstream defaultevictor.go applyPodsWithoutPDBProtection (utils.IsPodCoveredByPDB) and
    applyPodsWithResourceClaimsProtection (utils.IsPodWithResourceClaims)."""
    settings = evictor_of({"podProtections": {"extraEnabled": [
        "PodsWithoutPDB", "PodsWithResourceClaims"]}})
    pdb = {"metadata": {"name": "guard", "namespace": "default"},
           "spec": {"selector": {"matchLabels": {"app": "guarded"}}}}
    pods = [make_pod("guarded", "n1", labels={"app": "guarded"}),
            make_pod("unguarded", "n1", labels={"app": "other"}),
            make_pod("claims", "n1", labels={"app": "guarded"},
                     resourceClaims=[{"name": "gpu", "resourceClaimName": "gpu-0"}])]
    got, tally = lifetime_plan(settings, pods, pdbs=[pdb])
    assert got == ["guarded"]
    assert tally.skipped["pod does not have a PodDisruptionBudget and is protected against "
                         "eviction"] == 1


def claim_pod(name: str, *claims: str) -> dict[str, Any]:
    return make_pod(name, "n1", volumes=[
        {"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims])


def test_protected_storage_classes_keep_only_their_pods() -> None:
    """defaultevictor.go applyPVCPodsProtection with protectedStorageClasses
    (podStorageClasses): a pod whose claim uses a listed class is kept, one on another class
    may go; an unknown claim or a claim with no class keeps its pod, with upstream's words."""
    settings = evictor_of({"podProtections": {
        "extraEnabled": ["PodsWithPVC"],
        "config": {"PodsWithPVC": {"protectedStorageClasses": [{"name": "local"}]}}}})
    assert settings.protected_storage_classes == frozenset({"local"})
    classes = {("default", "fast"): "ssd", ("default", "disk"): "local",
               ("default", "bare"): ""}
    reasons = {name: protection_reasons(pod, settings, None, classes) for name, pod in (
        ("ssd", claim_pod("ssd", "fast")), ("local", claim_pod("local", "fast", "disk")),
        ("gone", claim_pod("gone", "missing")), ("bare", claim_pod("bare", "bare")))}
    assert reasons["ssd"] == []
    assert reasons["local"] == ['pod using protected storage class "local"']
    assert reasons["gone"] == ['failed to get persistent volume claim "default"/"missing": '
                               'persistentvolumeclaim "missing" not found']
    assert reasons["bare"] == ['failed to resolve storage class for pod "default"/"bare"']
    # without the list every pod with a claim is kept, as before
    everything = evictor_of({"podProtections": {"extraEnabled": ["PodsWithPVC"]}})
    assert protection_reasons(claim_pod("ssd", "fast"), everything, None, classes) == [
        "pod with PVC is protected against eviction"]


def test_protected_storage_classes_are_validated_and_read_only_with_the_protection() -> None:
    """defaultevictor/validation.go: an empty name; the classes matter only when PodsWithPVC
    is extra-enabled (defaultevictor.go protectedPVCStorageClasses)."""
    with pytest.raises(PolicyError) as error:
        parse_policy_text(v1alpha2_policy({"podProtections": {
            "extraEnabled": ["PodsWithPVC"],
            "config": {"PodsWithPVC": {"protectedStorageClasses": [{"name": ""}]}}}}))
    assert ("PodProtections.Config.PodsWithPVC.ProtectedStorageClasses[0] name cannot be "
            "empty") in str(error.value)
    off = evictor_of({"podProtections": {"defaultDisabled": ["DaemonSetPods"], "config": {
        "PodsWithPVC": {"protectedStorageClasses": [{"name": "local"}]}}}})
    assert not off.ignore_pvc_pods and off.protected_storage_classes == frozenset()


def test_deprecated_ignore_pods_without_pdb_is_read() -> None:
    """defaultevictor.go legacyGetPodProtections: ignorePodsWithoutPDB -> PodsWithoutPDB."""
    assert evictor_of({"ignorePodsWithoutPDB": True}).protect_pods_without_pdb


# PodLifeTime's newer filters (podlifetime/types.go PodLifeTimeArgs on main)

def condition_pod(name: str, kind: str, status: str, since: timedelta,
                  reason: str = "") -> dict[str, Any]:
    pod = make_pod(name, "n1", age=timedelta(hours=3))
    pod["status"]["conditions"] = [{
        "type": kind, "status": status, "reason": reason,
        "lastTransitionTime": (NOW - since).strftime("%Y-%m-%dT%H:%M:%SZ")}]
    return pod


def terminated(name: str, code: int, init: bool = False) -> dict[str, Any]:
    pod = make_pod(name, "n1", age=timedelta(hours=3))
    field = "initContainerStatuses" if init else "containerStatuses"
    pod["status"][field] = [{"name": "c", "state": {"terminated": {"exitCode": code,
                                                                   "reason": "Error"}}}]
    return pod


@pytest.mark.parametrize(("args", "expected"), [
    ({"maxPodLifeTimeSeconds": 60, "ownerKinds": {"include": ["Job"]}}, ["job"]),
    ({"maxPodLifeTimeSeconds": 60, "ownerKinds": {"exclude": ["Job"]}},
     ["rs", "not-ready-long", "not-ready-new", "ready", "exit-3", "init-exit-3"]),
    ({"conditions": [{"type": "Ready", "status": "False",
                      "minTimeSinceLastTransitionSeconds": 600}]}, ["not-ready-long"]),
    ({"conditions": [{"type": "Ready", "status": "False"}]},
     ["not-ready-long", "not-ready-new"]),
    ({"exitCodes": [3]}, ["exit-3"]),
    ({"exitCodes": [3], "includingInitContainers": True}, ["exit-3", "init-exit-3"]),
    ({"states": ["Error"]}, ["exit-3"]),  # a terminated container's reason
])
def test_pod_lifetime_owner_kinds_conditions_and_exit_codes(args: dict[str, Any],
                                                            expected: list[str]) -> None:
    """Upstream main podlifetime/pod_lifetime.go New: the ownerKinds include/exclude filter,
    matchesAnyPodConditionFilter, matchesAnyExitCode (init containers with
    includingInitContainers) and terminated reasons in states; maxPodLifeTimeSeconds is no
    longer required once another filter is given (validation.go ValidatePodLifeTimeArgs)."""
    pods = [make_pod("rs", "n1", age=timedelta(hours=3)),
            make_pod("job", "n1", owner="j", owner_kind="Job", age=timedelta(hours=2)),
            condition_pod("not-ready-long", "Ready", "False", timedelta(hours=1)),
            condition_pod("not-ready-new", "Ready", "False", timedelta(minutes=1)),
            condition_pod("ready", "Ready", "True", timedelta(hours=1)),
            terminated("exit-3", 3), terminated("init-exit-3", 3, init=True)]
    got, _ = plan(pod_lifetime, params(pod_lifetime, **args), [make_node("n1")], pods)
    assert sorted(got) == sorted(expected)


@pytest.mark.parametrize(("args", "message"), [
    ({}, "at least one filtering criterion must be specified (maxPodLifeTimeSeconds, states, "
         "conditions, or exitCodes)"),
    ({"maxPodLifeTimeSeconds": 1, "ownerKinds": {"include": ["Job"], "exclude": ["X"]}},
     "only one of Include/Exclude ownerKinds can be set"),
    ({"conditions": [{}]}, "conditions[0]: at least one of type, status, reason, or "
                           "minTimeSinceLastTransitionSeconds must be set"),
])
def test_pod_lifetime_validation(args: dict[str, Any], message: str) -> None:
    """Upstream main podlifetime/validation.go ValidatePodLifeTimeArgs."""
    problems = Problems()
    pod_lifetime.parse(args, "PodLifeTime", problems)
    assert any(message in item for item in problems.lines()), problems.lines()


# evictionFailureEventNotification (pkg/descheduler/evictions/evictions.go EvictPod)

def test_eviction_failure_events_are_read_from_the_policy() -> None:
    """v1alpha2 types.go DeschedulerPolicy.EvictionFailureEventNotification."""
    policy = parse_policy_text(v1alpha2_policy(evictionFailureEventNotification=True))
    assert policy.eviction_failure_events
    assert not parse_policy_text(v1alpha2_policy()).eviction_failure_events


@pytest.mark.parametrize(("book", "detail"), [
    (EvictionBook(total=0), "total eviction limit exceeded (0)"),
    (EvictionBook(per_node=0), "node eviction limit exceeded (0)"),
    (EvictionBook(per_namespace=0), "namespace eviction limit exceeded (0)"),
])
def test_eviction_failure_event_wording(book: EvictionBook, detail: str) -> None:
    """Upstream evictions.go EvictPod: a Warning event, reason EvictionFailed, action
    Descheduled, note "pod eviction from <node> node by sigs.k8s.io/descheduler failed: ..."."""
    pod = make_pod("p", "n1")
    limit = book.limit_reached(Candidate(pod, "test"))
    assert limit is not None and limit[1] == detail
    event = build_event(pod, "PodLifeTime", failure=limit[1])
    assert (event["type"], event["reason"], event["action"]) == (
        "Warning", "EvictionFailed", "Descheduled")
    assert event["note"] == f"pod eviction from n1 node by sigs.k8s.io/descheduler failed: {detail}"


def started_pod(name: str, created: timedelta, started: timedelta | None) -> dict[str, Any]:
    pod = make_pod(name, "n1", age=created)
    if started is not None:
        pod["status"]["startTime"] = (NOW - started).strftime("%Y-%m-%dT%H:%M:%SZ")
    return pod


def test_default_evictor_min_pod_age_counts_from_the_start_time() -> None:
    """Upstream defaultevictor/constraints.go evictionConstraintsForMinPodAge: the age is
    time.Since(pod.Status.StartTime); a pod without a startTime is refused."""
    settings = evictor_of({"minPodAge": "1h"})
    pods = [started_pod("old-start", timedelta(hours=3), timedelta(hours=2)),
            started_pod("late-start", timedelta(hours=3), timedelta(minutes=5)),
            started_pod("never-started", timedelta(hours=3), None)]
    got, tally = lifetime_plan(settings, pods)
    assert got == ["old-start"]
    assert tally.skipped["pod is younger than minPodAge"] == 2


def test_v1alpha1_failed_pods_params_have_no_exit_codes() -> None:
    """Upstream v0.30.1 pkg/api/v1alpha1/types.go FailedPods: excludeOwnerKinds,
    minPodLifetimeSeconds, reasons, includingInitContainers; strict decoding refuses more."""
    with pytest.raises(PolicyError, match=r"failedPods\.exitCodes: unknown field"):
        parse_policy_text(v1alpha1('''
            RemoveFailedPods:
              enabled: true
              params:
                failedPods: {exitCodes: [1]}
        '''))


@pytest.mark.parametrize(("evictor_selector", "evicted"), [(None, True), ("pool=a", False)])
def test_default_evictor_node_fit_looks_at_every_ready_node_unless_its_own_selector_narrows(
    evictor_selector: str | None, evicted: bool
) -> None:
    """Upstream defaultevictor.go PreEvictionFilter: nodeFit asks PodFitsAnyOtherNode over
    nodeutil.ReadyNodes(..., d.args.NodeSelector) - the DefaultEvictor's own nodeSelector
    (v1alpha2 arg; unset in v1alpha1, v1alpha1.V1alpha1ToInternal), not the policy's."""
    evictor: dict[str, Any] = {"nodeFit": True}
    if evictor_selector:
        evictor["nodeSelector"] = evictor_selector
    policy = parse_policy_text(v1alpha2_policy(evictor, nodeSelector="pool=a"))
    nodes = [make_node("a1", labels={"pool": "a"}), make_node("b1", labels={"pool": "b"})]
    cluster = ClusterState(nodes, [make_pod("p", "a1", age=timedelta(hours=2))],
                           node_selector=policy.node_selector, now=NOW)
    tally = Tally("PodLifeTime")
    ctx = StrategyContext(cluster, policy.strategies[0].evictor, tally)
    drive_planned(pod_lifetime.decide(policy.strategies[0].params, ctx),
                  planned_attempt(EvictionBook(), ctx))
    assert bool(tally.evicted) == evicted


def test_high_node_utilization_only_thresholding_resources_mode() -> None:
    """Upstream main highnodeutilization.go NewHighNodeUtilization: with evictionModes
    [OnlyThresholdingResources] the pod filter adds withResourceRequestForAny(thresholded
    resources) (nodeutilization.go); validation.go validateEvictionModes refuses others."""
    nodes = [make_node("idle", cpu="10"), make_node("busy", cpu="10")]
    pods = [make_pod("asks-cpu", "idle", cpu="1", owner="x"),
            make_pod("asks-nothing", "idle", owner="y"),
            *[make_pod(f"b{i}", "busy", cpu="1", owner=f"b{i}") for i in range(8)]]
    chosen = params(high_node_utilization, thresholds={"cpu": 20},
                    evictionModes=["OnlyThresholdingResources"])
    got, _ = plan(high_node_utilization, chosen, nodes, pods)
    assert got == ["asks-cpu"]
    problems = Problems()
    high_node_utilization.parse({"thresholds": {"cpu": 20}, "evictionModes": ["Sometimes"]},
                                "HighNodeUtilization", problems)
    assert any("invalid eviction mode Sometimes" in p for p in problems.lines())


def test_v1alpha2_pre_eviction_filter_by_its_json_name() -> None:
    """Upstream pkg/api/v1alpha2/types.go Plugins.PreEvictionFilter has the JSON name
    "preevictionfilter"; a profile enabling DefaultEvictor there loads."""
    document = yaml.safe_load(v1alpha2_policy())
    document["profiles"][0]["plugins"]["preevictionfilter"] = {"enabled": ["DefaultEvictor"]}
    document["profiles"][0]["plugins"]["filter"] = {"enabled": ["DefaultEvictor"]}
    assert parse_policy_text(yaml.safe_dump(document)).strategies[0].name == "PodLifeTime"
