"""OpenShift 4's ``KubeDescheduler`` profiles as the ``descheduler/v1alpha2`` DeschedulerPolicy
the OpenShift operator writes (docs/descheduler.md, "The `KubeDescheduler` resource").

Design: :func:`expand` is the pure half of openshift/cluster-kube-descheduler-operator
``pkg/operator/target_config_reconciler.go`` (``manageConfigMap`` and the ``*Profile``
functions): the namespaces are worked out once (the protected ones excluded unless
``profileCustomizations.namespaces.included`` replaces them), ``EvictPodsWithPVC`` and
``EvictPodsWithLocalStorage`` set every profile's DefaultEvictor, each other profile becomes one
v1alpha2 profile in the order listed, and ``evictionLimits`` go last (``setEvictionsLimits``).
The profile pairs its CRD refuses (``pkg/apis/descheduler/v1/types_descheduler.go``, the
``x-kubernetes-validations`` on ``profiles``) are refused here too, so a KubeDescheduler made
before our CRD was applied, or with the CRD's rules edited out, still gets a clear answer.
Every problem is collected and raised at once (:class:`KubeDeschedulerInvalid`), each with the
reason the status condition carries.

``devActualUtilizationProfile`` makes LowNodeUtilization balance by a Prometheus query
(utilizationProfileToPrometheusQuery's queries, or ``query:<PromQL>``) over ``MetricResource``,
and adds the Prometheus metrics provider. OpenShift finds Prometheus through the
``openshift-monitoring/prometheus-k8s`` Route; berthmaster takes its URL from the operator's
configuration (the chart's ``descheduler.prometheusURL``), and without one refuses the
customization with a condition saying so.

What berthmaster cannot run is refused, never silently dropped: the KubeVirt profiles (they need
KubeVirt, PSI metrics and Prometheus, which upstream checks before using them).
``devEnableEvictionsInBackground`` is not a policy setting: it becomes the runs'
``--feature-gates`` (kubedescheduler.feature_gates). No I/O here: the caller passes the
namespaces that exist and the Prometheus URL.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from berthmaster.foundation.durations import parse_go_duration
from berthmaster.scheduler.descheduler.usage_metrics import PROMETHEUS
from berthmaster.scheduler.descheduler.usage_prometheus import METRIC_RESOURCE

Obj = dict[str, Any]

AFFINITY_AND_TAINTS = "AffinityAndTaints"
TOPOLOGY_AND_DUPLICATES = "TopologyAndDuplicates"
SOFT_TOPOLOGY_AND_DUPLICATES = "SoftTopologyAndDuplicates"
LIFECYCLE_AND_UTILIZATION = "LifecycleAndUtilization"
EVICT_PODS_WITH_LOCAL_STORAGE = "EvictPodsWithLocalStorage"
EVICT_PODS_WITH_PVC = "EvictPodsWithPVC"
DEV_PREVIEW_LONG_LIFECYCLE = "DevPreviewLongLifecycle"
LONG_LIFECYCLE = "LongLifecycle"
COMPACT_AND_SCALE = "CompactAndScale"
KUBEVIRT_RELIEVE_AND_MIGRATE = "KubeVirtRelieveAndMigrate"
DEV_KUBEVIRT_RELIEVE_AND_MIGRATE = "DevKubeVirtRelieveAndMigrate"
# The CRD's enum, in upstream's order.
PROFILES = (AFFINITY_AND_TAINTS, TOPOLOGY_AND_DUPLICATES, LIFECYCLE_AND_UTILIZATION,
            DEV_PREVIEW_LONG_LIFECYCLE, LONG_LIFECYCLE, SOFT_TOPOLOGY_AND_DUPLICATES,
            EVICT_PODS_WITH_LOCAL_STORAGE, EVICT_PODS_WITH_PVC, COMPACT_AND_SCALE,
            DEV_KUBEVIRT_RELIEVE_AND_MIGRATE, KUBEVIRT_RELIEVE_AND_MIGRATE)
KUBEVIRT_PROFILES = (KUBEVIRT_RELIEVE_AND_MIGRATE, DEV_KUBEVIRT_RELIEVE_AND_MIGRATE)
_LIFECYCLE = (LIFECYCLE_AND_UTILIZATION, LONG_LIFECYCLE, DEV_PREVIEW_LONG_LIFECYCLE)
# Pairs that may not be enabled together (types_descheduler.go's CEL rules on spec.profiles).
CONFLICTS = (
    (DEV_PREVIEW_LONG_LIFECYCLE, LIFECYCLE_AND_UTILIZATION),
    (LONG_LIFECYCLE, LIFECYCLE_AND_UTILIZATION),
    (DEV_PREVIEW_LONG_LIFECYCLE, DEV_KUBEVIRT_RELIEVE_AND_MIGRATE),
    (LONG_LIFECYCLE, DEV_KUBEVIRT_RELIEVE_AND_MIGRATE),
    (LIFECYCLE_AND_UTILIZATION, DEV_KUBEVIRT_RELIEVE_AND_MIGRATE),
    (KUBEVIRT_RELIEVE_AND_MIGRATE, DEV_KUBEVIRT_RELIEVE_AND_MIGRATE),
    (DEV_PREVIEW_LONG_LIFECYCLE, KUBEVIRT_RELIEVE_AND_MIGRATE),
    (LONG_LIFECYCLE, KUBEVIRT_RELIEVE_AND_MIGRATE),
    (LIFECYCLE_AND_UTILIZATION, KUBEVIRT_RELIEVE_AND_MIGRATE),
    (SOFT_TOPOLOGY_AND_DUPLICATES, TOPOLOGY_AND_DUPLICATES),
    (COMPACT_AND_SCALE, LIFECYCLE_AND_UTILIZATION),
    (COMPACT_AND_SCALE, LONG_LIFECYCLE),
    (COMPACT_AND_SCALE, DEV_PREVIEW_LONG_LIFECYCLE),
    (COMPACT_AND_SCALE, DEV_KUBEVIRT_RELIEVE_AND_MIGRATE),
    (COMPACT_AND_SCALE, KUBEVIRT_RELIEVE_AND_MIGRATE),
    (COMPACT_AND_SCALE, TOPOLOGY_AND_DUPLICATES),
)
# The namespaces upstream always protects (NewTargetConfigReconciler), plus every openshift-*.
PROTECTED = ("kube-system", "hypershift", "openshift")
# devLowNodeUtilizationThresholds -> (thresholds, targetThresholds) in percent
# (getLowNodeUtilizationThresholds); "" and absent are Medium.
LOW_NODE_UTILIZATION = {"Low": (10, 30), "Medium": (20, 50), "": (20, 50), "High": (40, 70)}
# devHighNodeUtilizationThresholds -> thresholds (compactAndScaleProfile); "" is Modest.
HIGH_NODE_UTILIZATION = {"Minimal": 10, "Modest": 20, "": 20, "Moderate": 30}
UTILIZATION_RESOURCES = ("cpu", "memory", "pods")
# devActualUtilizationProfile -> PromQL (target_config_reconciler.go
# utilizationProfileToPrometheusQuery); "query:<PromQL>" gives the query itself.
ACTUAL_UTILIZATION_QUERIES = {
    "PrometheusCPUUsage": "instance:node_cpu:rate:sum",
    "PrometheusCPUPSIPressure": "rate(node_pressure_cpu_waiting_seconds_total[1m])",
    "PrometheusCPUPSIPressureByUtilization": (
        "avg by (instance) ( rate(node_pressure_cpu_waiting_seconds_total[1m])) and (1 - avg by "
        '(instance) (rate(node_cpu_seconds_total{mode="idle"}[1m]))) > 0.7 or avg by (instance) '
        "( rate(node_pressure_cpu_waiting_seconds_total[1m])) * 0"),
    "PrometheusMemoryPSIPressure": "rate(node_pressure_memory_waiting_seconds_total[1m])",
    "PrometheusIOPSIPressure": "rate(node_pressure_io_waiting_seconds_total[1m])",
    "PrometheusCPUCombined": "descheduler:combined_utilization_and_pressure:avg1m",
    "PrometheusCPUMemoryCombinedProfile": (
        "descheduler:node:linear_amplified_ideal_point_positive_distance:k3:avg1m"),
}
DEFAULT_POD_LIFETIME_SECONDS = 86400  # 24 hours
RESTART_THRESHOLD = 100

# Condition reasons (berthmaster's: upstream puts the error text itself in the reason).
NO_PROFILES = "NoProfiles"
DUPLICATE_PROFILE = "DuplicateProfile"
PROFILE_CONFLICT = "ProfileConflict"
UNKNOWN_PROFILE = "UnknownProfile"
UNSUPPORTED_PROFILE = "UnsupportedProfile"
INVALID_CUSTOMIZATION = "InvalidProfileCustomizations"
INVALID_INTERVAL = "InvalidDeschedulingInterval"
PROMETHEUS_NOT_CONFIGURED = "PrometheusNotConfigured"


def utilization_profile_query(profile: str) -> str:
    """The PromQL of a devActualUtilizationProfile; ValueError with upstream's sentence."""
    if profile in ACTUAL_UTILIZATION_QUERIES:
        return ACTUAL_UTILIZATION_QUERIES[profile]
    if not profile.startswith("query:"):
        raise ValueError(f"unknown prometheus profile: {profile}")
    return profile.removeprefix("query:")


