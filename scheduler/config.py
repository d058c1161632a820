"""``kubescheduler.config.k8s.io/v1`` KubeSchedulerConfiguration -> profiles, as kube-scheduler
1.35 reads it.

A file is decoded strictly (an unknown field is an error, as upstream's strict decoding),
defaulted as ``pkg/scheduler/apis/config/v1/defaults.go`` does and validated as
``pkg/scheduler/apis/config/validation`` does; every problem is reported at once, each as
``<field path>: <what is wrong>`` in upstream's words (``field.Invalid``'s ``Invalid value:``,
``field.NotSupported``'s ``Unsupported value:``...).

Plugins: each profile's ``plugins`` is merged with the default profile's (default_plugins.go,
mergePluginSet: ``disabled`` removes defaults, ``"*"`` all of them; an enabled plugin that is
also a default replaces it in place; the others are appended), then MultiPoint is expanded to
every extension point a plugin implements, unless disabled there; a plugin enabled at a
specific point too takes that entry (its weight) and runs first (runtime/framework.go,
expandMultiPointPlugins). The result is a :class:`~berthmaster.scheduler.policy.Policy`: the
filter plugins become predicates, in that order (the FailedScheduling counts follow it), the
score plugins priorities with their weights (a weight of 0 is 1); PostFilter decides whether
the profile preempts.

With no file at all, :func:`default_profile` is the result of an empty configuration: the
1.35 default profile, under berthmaster's own schedulerName.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from berthmaster.foundation.documents import safe_load
from berthmaster.foundation.durations import parse_go_duration
from berthmaster.foundation.errors import PolicyError
from berthmaster.foundation.problems import Problems
from berthmaster.scheduler.framework import ArgErrors, PluginKind
from berthmaster.scheduler.model import NodeSelector, NodeSelectorTerm, node_selector_term
from berthmaster.scheduler.plugins import (
    coscheduling,
    csi_volume_limits,
    image_locality,
    inter_pod_affinity,
    node_affinity,
    node_name,
    node_ports,
    node_resources_fit,
    node_unschedulable,
    out_of_tree,
    pod_topology_spread,
    resource_allocation,
    taint_toleration,
    volume_binding,
    volume_restrictions,
    volume_zone,
)
from berthmaster.scheduler.plugins.base import Predicate, Priority
from berthmaster.scheduler.policy import Extension, Policy, load_policy

API_VERSION = "kubescheduler.config.k8s.io/v1"
KIND = "KubeSchedulerConfiguration"
DEFAULT_SCHEDULER_NAME = "berthmaster"

# Extension points, as a profile's ``plugins`` names them, and the Go interface names
# upstream's errors use.
POINTS = {
    "preEnqueue": "PreEnqueuePlugin", "queueSort": "QueueSortPlugin",
    "preFilter": "PreFilterPlugin", "filter": "FilterPlugin", "postFilter": "PostFilterPlugin",
    "preScore": "PreScorePlugin", "score": "ScorePlugin", "reserve": "ReservePlugin",
    "permit": "PermitPlugin", "preBind": "PreBindPlugin", "bind": "BindPlugin",
    "postBind": "PostBindPlugin",
}


def _points(*names: str) -> frozenset[str]:
    return frozenset(names)


# The in-tree plugins berthmaster has (pkg/scheduler/framework/plugins/registry.go), with the
# extension points each implements in 1.35.
PLUGINS: dict[str, PluginKind] = {
    "SchedulingGates": PluginKind(_points("preEnqueue")),
    "PrioritySort": PluginKind(_points("queueSort")),
    "NodeUnschedulable": PluginKind(_points("filter"), node_unschedulable.NodeUnschedulable),
    "NodeName": PluginKind(_points("filter"), node_name.NodeName),
    "TaintToleration": PluginKind(_points("filter", "preScore", "score"),
                                  taint_toleration.TaintToleration,
                                  taint_toleration.TaintTolerationPriority),
    "NodeAffinity": PluginKind(_points("preFilter", "filter", "preScore", "score"),
                               node_affinity.NodeAffinity, node_affinity.NodeAffinityPriority),
    "NodePorts": PluginKind(_points("preFilter", "filter"), node_ports.NodePorts),
    "NodeResourcesFit": PluginKind(_points("preFilter", "filter", "preScore", "score"),
                                   node_resources_fit.NodeResourcesFit,
                                   resource_allocation.NodeResourcesFitScore),
    "VolumeRestrictions": PluginKind(_points("preFilter", "filter"),
                                     volume_restrictions.VolumeRestrictions),
    "NodeVolumeLimits": PluginKind(_points("preFilter", "filter"), csi_volume_limits.CSILimits),
    "VolumeBinding": PluginKind(_points("preFilter", "filter", "reserve", "preBind"),
                                volume_binding.VolumeBinding),
    "VolumeZone": PluginKind(_points("preFilter", "filter"), volume_zone.VolumeZone),
    "PodTopologySpread": PluginKind(_points("preFilter", "filter", "preScore", "score"),
                                    pod_topology_spread.PodTopologySpread,
                                    pod_topology_spread.PodTopologySpreadPriority),
    "InterPodAffinity": PluginKind(_points("preFilter", "filter", "preScore", "score"),
                                   inter_pod_affinity.InterPodAffinity,
                                   inter_pod_affinity.InterPodAffinityPriority),
    "DefaultPreemption": PluginKind(_points("postFilter")),
    "NodeResourcesBalancedAllocation": PluginKind(_points("preScore", "score"), None,
                                                  resource_allocation.BalancedAllocation),
    "ImageLocality": PluginKind(_points("score"), None, image_locality.ImageLocality),
    "DefaultBinder": PluginKind(_points("bind")),
    # not in the default profile (upstream's has it not either); enabled by configuration
    "Coscheduling": coscheduling.PLUGIN,
}

# apis/config/v1/default_plugins.go, getDefaultPlugins: the MultiPoint set, its order and
# weights (DynamicResources, which 1.35 adds before DefaultPreemption, is not in berthmaster:
# see docs/scheduler.md).
DEFAULT_PLUGINS: tuple[tuple[str, int], ...] = (
    ("SchedulingGates", 0), ("PrioritySort", 0), ("NodeUnschedulable", 0), ("NodeName", 0),
    ("TaintToleration", 3), ("NodeAffinity", 2), ("NodePorts", 0), ("NodeResourcesFit", 1),
    ("VolumeRestrictions", 0), ("NodeVolumeLimits", 0), ("VolumeBinding", 0),
    ("VolumeZone", 0), ("PodTopologySpread", 2), ("InterPodAffinity", 2),
    ("DefaultPreemption", 0), ("NodeResourcesBalancedAllocation", 1), ("ImageLocality", 1),
    ("DefaultBinder", 0),
)


@dataclass(frozen=True)
class LeaderElection:
    """componentbaseconfig.LeaderElectionConfiguration, defaulted as kube-scheduler's."""

    leader_elect: bool = True
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    resource_lock: str = "leases"
    resource_name: str = "berthmaster"
    resource_namespace: str = "kube-system"


