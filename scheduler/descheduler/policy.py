"""DeschedulerPolicy files, v1alpha1 ``strategies`` and v1alpha2 ``profiles``, to one internal form.

Design: both versions become a :class:`DeschedulerPolicy` — an ordered tuple of
:class:`StrategyConfig` (strategy name, parsed params, DefaultEvictor settings, profile) plus the
global eviction limits. v1alpha1 (OpenShift 3.11's format, dropped upstream in v0.31) is read as
upstream read it while migrating: each enabled strategy becomes its own profile whose evictor
takes the top-level ``evictLocalStoragePods``/``evictSystemCriticalPods``/``ignorePvcPods``/
``evictFailedBarePods`` and the strategy's ``thresholdPriority``/``thresholdPriorityClassName``/
``nodeFit``. Run order is upstream's: every ``deschedule`` strategy, then every ``balance`` one.

Validation collects every problem in the document (unknown strategies, unknown fields, bad
values, plugins under the wrong extension point) and raises one :class:`PolicyError` listing
them with their paths.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from berthmaster.foundation.documents import read_text, safe_load
from berthmaster.foundation.durations import parse_go_duration
from berthmaster.foundation.problems import Problems
from berthmaster.scheduler.descheduler.fields import (
    boolean,
    check_known,
    integer,
    invalid_policy,
    items,
    join,
    label_selector,
    mapping,
    raise_if_any,
)
from berthmaster.scheduler.descheduler.protection import MANDATORY, PREFERRED, EvictorSettings
from berthmaster.scheduler.descheduler.strategies import REGISTRY
from berthmaster.scheduler.descheduler.strategies.low_node_utilization import (
    prometheus_query,
    uses_actual_usage,
)
from berthmaster.scheduler.descheduler.usage_metrics import KUBERNETES_METRICS, PROMETHEUS
from berthmaster.scheduler.descheduler.usage_prometheus import PrometheusProvider
from berthmaster.scheduler.label_string import SelectorSyntaxError, parse_label_selector

V1ALPHA1 = "descheduler/v1alpha1"
V1ALPHA2 = "descheduler/v1alpha2"
KIND = "DeschedulerPolicy"
DEFAULT_EVICTOR = "DefaultEvictor"

V1ALPHA1_TOP = ("apiVersion", "kind", "strategies", "nodeSelector", "evictLocalStoragePods",
                "evictSystemCriticalPods", "evictDaemonSetPods", "ignorePvcPods",
                "evictFailedBarePods", "maxNoOfPodsToEvictPerNode",
                "maxNoOfPodsToEvictPerNamespace")
V1ALPHA1_STRATEGY = ("enabled", "weight", "params")
V1ALPHA2_TOP = ("apiVersion", "kind", "profiles", "nodeSelector", "maxNoOfPodsToEvictPerNode",
                "maxNoOfPodsToEvictPerNamespace", "maxNoOfPodsToEvictTotal",
                "gracePeriodSeconds", "evictionFailureEventNotification", "metricsCollector",
                "metricsProviders")
V1ALPHA2_PROFILE = ("name", "pluginConfig", "plugins")
# v1alpha2 Plugins' JSON name is "preevictionfilter" (types.go); the README writes
# "preEvictionFilter": both are read.
EXTENSION_POINTS = ("presort", "sort", "deschedule", "balance", "filter", "preEvictionFilter",
                    "preevictionfilter")
EVICTOR_ARGS = ("nodeSelector", "evictLocalStoragePods", "evictDaemonSetPods",
                "evictSystemCriticalPods", "ignorePvcPods", "evictFailedBarePods",
                "ignorePodsWithoutPDB", "labelSelector", "namespaceLabelSelector",
                "priorityThreshold", "nodeFit", "minReplicas", "minPodAge", "noEvictionPolicy",
                "podProtections")
DEPRECATED_EVICTOR_FLAGS = ("evictLocalStoragePods", "evictDaemonSetPods",
                            "evictSystemCriticalPods", "ignorePvcPods", "evictFailedBarePods",
                            "ignorePodsWithoutPDB")
# defaultevictor/types.go: defaultPodProtections and extraPodProtections, in upstream's order.
DEFAULT_PROTECTIONS = ("PodsWithLocalStorage", "SystemCriticalPods", "FailedBarePods",
                       "DaemonSetPods")
EXTRA_PROTECTIONS = ("PodsWithPVC", "PodsWithoutPDB", "PodsWithResourceClaims")


@dataclass(frozen=True)
class StrategyConfig:
    """One enabled strategy: what to run, with which params and evictor settings."""

    name: str
    profile: str
    params: Any
    evictor: EvictorSettings

    @property
    def extension_point(self) -> str:
        return REGISTRY[self.name].EXTENSION_POINT


@dataclass(frozen=True)
class DeschedulerPolicy:
    api_version: str
    strategies: tuple[StrategyConfig, ...]
    node_selector: str | None = None
    max_pods_per_node: int | None = None
    max_pods_per_namespace: int | None = None
    max_pods_total: int | None = None
    grace_period_seconds: int | None = None
    eviction_failure_events: bool = False
    # metricsCollector.enabled or a KubernetesMetrics entry in metricsProviders
    kubernetes_metrics: bool = False
    # a Prometheus entry in metricsProviders
    prometheus: PrometheusProvider | None = None

    @property
    def uses_actual_usage(self) -> bool:
        """Some strategy balances by the metrics API's usage rather than requests."""
        return any(uses_actual_usage(c.params) for c in self.strategies)

    @property
    def prometheus_queries(self) -> tuple[str, ...]:
        """The Prometheus queries the strategies balance by, each once, in order."""
        found = (prometheus_query(c.params) for c in self.strategies)
        return tuple(dict.fromkeys(q for q in found if q))