@dataclass(frozen=True)
class Problem:
    reason: str
    message: str


class KubeDeschedulerInvalid(ValueError):
    """Every reason a KubeDescheduler's spec cannot become a policy."""

    def __init__(self, problems: Sequence[Problem]):
        self.problems = list(problems)
        super().__init__("; ".join(p.message for p in self.problems))

    @property
    def reason(self) -> str:
        return self.problems[0].reason


def protected_namespaces(existing: Iterable[str], operator_namespace: str = "") -> list[str]:
    """Upstream's list (kube-system, hypershift, openshift and every existing openshift-*), plus
    the operator's own namespace, where the descheduler runs (upstream's is an openshift-* one)."""
    found = list(PROTECTED)
    for name in existing:
        if name.startswith("openshift-") and name not in found:
            found.append(name)
    if operator_namespace and operator_namespace not in found:
        found.append(operator_namespace)
    return found


def _namespaces(included: list[str], excluded: list[str]) -> Obj:
    found: Obj = {}
    if included:
        found["include"] = list(included)
    if excluded:
        found["exclude"] = list(excluded)
    return found


@dataclass(frozen=True)
class Scope:
    """What every profile shares: namespaces, the DefaultEvictor's args."""

    included: list[str]
    excluded: list[str]
    protected: list[str]
    evictor: Obj

    @property
    def namespaces(self) -> Obj | None:
        """A plugin's ``namespaces`` args, or None when neither list is set."""
        return _namespaces(self.included, self.excluded) or None

    def evictable_namespaces(self) -> Obj | None:
        """LowNodeUtilization's ``evictableNamespaces``: it takes no inclusion, so an inclusion
        falls back to excluding the protected namespaces
        (setExcludedNamespacesForLowNodeUtilizationPlugin)."""
        if self.excluded:
            return {"exclude": list(self.excluded)}
        if self.included:
            return {"exclude": list(self.protected)}
        return None


