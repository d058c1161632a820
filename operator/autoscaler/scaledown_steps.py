"""The scale-down step runner: remove the nodes the planner selected, one at a time.

Design: the decisions are pure (:func:`~.scaledown.find_unneeded`,
:func:`~.scaledown.select_removals`, and :func:`~.scaledown.pods_to_drain` judging a node's
pods again on a fresh list made after its taint); this runner does the writes in upstream's
order (core/scaledown/actuation/actuator.go ``StartDeletion`` and drain.go): taint (and cordon
with ``cordonNodeBeforeTerminating``), evict the pods that move within one
``MAX_POD_EVICTION_TIME`` budget, evict DaemonSet pods best effort, wait for the delay-deletion
annotations, mark the Machine ``delete-machine`` and lower its MachineSet's replicas from the
size the decision saw. Any failure untaints the node (and unmarks the Machine: upstream's
clusterapi ``DeleteNodes`` after a failed ``SetSize``) and ends this loop's scale-down.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, MutableMapping, Sequence

from berthmaster.foundation.kube import KubeError
from berthmaster.operator.autoscaler import events, metrics
from berthmaster.operator.autoscaler.actuation import (
    MAX_POD_EVICTION_TIME,
    NODE_DELETION_DELAY_TIMEOUT,
    daemonset_pods_to_evict,
    has_delay_deletion,
)
from berthmaster.operator.autoscaler.actuator import Actuator, stamp
from berthmaster.operator.autoscaler.config import AutoscalerConfig
from berthmaster.operator.autoscaler.drainability import Verdict
from berthmaster.operator.autoscaler.groups import ClusterView
from berthmaster.operator.autoscaler.scaledown import Unneeded, eviction_grace_period
from berthmaster.operator.autoscaler.state import JSON, AutoscalerState

log = logging.getLogger("berthmaster.operator.autoscaler")


class ScaleDownAborted(Exception):
    """A node's removal stopped before its Machine was given back (see apply_scale_down)."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


Drain = Callable[[Sequence[JSON]], tuple[list[JSON], Verdict | None]]
MachineRef = tuple[str, str]


async def _evict_all(act: Actuator, removal: Unneeded, fresh: Sequence[JSON],
                     to_move: Sequence[JSON], config: AutoscalerConfig) -> None:
    """The pods that must move (a refusal aborts the removal), then the DaemonSet pods (best
    effort: they go with the node), within one eviction budget for the node."""
    deadline = act.monotonic() + MAX_POD_EVICTION_TIME
    for pod in to_move:
        await act.event(pod, events.SCALE_DOWN, "deleting pod for node scale down")
        refused = await act.evict_retrying(
            pod, eviction_grace_period(pod, config.max_pod_grace_period), deadline)
        if refused is not None:
            await act.event(pod, events.SCALE_DOWN_FAILED,
                            "failed to delete pod for ScaleDown", "Warning")
            raise refused
    for pod in daemonset_pods_to_evict(fresh, occupied=bool(removal.pods_to_move)):
        refused = await act.evict_retrying(
            pod, eviction_grace_period(pod, config.max_pod_grace_period), deadline)
        if refused is not None:
            log.info("DaemonSet pod %s/%s not evicted: %s",
                     pod["metadata"].get("namespace"), pod["metadata"].get("name"), refused)


async def _drain_node(act: Actuator, removal: Unneeded, node: JSON, config: AutoscalerConfig,
                      drain_plan: Drain) -> None:
    """Taint the node, judge its pods again on a fresh list, evict, wait for delay-deletion."""
    await act.taint_node(node, cordon=config.scale_down.cordon_node_before_terminating)
    fresh = await act.pods_on(removal.node)
    to_move, blocked = drain_plan(fresh)
    if blocked is not None:
        raise ScaleDownAborted(f"{blocked.reason}: {blocked.message}")
    await _evict_all(act, removal, fresh, to_move, config)
    if has_delay_deletion(node) and not await act.wait_for_delay_deletion(removal.node):
        log.warning("Delay node deletion timed out for node %s, delay deletion "
                    "annotation wasn't removed within %gs", removal.node,
                    NODE_DELETION_DELAY_TIMEOUT)


async def _abandon(act: Actuator, node: JSON, machine: MachineRef | None, marked: bool,
                   config: AutoscalerConfig, error: KubeError | ScaleDownAborted) -> None:
    """Undo a failed removal: unmark the Machine, untaint (and uncordon) the node."""
    if marked and machine is not None:
        await act.unmark_machine(*machine)
    # a node left tainted would never take pods again
    await act.untaint_node(node, uncordon=config.scale_down.cordon_node_before_terminating)
    await act.event(node, events.SCALE_DOWN_FAILED,
                    f"failed to delete the node: {error.message}", "Warning")
    log.warning("scale-down of %s failed: %s", node["metadata"]["name"], error)


async def remove_node(act: Actuator, removal: Unneeded, node: JSON, machine: MachineRef | None,
                      targets: MutableMapping[str, int], config: AutoscalerConfig,
                      drain_plan: Drain) -> bool:
    """One node's removal; whether it went (a failure is undone: :func:`_abandon`)."""
    marked = False
    try:
        if machine is None:
            raise ScaleDownAborted(f"node {removal.node} has no Machine")
        await _drain_node(act, removal, node, config, drain_plan)
        await act.mark_machine(*machine)
        marked = True
        await act.set_replicas(removal.group_id, targets[removal.group_id],
                               targets[removal.group_id] - 1)
        targets[removal.group_id] -= 1
    except (KubeError, ScaleDownAborted) as error:
        await _abandon(act, node, machine, marked, config, error)
        return False
    return True


async def apply_scale_down(act: Actuator, removals: Sequence[Unneeded], view: ClusterView,
                           nodes: Mapping[str, JSON], state: AutoscalerState,
                           config: AutoscalerConfig, drain_plan: Drain) -> list[str]:
    """Remove each node in turn (:func:`remove_node`); the first failure ends the scale-down
    of this loop. The names of the nodes removed."""
    removed = []
    targets = {g.id: g.target_size for g in view.groups}
    for removal in removals:
        node = nodes[removal.node]
        machine = view.node_machine.get(removal.node)
        if not await remove_node(act, removal, node, machine, targets, config, drain_plan):
            state.last_failure = act.clock
            break
        removed.append(removal.node)
        state.unneeded_since.pop(removal.node, None)
        reason = "underutilized" if removal.pods_to_move else "empty"
        metrics.scaled_down_nodes_total.labels(reason).inc()
        await act.event(node, events.SCALE_DOWN, "marked the node as toBeDeleted/unschedulable")
        log.info("scale-down: node %s (machine %s/%s) of %s", removal.node,
                 *(machine or ("", "")), removal.group_id)
    if removed:
        state.last_scale_down = act.clock
        state.last_scale_down_record = {"time": stamp(act.now), "nodes": removed}
    return removed