def load_policy_file(path: str | Path) -> DeschedulerPolicy:
    """Read and validate a policy file (YAML or JSON); raises PolicyError naming the file, or
    DocumentError (one line) when the file cannot be read or is not text."""
    return parse_policy_text(read_text(path), str(path))


def parse_policy_text(text: str, source: str = "<policy>") -> DeschedulerPolicy:
    try:
        document = safe_load(text)
    except yaml.YAMLError as error:
        raise invalid_policy(source, [f"not valid YAML or JSON: {error}"]) from error
    return parse_policy(document, source)


def parse_policy(document: Any, source: str = "<policy>") -> DeschedulerPolicy:
    problems = Problems()
    if not isinstance(document, Mapping):
        problems.add("", "the policy must be a mapping with apiVersion and kind")
        raise_if_any(problems, source)
        raise AssertionError  # unreachable
    version = document.get("apiVersion")
    if document.get("kind") != KIND:
        problems.add("kind", f"must be {KIND!r}, got {document.get('kind')!r}")
    if version == V1ALPHA1:
        policy = _v1alpha1(document, problems)
    elif version == V1ALPHA2:
        policy = _v1alpha2(document, problems)
    else:
        problems.add("apiVersion", f"must be {V1ALPHA1!r} or {V1ALPHA2!r}, got {version!r}")
        policy = DeschedulerPolicy(str(version), ())
    raise_if_any(problems, source)
    return policy


def _selector_string(selector: Any, where: str, problems: Problems) -> str | None:
    """A label selector string (labels.Parse syntax); None when absent or unusable."""
    if selector is not None and not isinstance(selector, str):
        problems.add(where, f"must be a label selector string like 'a=b,c', got {selector!r}")
        return None
    if selector:
        try:
            parse_label_selector(selector)
        except SelectorSyntaxError as error:
            problems.add(where, f"{error} (a label selector such as 'zone in (a,b),!gpu')")
            return None
    return selector or None