def _plugin(name: str, args: Obj, namespaces: Obj | None = None) -> Obj:
    if namespaces:
        args = {**args, "namespaces": namespaces}
    return {"name": name, "args": args}


def _profile(name: str, configs: list[Obj], scope: Scope, **points: list[str]) -> Obj:
    plugins: Obj = {"filter": {"enabled": ["DefaultEvictor"]}}
    for point, enabled in points.items():
        plugins[point] = {"enabled": enabled}
    return {"name": name,
            "pluginConfig": [*configs, {"name": "DefaultEvictor", "args": dict(scope.evictor)}],
            "plugins": plugins}


def affinity_and_taints(scope: Scope) -> Obj:
    names = ("RemovePodsViolatingInterPodAntiAffinity", "RemovePodsViolatingNodeTaints",
             "RemovePodsViolatingNodeAffinity")
    configs = [
        _plugin(names[0], {}, scope.namespaces),
        _plugin(names[1], {}, scope.namespaces),
        _plugin(names[2], {"nodeAffinityType": ["requiredDuringSchedulingIgnoredDuringExecution"]},
                scope.namespaces),
    ]
    return _profile(AFFINITY_AND_TAINTS, configs, scope, deschedule=list(names))


def topology_and_duplicates(scope: Scope, soft: bool = False) -> Obj:
    constraints = ["DoNotSchedule", "ScheduleAnyway"] if soft else ["DoNotSchedule"]
    names = ("RemovePodsViolatingTopologySpreadConstraint", "RemoveDuplicates")
    configs = [_plugin(names[0], {"constraints": constraints}, scope.namespaces),
               _plugin(names[1], {}, scope.namespaces)]
    return _profile(SOFT_TOPOLOGY_AND_DUPLICATES if soft else TOPOLOGY_AND_DUPLICATES, configs,
                    scope, balance=list(names))


