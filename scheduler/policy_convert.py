"""A scheduler Policy (``kind: Policy``, v1) -> the ``kubescheduler.config.k8s.io/v1``
KubeSchedulerConfiguration that says the same, as far as kube-scheduler 1.35 can.

The translation is v1.22's, the last release that read a Policy: kubernetes v1.22
``pkg/scheduler/framework/plugins/legacy_registry.go`` maps each predicate onto the filter
plugins (and their PreFilter) it became and each priority onto a score plugin with the
priority's weight; ``AppendPredicateConfigs`` orders the filters by ``predicateOrdering``
(then the rest by name), ``AppendPriorityConfigs`` walks the priorities by name, and
``appendToPluginSet`` keeps a plugin once, with the highest weight asked for. The mandatory
predicates (CheckNodeUnschedulable, PodToleratesNodeTaints) are in every profile, as
:func:`~berthmaster.scheduler.policy.load_policy` adds them.

The result is one profile (``schedulerName: berthmaster`` unless told otherwise) that turns
the default plugins off (``multiPoint: {disabled: [{name: "*"}]}``) and lists every extension
point explicitly: the filters and scores of the Policy, with each plugin's PreFilter/PreScore
(1.35's plugins need the state their pre-phase writes; v1.22's producers listed them too),
VolumeBinding's Reserve and PreBind, and what every profile needs: SchedulingGates
(PreEnqueue), PrioritySort (QueueSort), DefaultPreemption (PostFilter, a Policy always
preempted) and DefaultBinder (Bind). Plugin arguments go to ``pluginConfig``: InterPodAffinity's
``hardPodAffinityWeight`` (the Policy's ``hardPodAffinitySymmetricWeight``), NodeResourcesFit's
``scoringStrategy`` (LeastRequestedPriority -> LeastAllocated, MostRequestedPriority ->
MostAllocated, cpu and memory weight 1: 1.35 folded v1.22's NodeResourcesLeastAllocated and
NodeResourcesMostAllocated plugins into NodeResourcesFit's one strategy) and PodTopologySpread's
``defaultingType`` (v1.22's producers: System for SelectorSpreadPriority, List for
EvenPodsSpreadPriority alone).

What 1.35 cannot say is not guessed at silently: each such part of the Policy gives one line in
:attr:`Conversion.unexpressed` (which part, and why), and the command exits 1 when there is
any. Where v1.22 had a replacement (SelectorSpreadPriority -> PodTopologySpread's system
defaults; the cloud volume-count predicates -> NodeVolumeLimits) the replacement is written and
the line says it is not the same.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from berthmaster.scheduler.config import API_VERSION, DEFAULT_SCHEDULER_NAME, KIND, PLUGINS
from berthmaster.scheduler.plugins import resource_allocation
from berthmaster.scheduler.plugins.base import Predicate, Priority
from berthmaster.scheduler.policy import Policy, decode_policy, policy_from_document

# v1.22 legacy_registry.go, predicateToConfigProducer: a predicate's canonical name (the
# Policy loader's ``NAME``) -> the filter plugins it became, in the order its producer
# appended them.
PREDICATE_PLUGINS: dict[str, tuple[str, ...]] = {
    "CheckNodeUnschedulable": ("NodeUnschedulable",),
    "GeneralPredicates": ("NodeResourcesFit", "NodeName", "NodePorts", "NodeAffinity"),
    "HostName": ("NodeName",),
    "PodFitsHostPorts": ("NodePorts",),
    "MatchNodeSelector": ("NodeAffinity",),
    "PodFitsResources": ("NodeResourcesFit",),
    "NoDiskConflict": ("VolumeRestrictions",),
    "PodToleratesNodeTaints": ("TaintToleration",),
    # 1.35's TaintToleration filters NoExecute taints as well as NoSchedule ones, and it is
    # in every profile (mandatory): the NoExecute-only predicate adds nothing to it.
    "PodToleratesNodeNoExecuteTaints": ("TaintToleration",),
    "MaxCSIVolumeCountPred": ("NodeVolumeLimits",),
    "CheckVolumeBinding": ("VolumeBinding",),
    "NoVolumeZoneConflict": ("VolumeZone",),
    "PodTopologySpread": ("PodTopologySpread",),  # v1.22's EvenPodsSpread
    "MatchInterPodAffinity": ("InterPodAffinity",),
}

# v1.22 legacy_registry.go, predicateOrdering (berthmaster's canonical names); predicates not
# in it follow, sorted by name, as AppendPredicateConfigs does.
PREDICATE_ORDERING: tuple[str, ...] = (
    "CheckNodeUnschedulable", "GeneralPredicates", "HostName", "PodFitsHostPorts",
    "MatchNodeSelector", "PodFitsResources", "NoDiskConflict", "PodToleratesNodeTaints",
    "CheckNodeLabelPresence", "checkServiceAffinity", "MaxEBSVolumeCount",
    "MaxGCEPDVolumeCount", "MaxCSIVolumeCountPred", "MaxAzureDiskVolumeCount",
    "MaxCinderVolumeCount", "CheckVolumeBinding", "NoVolumeZoneConflict", "PodTopologySpread",
    "MatchInterPodAffinity",
)

# The cloud volume-count predicates: v1.22 ran them as the EBSLimits, GCEPDLimits,
# AzureDiskLimits and CinderLimits plugins, which 1.35 no longer has.
CLOUD_VOLUME_LIMITS = frozenset(("MaxEBSVolumeCount", "MaxGCEPDVolumeCount",
                                 "MaxAzureDiskVolumeCount", "MaxCinderVolumeCount"))

# Predicates 1.35 has no plugin for, and why.
UNEXPRESSED_PREDICATES: dict[str, str] = {
    "CheckNodeCondition": "v1.22 already had no plugin for it: the node lifecycle controller "
                          "taints a NotReady or unreachable node (node.kubernetes.io/not-ready, "
                          ".../unreachable) and TaintToleration keeps pods off it",
    "CheckNodeMemoryPressure": "taint-based (TaintNodesByCondition): the node gets "
                               "node.kubernetes.io/memory-pressure and TaintToleration filters it",
    "CheckNodeDiskPressure": "taint-based (TaintNodesByCondition): the node gets "
                             "node.kubernetes.io/disk-pressure and TaintToleration filters it",
    "CheckNodePIDPressure": "taint-based (TaintNodesByCondition): the node gets "
                            "node.kubernetes.io/pid-pressure and TaintToleration filters it",
    "CheckNodeLabelPresence": "kube-scheduler 1.35 has no NodeLabel plugin; require the labels "
                              "with the pods' nodeAffinity (operator Exists / DoesNotExist)",
    "checkServiceAffinity": "kube-scheduler 1.35 has no ServiceAffinity plugin; use required pod "
                            "affinity on the service's pods with these topology keys",
}

# v1.22 legacy_registry.go, priorityToConfigProducer: a priority's canonical name -> its score
# plugin.
PRIORITY_PLUGINS: dict[str, str] = {
    "LeastRequestedPriority": "NodeResourcesFit",
    "MostRequestedPriority": "NodeResourcesFit",
    "NodeResourcesFit": "NodeResourcesFit",
    "BalancedResourceAllocation": "NodeResourcesBalancedAllocation",
    "SelectorSpreadPriority": "PodTopologySpread",
    "EvenPodsSpreadPriority": "PodTopologySpread",
    "InterPodAffinityPriority": "InterPodAffinity",
    "NodeAffinityPriority": "NodeAffinity",
    "TaintTolerationPriority": "TaintToleration",
    "ImageLocalityPriority": "ImageLocality",
}

UNEXPRESSED_PRIORITIES: dict[str, str] = {
    "NodePreferAvoidPodsPriority": "kube-scheduler 1.35 has no NodePreferAvoidPods plugin (the "
                                   "scheduler.alpha.kubernetes.io/preferAvoidPods annotation is "
                                   "read no more); taint the nodes instead",
    "EqualPriority": "it gives every node the same score, so it never changed a choice; 1.35 "
                     "has no such plugin",
    "NodeLabelPriority": "kube-scheduler 1.35 has no NodeLabel plugin; prefer the label with "
                         "the pods' preferred nodeAffinity",
    "ServiceAntiAffinityPriority": "kube-scheduler 1.35 has no ServiceAffinity plugin; spread the "
                                   "service's pods with topologySpreadConstraints on this label",
}

SELECTOR_SPREAD_NOTE = (
    "written as PodTopologySpread's score with defaultingType System, as v1.22 did with its "
    "default feature gates (DefaultPodTopologySpread), but the SelectorSpread plugin it "
    "replaces was removed in 1.26: the system default constraints (zone and hostname, "
    "ScheduleAnyway) score differently from spreading by service and controller")

# Arguments of the configurable entries, for the lines that name them.
_ARGUMENT_OF = {"CheckNodeLabelPresence": "labelsPresence",
                "checkServiceAffinity": "serviceAffinity",
                "NodeLabelPriority": "labelPreference",
                "ServiceAntiAffinityPriority": "serviceAntiAffinity"}


@dataclass
class Conversion:
    """A Policy's KubeSchedulerConfiguration and what of the Policy it could not say."""

    config: dict[str, Any]
    unexpressed: list[str] = field(default_factory=list)

    @property
    def exact(self) -> bool:
        return not self.unexpressed


