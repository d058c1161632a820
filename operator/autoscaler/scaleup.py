"""Scale-up: which MachineSet grows, by how much, for which unschedulable pods — and why not.

Design (upstream cluster-autoscaler's loop, one decision per call, pure):

1. Pods count when they are unschedulable (no node, ``PodScheduled=False`` with reason
   ``Unschedulable``, not being deleted) and their priority is at least ``podPriorityThreshold``;
   lower-priority pods are expendable and never cause a scale-up. Pods younger than
   ``scaleUp.newPodScaleUpDelay`` (or their own longer
   ``cluster-autoscaler.kubernetes.io/pod-scale-up-delay``) are left to the scheduler for now.
   A pod whose ``status.nominatedNodeName`` names an existing node is waiting for the scheduler's
   preemption to make room there: it causes no scale-up either, and the caller places it on
   that node in the simulation so the room it will take is not offered to other pods.
2. Nodes already asked for but not registered yet ("upcoming") join the simulation as template
   copies; pods that fit an existing or upcoming node are left to the scheduler, so a slow
   provider does not cause a second scale-up for the same pods.
3. For each node group an option is estimated by bin-packing the remaining pods onto fresh
   template nodes, capped by the group's max size and by the cluster's remaining headroom
   (``limits``); groups that cannot help say why, in upstream's words.
   A PodGroup's pods count all together (:mod:`.gangs`): an option that cannot start a whole
   gang (``minMember`` running or placed) is estimated again without it, so a gang causes one
   scale-up sized for it, or none.
4. The expanders choose one option; with ``balanceSimilarNodeGroups`` the nodes are spread over
   the similar groups, smallest first.

Every simulated change is rolled back before returning; the caller applies the decision.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from berthmaster.foundation.durations import parse_go_duration
from berthmaster.foundation.times import parse_rfc3339
from berthmaster.operator.autoscaler import nodegroupset
from berthmaster.operator.autoscaler.config import AutoscalerConfig
from berthmaster.operator.autoscaler.events import node_group_id
from berthmaster.operator.autoscaler.expanders import Option, Priorities, best_option
from berthmaster.operator.autoscaler.gangs import ALL_OR_NOTHING_REASON, Gang, gang_of, short_gangs
from berthmaster.operator.autoscaler.groups import ClusterView, NodeGroup
from berthmaster.operator.autoscaler.limits import Headroom, Totals, headroom, node_totals
from berthmaster.operator.autoscaler.resources import CPU, MEMORY, node_allocatable, pod_requests
from berthmaster.operator.autoscaler.simulation import Simulation
from berthmaster.operator.autoscaler.template import copy_of
from berthmaster.scheduler.model import resolve_priority

JSON = dict[str, Any]

BACKOFF_REASON = "in backoff after failed scale-up"
MAX_SIZE_REASON = "max node group size reached"
WOULD_NOT_FIT_REASON = "it wouldn't fit if a new node is added"
NO_TEMPLATE_REASON = "node group has no usable template"
POD_SCALE_UP_DELAY_KEY = "cluster-autoscaler.kubernetes.io/pod-scale-up-delay"


def pod_id(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def pod_priority(pod: Mapping[str, Any], priority_classes: Mapping[str, Mapping[str, Any]]) -> int:
    """The scheduler's rule: spec.priority, else its PriorityClass, else the global default."""
    return resolve_priority(dict(pod), {k: dict(v) for k, v in priority_classes.items()})


def is_unschedulable(pod: Mapping[str, Any]) -> bool:
    if (pod.get("spec") or {}).get("nodeName") or (pod.get("metadata") or {}).get(
            "deletionTimestamp"):
        return False
    status = pod.get("status") or {}
    if status.get("phase") not in (None, "Pending"):
        return False
    return any(c.get("type") == "PodScheduled" and c.get("status") == "False"
               and c.get("reason") == "Unschedulable" for c in status.get("conditions") or [])


def nominated_node(pod: Mapping[str, Any]) -> str:
    return str((pod.get("status") or {}).get("nominatedNodeName") or "")