def lifecycle_and_utilization(scope: Scope, customizations: Mapping[str, Any],
                              long: bool = False) -> Obj:
    """LifecycleAndUtilization; ``long``: the same without PodLifeTime, named LongLifecycle
    (longLifecycleProfile, for DevPreviewLongLifecycle too)."""
    low, high = LOW_NODE_UTILIZATION[customizations.get("devLowNodeUtilizationThresholds") or ""]
    actual = customizations.get("devActualUtilizationProfile")
    resources = (METRIC_RESOURCE,) if actual else UTILIZATION_RESOURCES
    utilization: Obj = {"thresholds": dict.fromkeys(resources, low),
                        "targetThresholds": dict.fromkeys(resources, high)}
    if actual:
        utilization["metricsUtilization"] = {
            "source": PROMETHEUS,
            "prometheus": {"query": utilization_profile_query(str(actual))}}
    evictable = scope.evictable_namespaces()
    if evictable:
        utilization["evictableNamespaces"] = evictable
    lifetime = customizations.get("podLifetime")
    seconds = int(parse_go_duration(lifetime)) if lifetime else DEFAULT_POD_LIFETIME_SECONDS
    configs = [
        _plugin("RemovePodsHavingTooManyRestarts",
                {"podRestartThreshold": RESTART_THRESHOLD, "includingInitContainers": True},
                scope.namespaces),
        _plugin("LowNodeUtilization", utilization),
    ]
    deschedule = ["RemovePodsHavingTooManyRestarts"]
    if not long:
        configs.insert(0, _plugin("PodLifeTime", {"maxPodLifeTimeSeconds": seconds},
                                  scope.namespaces))
        deschedule.insert(0, "PodLifeTime")
    return _profile(LONG_LIFECYCLE if long else LIFECYCLE_AND_UTILIZATION, configs, scope,
                    deschedule=deschedule, balance=["LowNodeUtilization"])


def compact_and_scale(scope: Scope, customizations: Mapping[str, Any]) -> Obj:
    level = customizations.get("devHighNodeUtilizationThresholds")
    threshold = HIGH_NODE_UTILIZATION[level or ""]
    args: Obj = {"thresholds": dict.fromkeys(UTILIZATION_RESOURCES, threshold)}
    # HighNodeUtilization takes no inclusion: only an exclusion reaches it.
    if scope.excluded:
        args["evictableNamespaces"] = {"exclude": list(scope.excluded)}
    return _profile(COMPACT_AND_SCALE, [_plugin("HighNodeUtilization", args)], scope,
                    balance=["HighNodeUtilization"])