def _limits(document: Mapping[str, Any], problems: Problems) -> dict[str, Any]:
    return {
        "node_selector": _selector_string(document.get("nodeSelector"), "nodeSelector",
                                          problems),
        "max_pods_per_node": integer(document.get("maxNoOfPodsToEvictPerNode"),
                                     "maxNoOfPodsToEvictPerNode", problems, minimum=0),
        "max_pods_per_namespace": integer(document.get("maxNoOfPodsToEvictPerNamespace"),
                                          "maxNoOfPodsToEvictPerNamespace", problems, minimum=0),
        "max_pods_total": integer(document.get("maxNoOfPodsToEvictTotal"),
                                  "maxNoOfPodsToEvictTotal", problems, minimum=0),
    }


def _ordered(configs: list[StrategyConfig]) -> tuple[StrategyConfig, ...]:
    return tuple([c for c in configs if c.extension_point == "deschedule"]
                 + [c for c in configs if c.extension_point == "balance"])


# ------------------------------------------------------------------------------ v1alpha1

def _v1alpha1(document: Mapping[str, Any], problems: Problems) -> DeschedulerPolicy:
    check_known(document, V1ALPHA1_TOP, "", problems)
    top = {key: boolean(document.get(key), key, problems) for key in (
        "evictLocalStoragePods", "evictSystemCriticalPods", "evictDaemonSetPods",
        "ignorePvcPods", "evictFailedBarePods")}
    strategies = mapping(document.get("strategies"), "strategies", problems)
    if not strategies:
        problems.add("strategies", "no strategy is configured; enable at least one, e.g. "
                                   "RemoveDuplicates: {enabled: true}")
    configs = []
    for name, raw in strategies.items():
        where = f'strategies["{name}"]'
        entry = mapping(raw, where, problems)
        check_known(entry, V1ALPHA1_STRATEGY, where, problems)
        module = REGISTRY.get(str(name))
        if module is None:
            problems.add(where, f"unknown strategy name; expected one of {sorted(REGISTRY)}")
            continue
        if not boolean(entry.get("enabled"), join(where, "enabled"), problems):
            continue
        params_where = join(where, "params")
        params = mapping(entry.get("params"), params_where, problems)
        from berthmaster.scheduler.descheduler.strategies.common import V1ALPHA1_PARAMS

        check_known(params, V1ALPHA1_PARAMS, params_where, problems)
        value = integer(params.get("thresholdPriority"), join(params_where, "thresholdPriority"),
                        problems)
        class_name = params.get("thresholdPriorityClassName") or None
        if value is not None and class_name:
            problems.add(params_where, "only one of thresholdPriority and "
                                       "thresholdPriorityClassName can be set")
        node_fit = boolean(params.get("nodeFit"), join(params_where, "nodeFit"), problems)
        evictor = EvictorSettings(
            evict_local_storage_pods=top["evictLocalStoragePods"],
            evict_daemonset_pods=top["evictDaemonSetPods"],
            evict_system_critical_pods=top["evictSystemCriticalPods"],
            ignore_pvc_pods=top["ignorePvcPods"],
            evict_failed_bare_pods=top["evictFailedBarePods"],
            node_fit=node_fit and name != "PodLifeTime",  # upstream ignores nodeFit there
            priority_threshold=value,
            priority_threshold_class=str(class_name) if class_name else None,
        )
        args = module.from_v1alpha1(params, params_where, problems)
        parsed = module.parse(args, params_where, problems)
        if hasattr(module, "v1alpha1_params"):  # read as v0.30.1 read it
            parsed = module.v1alpha1_params(parsed)
        configs.append(StrategyConfig(str(name), f"strategy-{name}-profile", parsed, evictor))
    return DeschedulerPolicy(V1ALPHA1, _ordered(configs), **_limits(document, problems))


# ------------------------------------------------------------------------------ v1alpha2

