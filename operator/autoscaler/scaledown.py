"""Scale-down: which nodes are unneeded, why the others must stay, and which go now.

Design (upstream cluster-autoscaler, pure):

- :func:`find_unneeded` looks at every node, least utilized first. A node is unneeded when it
  belongs to an autoscaled MachineSet above its min size, is not being deleted, carries no
  ``cluster-autoscaler.kubernetes.io/scale-down-disabled: "true"``, its utilization (the larger
  of its pods' cpu and memory requests over allocatable) is below the threshold, removing it
  keeps the cluster above every minimum resource limit, no pod on it blocks (see
  ``drainability``) and every pod that must move fits on another node that stays, as the
  placement engine's full default profile judges it — VolumeBinding included, so a pod whose
  claim is bound to a volume with node affinity to this node (a local PV) moves nowhere and
  keeps the node (``NoPlaceToMovePods``, upstream's simulator/cluster.go SimulateNodeRemoval,
  whose scheduling simulation runs the scheduler framework's filters). The moves of
  an unneeded node are kept in the simulation, so two nodes are never both emptied into the same
  free space; the moves of a node that must stay are rolled back. Every node that stays gets
  upstream's ``UnremovableReason`` name. A pod of a PodGroup blocks (``BlockedByPod``, drain
  reason ``PodGroupMinMember``) when evicting it would leave its group fewer running pods than
  ``minMember`` (:mod:`.gangs`).
- An unready node (Ready not True, or still carrying a startup taint) is judged by every rule,
  the utilization threshold included, as upstream's core/scaledown/eligibility/eligibility.go
  (``unremovableReasonAndNodeUtilization`` applies the threshold whatever the readiness; with
  the default ``--scale-down-unready-enabled=true`` readiness only changes how long the node
  must stay unneeded, below).
- :func:`select_removals` applies time: a node goes only after being unneeded for
  ``unneededTime`` (an unready one for upstream's ``--scale-down-unready-time``, 20 minutes,
  which OpenShift's ClusterAutoscaler does not expose), outside the cooldowns
  (``delayAfterAdd``, ``delayAfterDelete``, ``delayAfterFailure``); all eligible empty nodes go
  together, at most one node with pods to move per loop, never a group below its min size.
- :func:`pods_to_drain` judges a node's pods again when the node is being removed, on a fresh
  list made after the ToBeDeleted taint: a pod that blocks and arrived after the decision (the
  taint keeps new ones away only from then on) stops the removal, as upstream's actuator
  re-lists the pods after tainting and aborts the deletion when ``GetPodsToMove`` fails
  (core/scaledown/actuation/actuator.go, ``deleteNodesAsync``).
- :func:`eviction_grace_period` is how long an evicted pod of a removed node may take to stop:
  its own ``terminationGracePeriodSeconds`` capped at ``maxPodGracePeriod``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from berthmaster.operator.autoscaler.config import AutoscalerConfig
from berthmaster.operator.autoscaler.drainability import (
    Controllers,
    PdbBudget,
    Verdict,
    classify,
)
from berthmaster.operator.autoscaler.gangs import POD_GROUP_MIN_MEMBER, Gang, GangBudget
from berthmaster.operator.autoscaler.groups import ClusterView, NodeGroup
from berthmaster.operator.autoscaler.limits import Totals, node_totals, removal_blocked_by
from berthmaster.operator.autoscaler.resources import CPU, MEMORY, node_allocatable, pod_requests
from berthmaster.operator.autoscaler.simulation import Simulation
from berthmaster.operator.autoscaler.taints import TO_BE_DELETED_TAINT
from berthmaster.operator.autoscaler.template import has_startup_taint
from berthmaster.scheduler.pods import is_daemonset_pod, is_mirror_pod

JSON = dict[str, Any]

SCALE_DOWN_DISABLED_KEY = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
DEFAULT_TERMINATION_GRACE_PERIOD = 30  # corev1.DefaultTerminationGracePeriodSeconds

# upstream's simulator.UnremovableReason names
CURRENTLY_BEING_DELETED = "CurrentlyBeingDeleted"
SCALE_DOWN_DISABLED = "ScaleDownDisabledAnnotation"
NOT_AUTOSCALED = "NotAutoscaled"
NOT_UNDERUTILIZED = "NotUnderutilized"
MIN_SIZE_REACHED = "NodeGroupMinSizeReached"
MIN_RESOURCE_LIMIT = "MinimalResourceLimitExceeded"
BLOCKED_BY_POD = "BlockedByPod"
NO_PLACE_TO_MOVE_PODS = "NoPlaceToMovePods"


@dataclass(frozen=True)
class Unneeded:
    node: str
    group_id: str
    utilization: float
    pods_to_move: tuple[str, ...]
    ready: bool = True


@dataclass(frozen=True)
class ScaleDownPlan:
    unneeded: tuple[Unneeded, ...] = ()
    unremovable: Mapping[str, str] = field(default_factory=dict)  # node -> reason name
    messages: Mapping[str, str] = field(default_factory=dict)  # node -> human detail


def utilization(node: Mapping[str, Any], pods: Sequence[Mapping[str, Any]],
                ignore_daemonsets: bool, ignore_mirror_pods: bool = False) -> float:
    """Upstream's node utilization (simulator/utilization/info.go ``Calculate``): max over cpu
    and memory of the pods' requests over allocatable. With ``ignore_daemonsets``
    (``ignoreDaemonsetsUtilization``) or ``ignore_mirror_pods`` (upstream's
    ``--ignore-mirror-pods-utilization``, default false, no OpenShift field) those pods' requests
    leave both sides: they are taken out of the allocatable rather than counted as use."""
    allocatable = node_allocatable(node)
    used: dict[str, int] = {}
    ignored: dict[str, int] = {}
    for pod in pods:
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        skip = (ignore_daemonsets and is_daemonset_pod(pod)) or \
            (ignore_mirror_pods and is_mirror_pod(pod))
        into = ignored if skip else used
        for name, amount in pod_requests(pod).items():
            into[name] = into.get(name, 0) + amount
    shares = []
    for resource in (CPU, MEMORY):
        if not allocatable.get(resource):
            continue
        room = allocatable[resource] - ignored.get(resource, 0)
        use = used.get(resource, 0)
        # Go's float division: x/0 is +Inf (never underutilized), 0/0 is NaN (always under)
        shares.append(use / room if room > 0 else (float("inf") if use else 0.0))
    return max(shares, default=0.0)


def node_ready(node: Mapping[str, Any]) -> bool:
    """Whether the node's Ready condition is True (upstream's readiness test)."""
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or ())


def being_deleted(node: Mapping[str, Any]) -> bool:
    return any(t.get("key") == TO_BE_DELETED_TAINT
               for t in (node.get("spec") or {}).get("taints") or [])


def _usable_destination(node: Mapping[str, Any]) -> bool:
    if (node.get("spec") or {}).get("unschedulable") or being_deleted(node):
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])


def _first_reason(node: Mapping[str, Any], used: float, group: NodeGroup | None,
                  view: ClusterView, config: AutoscalerConfig, per_group_left: Mapping[str, int],
                  remaining: Totals) -> tuple[str, str] | None:
    """Why ``node`` stays before any pod is simulated (upstream's eligibility checks,
    core/scaledown/eligibility/eligibility.go), in upstream's order; None: it may go."""
    name = node["metadata"]["name"]
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    if being_deleted(node) or (group is not None and view.node_machine.get(name, ("", ""))[1]
                               in group.deleting_machines):
        return CURRENTLY_BEING_DELETED, "node is being deleted"
    if annotations.get(SCALE_DOWN_DISABLED_KEY) == "true":
        return SCALE_DOWN_DISABLED, f"node is annotated {SCALE_DOWN_DISABLED_KEY}=true"
    if group is None:
        return NOT_AUTOSCALED, "node belongs to no autoscaled MachineSet"
    if used >= config.scale_down.utilization_threshold:
        return NOT_UNDERUTILIZED, (f"utilization {used:.2f} is not below "
                                   f"{config.scale_down.utilization_threshold}")
    if per_group_left.get(group.id, 0) <= 0:
        return MIN_SIZE_REACHED, f"MachineSet {group.id} is at its min size {group.min_size}"
    below = removal_blocked_by(remaining, node, config.limits)
    if below:
        return MIN_RESOURCE_LIMIT, (f"removing it would go below the cluster minimum of "
                                    f"{', '.join(below)}")
    return None