def _label(kind: str, entry: Predicate | Priority) -> str:
    argument = _ARGUMENT_OF.get(entry.NAME)
    if argument:
        values = {k: getattr(entry, k) for k in ("labels", "label", "presence")
                  if hasattr(entry, k)}
        detail = " ".join(f"{k} {json.dumps(v)}" for k, v in values.items())
        what = f"{entry.name} ({argument} {detail})"
    else:
        what = entry.name + (f" ({entry.NAME})" if entry.name != entry.NAME else "")
    if isinstance(entry, Priority):
        what += f", weight {entry.weight}"
    return f"{kind} {what}"


def _enabled(names: list[str], weights: Mapping[str, int] | None = None
             ) -> dict[str, list[dict[str, Any]]]:
    if weights is None:
        return {"enabled": [{"name": n} for n in names]}
    return {"enabled": [{"name": n, "weight": weights[n]} for n in names]}


def _filters(policy: Policy, out: list[str]) -> list[str]:
    present = {p.NAME: p for p in policy.predicates}
    order = [n for n in PREDICATE_ORDERING if n in present]
    order += sorted(n for n in present if n not in PREDICATE_ORDERING)
    filters: list[str] = []
    for name in order:
        predicate = present[name]
        plugins = PREDICATE_PLUGINS.get(name, ())
        if name in CLOUD_VOLUME_LIMITS:
            plugins = ("NodeVolumeLimits",)
            out.append(f"{_label('predicate', predicate)}: written as NodeVolumeLimits, which "
                       "counts CSI volumes only: 1.35 has no in-tree volume-count plugins "
                       "(the cloud disks are counted through their CSI drivers once migrated)")
        elif name in UNEXPRESSED_PREDICATES:
            out.append(f"{_label('predicate', predicate)}: not converted: "
                       f"{UNEXPRESSED_PREDICATES[name]}")
        elif not plugins:
            out.append(f"{_label('predicate', predicate)}: not converted: no kube-scheduler "
                       "1.35 plugin implements it")
        filters.extend(p for p in plugins if p not in filters)
    return filters