def pods_to_help(pods: Iterable[Mapping[str, Any]], threshold: int,
                 priority_classes: Mapping[str, Mapping[str, Any]] | None = None,
                 node_names: Collection[str] = ()) -> tuple[list[JSON], list[JSON]]:
    """Unschedulable pods at or above the priority threshold, highest priority first, split
    into those a scale-up may help and those waiting for preemption on one of ``node_names``."""
    classes = priority_classes or {}
    chosen = [dict(p) for p in pods
              if is_unschedulable(p) and pod_priority(p, classes) >= threshold]
    chosen.sort(key=lambda p: (-pod_priority(p, classes), pod_id(p)))
    waiting = [p for p in chosen if nominated_node(p) in node_names]
    return [p for p in chosen if nominated_node(p) not in node_names], waiting


def scale_up_delay(pod: Mapping[str, Any], delay: float) -> float:
    """How old ``pod`` must be to cause a scale-up: ``delay``, or the pod's own
    ``pod-scale-up-delay`` annotation when that is a valid, longer duration (upstream ignores a
    shorter one)."""
    text = ((pod.get("metadata") or {}).get("annotations") or {}).get(POD_SCALE_UP_DELAY_KEY)
    if text is None:
        return delay
    try:
        own = parse_go_duration(str(text))
    except ValueError:
        return delay
    return max(own, delay)


def old_enough(pods: Iterable[JSON], now: float, delay: float) -> list[JSON]:
    """The pods older than their scale-up delay; a pod with no creation time counts as old."""
    kept = []
    for pod in pods:
        wait = scale_up_delay(pod, delay)
        created = parse_rfc3339((pod.get("metadata") or {}).get("creationTimestamp"))
        if wait <= 0 or created is None or now - created.timestamp() > wait:
            kept.append(pod)
    return kept


@dataclass(frozen=True)
class GroupIncrease:
    group_id: str
    current: int
    new: int
    max_size: int

    def __str__(self) -> str:
        return (f"{{{node_group_id(self.group_id)} {self.current}->{self.new} "
                f"(max: {self.max_size})}}")


@dataclass(frozen=True)
class ScaleUpDecision:
    increases: tuple[GroupIncrease, ...] = ()
    triggered: Mapping[str, str] = field(default_factory=dict)  # pod id -> event message
    not_triggered: Mapping[str, str] = field(default_factory=dict)
    waiting: tuple[str, ...] = ()  # pods that fit existing or upcoming nodes
    group_reasons: Mapping[str, str] = field(default_factory=dict)  # groups that could not help
    not_triggered_gangs: Mapping[str, str] = field(default_factory=dict)  # PodGroup -> message

    @property
    def scaled(self) -> bool:
        return bool(self.increases)


def _add_upcoming(sim: Simulation, view: ClusterView) -> None:
    for group in view.groups:
        if group.template is None:
            continue
        for index in range(group.upcoming):
            node = copy_of(group.template, 10_000 + index)
            node["metadata"]["name"] = f"upcoming-{group.name}-{index}"
            node["metadata"]["labels"]["kubernetes.io/hostname"] = node["metadata"]["name"]
            sim.add_node(node)


def _pack_size(pod: JSON, template: Mapping[str, Any]) -> float:
    """Upstream's binpacking order: the pod's share of a node, cpu plus memory."""
    allocatable = node_allocatable(template)
    requests = pod_requests(pod)
    return float(sum(requests.get(r, 0) / allocatable[r] for r in (CPU, MEMORY)
                     if allocatable.get(r)))