def _relocate(sim: Simulation, to_move: Sequence[JSON], others: Sequence[str]) -> str | None:
    """Place ``to_move`` on ``others`` in the simulation; on the first pod that fits nowhere,
    roll the simulation back and say so (simulator/cluster.go findPlaceFor's error, and the pod
    that found no node)."""
    mark = sim.checkpoint()
    for moved, pod in enumerate(to_move):
        target = sim.find_node(pod, others)
        if target is None:
            sim.rollback(mark)
            meta = pod.get("metadata") or {}
            return (f"can reschedule only {moved} out of {len(to_move)} pods: no other node for "
                    f"pod {meta.get('namespace')}/{meta.get('name')}")
        sim.place(pod, target)
    return None


@dataclass
class _Tally:
    """What one :func:`find_unneeded` pass has found so far, and what the nodes found unneeded
    have spent: their group's room above min size, the cluster's resources, the disruptions
    PodDisruptionBudgets and gangs allow."""

    per_group_left: dict[str, int]
    remaining: Totals
    budget: PdbBudget
    gang_budget: GangBudget
    unneeded: list[Unneeded] = field(default_factory=list)
    unremovable: dict[str, str] = field(default_factory=dict)
    messages: dict[str, str] = field(default_factory=dict)
    removing: set[str] = field(default_factory=set)

    def stays(self, node_name: str, reason: str, message: str) -> None:
        self.unremovable[node_name] = reason
        self.messages[node_name] = message

    def goes(self, node: Mapping[str, Any], entry: Unneeded, gpu_types: Sequence[str]) -> None:
        self.removing.add(entry.node)
        self.per_group_left[entry.group_id] -= 1
        self.remaining = self.remaining.minus(node_totals(node, gpu_types))
        self.unneeded.append(entry)