def profile_problems(profiles: Sequence[str]) -> list[Problem]:
    """Empty, duplicate, conflicting, unknown and unsupported profiles."""
    found: list[Problem] = []
    if not profiles:
        found.append(Problem(NO_PROFILES, (
            "spec.profiles: descheduler should have at least 1 profile enabled; list one of "
            + ", ".join(PROFILES))))
    elif all(name in (EVICT_PODS_WITH_PVC, EVICT_PODS_WITH_LOCAL_STORAGE) for name in profiles):
        # upstream would run a policy with no profile at all, which evicts nothing
        found.append(Problem(NO_PROFILES, (
            "spec.profiles: EvictPodsWithPVC and EvictPodsWithLocalStorage only widen what the "
            "other profiles evict; enable at least one other profile")))
    seen: set[str] = set()
    for name in profiles:
        if name in seen:
            found.append(Problem(DUPLICATE_PROFILE, (
                f"spec.profiles: duplicate profiles are not allowed ({name!r} is listed twice); "
                "remove one")))
        seen.add(name)
        if name not in PROFILES:
            found.append(Problem(UNKNOWN_PROFILE, (
                f"spec.profiles: Profile {name!r} not recognized; use one of "
                + ", ".join(PROFILES))))
        elif name in KUBEVIRT_PROFILES:
            found.append(Problem(UNSUPPORTED_PROFILE, (
                f"spec.profiles: profile {name} can only be used when KubeVirt is properly "
                "deployed and PSI metrics are read from Prometheus, which berthmaster does not "
                "do; remove it (LifecycleAndUtilization balances by requests)")))
    for first, second in CONFLICTS:
        if first in seen and second in seen:
            found.append(Problem(PROFILE_CONFLICT, (
                f"spec.profiles: cannot declare {first} and {second} profiles simultaneously; "
                "remove one of them")))
    return found


def customization_problems(customizations: Mapping[str, Any], protected: Sequence[str],
                           prometheus_url: str = "") -> list[Problem]:
    found: list[Problem] = []

    def bad(message: str) -> None:
        found.append(Problem(INVALID_CUSTOMIZATION, f"spec.profileCustomizations.{message}"))

    namespaces = customizations.get("namespaces") or {}
    if namespaces.get("included") and namespaces.get("excluded"):
        bad("namespaces: It is forbidden to combine both included and excluded namespaces; "
            "keep one of included and excluded")
    for name in namespaces.get("included") or ():
        if name in protected:
            bad(f"namespaces.included: Protected namespace {name} included. It is forbidden to "
                f"include any of the protected namespaces from {list(protected)}; remove it")
    if customizations.get("thresholdPriority") is not None and customizations.get(
            "thresholdPriorityClassName"):
        bad("thresholdPriority: It is invalid to set both thresholdPriority and "
            "thresholdPriorityClassName; keep one")
    lifetime = customizations.get("podLifetime")
    if lifetime:
        try:
            if parse_go_duration(str(lifetime)) < 0:
                bad(f"podLifetime: {lifetime!r} is negative; use a duration such as 48h")
        except ValueError as error:
            bad(f"podLifetime: {error}")
    low = customizations.get("devLowNodeUtilizationThresholds")
    if low is not None and low not in LOW_NODE_UTILIZATION:
        bad(f"devLowNodeUtilizationThresholds: unknown Descheduler LowNodeUtilization threshold "
            f"{low}, only 'Low', 'Medium' and 'High' are supported")
    high = customizations.get("devHighNodeUtilizationThresholds")
    if high is not None and high not in HIGH_NODE_UTILIZATION:
        bad(f"devHighNodeUtilizationThresholds: unknown Descheduler HighNodeUtilization "
            f"threshold {high}, only 'Minimal', 'Modest' and 'Moderate' are supported")
    actual = customizations.get("devActualUtilizationProfile")
    if actual:
        try:
            utilization_profile_query(str(actual))
        except ValueError as error:
            bad(f"devActualUtilizationProfile: {error}")
        if not prometheus_url:
            found.append(Problem(PROMETHEUS_NOT_CONFIGURED, (
                "spec.profileCustomizations.devActualUtilizationProfile: the operator knows no "
                "Prometheus to query; set the chart's descheduler.prometheusURL (the operator's "
                "$BERTHMASTER_PROMETHEUS_URL), or remove it to balance by requests")))
    return found


