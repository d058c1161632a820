"""The scale-up step runners: the writes of a scale-up decision and of a timed-out one.

Design: the decisions are pure (:func:`~.scaleup.decide_scale_up`,
:func:`~.loop_decisions.decide_provisioning`); these runners apply them in order, recording in
the :class:`~.state.AutoscalerState` what was done and writing through the
:class:`~.actuator.Actuator`.
A MachineSet resized by someone else since the read is left alone (``StaleDecision``) and
decided again next loop. Mirrors upstream's core/scaleup/orchestrator/executor.go
(``ExecuteScaleUps``: resize, record the request, the TriggeredScaleUp events) and
clusterstate/clusterstate.go (``updateScaleRequests``: a request that timed out backs its group
off and its unregistered nodes are given back).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from berthmaster.operator.autoscaler import events, metrics
from berthmaster.operator.autoscaler.actuator import Actuator, StaleDecision, stamp
from berthmaster.operator.autoscaler.config import AutoscalerConfig
from berthmaster.operator.autoscaler.groups import ClusterView
from berthmaster.operator.autoscaler.loop_decisions import (
    Backoffs,
    ProvisionVerdict,
    decide_provisioning,
)
from berthmaster.operator.autoscaler.scaleup import ScaleUpDecision
from berthmaster.operator.autoscaler.state import JSON, AutoscalerState, ProvisionRequest

log = logging.getLogger("berthmaster.operator.autoscaler")


def _reset_backoff(state: AutoscalerState, group_id: str) -> None:
    # clusterstate.go updateScaleRequests: a finished scale-up resets the backoff
    for backoffs in (state.backoff_length, state.backoff_until, state.backoff_last_failure):
        backoffs.pop(group_id, None)


async def _give_back(act: Actuator, view: ClusterView, verdict: ProvisionVerdict,
                     config: AutoscalerConfig, machine_sets: Sequence[JSON]) -> None:
    """A timed-out request's writes: the event, and its unregistered Machines given back, as
    upstream decreases the target size."""
    group = view.group(verdict.group_id)
    assert group is not None  # verdicts are made for the view's groups only
    machine_set = next(m for m in machine_sets
                       if f"{m['metadata']['namespace']}/{m['metadata']['name']}" == group.id)
    await act.event(machine_set, events.SCALE_UP_TIMED_OUT,
                    f"Nodes added to group {events.node_group_id(group.id)} failed to "
                    "register within "
                    f"{config.max_node_provision_time:g}s", "Warning")
    for machine in verdict.give_back:
        await act.mark_machine(group.namespace, machine)
    if verdict.new_size is not None:
        try:
            await act.set_replicas(group.id, group.target_size, verdict.new_size)
        except StaleDecision as error:
            log.info("%s", error.message)


async def handle_provision_timeouts(act: Actuator, view: ClusterView, state: AutoscalerState,
                                    config: AutoscalerConfig, machine_sets: Sequence[JSON]
                                    ) -> list[str]:
    """Back off the groups whose requested nodes did not register in time; their ids."""
    decision = decide_provisioning(
        view, state.provisioning,
        Backoffs(state.backoff_length, state.backoff_until, state.backoff_last_failure),
        act.clock, config.max_node_provision_time)
    for gone in decision.forget:
        del state.provisioning[gone]
    timed_out = []
    for verdict in decision.verdicts:
        if verdict.outcome == "waiting":
            continue
        del state.provisioning[verdict.group_id]
        if verdict.outcome == "arrived":
            _reset_backoff(state, verdict.group_id)
            continue
        assert verdict.backoff is not None
        state.backoff_length[verdict.group_id], state.backoff_until[verdict.group_id] = \
            verdict.backoff
        state.backoff_last_failure[verdict.group_id] = act.clock
        metrics.failed_scale_ups_total.labels("timeout").inc()
        timed_out.append(verdict.group_id)
        await _give_back(act, view, verdict, config, machine_sets)
    return timed_out


async def apply_scale_up(act: Actuator, decision: ScaleUpDecision, pods: Mapping[str, JSON],
                         state: AutoscalerState) -> None:
    made = []
    for increase in decision.increases:
        try:
            await act.set_replicas(increase.group_id, increase.current, increase.new)
        except StaleDecision as error:
            # someone else resized it since our read: never overwrite, decide again next loop
            log.info("scale-up of %s skipped: %s", increase.group_id, error.message)
            continue
        made.append(increase)
        state.provisioning[increase.group_id] = ProvisionRequest(act.clock, increase.new)
        metrics.scaled_up_nodes_total.inc(increase.new - increase.current)
        log.info("scale-up: %s %d->%d (max: %d)", increase.group_id, increase.current,
                 increase.new, increase.max_size)
    if made:
        state.last_scale_up = act.clock
        state.last_scale_up_record = {
            "time": stamp(act.now),
            "nodeGroups": [{"name": i.group_id, "from": i.current, "to": i.new,
                            "max": i.max_size} for i in made],
            "pods": sorted(decision.triggered)[:50],
        }
    for key, message in decision.triggered.items():
        await act.event(pods[key], events.TRIGGERED_SCALE_UP, message)
    for key, message in decision.not_triggered.items():
        await act.event(pods[key], events.NOT_TRIGGER_SCALE_UP, message)