def estimate(sim: Simulation, group: NodeGroup, pods: Sequence[JSON], cap: int
             ) -> tuple[Option, dict[str, str]]:
    """Bin-pack ``pods`` onto at most ``cap`` new template nodes of ``group`` (rolled back).

    Returns the option and, for each pod left out, the reason it was left out.
    """
    assert group.template is not None
    template = group.template
    mark = sim.checkpoint()
    new_nodes: list[str] = []
    helped: list[JSON] = []
    left_out: dict[str, str] = {}
    ordered = sorted(pods, key=lambda p: (-_pack_size(p, template), pod_id(p)))
    for pod in ordered:
        target = sim.find_node(pod, reversed(new_nodes))
        if target is None:
            if len(new_nodes) >= cap:
                left_out[pod_id(pod)] = MAX_SIZE_REASON
                continue
            before = sim.checkpoint()
            node = copy_of(template, len(new_nodes))
            sim.add_node(node)
            if not sim.fits(pod, node["metadata"]["name"]):
                # The scheduler's own words for the empty template node, as upstream reports.
                reasons = sim.why_not(pod, node["metadata"]["name"])
                sim.rollback(before)
                left_out[pod_id(pod)] = reasons[0] if reasons else WOULD_NOT_FIT_REASON
                continue
            new_nodes.append(node["metadata"]["name"])
            target = node["metadata"]["name"]
        sim.place(pod, target)
        helped.append(pod)
    sim.rollback(mark)
    return Option(group, len(new_nodes), tuple(helped), template), left_out


def estimate_whole_gangs(sim: Simulation, group: NodeGroup, pods: Sequence[JSON], cap: int,
                         gangs: Mapping[str, Gang], placed: Sequence[JSON] = ()
                         ) -> tuple[Option, dict[str, str]]:
    """:func:`estimate`, all-or-nothing per gang (:mod:`.gangs`): a gang the option cannot
    start, with its members already ``placed`` on existing or upcoming nodes, is left out
    whole and the option estimated again without it."""
    dropped: set[str] = set()
    while True:
        option, left_out = estimate(sim, group, [p for p in pods if gang_of(p) not in dropped],
                                    cap)
        short = short_gangs(gangs, [*placed, *option.pods]) & {gang_of(p) for p in option.pods}
        if not short:
            break
        dropped |= short
    for pod in pods:
        if gang_of(pod) in dropped:
            left_out[pod_id(pod)] = ALL_OR_NOTHING_REASON
    return option, left_out


def balance(chosen: Option, options: Sequence[Option], ignored: Iterable[str],
            cannot_host: Mapping[str, Collection[str]] | None = None) -> list[GroupIncrease]:
    """Spread ``chosen.node_count`` over the groups similar to the chosen one (upstream's
    comparator, see :mod:`.nodegroupset`) that can host every pod the chosen one helps,
    smallest first (``BalanceScaleUpBetweenGroups``). ``cannot_host`` maps a group id to the
    pods that would not fit its template node."""
    ignored = tuple(ignored)
    blocked = cannot_host or {}
    assert chosen.group.template is not None
    helped = {pod_id(p) for p in chosen.pods}
    similar = [o.group for o in options if o.group == chosen.group or (
        o.group.template is not None
        and nodegroupset.similar(chosen.group.template, o.group.template, ignored)
        and not helped & set(blocked.get(o.group.id, ())))]
    if chosen.group not in similar:
        similar.append(chosen.group)
    sizes = {g.id: g.target_size for g in similar}
    for _ in range(chosen.node_count):
        room = [g for g in similar if sizes[g.id] < g.max_size]
        if not room:
            break
        smallest = min(room, key=lambda g: (sizes[g.id], g.id))
        sizes[smallest.id] += 1
    return [GroupIncrease(g.id, g.target_size, sizes[g.id], g.max_size)
            for g in sorted(similar, key=lambda g: g.id) if sizes[g.id] > g.target_size]


def _not_triggered_message(reasons: Counter[str]) -> str:
    if not reasons:
        return "pod didn't trigger scale-up: no node group to scale up"
    parts = [f"{count} {reason}" for reason, count in sorted(reasons.items())]
    return "pod didn't trigger scale-up: " + ", ".join(parts)


