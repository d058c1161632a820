"""One autoscaler iteration as a table of named steps: observe, decide (pure), act, report.

Design: :func:`run_once` runs :data:`STEPS` in order on one :class:`Loop` (what the steps read
and decided so far), as upstream's cluster-autoscaler/core/static_autoscaler.go ``RunOnce``:

1. ``OBSERVE``: read the cluster (the watch caches' ``read``, or one LIST per kind:
   :mod:`.observe`); the first run removes the ToBeDeleted and DeletionCandidate taints a
   previous process left (:mod:`.taints`, upstream's ``cleanUpIfRequired``);
2. ``BUILD_VIEW``: the node groups (:func:`~.groups.build_cluster_view`) and whether the
   cluster may be autoscaled (:func:`~.loop_decisions.decide_safety`); with too many unready
   nodes the loop stops here, forgetting the unneeded nodes, as upstream;
3. ``PROVISION_TIMEOUTS``: back off MachineSets whose new nodes did not register within
   ``maxNodeProvisionTime`` and give their unregistered Machines back (:mod:`.scaleup_steps`);
4. ``PLAN_SCALE_UP``: the pods to help (:func:`~.loop_decisions.select_pending`) and the
   scale-up (:func:`~.scaleup.decide_scale_up`; core/scaleup/orchestrator/orchestrator.go);
5. ``ACTUATE_SCALE_UP``: raise ``spec.replicas``, TriggeredScaleUp / NotTriggerScaleUp events
   on the pods and on a PodGroup whose gang no scale-up can start whole;
6. ``PLAN_SCALE_DOWN``: the unneeded nodes and the cooldown (:func:`~.scaledown.find_unneeded`,
   :func:`~.loop_decisions.decide_cooldown`; core/scaledown/planner/planner.go);
7. ``ACTUATE_SCALE_DOWN``: outside the cooldowns, remove the nodes unneeded long enough
   (:mod:`.scaledown_steps`);
8. ``MIN_SIZE``: with ``enforceNodeGroupMinSize``, raise MachineSets below their min size
   (:func:`~.loop_decisions.plan_min_size`);
9. ``REPORT``: the metrics and the ClusterAutoscaler status (:mod:`.status`).

Every decision is a pure function of plain data (:mod:`.loop_decisions`, :mod:`.scaleup`,
:mod:`.scaledown`); the reads are in ``OBSERVE`` and the writes in the ``ACTUATE`` runners,
through the :class:`~.actuator.Actuator`, whose writes never overwrite what they did not read.
The in-memory :class:`~.state.AutoscalerState` is what upstream keeps in memory too; its times
are on the monotonic clock (``clock``); the wall clock (``now``) is read only for pod ages and
for what is written to the API. ``logVerbosity`` sets the level of the
``berthmaster.operator.autoscaler`` logger each loop.
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from berthmaster.foundation.kube import KubeClient
from berthmaster.operator.autoscaler import events, metrics, taints
from berthmaster.operator.autoscaler.actuator import Actuator, StaleDecision
from berthmaster.operator.autoscaler.config import (
    DEBUG_VERBOSITY,
    DEFAULT_NAMESPACE,
    AutoscalerConfig,
    parse_cluster_autoscaler,
)
from berthmaster.operator.autoscaler.expanders import Priorities, read_priorities
from berthmaster.operator.autoscaler.groups import ClusterView, build_cluster_view
from berthmaster.operator.autoscaler.limits import Totals, cluster_totals
from berthmaster.operator.autoscaler.loop_decisions import (
    Pending,
    Safety,
    decide_cooldown,
    decide_safety,
    loop_figures,
    plan_min_size,
    select_pending,
)
from berthmaster.operator.autoscaler.observe import (
    ACTIVE_PODS,
    MACHINE_API,
    POD_GROUPS_API,
    POLICY_API,
    SCHEDULING_API,
    ClusterReader,
    list_pod_groups,
    read_cluster,
)
from berthmaster.operator.autoscaler.scaledown import (
    Cooldown,
    ScaleDownPlan,
    find_unneeded,
    pods_to_drain,
    select_removals,
    track_unneeded,
)
from berthmaster.operator.autoscaler.scaledown_steps import (
    Drain,
    ScaleDownAborted,
    apply_scale_down,
)
from berthmaster.operator.autoscaler.scaleup import (
    ScaleUpDecision,
    decide_scale_up,
    nominated_node,
    pod_id,
    pod_priority,
)
from berthmaster.operator.autoscaler.scaleup_steps import (
    apply_scale_up,
    handle_provision_timeouts,
)
from berthmaster.operator.autoscaler.simulation import Placement, Simulation
from berthmaster.operator.autoscaler.state import (
    JSON,
    AutoscalerState,
    ClusterState,
    ProvisionRequest,
)
from berthmaster.operator.autoscaler.status import build_status, with_transition_times

__all__ = [  # what the operator and its tests import from here
    "ACTIVE_PODS", "MACHINE_API", "POD_GROUPS_API", "POLICY_API", "SCHEDULING_API", "Actuator",
    "AutoscalerState", "ClusterState", "Drain", "ProvisionRequest", "ScaleDownAborted",
    "StaleDecision", "apply_scale_down", "apply_scale_up", "build_status", "default_placement",
    "handle_provision_timeouts", "list_pod_groups", "log_level", "read_cluster", "run_once",
    "with_transition_times",
]

log = logging.getLogger("berthmaster.operator.autoscaler")


def default_placement() -> Placement:
    """The scheduler's placement engine (one placement truth for scheduler and autoscaler):
    kube-scheduler 1.35's default profile, VolumeBinding and the other volume filters included,
    as upstream's simulator runs the scheduler framework's filters
    (cluster-autoscaler/simulator/scheduling/hinting_simulator.go)."""
    from berthmaster.scheduler.config import default_profile
    from berthmaster.scheduler.engine import Engine

    return Engine(default_profile())


def log_level(verbosity: int) -> int:
    """klog's ``-v`` as a Python logging level: from 4 (upstream's debugging level) every
    decision is logged at DEBUG; below, INFO and above (klog's V(0) messages always show)."""
    return logging.DEBUG if verbosity >= DEBUG_VERBOSITY else logging.INFO


class Step(enum.Enum):
    OBSERVE = "Observe"
    BUILD_VIEW = "BuildView"
    PROVISION_TIMEOUTS = "ProvisionTimeouts"
    PLAN_SCALE_UP = "PlanScaleUp"
    ACTUATE_SCALE_UP = "ActuateScaleUp"
    PLAN_SCALE_DOWN = "PlanScaleDown"
    ACTUATE_SCALE_DOWN = "ActuateScaleDown"
    MIN_SIZE = "MinSize"
    REPORT = "Report"


@dataclass
class Loop:
    """One iteration's inputs and what its steps observed and decided, filled step by step."""

    kube: KubeClient
    autoscaler: Mapping[str, Any]
    state: AutoscalerState
    placement: Placement
    config: AutoscalerConfig
    act: Actuator
    read: ClusterReader | None
    namespace: str
    started: float
    cluster: ClusterState | None = None
    view: ClusterView = field(default_factory=lambda: build_cluster_view([], [], []))
    safety: Safety = field(default_factory=lambda: Safety(0, 0, 0, None))
    in_backoff: list[str] = field(default_factory=list)
    sim: Simulation | None = None
    totals: Totals | None = None
    pending: Pending | None = None
    decision: ScaleUpDecision = field(default_factory=ScaleUpDecision)
    plan: ScaleDownPlan = field(default_factory=ScaleDownPlan)
    cooldown: str | None = None
    status: JSON | None = None  # set by the step that ends the loop

    @property
    def now(self) -> float:
        return self.act.now

    @property
    def clock(self) -> float:
        return self.act.clock

    def observed(self) -> ClusterState:
        assert self.cluster is not None, "OBSERVE runs first"
        return self.cluster


async def observe(loop: Loop) -> None:
    loop.cluster = await (loop.read(loop.config) if loop.read is not None
                          else read_cluster(loop.kube, loop.config, loop.namespace))
    if not loop.state.initialized:
        await taints.clean_up_at_start(loop.kube, loop.cluster.nodes,
                                       loop.config.scale_down.cordon_node_before_terminating,
                                       loop.act.event)
        loop.state.initialized = True


def previous_conditions(loop: Loop) -> list[Mapping[str, Any]]:
    conditions: list[Mapping[str, Any]] = (loop.autoscaler.get("status") or {}).get(
        "conditions") or []
    return conditions


async def build_view(loop: Loop) -> None:
    cluster = loop.observed()
    loop.view = build_cluster_view(cluster.machine_sets, cluster.machines, cluster.nodes,
                                   loop.config.startup_taints)
    for problem in loop.view.problems:
        log.warning("%s", problem)
    loop.safety = decide_safety(cluster.nodes, loop.view)
    if loop.safety.unsafe is not None:
        # upstream skips the whole loop (and forgets the unneeded nodes) until it recovers
        log.warning("Cluster is not ready for autoscaling: %s (%d of %d nodes unready)",
                    loop.safety.unsafe, loop.safety.unready, loop.safety.total)
        loop.state.unneeded_since = {}
        metrics.record_loop(loop_figures(loop.safety, loop.view), loop.now)
        loop.status = build_status(loop.view, loop.state, ScaleUpDecision(), ScaleDownPlan(),
                                   None, 0, loop.config, loop.now, previous_conditions(loop),
                                   loop.clock)


async def provision_timeouts(loop: Loop) -> None:
    await handle_provision_timeouts(loop.act, loop.view, loop.state, loop.config,
                                    loop.observed().machine_sets)
    loop.in_backoff = [g for g, until in loop.state.backoff_until.items() if until > loop.clock]


async def _priorities(loop: Loop) -> Priorities:
    """The Priority expander's ConfigMap; a bad one is never fatal: the expanders after
    Priority decide (expanders.py), with a warning event on the ClusterAutoscaler."""
    if "Priority" not in loop.config.expanders:
        return {}
    reading = read_priorities(loop.observed().priority_configmap, loop.namespace)
    if reading.problem:
        log.warning("%s", reading.problem)
        await loop.act.event(loop.autoscaler, reading.reason, reading.problem, "Warning")
    return reading.priorities


async def plan_scale_up(loop: Loop) -> None:
    cluster, config = loop.observed(), loop.config
    sim = Simulation.build(loop.placement, cluster.nodes, cluster.pods, pdbs=cluster.pdbs,
                           priority_classes=list(cluster.priority_classes.values()),
                           **cluster.volumes.snapshot_args())
    # Starting nodes are registered (counted among the nodes) though upcoming for placement.
    upcoming = [(g.template, g.upcoming - len(g.starting_nodes)) for g in loop.view.groups
                if g.template is not None]
    loop.sim, loop.totals = sim, cluster_totals(cluster.nodes, config.limits, upcoming)
    pending = loop.pending = select_pending(cluster.pods, config, cluster.priority_classes,
                                            set(sim.node_names()), loop.now, cluster.pod_groups)
    for pod in pending.preempting:  # the room preemption makes is theirs
        sim.place(pod, nominated_node(pod))
    for young in pending.young:
        log.debug("pod %s is younger than its scale-up delay; left to the scheduler",
                  pod_id(young))
    priorities = await _priorities(loop)
    started = time.monotonic()
    loop.decision = decide_scale_up(pending.pods, loop.view, sim, config, loop.totals,
                                    loop.in_backoff, loop.state.rng, priorities, pending.gangs)
    metrics.function_duration_seconds.labels("scaleUp").observe(time.monotonic() - started)


async def actuate_scale_up(loop: Loop) -> None:
    decision, pending = loop.decision, loop.pending
    assert pending is not None, "PLAN_SCALE_UP runs first"
    pods_by_key = {pod_id(p): p for p in loop.observed().pods}
    await apply_scale_up(loop.act, decision, pods_by_key, loop.state)
    for key, message in decision.not_triggered_gangs.items():
        if key in pending.gangs:
            await loop.act.event(pending.gangs[key].pod_group, events.NOT_TRIGGER_SCALE_UP,
                                 message)
    log.debug("scale-up: %d pending pod(s), %d waiting for upcoming nodes, increases %s, "
              "groups that cannot help: %s", len(pending.pods), len(decision.waiting),
              [str(i) for i in decision.increases] or "none",
              dict(decision.group_reasons) or "none")


def _drain_plan(loop: Loop) -> Drain:
    """How a node's pods are judged again at its removal, as the planner judged them."""
    cluster, config, pending = loop.observed(), loop.config, loop.pending
    assert pending is not None
    return lambda pods: pods_to_drain(
        pods, config, cluster.pdbs, lambda pod: pod_priority(pod, cluster.priority_classes),
        loop.now, cluster.controllers, pending.gangs)


async def plan_scale_down(loop: Loop) -> None:
    cluster, config, state, pending = loop.observed(), loop.config, loop.state, loop.pending
    if not config.scale_down.enabled or loop.sim is None or pending is None:
        return
    by_node: dict[str, list[JSON]] = {}
    for pod in cluster.pods:
        node_name = (pod.get("spec") or {}).get("nodeName")
        if node_name:
            by_node.setdefault(node_name, []).append(pod)
    loop.plan = find_unneeded(cluster.nodes, by_node, loop.view, loop.sim, config, cluster.pdbs,
                              cluster_totals(cluster.nodes, config.limits),
                              lambda pod: pod_priority(pod, cluster.priority_classes), loop.now,
                              cluster.controllers, pending.gangs)
    state.unneeded_since = track_unneeded(state.unneeded_since, loop.plan, loop.clock)
    loop.cooldown = decide_cooldown(config, Cooldown(state.last_scale_up, state.last_scale_down,
                                                     state.last_failure), loop.clock,
                                    bool(loop.decision.increases))
    log.debug("scale-down: unneeded %s, unremovable %s, cooldown %s",
              [u.node for u in loop.plan.unneeded] or "none",
              dict(loop.plan.unremovable) or "none", loop.cooldown or "none")


async def actuate_scale_down(loop: Loop) -> None:
    if not loop.config.scale_down.enabled or loop.cooldown is not None:
        return
    removals = select_removals(loop.plan, loop.state.unneeded_since, loop.clock, loop.config)
    nodes = {n["metadata"]["name"]: n for n in loop.observed().nodes}
    await apply_scale_down(loop.act, removals, loop.view, nodes, loop.state, loop.config,
                           _drain_plan(loop))


async def min_size(loop: Loop) -> None:
    assert loop.totals is not None, "PLAN_SCALE_UP runs first"
    raise_to_min = plan_min_size(loop.view, loop.config, loop.totals, loop.decision,
                                 loop.in_backoff)
    if raise_to_min:
        log.info("scale-up to node group min size: %s", ", ".join(str(i) for i in raise_to_min))
        pods_by_key = {pod_id(p): p for p in loop.observed().pods}
        await apply_scale_up(loop.act, ScaleUpDecision(increases=raise_to_min), pods_by_key,
                             loop.state)


async def report(loop: Loop) -> None:
    unschedulable = len(loop.pending.pods) if loop.pending is not None else 0
    metrics.record_loop(loop_figures(loop.safety, loop.view, unschedulable, loop.plan,
                                     loop.cooldown), loop.now)
    metrics.function_duration_seconds.labels("main").observe(time.monotonic() - loop.started)
    loop.status = build_status(loop.view, loop.state, loop.decision, loop.plan, loop.cooldown,
                               unschedulable, loop.config, loop.now, previous_conditions(loop),
                               loop.clock)


StepRunner = Callable[[Loop], Awaitable[None]]
STEPS: tuple[tuple[Step, StepRunner], ...] = (
    (Step.OBSERVE, observe),
    (Step.BUILD_VIEW, build_view),
    (Step.PROVISION_TIMEOUTS, provision_timeouts),
    (Step.PLAN_SCALE_UP, plan_scale_up),
    (Step.ACTUATE_SCALE_UP, actuate_scale_up),
    (Step.PLAN_SCALE_DOWN, plan_scale_down),
    (Step.ACTUATE_SCALE_DOWN, actuate_scale_down),
    (Step.MIN_SIZE, min_size),
    (Step.REPORT, report),
)


async def run_once(kube: KubeClient, autoscaler: Mapping[str, Any], state: AutoscalerState,
                   placement: Placement, now: float | None = None,
                   read: ClusterReader | None = None, namespace: str = DEFAULT_NAMESPACE,
                   clock: float | None = None) -> JSON:
    """One iteration; returns the ClusterAutoscaler ``status`` to write. ``read`` gives the
    cluster (the watch caches' ``read``); without it every kind is LISTed. ``namespace`` is
    the operator's, the Priority expander's ConfigMap's (the watch caches' own). ``now`` is
    the wall clock (pod ages, the stamps written), ``clock`` the monotonic one every duration
    kept in ``state`` is measured on (see the module docstring)."""
    started = time.monotonic()
    now = time.time() if now is None else now
    config = parse_cluster_autoscaler(autoscaler)
    log.setLevel(log_level(config.log_verbosity))
    loop = Loop(kube, autoscaler, state, placement, config,
                Actuator(kube, now, started if clock is None else clock), read, namespace,
                started)
    for _step, runner in STEPS:
        await runner(loop)
        if loop.status is not None:
            return loop.status
    raise AssertionError("the REPORT step sets the status")
