"""The ClusterAutoscaler resource -> one validated, defaulted :class:`AutoscalerConfig`.

Design: the CRD's schema and CEL rules reject most bad input at the API server; this module is
the second line (objects written before the CRD was tightened, tests, the offline tools) and the
single place where upstream cluster-autoscaler's defaults live. Validation collects every problem
and raises one :class:`ConfigError` whose lines name the field and the fix. Durations use Go's
``time.ParseDuration`` syntax (``10m``, ``1h30m``, ``500ms``), as the upstream flags do.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from berthmaster.foundation.durations import parse_go_duration
from berthmaster.foundation.problems import Problems

# The namespace the operator runs in, where the Priority expander's ConfigMap is read: upstream's
# --namespace (the namespace cluster-autoscaler runs in; its deployment examples give it a Role
# there for its ConfigMaps). In a Pod the chart's Downward API sets $POD_NAMESPACE.
DEFAULT_NAMESPACE = "berthmaster"  # the chart's and deploy/manifests/' namespace


def operator_namespace(flag: str = "") -> str:
    """``berthmaster operator --autoscaler-namespace``, else ``$POD_NAMESPACE``, else
    ``berthmaster``."""
    return flag or os.environ.get("POD_NAMESPACE") or DEFAULT_NAMESPACE


# Upstream cluster-autoscaler flag defaults (cluster-autoscaler/main.go / FAQ).
DEFAULT_POD_PRIORITY_THRESHOLD = -10  # --expendable-pods-priority-cutoff
DEFAULT_MAX_POD_GRACE_PERIOD = 600  # --max-graceful-termination-sec
DEFAULT_MAX_NODE_PROVISION_TIME = 15 * 60.0  # --max-node-provision-time
DEFAULT_DELAY_AFTER_ADD = 10 * 60.0
DEFAULT_DELAY_AFTER_DELETE = 10.0  # defaults to the scan interval
DEFAULT_DELAY_AFTER_FAILURE = 3 * 60.0
DEFAULT_UNNEEDED_TIME = 10 * 60.0
# upstream's --scale-down-unready-time; OpenShift's ClusterAutoscaler has no field for it
DEFAULT_UNREADY_TIME = 20 * 60.0
# --cordon-node-before-terminating (config/flags/flags.go: true); OpenShift's operator passes the
# flag only when scaleDown.cordonNodeBeforeTerminating is set (clusterautoscaler.go
# ScaleDownArgs), so an unset field leaves the autoscaler's own default
DEFAULT_CORDON_NODE_BEFORE_TERMINATING = True
DEFAULT_UTILIZATION_THRESHOLD = 0.5
SCAN_INTERVAL = 10.0
DEFAULT_NEW_POD_SCALE_UP_DELAY = 0.0  # --new-pod-scale-up-delay
# OpenShift's operator passes --v=1 unless logVerbosity (or CLUSTER_AUTOSCALER_VERBOSITY) says
# otherwise.
DEFAULT_LOG_VERBOSITY = 1
DEBUG_VERBOSITY = 4  # the level OpenShift's API recommends for debugging

# OpenShift's three plus upstream's most-pods. Left empty, OpenShift's operator passes no
# --expander flag, so the autoscaler's own default applies: least-waste (config/flags/flags.go).
EXPANDERS = ("LeastWaste", "MostPods", "Priority", "Random")
DEFAULT_EXPANDERS = ("LeastWaste",)
# The Enabled/Disabled switches of openshift/cluster-autoscaler-operator's v1 API.
MODES = {"Enabled": True, "Disabled": False}
ONLY_NAME = "default"


class ConfigError(ValueError):
    """Every problem found in one ClusterAutoscaler, one per line."""

    def __init__(self, name: str, problems: Problems):
        self.problems = problems.lines()
        super().__init__(problems.render(f"ClusterAutoscaler {name!r} is invalid"))


@dataclass(frozen=True)
class ResourceRange:
    min: int
    max: int


@dataclass(frozen=True)
class GpuLimit:
    type: str
    min: int
    max: int


@dataclass(frozen=True)
class ResourceLimits:
    """Cluster-wide bounds; cores in cores, memory in GiB, as the resource spells them."""

    max_nodes_total: int | None = None
    cores: ResourceRange | None = None
    memory_gib: ResourceRange | None = None
    gpus: tuple[GpuLimit, ...] = ()


@dataclass(frozen=True)
class ScaleDownConfig:
    enabled: bool = True
    delay_after_add: float = DEFAULT_DELAY_AFTER_ADD
    delay_after_delete: float = DEFAULT_DELAY_AFTER_DELETE
    delay_after_failure: float = DEFAULT_DELAY_AFTER_FAILURE
    unneeded_time: float = DEFAULT_UNNEEDED_TIME
    utilization_threshold: float = DEFAULT_UTILIZATION_THRESHOLD
    unready_time: float = DEFAULT_UNREADY_TIME
    cordon_node_before_terminating: bool = DEFAULT_CORDON_NODE_BEFORE_TERMINATING


@dataclass(frozen=True)
class ScaleUpConfig:
    new_pod_scale_up_delay: float = DEFAULT_NEW_POD_SCALE_UP_DELAY


@dataclass(frozen=True)
class AutoscalerConfig:
    pod_priority_threshold: int = DEFAULT_POD_PRIORITY_THRESHOLD
    max_pod_grace_period: int = DEFAULT_MAX_POD_GRACE_PERIOD
    max_node_provision_time: float = DEFAULT_MAX_NODE_PROVISION_TIME
    limits: ResourceLimits = field(default_factory=ResourceLimits)
    scale_down: ScaleDownConfig = field(default_factory=ScaleDownConfig)
    scale_up: ScaleUpConfig = field(default_factory=ScaleUpConfig)
    expanders: tuple[str, ...] = DEFAULT_EXPANDERS
    balance_similar_node_groups: bool = False
    balancing_ignored_labels: tuple[str, ...] = ()
    ignore_daemonsets_utilization: bool = False
    skip_nodes_with_local_storage: bool = True
    enforce_node_group_min_size: bool = False
    startup_taints: tuple[str, ...] = ()
    log_verbosity: int = DEFAULT_LOG_VERBOSITY


T = TypeVar("T")


def _field(spec: Mapping[str, Any], key: str, path: str, problems: Problems, default: T,
              convert: Callable[[Any], T]) -> T:
    """``spec[key]`` through ``convert``; absent or null: ``default``. A ValueError from
    ``convert`` is a problem at ``path.key`` (its message says what to write), and the field
    reads as ``default``."""
    value = spec.get(key)
    if value is None:
        return default
    try:
        return convert(value)
    except ValueError as error:
        problems.add(f"{path}.{key}", str(error))
        return default


def _int(spec: Mapping[str, Any], key: str, path: str, problems: Problems,
         default: int | None, minimum: int | None = None) -> int | None:
    def convert(value: Any) -> int | None:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{value!r} is not an integer; write a whole number")
        if minimum is not None and value < minimum:
            raise ValueError(f"{value} is below {minimum}; use a value >= {minimum}")
        return value
    return _field(spec, key, path, problems, default, convert)


def _bool(spec: Mapping[str, Any], key: str, path: str, problems: Problems, default: bool) -> bool:
    def convert(value: Any) -> bool:
        if not isinstance(value, bool):
            raise ValueError(f"{value!r} is not a boolean; write true or false")
        return value
    return _field(spec, key, path, problems, default, convert)


def _duration(spec: Mapping[str, Any], key: str, path: str, problems: Problems,
              default: float) -> float:
    def convert(value: Any) -> float:
        seconds = parse_go_duration(str(value))
        if seconds < 0:
            raise ValueError(f"{value!r} is negative; use a duration >= 0")
        return seconds
    return _field(spec, key, path, problems, default, convert)


def _mode(spec: Mapping[str, Any], key: str, path: str, problems: Problems, default: bool) -> bool:
    def convert(value: Any) -> bool:
        if value not in MODES:
            raise ValueError(f"{value!r} is not a mode; write Enabled or Disabled")
        return MODES[value]
    return _field(spec, key, path, problems, default, convert)


def _strings(spec: Mapping[str, Any], key: str, path: str, problems: Problems) -> tuple[str, ...]:
    value = spec.get(key)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        problems.add(f"{path}.{key}", "expected a list of non-empty strings")
        return ()
    if len(set(value)) != len(value):
        problems.add(f"{path}.{key}", "an item is listed twice; list each once")
    return tuple(dict.fromkeys(value))


def _range(spec: Mapping[str, Any], key: str, path: str,
           problems: Problems) -> ResourceRange | None:
    raw = spec.get(key)
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        problems.add(f"{path}.{key}", "expected an object with min and max")
        return None
    low = _int(raw, "min", f"{path}.{key}", problems, 0, minimum=0)
    high = _int(raw, "max", f"{path}.{key}", problems, None, minimum=0)
    if high is None:
        if "max" not in raw:
            problems.add(f"{path}.{key}.max", "required; set the maximum")
        return None
    low = low or 0
    if low > high:
        problems.add(f"{path}.{key}", f"min {low} is greater than max {high}; make min <= max")
        return None
    return ResourceRange(low, high)


def _limits(spec: Mapping[str, Any], problems: Problems) -> ResourceLimits:
    raw = spec.get("resourceLimits") or {}
    path = "spec.resourceLimits"
    if not isinstance(raw, Mapping):
        problems.add(path, "expected an object")
        return ResourceLimits()
    gpus: list[GpuLimit] = []
    for index, item in enumerate(raw.get("gpus") or []):
        where = f"{path}.gpus[{index}]"
        if not isinstance(item, Mapping) or not item.get("type"):
            problems.add(f"{where}.type", "required; name the GPU type (such as nvidia.com/gpu)")
            continue
        bounds = _range({"g": item}, "g", where, problems)
        if bounds is not None:
            gpus.append(GpuLimit(str(item["type"]), bounds.min, bounds.max))
    if len({gpu.type for gpu in gpus}) != len(gpus):
        problems.add(f"{path}.gpus", "a GPU type is listed twice; list each type once")
    return ResourceLimits(
        max_nodes_total=_int(raw, "maxNodesTotal", path, problems, None, minimum=0),
        cores=_range(raw, "cores", path, problems),
        memory_gib=_range(raw, "memory", path, problems),
        gpus=tuple(gpus),
    )


def _section(spec: Mapping[str, Any], key: str, problems: Problems) -> Mapping[str, Any] | None:
    """An optional object of ``spec``: None when absent, or (a problem) when not an object."""
    raw = spec.get(key)
    if raw is not None and not isinstance(raw, Mapping):
        problems.add(f"spec.{key}", "expected an object")
        return None
    return raw


def _scale_down(spec: Mapping[str, Any], problems: Problems) -> ScaleDownConfig:
    path = "spec.scaleDown"
    raw = _section(spec, "scaleDown", problems)
    if raw is None:
        return ScaleDownConfig()
    threshold = DEFAULT_UTILIZATION_THRESHOLD
    if raw.get("utilizationThreshold") is not None:
        try:
            threshold = float(str(raw["utilizationThreshold"]))
            if not 0.0 < threshold < 1.0:
                raise ValueError
        except ValueError:
            # openshift/cluster-autoscaler-operator's validateScaleDownConfig: strictly between.
            problems.add(f"{path}.utilizationThreshold",
                         f"{raw['utilizationThreshold']!r} must be a quoted number above 0 and "
                         "below 1, such as \"0.5\"")
            threshold = DEFAULT_UTILIZATION_THRESHOLD
    return ScaleDownConfig(
        enabled=_bool(raw, "enabled", path, problems, True),
        delay_after_add=_duration(raw, "delayAfterAdd", path, problems, DEFAULT_DELAY_AFTER_ADD),
        delay_after_delete=_duration(raw, "delayAfterDelete", path, problems,
                                     DEFAULT_DELAY_AFTER_DELETE),
        delay_after_failure=_duration(raw, "delayAfterFailure", path, problems,
                                      DEFAULT_DELAY_AFTER_FAILURE),
        unneeded_time=_duration(raw, "unneededTime", path, problems, DEFAULT_UNNEEDED_TIME),
        utilization_threshold=threshold,
        cordon_node_before_terminating=_mode(raw, "cordonNodeBeforeTerminating", path, problems,
                                             DEFAULT_CORDON_NODE_BEFORE_TERMINATING),
    )


def _scale_up(spec: Mapping[str, Any], problems: Problems) -> ScaleUpConfig:
    path = "spec.scaleUp"
    raw = _section(spec, "scaleUp", problems)
    if raw is None:
        return ScaleUpConfig()
    return ScaleUpConfig(new_pod_scale_up_delay=_duration(
        raw, "newPodScaleUpDelay", path, problems, DEFAULT_NEW_POD_SCALE_UP_DELAY))


def _expanders(spec: Mapping[str, Any], problems: Problems) -> tuple[str, ...]:
    raw = spec.get("expanders")
    if not raw:
        return DEFAULT_EXPANDERS
    names: list[str] = []
    for name in raw:
        if name not in EXPANDERS:
            problems.add("spec.expanders", f"unknown expander {name!r}; "
                         f"use one of {', '.join(EXPANDERS)}")
        elif name in names:
            problems.add("spec.expanders", f"{name} is listed twice; list each expander once")
        else:
            names.append(name)
    return tuple(names) or DEFAULT_EXPANDERS


def parse_cluster_autoscaler(obj: Mapping[str, Any]) -> AutoscalerConfig:
    """A ClusterAutoscaler object (dict) -> its config; raises ConfigError listing every problem."""
    name = str((obj.get("metadata") or {}).get("name") or "")
    spec = obj.get("spec") or {}
    problems = Problems()
    if name != ONLY_NAME:
        problems.add("metadata.name", f"only a ClusterAutoscaler named {ONLY_NAME!r} is used; "
                     f"rename {name!r} to {ONLY_NAME!r}")
    provision = spec.get("maxNodeProvisionTime")
    config = AutoscalerConfig(
        pod_priority_threshold=_int(spec, "podPriorityThreshold", "spec", problems,
                                    DEFAULT_POD_PRIORITY_THRESHOLD) or 0,
        max_pod_grace_period=_int(spec, "maxPodGracePeriod", "spec", problems,
                                  DEFAULT_MAX_POD_GRACE_PERIOD, minimum=0) or 0,
        max_node_provision_time=_duration(spec, "maxNodeProvisionTime", "spec", problems,
                                          DEFAULT_MAX_NODE_PROVISION_TIME)
        if provision else DEFAULT_MAX_NODE_PROVISION_TIME,
        limits=_limits(spec, problems),
        scale_down=_scale_down(spec, problems),
        scale_up=_scale_up(spec, problems),
        expanders=_expanders(spec, problems),
        balance_similar_node_groups=_bool(spec, "balanceSimilarNodeGroups", "spec", problems,
                                          False),
        balancing_ignored_labels=tuple(str(x) for x in spec.get("balancingIgnoredLabels") or ()),
        ignore_daemonsets_utilization=_bool(spec, "ignoreDaemonsetsUtilization", "spec", problems,
                                            False),
        skip_nodes_with_local_storage=_bool(spec, "skipNodesWithLocalStorage", "spec", problems,
                                            True),
        enforce_node_group_min_size=_mode(spec, "enforceNodeGroupMinSize", "spec", problems,
                                          False),
        startup_taints=_strings(spec, "startupTaints", "spec", problems),
        log_verbosity=_int(spec, "logVerbosity", "spec", problems, DEFAULT_LOG_VERBOSITY,
                           minimum=0) or 0,
    )
    if problems:
        raise ConfigError(name, problems)
    return config