def duration_seconds(value: Any, where: str, problems: Problems) -> float | None:
    """A Go duration string (``90s``, ``1h30m``; upstream's ``metav1.Duration``)."""
    if value is None:
        return None
    try:
        return parse_go_duration(str(value))
    except ValueError:
        problems.add(where, f"must be a duration such as '30s', '5m' or '1h30m', got {value!r}")
        return None


def _protection_list(value: Any, where: str, allowed: tuple[str, ...], label: str,
                     problems: Problems) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        problems.add(where, f"must be a list of pod protection names, got {value!r}")
        return []
    for name in value:
        if name not in allowed:
            problems.add(where, f"invalid pod protection policy in {label}: {name!r}. Valid "
                                f"options are: {list(allowed)}")
    if len(set(value)) != len(value):
        problems.add(where, f"PodProtections.{label} contains duplicate entries")
    return [v for v in value if v in allowed]


def _protections(args: Mapping[str, Any], flags: Mapping[str, bool], where: str,
                 problems: Problems) -> tuple[set[str], frozenset[str]]:
    """Upstream's getEffectivePodProtections: the deprecated booleans, or podProtections'
    defaults minus ``defaultDisabled`` plus ``extraEnabled`` (never both); and the protected
    storage classes of its ``config`` (:func:`_protected_storage_classes`)."""
    at = join(where, "podProtections")
    raw = mapping(args.get("podProtections"), at, problems)
    check_known(raw, ("extraEnabled", "defaultDisabled", "config"), at, problems)
    extra = _protection_list(raw.get("extraEnabled"), join(at, "extraEnabled"),
                             EXTRA_PROTECTIONS, "ExtraEnabled", problems)
    disabled = _protection_list(raw.get("defaultDisabled"), join(at, "defaultDisabled"),
                                DEFAULT_PROTECTIONS, "DefaultDisabled", problems)
    if not (extra or disabled):
        found = {name for name, flag in (
            ("PodsWithLocalStorage", "evictLocalStoragePods"), ("DaemonSetPods",
                                                                "evictDaemonSetPods"),
            ("SystemCriticalPods", "evictSystemCriticalPods"),
            ("FailedBarePods", "evictFailedBarePods")) if not flags[flag]}
        if flags["ignorePvcPods"]:
            found.add("PodsWithPVC")
        if flags["ignorePodsWithoutPDB"]:
            found.add("PodsWithoutPDB")
    else:
        if any(flags[f] for f in DEPRECATED_EVICTOR_FLAGS):
            problems.add(where, "cannot use Deprecated fields alongside "
                                "PodProtections.ExtraEnabled or PodProtections.DefaultDisabled")
        found = (set(DEFAULT_PROTECTIONS) - set(disabled)) | set(extra)
    classes = _protected_storage_classes(raw.get("config"), join(at, "config"), problems,
                                         enabled="PodsWithPVC" in found)
    return found, classes


def _protected_storage_classes(config_value: Any, at: str, problems: Problems,
                               enabled: bool) -> frozenset[str]:
    """``podProtections.config`` (``at``) and its ``PodsWithPVC.protectedStorageClasses``
    (defaultevictor/types.go PodProtectionsConfig), read only when the PodsWithPVC protection
    is ``enabled``, as upstream reads and validates them (defaultevictor.go
    protectedPVCStorageClasses, validation.go)."""
    config = mapping(config_value, at, problems)
    check_known(config, ("PodsWithPVC",), at, problems)
    pvc_at = join(at, "PodsWithPVC")
    pvc = mapping(config.get("PodsWithPVC"), pvc_at, problems)
    check_known(pvc, ("protectedStorageClasses",), pvc_at, problems)
    list_at = join(pvc_at, "protectedStorageClasses")
    listed = pvc.get("protectedStorageClasses") or []
    if not isinstance(listed, list):
        problems.add(list_at, "must be a list of {name: ...}")
        return frozenset()
    if not enabled:
        return frozenset()
    names = set()
    for index, item in enumerate(listed):
        name = mapping(item, join(list_at, index), problems).get("name")
        if not name:
            problems.add(join(list_at, index),
                         f"PodProtections.Config.PodsWithPVC.ProtectedStorageClasses[{index}] "
                         "name cannot be empty")
            continue
        names.add(str(name))
    return frozenset(names)


