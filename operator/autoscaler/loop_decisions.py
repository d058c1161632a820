"""The autoscaler loop's own decisions: pure functions from plain data to a frozen decision.

Design: each step of :func:`~.loop.run_once` that decides something outside the scale-up and
scale-down planners (:mod:`.scaleup`, :mod:`.scaledown`) decides it here, with no clock, no
client and no state mutated; the step runners (:mod:`.loop`, :mod:`.scaleup_steps`,
:mod:`.scaledown_steps`) do the reads and writes around them. Each mirrors a piece of
upstream's cluster-autoscaler/core/static_autoscaler.go ``RunOnce``:

- :func:`decide_safety`: the ready/unready count and whether the cluster may be autoscaled at
  all (clusterstate/clusterstate.go ``IsClusterHealthy``); starting nodes (still carrying a
  startup taint) do not count as unready;
- :func:`decide_provisioning`: which scale-up requests arrived, wait, are forgotten or timed out
  (clusterstate.go ``updateScaleRequests`` and ``handleInstanceCreationErrors``: the backoff
  and the unregistered Machines given back);
- :func:`select_pending`: the pods a scale-up is for (priority threshold, preemptors, the
  per-pod delay, whole gangs), upstream's ``filterOutSchedulablePodListProcessor`` inputs;
- :func:`decide_cooldown`: why scale-down waits this loop (upstream's ``scaleDownInCooldown``;
  a loop that scaled up never scales down);
- :func:`plan_min_size`: ``enforceNodeGroupMinSize`` after this loop's scale-up, on the
  resource totals it leaves (core/scaleup/orchestrator/orchestrator.go
  ``ScaleUpToNodeGroupMinSize``);
- :func:`loop_figures`: what the loop metrics say.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from berthmaster.operator.autoscaler import metrics
from berthmaster.operator.autoscaler.clusterstate import next_backoff, unsafe_to_autoscale
from berthmaster.operator.autoscaler.config import AutoscalerConfig
from berthmaster.operator.autoscaler.gangs import Gang, gangs_of, with_pending_members
from berthmaster.operator.autoscaler.groups import ClusterView, NodeGroup
from berthmaster.operator.autoscaler.limits import Totals, node_totals
from berthmaster.operator.autoscaler.scaledown import Cooldown, ScaleDownPlan, cooldown_reason
from berthmaster.operator.autoscaler.scaleup import (
    GroupIncrease,
    ScaleUpDecision,
    decide_min_size_scale_up,
    old_enough,
    pods_to_help,
)
from berthmaster.operator.autoscaler.state import JSON, ProvisionRequest


def node_ready(node: Mapping[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])


@dataclass(frozen=True)
class Safety:
    total: int
    ready: int
    unready: int  # not ready and not starting: what the safety check counts
    unsafe: str | None  # why the cluster may not be autoscaled; None: it may


def decide_safety(nodes: Sequence[Mapping[str, Any]], view: ClusterView) -> Safety:
    starting = {name for group in view.groups for name in group.starting_nodes}
    ready = sum(1 for n in nodes if node_ready(n))
    unready = sum(1 for n in nodes if not node_ready(n) and n["metadata"]["name"] not in starting)
    return Safety(len(nodes), ready, unready, unsafe_to_autoscale(len(nodes), unready))


Outcome = Literal["arrived", "waiting", "timed_out"]


@dataclass(frozen=True)
class ProvisionVerdict:
    group_id: str
    outcome: Outcome
    backoff: tuple[float, float] | None = None  # (length, until) when timed out
    give_back: tuple[str, ...] = ()  # unregistered Machines to mark and remove
    new_size: int | None = None  # the replicas once they are given back


@dataclass(frozen=True)
class Provisioning:
    forget: tuple[str, ...]  # requests of groups that no longer exist
    verdicts: tuple[ProvisionVerdict, ...]  # in the view's group order


@dataclass(frozen=True)
class Backoffs:
    length: Mapping[str, float]
    until: Mapping[str, float]
    last_failure: Mapping[str, float]


def _provision_verdict(group: NodeGroup, request: ProvisionRequest, backoffs: Backoffs,
                       clock: float, max_provision_time: float) -> ProvisionVerdict:
    if len(group.nodes) >= min(request.target, group.target_size) or \
            group.target_size < request.target:
        return ProvisionVerdict(group.id, "arrived")  # arrived, or someone else resized the set
    if clock - request.since < max_provision_time:
        return ProvisionVerdict(group.id, "waiting")
    backoff = next_backoff(backoffs.length.get(group.id), backoffs.until.get(group.id),
                           backoffs.last_failure.get(group.id), clock)
    stuck = tuple(m for m in group.machines_without_node if m not in group.deleting_machines)
    return ProvisionVerdict(group.id, "timed_out", backoff, stuck,
                            max(group.min_size, group.target_size - len(stuck)) if stuck else None)


def decide_provisioning(view: ClusterView, provisioning: Mapping[str, ProvisionRequest],
                        backoffs: Backoffs, clock: float, max_provision_time: float
                        ) -> Provisioning:
    """A request of a group that no longer exists is forgotten: nothing will ever arrive for it,
    and it would keep ScaleUp InProgress."""
    existing = {group.id for group in view.groups}
    verdicts = tuple(_provision_verdict(group, provisioning[group.id], backoffs, clock,
                                        max_provision_time)
                     for group in view.groups if group.id in provisioning)
    return Provisioning(tuple(g for g in provisioning if g not in existing), verdicts)


@dataclass(frozen=True)
class Pending:
    pods: list[JSON]  # what the scale-up is for: old enough, with their gangs' members
    preempting: list[JSON]  # nominated pods: the room preemption makes is theirs
    young: list[JSON]  # younger than their scale-up delay, left to the scheduler
    gangs: Mapping[str, Gang]


def select_pending(pods: Sequence[JSON], config: AutoscalerConfig,
                   priority_classes: Mapping[str, Mapping[str, Any]],
                   node_names: Collection[str], now: float, pod_groups: Iterable[JSON]
                   ) -> Pending:
    pending, preempting = pods_to_help(pods, config.pod_priority_threshold, priority_classes,
                                       node_names)
    old = old_enough(pending, now, config.scale_up.new_pod_scale_up_delay)
    kept = {id(p) for p in old}
    gangs = gangs_of(pods, pod_groups)
    return Pending(with_pending_members(old, pods, gangs), preempting,
                   [p for p in pending if id(p) not in kept], gangs)


def decide_cooldown(config: AutoscalerConfig, cooldown: Cooldown, clock: float,
                    scaled_up: bool) -> str | None:
    """Why scale-down waits this loop; None: it may remove nodes."""
    reason = cooldown_reason(config, cooldown, clock)
    return "scaled up in this loop" if scaled_up else reason


def plan_min_size(view: ClusterView, config: AutoscalerConfig, totals: Totals,
                  decision: ScaleUpDecision, in_backoff: Iterable[str]
                  ) -> tuple[GroupIncrease, ...]:
    """Groups grown in this loop are judged next loop, on their new size; the resource limits
    count the nodes this loop's scale-up asked for."""
    if not config.enforce_node_group_min_size:
        return ()
    grown = {i.group_id for i in decision.increases}
    gpu_types = [g.type for g in config.limits.gpus]
    after = totals
    for increase in decision.increases:
        group = view.group(increase.group_id)
        if group is not None and group.template is not None:
            after = after.plus(node_totals(group.template, gpu_types),
                               increase.new - increase.current)
    return decide_min_size_scale_up(view, config, after, [*in_backoff, *grown])


def loop_figures(safety: Safety, view: ClusterView, unschedulable: int = 0,
                 plan: ScaleDownPlan | None = None, cooldown: str | None = None
                 ) -> metrics.LoopFigures:
    """The loop's metrics; an unsafe cluster reports only its nodes and groups."""
    figures = metrics.LoopFigures(
        ready_nodes=safety.ready, unready_nodes=safety.total - safety.ready,
        node_groups=len(view.groups), max_nodes=sum(g.max_size for g in view.groups),
        safe_to_autoscale=safety.unsafe is None)
    if safety.unsafe is not None:
        return figures
    plan = plan or ScaleDownPlan()
    return replace(figures, upcoming_nodes=sum(g.upcoming for g in view.groups),
                   unschedulable_pods=unschedulable, unneeded_nodes=len(plan.unneeded),
                   unremovable=dict(Counter(plan.unremovable.values())),
                   in_cooldown=cooldown is not None)