def interval_problems(spec: Mapping[str, Any]) -> list[Problem]:
    interval = spec.get("deschedulingIntervalSeconds")
    if isinstance(interval, int) and not isinstance(interval, bool) and interval > 0:
        return []
    return [Problem(INVALID_INTERVAL, (
        "spec.deschedulingIntervalSeconds: descheduler should have an interval set and it "
        "should be greater than 0; set it, for example to 3600"))]


def _scope(customizations: Mapping[str, Any], profiles: Sequence[str],
           protected: Sequence[str]) -> Scope:
    namespaces = customizations.get("namespaces") or {}
    included = list(namespaces.get("included") or ())
    excluded = [] if included else list(protected)
    excluded += list(namespaces.get("excluded") or ())
    evictor: Obj = {"ignorePvcPods": EVICT_PODS_WITH_PVC not in profiles,
                    "evictLocalStoragePods": EVICT_PODS_WITH_LOCAL_STORAGE in profiles}
    if customizations.get("thresholdPriority") is not None:
        evictor["priorityThreshold"] = {"value": customizations["thresholdPriority"]}
    elif customizations.get("thresholdPriorityClassName"):
        evictor["priorityThreshold"] = {"name": customizations["thresholdPriorityClassName"]}
    return Scope(included, excluded, list(protected), evictor)


def _eviction_limits(policy: Obj, limits: Mapping[str, Any]) -> None:
    if limits.get("total") is not None:
        policy["maxNoOfPodsToEvictTotal"] = limits["total"]
    if limits.get("node") is not None:
        policy["maxNoOfPodsToEvictPerNode"] = limits["node"]
        for profile in policy["profiles"]:
            for config in profile["pluginConfig"]:
                if config["name"] == "LowNodeUtilization":
                    config["args"]["evictionLimits"] = {"node": limits["node"]}


def expand(spec: Mapping[str, Any], protected: Sequence[str], prometheus_url: str = "") -> Obj:
    """The DeschedulerPolicy for a KubeDescheduler's spec; KubeDeschedulerInvalid listing every
    problem otherwise. ``protected``: :func:`protected_namespaces`; ``prometheus_url``: where
    ``devActualUtilizationProfile``'s queries go ("" when none is configured)."""
    profiles = list(spec.get("profiles") or ())
    customizations: Mapping[str, Any] = spec.get("profileCustomizations") or {}
    problems = [*interval_problems(spec), *profile_problems(profiles),
                *customization_problems(customizations, protected, prometheus_url)]
    if problems:
        raise KubeDeschedulerInvalid(problems)
    scope = _scope(customizations, profiles, protected)
    expanded: list[Obj] = []
    for name in profiles:
        if name == AFFINITY_AND_TAINTS:
            expanded.append(affinity_and_taints(scope))
        elif name in (TOPOLOGY_AND_DUPLICATES, SOFT_TOPOLOGY_AND_DUPLICATES):
            expanded.append(topology_and_duplicates(scope, soft=name != TOPOLOGY_AND_DUPLICATES))
        elif name in _LIFECYCLE:
            expanded.append(lifecycle_and_utilization(
                scope, customizations, long=name != LIFECYCLE_AND_UTILIZATION))
        elif name == COMPACT_AND_SCALE:
            expanded.append(compact_and_scale(scope, customizations))
        # EvictPodsWithPVC and EvictPodsWithLocalStorage only set the DefaultEvictor's args
    policy: Obj = {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
                   "profiles": expanded}
    if customizations.get("devActualUtilizationProfile"):
        # isPrometheusAsMetricsProviderForProfiles: the provider goes in with the customization
        policy["metricsProviders"] = [{"source": PROMETHEUS,
                                       "prometheus": {"url": prometheus_url}}]
    _eviction_limits(policy, spec.get("evictionLimits") or {})
    return policy