def _evictor_settings(args: Mapping[str, Any], where: str, problems: Problems) -> EvictorSettings:
    check_known(args, EVICTOR_ARGS, where, problems)
    flags = {key: boolean(args.get(key), join(where, key), problems) for key in (
        *DEPRECATED_EVICTOR_FLAGS, "nodeFit")}
    threshold = mapping(args.get("priorityThreshold"), join(where, "priorityThreshold"), problems)
    check_known(threshold, ("value", "name"), join(where, "priorityThreshold"), problems)
    value = integer(threshold.get("value"), join(where, "priorityThreshold.value"), problems)
    name = threshold.get("name") or None
    if value is not None and name:
        problems.add(join(where, "priorityThreshold"), "only one of priorityThreshold fields can "
                                                       "be set: give value or name")
    node_selector = _selector_string(args.get("nodeSelector"), join(where, "nodeSelector"),
                                     problems)
    no_eviction = args.get("noEvictionPolicy") or ""
    if no_eviction not in ("", PREFERRED, MANDATORY):
        problems.add(join(where, "noEvictionPolicy"),
                     f'noEvictionPolicy accepts only ["{PREFERRED}" "{MANDATORY}"] values, got '
                     f"{no_eviction!r}")
        no_eviction = ""
    protected, storage_classes = _protections(args, flags, where, problems)
    return EvictorSettings(
        evict_local_storage_pods="PodsWithLocalStorage" not in protected,
        evict_daemonset_pods="DaemonSetPods" not in protected,
        evict_system_critical_pods="SystemCriticalPods" not in protected,
        ignore_pvc_pods="PodsWithPVC" in protected,
        protected_storage_classes=storage_classes,
        evict_failed_bare_pods="FailedBarePods" not in protected,
        node_fit=flags["nodeFit"],
        priority_threshold=value,
        priority_threshold_class=str(name) if name else None,
        label_selector=label_selector(args.get("labelSelector"), join(where, "labelSelector"),
                                      problems),
        min_replicas=integer(args.get("minReplicas"), join(where, "minReplicas"), problems,
                             default=0, minimum=0) or 0,
        min_pod_age_seconds=duration_seconds(args.get("minPodAge"), join(where, "minPodAge"),
                                             problems),
        protect_pods_without_pdb="PodsWithoutPDB" in protected,
        protect_resource_claims="PodsWithResourceClaims" in protected,
        namespace_label_selector=label_selector(
            args.get("namespaceLabelSelector"), join(where, "namespaceLabelSelector"), problems),
        no_eviction_policy=str(no_eviction),
        node_selector=node_selector,
    )


def _plugin_set(
    plugins: Mapping[str, Any], point: str, where: str, problems: Problems
) -> list[str]:
    at = join(where, point)
    entry = mapping(plugins.get(point), at, problems)
    check_known(entry, ("enabled", "disabled"), at, problems)
    enabled = entry.get("enabled") or []
    if not isinstance(enabled, list) or not all(isinstance(n, str) for n in enabled):
        problems.add(join(at, "enabled"), "must be a list of plugin names")
        return []
    return list(enabled)