@dataclass
class _Scores:
    weights: dict[str, int] = field(default_factory=dict)
    sources: dict[str, list[str]] = field(default_factory=dict)
    fit: resource_allocation.NodeResourcesFitScore | None = None


def _scores(policy: Policy, out: list[str]) -> _Scores:
    scores = _Scores()
    for priority in sorted(policy.priorities, key=lambda p: (p.NAME, p.name)):
        label = _label("priority", priority)
        if priority.NAME in UNEXPRESSED_PRIORITIES:
            out.append(f"{label}: not converted: {UNEXPRESSED_PRIORITIES[priority.NAME]}")
            continue
        plugin = PRIORITY_PLUGINS.get(priority.NAME)
        if plugin is None:
            out.append(f"{label}: not converted: no kube-scheduler 1.35 plugin implements it")
            continue
        if priority.NAME == "SelectorSpreadPriority":
            out.append(f"{label}: {SELECTOR_SPREAD_NOTE}")
        weight = priority.weight  # no bound: upstream only guards against overflow
        if isinstance(priority, resource_allocation.NodeResourcesFitScore):
            if scores.fit is None:
                scores.fit = priority
            elif scores.fit.strategy != priority.strategy:
                out.append(f"{label}: not converted: NodeResourcesFit scores with one strategy "
                           f"and {scores.fit.name} already gives it {scores.fit.strategy}")
                continue
        if plugin in scores.weights:
            others = ", ".join(scores.sources[plugin])
            out.append(f"{label}: merged with {others} into the one {plugin} score plugin, "
                       f"weight {max(weight, scores.weights[plugin])} (the higher, as v1.22's "
                       "appendToPluginSet), not the sum of both")
        scores.weights[plugin] = max(weight, scores.weights.get(plugin, 0))
        scores.sources.setdefault(plugin, []).append(priority.name)
    return scores