@dataclass(frozen=True)
class _Context:
    """The inputs every node of one :func:`find_unneeded` pass is judged with."""

    view: ClusterView
    sim: Simulation
    config: AutoscalerConfig
    destinations: Sequence[str]
    priority: Any
    now: float | None
    controllers: Controllers | None


def _judge(node: Mapping[str, Any], used: float, ctx: _Context, tally: _Tally) -> None:
    """One node, in utilization order: it stays (with upstream's UnremovableReason) or goes,
    its pods moved in the simulation to the nodes not already going."""
    name = node["metadata"]["name"]
    group_id = ctx.view.node_group.get(name)
    group = ctx.view.group(group_id) if group_id else None
    reason = _first_reason(node, used, group, ctx.view, ctx.config, tally.per_group_left,
                           tally.remaining)
    if reason is not None or group is None:
        tally.stays(name, *(reason or (NOT_AUTOSCALED, "")))
        return
    spent, gangs_spent = tally.budget.save(), tally.gang_budget.save()
    # The snapshot's pods: those moved here from nodes found unneeded earlier count too.
    to_move, blocked = _pods_to_move([dict(v.raw) for v in ctx.sim.snapshot.pods_on(name)],
                                     ctx.config, tally.budget, tally.gang_budget, ctx.priority,
                                     ctx.now, ctx.controllers)
    if blocked is not None:
        reason = BLOCKED_BY_POD, f"{blocked.reason}: {blocked.message}"
    else:
        others = [d for d in ctx.destinations if d != name and d not in tally.removing]
        stuck = _relocate(ctx.sim, to_move, others)
        reason = (NO_PLACE_TO_MOVE_PODS, stuck) if stuck is not None else None
    if reason is not None:
        tally.budget.restore(spent)
        tally.gang_budget.restore(gangs_spent)
        tally.stays(name, *reason)
        return
    ready = node_ready(node) and not has_startup_taint(node, ctx.config.startup_taints)
    tally.goes(node, Unneeded(name, group.id, used, tuple(
        f"{(p.get('metadata') or {}).get('namespace')}/{(p.get('metadata') or {}).get('name')}"
        for p in to_move), ready), [g.type for g in ctx.config.limits.gpus])


def find_unneeded(
    nodes: Sequence[Mapping[str, Any]],
    pods_by_node: Mapping[str, Sequence[JSON]],
    view: ClusterView,
    sim: Simulation,
    config: AutoscalerConfig,
    pdbs: Sequence[Mapping[str, Any]],
    totals: Totals,
    priority_of: Any = None,
    now: float | None = None,
    controllers: Controllers | None = None,
    gangs: Mapping[str, Gang] | None = None,
) -> ScaleDownPlan:
    """Every node judged (:func:`_judge`), least utilized first, as upstream's
    core/scaledown/planner/planner.go ``UpdateClusterState``; the simulation keeps the moves of
    the unneeded ones (caller rolls back when done). PodDisruptionBudgets' disruptions and the
    members a gang may lose are spent across every node found unneeded."""
    priority = priority_of or (lambda pod: int((pod.get("spec") or {}).get("priority") or 0))
    tally = _Tally({g.id: g.target_size - g.min_size for g in view.groups}, totals,
                   PdbBudget(pdbs), GangBudget(gangs or {}))
    by_name = {n["metadata"]["name"]: n for n in nodes}
    ctx = _Context(view, sim, config,
                   [name for name, n in by_name.items() if _usable_destination(n)], priority,
                   now, controllers)
    scored = sorted(
        ((utilization(n, pods_by_node.get(n["metadata"]["name"], ()),
                      config.ignore_daemonsets_utilization), n["metadata"]["name"]) for n in nodes),
    )
    for used, name in scored:
        _judge(by_name[name], used, ctx, tally)
    return ScaleDownPlan(tuple(tally.unneeded), tally.unremovable, tally.messages)