def _gang_messages(remaining: Sequence[JSON], pod_reasons: Mapping[str, Counter[str]],
                   not_triggered: Mapping[str, str]) -> dict[str, str]:
    """For each gang left out all-or-nothing, the message of its first such pod (the event
    its PodGroup gets)."""
    messages: dict[str, str] = {}
    for pod in remaining:
        key, gang = pod_id(pod), gang_of(pod)
        if gang and gang not in messages and key in not_triggered \
                and pod_reasons[key][ALL_OR_NOTHING_REASON]:
            messages[gang] = not_triggered[key]
    return messages


def _place_on_existing(sim: Simulation, pending: Sequence[JSON]
                       ) -> tuple[list[JSON], list[JSON]]:
    """The pods that fit no existing or upcoming node, and those placed (they wait for them),
    upstream's core/podlistprocessor/filter_out_schedulable.go."""
    remaining: list[JSON] = []
    placed: list[JSON] = []
    nodes = sim.node_names()
    for pod in pending:
        target = sim.find_node(pod, nodes)
        if target is None:
            remaining.append(pod)
        else:
            sim.place(pod, target)
            placed.append(pod)
    return remaining, placed


def _skip_reason(group: NodeGroup, backoff: Collection[str], room: Headroom | None
                 ) -> str | None:
    """Why ``group`` is no option at all (upstream's orchestrator.go ``IsNodeGroupReadyToScaleUp``
    and ``IsNodeGroupResourceExceeded``); ``room`` is None for a group without a template."""
    if room is None:
        return NO_TEMPLATE_REASON
    if group.id in backoff:
        return BACKOFF_REASON
    if group.target_size >= group.max_size:
        return MAX_SIZE_REASON
    if room.nodes == 0:
        return room.reason()
    return None


@dataclass
class _Options:
    """Every node group's scale-up option for the pods left, and why the others cannot help."""

    pod_reasons: dict[str, Counter[str]]
    options: list[Option] = field(default_factory=list)
    cannot_host: dict[str, set[str]] = field(default_factory=dict)
    group_reasons: dict[str, str] = field(default_factory=dict)

    def skip(self, group: NodeGroup, reason: str) -> None:
        self.group_reasons[group.id] = reason
        for counter in self.pod_reasons.values():
            counter[reason] += 1

    def add(self, option: Option, left_out: Mapping[str, str], room: Headroom) -> None:
        group = option.group
        self.cannot_host[group.id] = {k for k, r in left_out.items() if r != MAX_SIZE_REASON}
        for key, reason in left_out.items():
            if reason == MAX_SIZE_REASON and room.nodes is not None \
                    and room.nodes < group.max_size - group.target_size:
                reason = room.reason()  # the cluster limits capped it, not the group max
            self.pod_reasons[key][reason] += 1
        if option.node_count > 0:
            self.options.append(option)


def _options(remaining: Sequence[JSON], placed: Sequence[JSON], view: ClusterView,
             sim: Simulation, config: AutoscalerConfig, totals: Totals, backoff: Collection[str],
             gangs: Mapping[str, Gang]) -> _Options:
    """Upstream's core/scaleup/orchestrator/orchestrator.go ``computeExpansionOption`` for each
    group: the nodes its template needs for the pods, capped by its max size and the cluster's
    resource limits, gangs all-or-nothing."""
    found = _Options({pod_id(p): Counter() for p in remaining})
    for group in view.groups:
        room = headroom(totals, group.template, config.limits) if group.template is not None \
            else None
        reason = _skip_reason(group, backoff, room)
        if reason is not None or room is None:
            found.skip(group, reason or NO_TEMPLATE_REASON)
            continue
        cap = group.max_size - group.target_size
        if room.nodes is not None:
            cap = min(cap, room.nodes)
        option, left_out = estimate_whole_gangs(sim, group, remaining, cap, gangs, placed)
        found.add(option, left_out, room)
    return found