def _fit_args(fit: resource_allocation.NodeResourcesFitScore) -> dict[str, Any]:
    strategy: dict[str, Any] = {
        "type": fit.strategy,
        "resources": [{"name": name, "weight": weight} for name, weight in fit.resources]}
    if fit.strategy == resource_allocation.REQUESTED_TO_CAPACITY_RATIO:
        strategy["requestedToCapacityRatio"] = {
            "shape": [{"utilization": u, "score": s} for u, s in fit.shape]}
    return {"scoringStrategy": strategy}


def convert(policy: Policy, scheduler_name: str = DEFAULT_SCHEDULER_NAME,
            extenders: bool = False) -> Conversion:
    """The KubeSchedulerConfiguration of a loaded Policy (``extenders``: the file had some,
    which a profile here cannot run)."""
    unexpressed: list[str] = []
    filters = _filters(policy, unexpressed)
    scores = _scores(policy, unexpressed)
    score_names = list(scores.weights)
    if policy.always_check_all_predicates:
        unexpressed.append("alwaysCheckAllPredicates: not converted: a 1.35 profile stops at a "
                           "node's first failing filter and cannot be told to run them all")
    if extenders:
        unexpressed.append("extenders: not converted: berthmaster runs no scheduler extenders "
                           "(its KubeSchedulerConfiguration refuses them too)")

    def pre(point: str, names: list[str]) -> list[str]:
        return [n for n in names if point in PLUGINS[n].points]

    plugins: dict[str, Any] = {
        "multiPoint": {"disabled": [{"name": "*"}]},
        "preEnqueue": _enabled(["SchedulingGates"]),
        "queueSort": _enabled(["PrioritySort"]),
    }
    if pre("preFilter", filters):
        plugins["preFilter"] = _enabled(pre("preFilter", filters))
    if filters:
        plugins["filter"] = _enabled(filters)
    plugins["postFilter"] = _enabled(["DefaultPreemption"])
    if pre("preScore", score_names):
        plugins["preScore"] = _enabled(pre("preScore", score_names))
    if score_names:
        plugins["score"] = _enabled(score_names, scores.weights)
    if "VolumeBinding" in filters:
        plugins["reserve"] = _enabled(["VolumeBinding"])
        plugins["preBind"] = _enabled(["VolumeBinding"])
    plugins["bind"] = _enabled(["DefaultBinder"])

    plugin_config: list[dict[str, Any]] = []
    if "InterPodAffinity" in scores.weights:
        plugin_config.append({"name": "InterPodAffinity", "args": {
            "hardPodAffinityWeight": policy.hard_pod_affinity_weight or 1}})
    if scores.fit is not None:
        plugin_config.append({"name": "NodeResourcesFit", "args": _fit_args(scores.fit)})
    spread = {p.NAME for p in policy.priorities}
    if "SelectorSpreadPriority" in spread:
        plugin_config.append({"name": "PodTopologySpread", "args": {"defaultingType": "System"}})
    elif "EvenPodsSpreadPriority" in spread:
        plugin_config.append({"name": "PodTopologySpread", "args": {"defaultingType": "List"}})

    profile: dict[str, Any] = {"schedulerName": scheduler_name, "plugins": plugins}
    if plugin_config:
        profile["pluginConfig"] = plugin_config
    config = {"apiVersion": API_VERSION, "kind": KIND, "profiles": [profile]}
    return Conversion(config, unexpressed)


def convert_policy_text(text: str, source: str = "<policy>",
                        scheduler_name: str = DEFAULT_SCHEDULER_NAME) -> Conversion:
    """Decode, validate and convert a Policy file's text; raise PolicyError (every problem)
    when it is not a valid Policy. ``extenders`` are set aside before validation (the
    scheduler refuses a Policy with them, but converting one is how to leave them behind) and
    reported as not converted."""
    doc = dict(decode_policy(text, source))
    extenders = bool(doc.pop("extenders", None))
    return convert(policy_from_document(doc, source), scheduler_name, extenders)