def _pods_to_move(pods: Sequence[JSON], config: AutoscalerConfig, budget: PdbBudget,
                  gang_budget: GangBudget, priority: Any, now: float | None,
                  controllers: Controllers | None = None) -> tuple[list[JSON], Verdict | None]:
    """The pods that must move off a node, or the first that blocks its removal (the drain
    rules of ``drainability``, then the gang rule of :mod:`.gangs`)."""
    to_move = []
    for pod in pods:
        verdict = classify(pod, config, budget, priority(pod), now, controllers)
        if verdict.action == "block":
            return [], verdict
        if verdict.action == "move":
            stranded = gang_budget.take(pod)
            if stranded is not None:
                meta = pod.get("metadata") or {}
                return [], Verdict("block", POD_GROUP_MIN_MEMBER,
                                   f"pod {meta.get('namespace')}/{meta.get('name')}: {stranded}")
            to_move.append(pod)
    return to_move, None


def pods_to_drain(pods: Sequence[JSON], config: AutoscalerConfig,
                  pdbs: Sequence[Mapping[str, Any]], priority_of: Any = None,
                  now: float | None = None, controllers: Controllers | None = None,
                  gangs: Mapping[str, Gang] | None = None) -> tuple[list[JSON], Verdict | None]:
    """The pods of a node being removed that must be evicted, or the first that blocks."""
    priority = priority_of or (lambda pod: int((pod.get("spec") or {}).get("priority") or 0))
    return _pods_to_move(pods, config, PdbBudget(pdbs), GangBudget(gangs or {}), priority, now,
                         controllers)


def eviction_grace_period(pod: Mapping[str, Any], maximum: int) -> int:
    """Upstream's evictor (core/scaledown/actuation/drain.go ``evictPod``): the pod's
    ``terminationGracePeriodSeconds`` when below ``maximum`` (``--max-graceful-termination-sec``),
    else ``maximum``; a pod that names none gets Kubernetes' default 30 s."""
    own = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
    if own is None:
        return DEFAULT_TERMINATION_GRACE_PERIOD
    return min(int(own), maximum)


def track_unneeded(since: Mapping[str, float], plan: ScaleDownPlan, now: float) -> dict[str, float]:
    """First time each currently unneeded node was seen unneeded (others forgotten)."""
    return {u.node: since.get(u.node, now) for u in plan.unneeded}


@dataclass(frozen=True)
class Cooldown:
    last_scale_up: float | None = None
    last_scale_down: float | None = None
    last_failure: float | None = None


def cooldown_reason(config: AutoscalerConfig, cooldown: Cooldown, now: float) -> str | None:
    """Why scale-down must wait now (None: it may act)."""
    checks = (
        (cooldown.last_scale_up, config.scale_down.delay_after_add, "delayAfterAdd"),
        (cooldown.last_scale_down, config.scale_down.delay_after_delete, "delayAfterDelete"),
        (cooldown.last_failure, config.scale_down.delay_after_failure, "delayAfterFailure"),
    )
    for stamp, delay, name in checks:
        if stamp is not None and now - stamp < delay:
            return f"{name} {delay:g}s has not passed since the last event"
    return None


def select_removals(plan: ScaleDownPlan, since: Mapping[str, float], now: float,
                    config: AutoscalerConfig) -> list[Unneeded]:
    """The unneeded nodes that go in this loop: every eligible empty node, plus at most one
    node whose pods must move."""
    def waited(u: Unneeded) -> bool:
        wait = config.scale_down.unneeded_time if u.ready else config.scale_down.unready_time
        return now - since.get(u.node, now) >= wait

    due = [u for u in plan.unneeded if waited(u)]
    empty = [u for u in due if not u.pods_to_move]
    busy = [u for u in due if u.pods_to_move]
    return empty + busy[:1]