def _chosen_decision(chosen: Option, found: _Options, remaining: Sequence[JSON],
                     waiting: tuple[str, ...], config: AutoscalerConfig) -> ScaleUpDecision:
    """The increases for the chosen option (balanced over similar groups when asked: upstream's
    ``BalanceScaleUpBetweenGroups``) and the events of the pods it helps and of those nothing
    can help."""
    if config.balance_similar_node_groups:
        increases = balance(chosen, found.options, config.balancing_ignored_labels,
                            found.cannot_host)
    else:
        g = chosen.group
        increases = [GroupIncrease(g.id, g.target_size, g.target_size + chosen.node_count,
                                   g.max_size)]
    helped = {pod_id(p) for p in chosen.pods}
    helped_anywhere = {pod_id(p) for o in found.options for p in o.pods}
    summary = "[" + " ".join(str(i) for i in increases) + "]"
    # Pods another option could help wait for the next loop (upstream: "awaiting
    # evaluation"); only pods nothing can help hear why.
    not_triggered = {k: _not_triggered_message(c) for k, c in found.pod_reasons.items()
                     if k not in helped_anywhere}
    return ScaleUpDecision(
        increases=tuple(increases),
        triggered={k: f"pod triggered scale-up: {summary}" for k in sorted(helped)},
        not_triggered=not_triggered,
        waiting=waiting,
        group_reasons=found.group_reasons,
        not_triggered_gangs=_gang_messages(remaining, found.pod_reasons, not_triggered),
    )


def decide_scale_up(
    pending: Sequence[JSON],
    view: ClusterView,
    sim: Simulation,
    config: AutoscalerConfig,
    totals: Totals,
    in_backoff: Iterable[str] = (),
    rng: random.Random | None = None,
    priorities: Priorities | None = None,
    gangs: Mapping[str, Gang] | None = None,
) -> ScaleUpDecision:
    """One scale-up decision for ``pending`` (already filtered by :func:`pods_to_help`, with
    every pending member of the gangs it holds: :func:`.gangs.with_pending_members`), as
    upstream's core/scaleup/orchestrator/orchestrator.go ``ScaleUp``: the pods that fit existing
    or upcoming nodes wait, each group's option is estimated, the expanders choose one.

    ``totals`` counts every node plus the upcoming ones; ``sim`` holds the registered nodes and
    their pods and is left as it was found.
    """
    if not pending:
        return ScaleUpDecision()
    mark = sim.checkpoint()
    try:
        _add_upcoming(sim, view)
        remaining, placed = _place_on_existing(sim, pending)
        waiting = tuple(pod_id(p) for p in placed)
        if not remaining:
            return ScaleUpDecision(waiting=waiting)
        found = _options(remaining, placed, view, sim, config, totals, set(in_backoff),
                         gangs or {})
        chosen = best_option(found.options, config.expanders, rng or random.Random(), priorities)
        if chosen is not None:
            return _chosen_decision(chosen, found, remaining, waiting, config)
        not_triggered = {k: _not_triggered_message(c) for k, c in found.pod_reasons.items()}
        return ScaleUpDecision(
            not_triggered=not_triggered, waiting=waiting, group_reasons=found.group_reasons,
            not_triggered_gangs=_gang_messages(remaining, found.pod_reasons, not_triggered))
    finally:
        sim.rollback(mark)


def decide_min_size_scale_up(view: ClusterView, config: AutoscalerConfig, totals: Totals,
                             in_backoff: Iterable[str] = ()) -> tuple[GroupIncrease, ...]:
    """With ``enforceNodeGroupMinSize``: grow each MachineSet whose replicas are below its min
    size up to it, as upstream's ``ScaleUpToNodeGroupMinSize``: groups in backoff or without a
    template are skipped, and the cluster's resource limits cap each increase in turn."""
    backoff = set(in_backoff)
    increases = []
    for group in view.groups:
        missing = group.min_size - group.target_size
        if missing <= 0 or group.id in backoff or group.template is None:
            continue
        room = headroom(totals, group.template, config.limits)
        if room.nodes is not None:
            missing = min(missing, room.nodes)
        if missing <= 0:
            continue
        totals = totals.plus(node_totals(group.template, [g.type for g in config.limits.gpus]),
                             missing)
        increases.append(GroupIncrease(group.id, group.target_size,
                                       group.target_size + missing, group.max_size))
    return tuple(increases)