@dataclass(frozen=True)
class SchedulerConfig:
    """A defaulted, validated KubeSchedulerConfiguration."""

    profiles: tuple[Policy, ...]
    percentage_of_nodes_to_score: int = 0
    pod_initial_backoff_seconds: int = 1
    pod_max_backoff_seconds: int = 10
    leader_election: LeaderElection = field(default_factory=LeaderElection)
    qps: float = 50.0
    burst: int = 100
    source: str = "<config>"

    @property
    def scheduler_names(self) -> tuple[str, ...]:
        return tuple(p.scheduler_name for p in self.profiles)


class _Problems(Problems):
    """Problems in upstream's field-error words (apimachinery pkg/util/validation/field
    errors.go ``ErrorType.String``, and the strict decoder's ``unknown field``)."""

    def invalid(self, path: str, value: Any, detail: str) -> None:
        self.add(path, f"Invalid value: {_go_value(value)}: {detail}")

    def required(self, path: str, detail: str = "") -> None:
        self.add(path, "Required value" + (f": {detail}" if detail else ""))

    def duplicate(self, path: str, value: Any) -> None:
        self.add(path, f"Duplicate value: {_go_value(value)}")

    def unsupported(self, path: str, value: Any, supported: Sequence[str]) -> None:
        allowed = ", ".join(f'"{s}"' for s in supported)
        self.add(path, f"Unsupported value: {_go_value(value)}: supported values: {allowed}")

    def forbidden(self, path: str, detail: str) -> None:
        self.add(path, f"Forbidden: {detail}")

    def unknown(self, path: str, name: str, known: Sequence[str]) -> None:
        self.add(path, f'strict decoding error: unknown field "{name}"; known fields: '
                       f"{', '.join(known)}")

    def type_error(self, path: str, value: Any, wanted: str) -> None:
        self.add(path, f"Invalid value: {_go_value(value)}: must be {wanted}")