def _v1alpha2(document: Mapping[str, Any], problems: Problems) -> DeschedulerPolicy:
    check_known(document, V1ALPHA2_TOP, "", problems)
    profiles = document.get("profiles")
    if not isinstance(profiles, list) or not profiles:
        problems.add("profiles", "at least one profile is required")
        profiles = []
    names: set[str] = set()
    configs: list[StrategyConfig] = []
    for index, raw in enumerate(profiles):
        where = join("profiles", index)
        profile = mapping(raw, where, problems)
        check_known(profile, V1ALPHA2_PROFILE, where, problems)
        name = profile.get("name")
        if not isinstance(name, str) or not name:
            problems.add(join(where, "name"), "every profile needs a name")
            name = f"profile-{index}"
        elif name in names:
            problems.add(join(where, "name"), f"profile name {name!r} is used twice; names must "
                                              "be unique")
        names.add(name)
        args_by_plugin: dict[str, tuple[str, Mapping[str, Any]]] = {}
        plugin_configs = items(profile.get("pluginConfig"), join(where, "pluginConfig"),
                               problems, "a list of {name, args}")
        for i, item in enumerate(plugin_configs):
            at = join(join(where, "pluginConfig"), i)
            entry = mapping(item, at, problems)
            check_known(entry, ("name", "args"), at, problems)
            plugin = entry.get("name")
            if plugin != DEFAULT_EVICTOR and plugin not in REGISTRY:
                problems.add(join(at, "name"), f"unknown plugin {plugin!r}; expected "
                                               f"{DEFAULT_EVICTOR} or one of {sorted(REGISTRY)}")
                continue
            if plugin in args_by_plugin:
                problems.add(join(at, "name"), f"plugin {plugin!r} is configured twice")
            args_by_plugin[str(plugin)] = (join(at, "args"),
                                           mapping(entry.get("args"), join(at, "args"), problems))
        plugins = mapping(profile.get("plugins"), join(where, "plugins"), problems)
        check_known(plugins, EXTENSION_POINTS, join(where, "plugins"), problems)
        for point in ("filter", "preEvictionFilter", "preevictionfilter", "presort", "sort"):
            for plugin in _plugin_set(plugins, point, join(where, "plugins"), problems):
                if plugin != DEFAULT_EVICTOR:
                    problems.add(join(join(where, "plugins"), point),
                                 f"unknown {point} plugin {plugin!r}; only {DEFAULT_EVICTOR} "
                                 "is available")
        evictor_where, evictor_args = args_by_plugin.get(DEFAULT_EVICTOR, ("", {}))
        evictor = _evictor_settings(evictor_args, evictor_where or join(where, "pluginConfig"),
                                    problems)
        for point in ("deschedule", "balance"):
            at = join(join(where, "plugins"), point)
            for plugin in _plugin_set(plugins, point, join(where, "plugins"), problems):
                module = REGISTRY.get(plugin)
                if module is None:
                    problems.add(at, f"unknown plugin {plugin!r}; expected one of "
                                     f"{sorted(REGISTRY)}")
                    continue
                if point != module.EXTENSION_POINT:
                    problems.add(at, f"{plugin} is a {module.EXTENSION_POINT} plugin; list it "
                                     f"under plugins.{module.EXTENSION_POINT}.enabled")
                    continue
                args_where, args = args_by_plugin.get(plugin, (at, {}))
                configs.append(StrategyConfig(plugin, name, module.parse(args, args_where,
                                                                         problems), evictor))
    kubernetes_metrics, prometheus = _metrics_sources(document, problems)
    for config in configs:
        at = f"profiles[{config.profile}].pluginConfig[{config.name}].args.metricsUtilization"
        if uses_actual_usage(config.params) and not kubernetes_metrics:
            problems.add(at, "metrics client not initialized: metricsUtilization needs the "
                             "metrics collector; set metricsCollector: {enabled: true} or "
                             f"metricsProviders: [{{source: {KUBERNETES_METRICS}}}] at the top "
                             "of the policy")
        if prometheus_query(config.params) and prometheus is None:
            problems.add(at, "prometheus client not initialized: metricsUtilization with source "
                             f"{PROMETHEUS} needs metricsProviders: [{{source: {PROMETHEUS}, "
                             "prometheus: {url: ...}}] at the top of the policy")
    grace = integer(document.get("gracePeriodSeconds"), "gracePeriodSeconds", problems, minimum=0)
    events = boolean(document.get("evictionFailureEventNotification"),
                     "evictionFailureEventNotification", problems)
    return DeschedulerPolicy(V1ALPHA2, _ordered(configs), grace_period_seconds=grace,
                             eviction_failure_events=events,
                             kubernetes_metrics=kubernetes_metrics, prometheus=prometheus,
                             **_limits(document, problems))