def _go_value(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def _fields(doc: Mapping[str, Any], path: str, known: Sequence[str], problems: _Problems
            ) -> None:
    for name in doc:
        if name not in known:
            problems.unknown(f"{path}.{name}" if path else str(name), str(name), known)


def _object(value: Any, path: str, problems: _Problems) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        problems.type_error(path, value, "an object")
        return {}
    return value


def _list(value: Any, path: str, problems: _Problems) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        problems.type_error(path, value, "a list")
        return []
    return value


def _typed(value: Any, path: str, problems: _Problems, default: Any,
           accepts: Callable[[Any], bool], wanted: str) -> Any:
    """``value`` when it is of the kind ``accepts`` takes, the default when absent; anything
    else is reported (as ``wanted``) and read as the default."""
    if value is None:
        return default
    if not accepts(value):
        problems.type_error(path, value, wanted)
        return default
    return value


def _int(value: Any, path: str, problems: _Problems, default: int) -> int:
    return int(_typed(value, path, problems, default,
                      lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"))


def _number(value: Any, path: str, problems: _Problems, default: float) -> float:
    return float(_typed(value, path, problems, default,
                        lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
                        "a number"))


def _bool(value: Any, path: str, problems: _Problems, default: bool) -> bool:
    return bool(_typed(value, path, problems, default, lambda v: isinstance(v, bool),
                       "true or false"))


def _duration(value: Any, path: str, problems: _Problems, default: float) -> float:
    if value is None:
        return default
    if not isinstance(value, str):
        problems.type_error(path, value, 'a duration such as "15s"')
        return default
    try:
        return parse_go_duration(value)
    except ValueError as error:
        problems.invalid(path, value, str(error))
        return default


# ---------------------------------------------------------------------------- plugins
class _Known:
    """The plugins one load may name: the in-tree ones, then, for a name berthmaster does not
    have, the one an installed package provides (:mod:`.plugins.out_of_tree`), each looked up
    once per load."""

    def __init__(self) -> None:
        self.found: dict[str, PluginKind | None] = dict(PLUGINS)
        self.out_of_tree: set[str] = set()
        self.failed: dict[str, str] = {}

    def get(self, name: str) -> PluginKind | None:
        if name not in self.found:
            try:
                kind = out_of_tree.find(name)
            except out_of_tree.PluginLoadError as error:
                self.failed[name] = str(error)
                kind = None
            self.found[name] = kind
            if kind is not None:
                self.out_of_tree.add(name)
        return self.found[name]

    def __getitem__(self, name: str) -> PluginKind:
        kind = self.get(name)
        assert kind is not None, name
        return kind

    def unknown(self, name: str) -> str:
        """Why ``name`` is not a plugin: its package failed to load, or nothing provides it."""
        if name in self.failed:
            return f"the package providing plugin {name!r} failed: {self.failed[name]}"
        return (f"no such plugin in berthmaster; its plugins are: {', '.join(sorted(PLUGINS))}; "
                f"and none in the {out_of_tree.where_looked()}: install the package that "
                "provides it (docs/plugins.md)")


@dataclass
class _PluginSet:
    enabled: list[tuple[str, int]]
    disabled: list[str]


def _named(raw: Any, path: str, problems: _Problems, fields: Sequence[str]
           ) -> Iterator[tuple[str, str, Mapping[str, Any]]]:
    """(where, name, entry) for each entry of the list ``raw`` whose fields are ``fields``
    and whose ``name`` is set (the others are reported)."""
    for i, entry in enumerate(_list(raw, path, problems)):
        where = f"{path}[{i}]"
        entry = _object(entry, where, problems)
        _fields(entry, where, fields, problems)
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            problems.required(f"{where}.name")
            continue
        yield where, name, entry


def _plugin_set(raw: Any, path: str, problems: _Problems, known: _Known) -> _PluginSet:
    doc = _object(raw, path, problems)
    _fields(doc, path, ("enabled", "disabled"), problems)
    enabled: list[tuple[str, int]] = []
    for where, name, entry in _named(doc.get("enabled"), f"{path}.enabled", problems,
                                     ("name", "weight")):
        weight = _int(entry.get("weight"), f"{where}.weight", problems, 0)
        if weight < 0:
            problems.invalid(f"{where}.weight", weight, "must not be negative")
        if name != "*" and known.get(name) is None:
            problems.invalid(f"{where}.name", name, known.unknown(name))
            continue
        enabled.append((name, weight))
    disabled = [name for _, name, _ in _named(doc.get("disabled"), f"{path}.disabled",
                                              problems, ("name", "weight"))]
    return _PluginSet(enabled, disabled)


def merge_plugin_set(default: Sequence[tuple[str, int]], custom: _PluginSet
                     ) -> tuple[list[tuple[str, int]], set[str]]:
    """default_plugins.go, mergePluginSet: the enabled list and the disabled names."""
    disabled = set(custom.disabled)
    custom_by_name = {name: (i, (name, w)) for i, (name, w) in enumerate(custom.enabled)}
    replaced: set[int] = set()
    out: list[tuple[str, int]] = []
    if "*" not in disabled:
        for name, weight in default:
            if name in disabled:
                continue
            entry: tuple[str, int] = (name, weight)
            if name in custom_by_name:
                index, entry = custom_by_name[name]
                replaced.add(index)
            out.append(entry)
    out.extend(e for i, e in enumerate(custom.enabled) if i not in replaced)
    return out, disabled


def expand(multipoint: Sequence[tuple[str, int]], point: str,
           specific: Sequence[tuple[str, int]], disabled: set[str], path: str,
           problems: _Problems, known: Mapping[str, PluginKind] | _Known = PLUGINS
           ) -> list[tuple[str, int]]:
    """runtime/framework.go, expandMultiPointPlugins, for one extension point: the plugins
    that run there in order, with their weights."""
    interface = POINTS[point]
    for i, (name, _) in enumerate(specific):
        if point not in known[name].points:
            problems.invalid(f"{path}.{point}.enabled[{i}].name", name,
                             f"plugin {name!r} does not extend {interface}")
    enabled_here = {name for name, _ in specific}
    overrides: list[str] = []
    from_multipoint: list[tuple[str, int]] = []
    if "*" not in disabled:
        for name, weight in multipoint:
            if point not in known[name].points or name in disabled:
                continue
            if name in enabled_here:
                overrides.append(name)
                continue
            if any(n == name for n, _ in from_multipoint):
                problems.invalid(f"{path}.multiPoint", name,
                                 f"plugin {name!r} already registered as {interface!r}")
                continue
            from_multipoint.append((name, weight))
    specific_by_name = dict(specific)
    ordered = [(name, specific_by_name[name]) for name in overrides]
    ordered.extend(from_multipoint)
    ordered.extend((n, w) for n, w in specific if n not in overrides)
    return ordered


# ---------------------------------------------------------------------------- plugin args
@dataclass
class _Args:
    """Every profile's plugin arguments, defaulted (apis/config/v1/defaults.go)."""

    fit_strategy: str = resource_allocation.LEAST_ALLOCATED
    fit_resources: tuple[tuple[str, int], ...] = resource_allocation.DEFAULT_RESOURCES
    fit_shape: tuple[tuple[int, int], ...] = ()
    balanced_resources: tuple[tuple[str, int], ...] = resource_allocation.DEFAULT_RESOURCES
    spread_defaulting: str = "System"
    spread_defaults: tuple[Any, ...] = ()
    hard_pod_affinity_weight: int = 1
    ignore_preferred_terms_of_existing_pods: bool = False
    min_candidate_nodes_percentage: int = 10
    min_candidate_nodes_absolute: int = 100
    bind_timeout_seconds: int = 600
    added_required: NodeSelector | None = None
    added_preferred: tuple[tuple[int, NodeSelectorTerm], ...] = ()
    # out-of-tree plugins' arguments, parsed by their own parsers (framework.ArgsParser)
    out_of_tree: dict[str, dict[str, Any]] = field(default_factory=dict)


def _resources(raw: Any, path: str, problems: _Problems, balanced: bool
               ) -> tuple[tuple[str, int], ...] | None:
    """A ``resources`` list, defaulted as apis/config/v1/defaults.go
    (SetDefaults_NodeResourcesFitArgs, SetDefaults_NodeResourcesBalancedAllocationArgs): none
    or an empty list is cpu and memory, weight 1; a weight left out or 0 is 1. Then validated
    as apis/config/validation/validation_pluginargs.go (validateResources,
    ValidateNodeResourcesBalancedAllocationArgs)."""
    items = _list(raw, path, problems)
    if not items:
        return None
    out: list[tuple[str, int]] = []
    seen: set[str] = set()
    for where, name, entry in _named(items, path, problems, ("name", "weight")):
        weight = _int(entry.get("weight"), f"{where}.weight", problems, 0) or 1
        if balanced:
            if name in seen:
                problems.duplicate(f"{where}.name", name)
            if weight != 1:
                problems.invalid(f"{where}.weight", weight, "must be 1")
        elif not 0 < weight <= 100:
            problems.invalid(f"{where}.weight", weight, "resource weight of "
                             f"{name} not in valid range (0, 100]")
        seen.add(name)
        out.append((name, weight))
    return tuple(out)


def _fit_args(doc: Mapping[str, Any], path: str, args: _Args, problems: _Problems) -> None:
    _fields(doc, path, ("ignoredResources", "ignoredResourceGroups", "scoringStrategy"),
            problems)
    for name in ("ignoredResources", "ignoredResourceGroups"):
        if doc.get(name):
            problems.forbidden(f"{path}.{name}", "not supported by berthmaster yet; remove it")
    strategy = _object(doc.get("scoringStrategy"), f"{path}.scoringStrategy", problems)
    spath = f"{path}.scoringStrategy"
    _fields(strategy, spath, ("type", "resources", "requestedToCapacityRatio"), problems)
    # defaults.go defaults a missing scoringStrategy, not a missing type within one
    kind = strategy.get("type", "") if "scoringStrategy" in doc \
        else resource_allocation.LEAST_ALLOCATED
    if kind not in resource_allocation.STRATEGIES:  # reported with the resources' problems
        problems.unsupported(f"{spath}.type", kind, resource_allocation.STRATEGIES)
    else:
        args.fit_strategy = kind
    resources = _resources(strategy.get("resources"), f"{spath}.resources", problems, False)
    if resources is not None:
        args.fit_resources = resources
    if kind != resource_allocation.REQUESTED_TO_CAPACITY_RATIO \
            and strategy.get("requestedToCapacityRatio") is None:
        return
    ratio = _object(strategy.get("requestedToCapacityRatio"),
                    f"{spath}.requestedToCapacityRatio", problems)
    rpath = f"{spath}.requestedToCapacityRatio"
    _fields(ratio, rpath, ("shape",), problems)
    shape: list[tuple[int, int]] = []
    points = _list(ratio.get("shape"), f"{rpath}.shape", problems)
    # validation_pluginargs.go names the points under scoringStrategy.shape
    if not points:
        problems.required(f"{spath}.shape", "at least one point must be specified")
    for i, point in enumerate(points):
        where = f"{spath}.shape[{i}]"
        point = _object(point, where, problems)
        _fields(point, where, ("utilization", "score"), problems)
        u = _int(point.get("utilization"), f"{where}.utilization", problems, 0)
        s = _int(point.get("score"), f"{where}.score", problems, 0)
        if shape and u <= shape[-1][0]:
            problems.invalid(f"{where}.utilization", u, "values must be sorted in increasing "
                             "order")
        if not 0 <= u <= 100:
            problems.invalid(f"{where}.utilization", u, "not in valid range [0, 100]")
        if not 0 <= s <= resource_allocation.MAX_CUSTOM_PRIORITY_SCORE:
            problems.invalid(f"{where}.score", s, "not in valid range [0, 10]")
        shape.append((u, s))
    args.fit_shape = tuple(shape)


def _balanced_args(doc: Mapping[str, Any], path: str, args: _Args, problems: _Problems
                   ) -> None:
    _fields(doc, path, ("resources",), problems)
    resources = _resources(doc.get("resources"), f"{path}.resources", problems, True)
    if resources is not None:
        args.balanced_resources = resources


def _spread_args(doc: Mapping[str, Any], path: str, args: _Args, problems: _Problems) -> None:
    _fields(doc, path, ("defaultConstraints", "defaultingType"), problems)
    kind = doc.get("defaultingType", "System")
    if kind not in ("System", "List"):
        problems.unsupported(f"{path}.defaultingType", kind, ("List", "System"))
        return
    constraints = _list(doc.get("defaultConstraints"), f"{path}.defaultConstraints", problems)
    if kind == "System" and constraints:
        problems.invalid(f"{path}.defaultingType", kind, "when .defaultConstraints are not "
                         "empty")
        return
    seen: set[tuple[str, str]] = set()
    for i, c in enumerate(constraints):
        where = f"{path}.defaultConstraints[{i}]"
        c = _object(c, where, problems)
        _fields(c, where, ("maxSkew", "topologyKey", "whenUnsatisfiable", "minDomains",
                           "nodeAffinityPolicy", "nodeTaintsPolicy", "matchLabelKeys",
                           "labelSelector"), problems)
        skew = _int(c.get("maxSkew"), f"{where}.maxSkew", problems, 0)
        if skew <= 0:
            problems.invalid(f"{where}.maxSkew", skew, "not in valid range (0, inf)")
        key = c.get("topologyKey")
        if not key:
            problems.required(f"{where}.topologyKey", "can not be empty")
        action = c.get("whenUnsatisfiable")
        if not action:
            problems.required(f"{where}.whenUnsatisfiable", "can not be empty")
        elif action not in ("DoNotSchedule", "ScheduleAnyway"):
            problems.unsupported(f"{where}.whenUnsatisfiable", action,
                                 ("DoNotSchedule", "ScheduleAnyway"))
        if c.get("labelSelector") is not None:
            problems.forbidden(f"{where}.labelSelector", "constraint must not define a "
                               "selector, as they deduced for each pod")
        pair = (str(key), str(action))
        if pair in seen:
            problems.duplicate(f"{path}.defaultConstraints[{i}]", f"{{{key}, {action}}}")
        seen.add(pair)
    args.spread_defaulting = kind
    args.spread_defaults = tuple(constraints)


def _affinity_args(doc: Mapping[str, Any], path: str, args: _Args, problems: _Problems
                   ) -> None:
    _fields(doc, path, ("hardPodAffinityWeight", "ignorePreferredTermsOfExistingPods"),
            problems)
    weight = _int(doc.get("hardPodAffinityWeight"), f"{path}.hardPodAffinityWeight", problems,
                  1)
    if not 0 <= weight <= 100:
        problems.invalid(f"{path}.hardPodAffinityWeight", weight, "not in valid range [0, 100]")
    args.hard_pod_affinity_weight = weight
    args.ignore_preferred_terms_of_existing_pods = _bool(
        doc.get("ignorePreferredTermsOfExistingPods"),
        f"{path}.ignorePreferredTermsOfExistingPods", problems, False)


def _node_affinity_args(doc: Mapping[str, Any], path: str, args: _Args, problems: _Problems
                        ) -> None:
    """NodeAffinityArgs.addedAffinity: required terms every pod must match too, preferred
    terms scored beside the pod's own (nodeaffinity/node_affinity.go)."""
    _fields(doc, path, ("addedAffinity",), problems)
    apath = f"{path}.addedAffinity"
    added = _object(doc.get("addedAffinity"), apath, problems)
    _fields(added, apath, ("requiredDuringSchedulingIgnoredDuringExecution",
                           "preferredDuringSchedulingIgnoredDuringExecution"), problems)
    rpath = f"{apath}.requiredDuringSchedulingIgnoredDuringExecution"
    required = added.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is not None:
        tpath = f"{rpath}.nodeSelectorTerms"
        terms = _list(_object(required, rpath, problems).get("nodeSelectorTerms"), tpath,
                      problems)
        if not terms:  # core validation, ValidateNodeSelector: at least one term
            problems.required(tpath, "must have at least one node selector term")
        args.added_required = NodeSelector(tuple(
            node_selector_term(_object(t, f"{tpath}[{i}]", problems))
            for i, t in enumerate(terms)))
    preferred: list[tuple[int, NodeSelectorTerm]] = []
    ppath = f"{apath}.preferredDuringSchedulingIgnoredDuringExecution"
    for i, entry in enumerate(_list(added.get(
            "preferredDuringSchedulingIgnoredDuringExecution"), ppath, problems)):
        entry = _object(entry, f"{ppath}[{i}]", problems)
        weight = _int(entry.get("weight"), f"{ppath}[{i}].weight", problems, 0)
        if not 1 <= weight <= 100:
            problems.invalid(f"{ppath}[{i}].weight", weight, "must be in the range 1-100")
        preferred.append((weight, node_selector_term(
            _object(entry.get("preference"), f"{ppath}[{i}].preference", problems))))
    args.added_preferred = tuple(preferred)


def _preemption_args(doc: Mapping[str, Any], path: str, args: _Args, problems: _Problems
                     ) -> None:
    _fields(doc, path, ("minCandidateNodesPercentage", "minCandidateNodesAbsolute"), problems)
    pct = _int(doc.get("minCandidateNodesPercentage"), f"{path}.minCandidateNodesPercentage",
               problems, 10)
    absolute = _int(doc.get("minCandidateNodesAbsolute"), f"{path}.minCandidateNodesAbsolute",
                    problems, 100)
    if not 0 <= pct <= 100:
        problems.invalid(f"{path}.minCandidateNodesPercentage", pct,
                         "not in valid range [0, 100]")
    if absolute < 0:
        problems.invalid(f"{path}.minCandidateNodesAbsolute", absolute,
                         "not in valid range [0, inf)")
    if pct == 0 and absolute == 0:
        problems.invalid(f"{path}.minCandidateNodesPercentage", pct,
                         "cannot be zero at the same time as minCandidateNodesAbsolute")
        problems.invalid(f"{path}.minCandidateNodesAbsolute", absolute,
                         "cannot be zero at the same time as minCandidateNodesPercentage")
    args.min_candidate_nodes_percentage, args.min_candidate_nodes_absolute = pct, absolute


def _volume_binding_args(doc: Mapping[str, Any], path: str, args: _Args, problems: _Problems
                         ) -> None:
    _fields(doc, path, ("bindTimeoutSeconds", "shape"), problems)
    timeout = _int(doc.get("bindTimeoutSeconds"), f"{path}.bindTimeoutSeconds", problems, 600)
    if timeout < 0:
        problems.invalid(f"{path}.bindTimeoutSeconds", timeout,
                         "invalid BindTimeoutSeconds, should not be a negative value")
    shape = doc.get("shape")
    if shape is not None:
        # validation_pluginargs.go, ValidateVolumeBindingArgsWithOptions: the gate
        # StorageCapacityScoring is alpha and off in 1.35, so any shape is refused; the value
        # is printed as the internal type marshals (field names without JSON tags)
        if isinstance(shape, list):
            shape = [{"Utilization": p.get("utilization", 0), "Score": p.get("score", 0)}
                     if isinstance(p, Mapping) else p for p in shape]
        problems.invalid(f"{path}.shape", shape, "unexpected field `shape`, remove "
                         "it or turn on the feature gate StorageCapacityScoring")
    args.bind_timeout_seconds = timeout


_ARGS: dict[str, tuple[str, Callable[[Mapping[str, Any], str, _Args, _Problems], None]]] = {
    "NodeResourcesFit": ("NodeResourcesFitArgs", _fit_args),
    "NodeResourcesBalancedAllocation": ("NodeResourcesBalancedAllocationArgs",
                                        _balanced_args),
    "PodTopologySpread": ("PodTopologySpreadArgs", _spread_args),
    "InterPodAffinity": ("InterPodAffinityArgs", _affinity_args),
    "NodeAffinity": ("NodeAffinityArgs", _node_affinity_args),
    "DefaultPreemption": ("DefaultPreemptionArgs", _preemption_args),
    "VolumeBinding": ("VolumeBindingArgs", _volume_binding_args),
}


def _plugin_args(raw: Any, path: str, problems: _Problems, known: _Known) -> _Args:
    args = _Args()
    seen: set[str] = set()
    for where, name, entry in _named(raw, path, problems, ("name", "args")):
        if name in seen:
            problems.duplicate(where, name)
        seen.add(name)
        plugin = known.get(name)
        if plugin is not None and plugin.args is not None:
            body = dict(_object(entry.get("args"), f"{where}.args", problems))
            body.pop("apiVersion", None)
            body.pop("kind", None)
            args.out_of_tree[name] = _out_of_tree_args(plugin, body, f"{where}.args", problems)
            continue
        if name not in _ARGS:
            detail = "has no arguments" if plugin is not None else known.unknown(name)
            problems.invalid(f"{where}.name", name, detail)
            continue
        kind, parse = _ARGS[name]
        body = dict(_object(entry.get("args"), f"{where}.args", problems))
        for meta in ("apiVersion", "kind"):
            value = body.pop(meta, None)
            if meta == "kind" and value is not None and value != kind:
                problems.invalid(f"{where}.args", value, "has to match plugin args")
            if meta == "apiVersion" and value is not None and value != API_VERSION:
                problems.invalid(f"{where}.args.apiVersion", value, f"must be {API_VERSION}")
        parse(body, f"{where}.args", args, problems)
    return args


def _out_of_tree_args(plugin: PluginKind, body: dict[str, Any], path: str,
                      problems: _Problems) -> dict[str, Any]:
    """An out-of-tree plugin's arguments through its own parser, whose problems are reported
    under ``path`` in the loader's words; a parser that raises is reported as such."""
    assert plugin.args is not None
    errors = ArgErrors()
    try:
        parsed = plugin.args(body, errors)
    except Exception as error:  # the plugin's code: report, do not crash the loader
        problems.invalid(path, body, f"the plugin's argument parser failed: "
                         f"{type(error).__name__}: {error}")
        return {}
    for what, where, value, detail in errors.items:
        at = f"{path}.{where}" if where else path
        if what == "required":
            problems.required(at, detail)
        elif what == "unknown":
            problems.unknown(at, where.rsplit(".", 1)[-1], value)
        else:
            problems.invalid(at, value, detail)
    return parsed


# ---------------------------------------------------------------------------- profiles
def _build_profile(name: str, percentage: int | None, filters: Sequence[tuple[str, int]],
                   scores: Sequence[tuple[str, int]], post_filters: Sequence[tuple[str, int]],
                   args: _Args, source: str, known: _Known,
                   built: Mapping[str, tuple[Predicate | None, Priority | None]],
                   extensions: tuple[Extension, ...] = (),
                   point_order: tuple[tuple[str, tuple[str, ...]], ...] = ()) -> Policy:
    predicates: list[Predicate] = []
    for plugin, _ in filters:
        if plugin in known.out_of_tree:
            predicate = built[plugin][0] if plugin in built else None
            if predicate is not None:
                predicates.append(predicate)
            continue
        cls = PLUGINS[plugin].predicate
        if cls is pod_topology_spread.PodTopologySpread:
            predicates.append(pod_topology_spread.PodTopologySpread(
                name=plugin, default_constraints=pod_topology_spread.default_constraints(
                    args.spread_defaulting, args.spread_defaults)))
        elif cls is node_affinity.NodeAffinity:
            predicates.append(node_affinity.NodeAffinity(name=plugin, added=args.added_required))
        elif cls is not None:
            predicates.append(cls(name=plugin))
    priorities: list[Priority] = []
    for plugin, weight in scores:
        if plugin in known.out_of_tree:
            priority = built[plugin][1] if plugin in built else None
            if priority is not None:
                priority.weight = weight or 1
                priorities.append(priority)
            continue
        pcls = PLUGINS[plugin].priority
        if pcls is None:
            continue
        kwargs: dict[str, Any] = {"name": plugin, "weight": weight or 1}
        if pcls is resource_allocation.NodeResourcesFitScore:
            kwargs.update(strategy=args.fit_strategy, resources=args.fit_resources,
                          shape=args.fit_shape)
        elif pcls is resource_allocation.BalancedAllocation:
            kwargs["resources"] = args.balanced_resources
        elif pcls is node_affinity.NodeAffinityPriority:
            kwargs["added_preferred"] = args.added_preferred
        elif pcls is inter_pod_affinity.InterPodAffinityPriority:
            kwargs.update(hard_pod_affinity_weight=args.hard_pod_affinity_weight,
                          ignore_preferred_terms_of_existing_pods=(
                              args.ignore_preferred_terms_of_existing_pods))
        elif pcls is pod_topology_spread.PodTopologySpreadPriority:
            kwargs["default_constraints"] = pod_topology_spread.default_constraints(
                args.spread_defaulting, args.spread_defaults)
            kwargs["system_defaulted"] = args.spread_defaulting == "System"
        priorities.append(pcls(**kwargs))
    return Policy(tuple(predicates), tuple(priorities), source,
                  hard_pod_affinity_weight=args.hard_pod_affinity_weight,
                  scheduler_name=name, percentage_of_nodes_to_score=percentage,
                  preemption=any(p == "DefaultPreemption" for p, _ in post_filters),
                  min_candidate_nodes_percentage=args.min_candidate_nodes_percentage,
                  min_candidate_nodes_absolute=args.min_candidate_nodes_absolute,
                  bind_timeout_seconds=args.bind_timeout_seconds,
                  extensions=extensions, point_order=point_order,
                  watches=tuple(w for ext in extensions if ext.lifecycle is not None
                                for w in known[ext.name].watches))


# the points a Lifecycle serves, in the order a cycle reaches them
LIFECYCLE_POINTS = ("queueSort", "postFilter", "reserve", "permit", "preBind", "bind",
                    "postBind")
# the in-tree plugins whose Reserve/PreBind/Bind the daemon runs itself (no Lifecycle class)
_DAEMON_EXTENSIONS = ("VolumeBinding", "DefaultBinder")


def _extensions(by_point: Mapping[str, Sequence[tuple[str, int]]], args: _Args,
                known: _Known) -> tuple[Extension, ...]:
    """The profile's plugins at the points after filtering and scoring, each with the points
    it is enabled at (each point's order is the profile's: ``Policy.point_order``)."""
    points: dict[str, set[str]] = {}
    for point in LIFECYCLE_POINTS:
        for name, _ in by_point.get(point, ()):
            kind = known.get(name)
            if kind is None or (kind.lifecycle is None and name not in _DAEMON_EXTENSIONS):
                continue
            points.setdefault(name, set()).add(point)
    return tuple(Extension(name, frozenset(at), known[name].lifecycle,
                           args.out_of_tree.get(name)) for name, at in points.items())


_PROFILE_FIELDS = ("schedulerName", "percentageOfNodesToScore", "plugins", "pluginConfig")


def _profile(raw: Any, path: str, default_name: str, problems: _Problems,
             source: str) -> Policy | None:
    known = _Known()
    doc = _object(raw, path, problems)
    _fields(doc, path, _PROFILE_FIELDS, problems)
    name = doc.get("schedulerName", default_name)
    if not isinstance(name, str) or not name:
        problems.required(f"{path}.schedulerName")
        return None
    percentage = doc.get("percentageOfNodesToScore")
    if percentage is not None:
        percentage = _int(percentage, f"{path}.percentageOfNodesToScore", problems, 0)
        if not 0 <= percentage <= 100:
            problems.invalid(f"{path}.percentageOfNodesToScore", percentage,
                             "not in valid range [0-100]")
    plugins = _object(doc.get("plugins"), f"{path}.plugins", problems)
    _fields(plugins, f"{path}.plugins", ("multiPoint", *POINTS), problems)
    custom_multi = _plugin_set(plugins.get("multiPoint"), f"{path}.plugins.multiPoint",
                               problems, known)
    multipoint, multi_disabled = merge_plugin_set(DEFAULT_PLUGINS, custom_multi)
    for i, (plugin, _) in enumerate(custom_multi.enabled):
        if plugin == "*":
            problems.invalid(f"{path}.plugins.multiPoint.enabled[{i}].name", plugin,
                             "only disabled may name \"*\"")
    multipoint = [(n, w) for n, w in multipoint if n != "*" and n not in multi_disabled]
    by_point: dict[str, list[tuple[str, int]]] = {}
    for point in POINTS:
        where = f"{path}.plugins.{point}"
        custom = _plugin_set(plugins.get(point), where, problems, known)
        specific, disabled = merge_plugin_set((), custom)
        specific = [(n, w) for n, w in specific if n != "*"]
        by_point[point] = expand(multipoint, point, specific, disabled, f"{path}.plugins",
                                 problems, known)
    sorts = by_point["queueSort"]
    if len(sorts) > 1:
        problems.invalid(f"{path}.plugins.queueSort.Enabled", len(sorts),
                         "only one queue sort plugin can be enabled")
    if not by_point["bind"]:
        problems.invalid(f"{path}.plugins.bind", "", "at least one bind plugin is needed")
    args = _plugin_args(doc.get("pluginConfig"), f"{path}.pluginConfig", problems, known)
    built: dict[str, tuple[Predicate | None, Priority | None]] = {}
    for plugin in sorted({n for n, _ in (*by_point["filter"], *by_point["score"])}
                         & known.out_of_tree):
        try:
            built[plugin] = out_of_tree.build(known[plugin], plugin, 1,
                                              args.out_of_tree.get(plugin))
        except Exception as error:  # the plugin's constructor: report it as upstream does
            problems.invalid(f"{path}.plugins", plugin, f'initializing plugin "{plugin}": '
                             f"{type(error).__name__}: {error}")
    extensions = _extensions(by_point, args, known)
    named = {ext.name for ext in extensions}
    point_order = tuple((point, tuple(n for n, _ in by_point[point] if n in named))
                        for point in LIFECYCLE_POINTS)
    return _build_profile(name, percentage, by_point["filter"], by_point["score"],
                          by_point["postFilter"], args, source, known, built, extensions,
                          point_order)


_TOP_FIELDS = ("apiVersion", "kind", "parallelism", "leaderElection", "clientConnection",
               "healthzBindAddress", "metricsBindAddress", "debuggingConfiguration",
               "percentageOfNodesToScore", "podInitialBackoffSeconds", "podMaxBackoffSeconds",
               "profiles", "extenders", "delayCacheUntilActive")
_LEADER_FIELDS = ("leaderElect", "leaseDuration", "renewDeadline", "retryPeriod",
                  "resourceLock", "resourceName", "resourceNamespace")
_CLIENT_FIELDS = ("kubeconfig", "acceptContentTypes", "contentType", "qps", "burst")


def _leader_election(raw: Any, problems: _Problems) -> LeaderElection:
    doc = _object(raw, "leaderElection", problems)
    _fields(doc, "leaderElection", _LEADER_FIELDS, problems)
    base = LeaderElection()
    lock = doc.get("resourceLock", base.resource_lock)
    if lock != "leases":
        problems.invalid("leaderElection.resourceLock", lock,
                         'resourceLock value must be "leases"')
    out = LeaderElection(
        leader_elect=_bool(doc.get("leaderElect"), "leaderElection.leaderElect", problems,
                           base.leader_elect),
        lease_duration=_duration(doc.get("leaseDuration"), "leaderElection.leaseDuration",
                                 problems, base.lease_duration),
        renew_deadline=_duration(doc.get("renewDeadline"), "leaderElection.renewDeadline",
                                 problems, base.renew_deadline),
        retry_period=_duration(doc.get("retryPeriod"), "leaderElection.retryPeriod", problems,
                               base.retry_period),
        resource_name=str(doc.get("resourceName") or base.resource_name),
        resource_namespace=str(doc.get("resourceNamespace") or base.resource_namespace))
    if out.leader_elect:
        # component-base/config/validation: ValidateLeaderElectionConfiguration
        if out.lease_duration <= 0:
            problems.invalid("leaderElection.leaseDuration", doc.get("leaseDuration"),
                             "must be greater than zero")
        if out.renew_deadline <= 0:
            problems.invalid("leaderElection.renewDeadline", doc.get("renewDeadline"),
                             "must be greater than zero")
        if out.retry_period <= 0:
            problems.invalid("leaderElection.retryPeriod", doc.get("retryPeriod"),
                             "must be greater than zero")
        if out.lease_duration <= out.renew_deadline:
            problems.invalid("leaderElection.leaseDuration", doc.get("leaseDuration"),
                             "LeaseDuration must be greater than RenewDeadline")
    return out


def load_config(text: str, source: str = "<config>",
                default_scheduler_name: str = DEFAULT_SCHEDULER_NAME) -> SchedulerConfig:
    """Decode, default and validate a KubeSchedulerConfiguration (YAML or JSON); raise
    :class:`PolicyError` listing every problem. A profile without ``schedulerName`` gets
    ``default_scheduler_name`` (berthmaster's, not upstream's ``default-scheduler``, which
    would take the cluster's own scheduler's pods)."""
    problems = _Problems()
    try:
        doc = safe_load(text) if text.strip() else {}
    except yaml.YAMLError as error:
        raise PolicyError(source, [f"not YAML or JSON: {error}"],
                          document="scheduler configuration") from None
    if doc is None:
        doc = {}
    if not isinstance(doc, Mapping):
        raise PolicyError(source, ["the file must be an object with kind: "
                                   "KubeSchedulerConfiguration"],
                          document="scheduler configuration")
    if doc.get("kind", KIND) != KIND:
        problems.invalid("kind", doc.get("kind"), f"must be {KIND}")
    if doc.get("apiVersion", API_VERSION) != API_VERSION:
        problems.invalid("apiVersion", doc.get("apiVersion"),
                         f"must be {API_VERSION} (the only version kube-scheduler 1.35 reads)")
    _fields(doc, "", _TOP_FIELDS, problems)
    if doc.get("extenders"):
        problems.forbidden("extenders", "scheduler extenders are not supported by berthmaster; "
                           "write a Python plugin instead (docs/plugins.md)")
    percentage = _int(doc.get("percentageOfNodesToScore"), "percentageOfNodesToScore",
                      problems, 0)
    if not 0 <= percentage <= 100:
        problems.invalid("percentageOfNodesToScore", percentage, "not in valid range [0-100]")
    initial = _int(doc.get("podInitialBackoffSeconds"), "podInitialBackoffSeconds", problems, 1)
    maximum = _int(doc.get("podMaxBackoffSeconds"), "podMaxBackoffSeconds", problems, 10)
    if initial <= 0:
        problems.invalid("podInitialBackoffSeconds", initial, "must be greater than 0")
    if maximum < initial:
        problems.invalid("podMaxBackoffSeconds", maximum,
                         "must be greater than or equal to PodInitialBackoffSeconds")
    parallelism = _int(doc.get("parallelism"), "parallelism", problems, 16)
    if parallelism <= 0:
        problems.invalid("parallelism", parallelism, "should be an integer value greater "
                         "than zero")
    election = _leader_election(doc.get("leaderElection"), problems)
    client = _object(doc.get("clientConnection"), "clientConnection", problems)
    _fields(client, "clientConnection", _CLIENT_FIELDS, problems)
    qps = _number(client.get("qps"), "clientConnection.qps", problems, 50.0)
    burst = _int(client.get("burst"), "clientConnection.burst", problems, 100)
    raw_profiles = _list(doc.get("profiles"), "profiles", problems) or [{}]
    profiles: list[Policy] = []
    names: dict[str, int] = {}
    for i, raw in enumerate(raw_profiles):
        profile = _profile(raw, f"profiles[{i}]", default_scheduler_name, problems, source)
        if profile is None:
            continue
        if profile.scheduler_name in names:
            problems.duplicate(f"profiles[{i}].schedulerName",
                               f"profiles[{names[profile.scheduler_name]}].schedulerName")
        names.setdefault(profile.scheduler_name, i)
        profiles.append(profile)
    sorts = [_queue_sort(profile) for profile in profiles]
    for i, sort in enumerate(sorts[1:], start=1):
        if sort != sorts[0]:
            # validation.go, validateCommonQueueSort: one queue serves every profile
            problems.invalid(f"profiles[{i}].plugins.queueSort", sort,
                             "must be the same for all profiles")
    if problems:
        raise PolicyError(source, problems.lines(), document="scheduler configuration")
    return SchedulerConfig(tuple(profiles), percentage, initial, maximum, election, qps, burst,
                           source)


def _queue_sort(profile: Policy) -> str:
    return next((ext.name for ext in profile.extensions if "queueSort" in ext.points),
                "PrioritySort")


def load_profile(text: str, source: str) -> Policy:
    """A Policy file, or a KubeSchedulerConfiguration's first profile, told apart by ``kind``
    (what ``simulate --policy`` and ``explain --policy`` read)."""
    try:
        doc = safe_load(text) if text.strip() else None
    except yaml.YAMLError:
        doc = None  # load_policy reports it in its words
    if isinstance(doc, Mapping) and doc.get("kind") == KIND:
        return load_config(text, source).profiles[0]
    return load_policy(text, source)


def default_config(scheduler_name: str = DEFAULT_SCHEDULER_NAME) -> SchedulerConfig:
    """An empty configuration, defaulted: one profile, kube-scheduler 1.35's default."""
    return load_config("", "default profile", scheduler_name)


def default_profile(scheduler_name: str = DEFAULT_SCHEDULER_NAME) -> Policy:
    """kube-scheduler 1.35's default profile (what berthmaster runs with no configuration)."""
    return default_config(scheduler_name).profiles[0]