def _metrics_sources(document: Mapping[str, Any],
                     problems: Problems) -> tuple[bool, PrometheusProvider | None]:
    """``metricsCollector`` and ``metricsProviders`` checked as upstream's
    validateDeschedulerConfiguration (pkg/descheduler/policyconfig.go): whether the metrics
    API is to be read, and the Prometheus server if one is named."""
    collector = mapping(document.get("metricsCollector"), "metricsCollector", problems)
    check_known(collector, ("enabled",), "metricsCollector", problems)
    enabled = boolean(collector.get("enabled"), "metricsCollector.enabled", problems)
    providers = document.get("metricsProviders") or []
    if not isinstance(providers, list):
        problems.add("metricsProviders", "must be a list such as [{source: KubernetesMetrics}]")
        providers = []
    seen: set[str] = set()
    prometheus: PrometheusProvider | None = None
    for index, raw in enumerate(providers):
        at = join("metricsProviders", index)
        provider = mapping(raw, at, problems)
        check_known(provider, ("source", "prometheus"), at, problems)
        source = str(provider.get("source") or "")
        if source in seen:
            problems.add(at, f"metric provider {source!r} is already configured, each source "
                             "can be configured only once")
            continue
        seen.add(source)
        if source == PROMETHEUS:
            prometheus = _prometheus_provider(provider.get("prometheus"),
                                              join(at, "prometheus"), problems)
        elif source != KUBERNETES_METRICS:
            problems.add(join(at, "source"), f"unknown metrics source {source!r}; expected "
                                             f"{KUBERNETES_METRICS} or {PROMETHEUS}")
    if KUBERNETES_METRICS in seen and enabled:
        problems.add("metricsProviders", "it is not allowed to combine metrics provider when "
                                         "metrics collector is enabled")
    return enabled or KUBERNETES_METRICS in seen, prometheus


def _prometheus_provider(value: Any, at: str, problems: Problems) -> PrometheusProvider | None:
    """A Prometheus entry's ``prometheus``: ``url`` and the optional ``authToken``'s Secret,
    with upstream's sentences (policyconfig.go validateDeschedulerConfiguration)."""
    if value is None:
        problems.add(at, "prometheus configuration is required when prometheus source is "
                         "enabled")
        return None
    config = mapping(value, at, problems)
    check_known(config, ("url", "authToken"), at, problems)
    url = config.get("url")
    if not isinstance(url, str) or not url:
        problems.add(join(at, "url"), "prometheus URL is required when prometheus is enabled")
        return None
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        problems.add(join(at, "url"), f"error parsing prometheus URL: {url!r} is not an "
                                      "http:// or https:// address")
        return None
    if config.get("authToken") is None:
        return PrometheusProvider(url)
    token_at = join(at, "authToken")
    token = mapping(config.get("authToken"), token_at, problems)
    check_known(token, ("secretReference",), token_at, problems)
    if token.get("secretReference") is None:
        problems.add(token_at, "prometheus authToken secret is expected to be set when "
                               "authToken field is")
        return None
    ref_at = join(token_at, "secretReference")
    ref = mapping(token.get("secretReference"), ref_at, problems)
    check_known(ref, ("namespace", "name"), ref_at, problems)
    namespace, name = ref.get("namespace"), ref.get("name")
    if not namespace or not name or not isinstance(namespace, str) or not isinstance(name, str):
        problems.add(ref_at, "prometheus authToken secret reference does not set both "
                             "namespace and name")
        return None
    return PrometheusProvider(url, namespace, name)
