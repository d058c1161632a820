"""The loop's last step, report: the ClusterAutoscaler status, a pure function of the loop's
decisions and state.

Design: conditions Healthy, ScaleUp and ScaleDown (keeping a condition's lastTransitionTime
while its status does not change), the node groups' sizes and backoffs, why autoscaled nodes
stay (upstream's UnremovableReason names), and the last scale-up and scale-down. ``now`` is the
wall clock the stamps are written in; the state's times are on the monotonic ``clock``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from berthmaster.operator.autoscaler.actuator import stamp
from berthmaster.operator.autoscaler.config import AutoscalerConfig
from berthmaster.operator.autoscaler.groups import ClusterView
from berthmaster.operator.autoscaler.scaledown import ScaleDownPlan
from berthmaster.operator.autoscaler.scaleup import ScaleUpDecision
from berthmaster.operator.autoscaler.state import JSON, AutoscalerState


def _condition(kind: str, status: bool, reason: str, message: str) -> JSON:
    return {"type": kind, "status": "True" if status else "False", "reason": reason,
            "message": message}


def with_transition_times(conditions: list[JSON], previous: Sequence[Mapping[str, Any]],
                          now: float) -> list[JSON]:
    """Keep a condition's lastTransitionTime while its status does not change."""
    before = {c.get("type"): c for c in previous}
    for condition in conditions:
        old = before.get(condition["type"])
        same = old is not None and old.get("status") == condition["status"]
        condition["lastTransitionTime"] = (old or {}).get("lastTransitionTime") if same and \
            (old or {}).get("lastTransitionTime") else stamp(now)
    return conditions


def build_status(view: ClusterView, state: AutoscalerState, decision: ScaleUpDecision,
                 plan: ScaleDownPlan, cooldown: str | None, unschedulable: int,
                 config: AutoscalerConfig, now: float,
                 previous: Sequence[Mapping[str, Any]] = (), clock: float | None = None
                 ) -> JSON:
    """The ClusterAutoscaler status. ``now`` is the wall clock (the stamps written), ``clock``
    the monotonic one the state's times are on (``now`` when not given)."""
    clock = now if clock is None else clock
    backing_off = sorted(g for g, until in state.backoff_until.items() if until > clock)
    if decision.increases:
        scale_up = _condition("ScaleUp", True, "InProgress",
                              "scaling up " + ", ".join(str(i) for i in decision.increases))
    elif state.provisioning:
        scale_up = _condition("ScaleUp", True, "InProgress", "waiting for nodes of " +
                              ", ".join(sorted(state.provisioning)))
    elif backing_off:
        scale_up = _condition("ScaleUp", False, "Backoff", "in backoff after failed scale-up: " +
                              ", ".join(backing_off))
    elif decision.not_triggered:
        scale_up = _condition("ScaleUp", False, "NoOptions",
                              f"{len(decision.not_triggered)} pod(s) cannot be helped")
    else:
        scale_up = _condition("ScaleUp", False, "NoActivity", "no unschedulable pods to help")
    if not config.scale_down.enabled:
        scale_down = _condition("ScaleDown", False, "Disabled", "scaleDown.enabled is false")
    elif plan.unneeded:
        scale_down = _condition("ScaleDown", True, "CandidatesPresent",
                                "unneeded: " + ", ".join(u.node for u in plan.unneeded)
                                + (f" (waiting: {cooldown})" if cooldown else ""))
    else:
        scale_down = _condition("ScaleDown", False, "NoCandidates", "no unneeded nodes")
    healthy = _condition("Healthy", not view.problems, "Healthy" if not view.problems
                         else "InvalidNodeGroups", "; ".join(view.problems) or "all node "
                         "groups readable")
    status: JSON = {
        "conditions": with_transition_times([healthy, scale_up, scale_down], previous, now),
        "unschedulablePods": unschedulable,
        "unneededNodes": len(plan.unneeded),
        # Why autoscaled nodes stay (first 50; upstream's UnremovableReason names).
        "unremovableNodes": [
            {"name": node, "reason": reason, "message": plan.messages.get(node, "")}
            for node, reason in sorted(plan.unremovable.items())
            if reason != "NotAutoscaled"][:50],
        "nodeGroups": [{"name": g.id, "minSize": g.min_size, "maxSize": g.max_size,
                        "targetSize": g.target_size, "registered": len(g.nodes),
                        **({"backoffUntil": stamp(now + state.backoff_until[g.id] - clock)}
                           if state.backoff_until.get(g.id, 0) > clock else {})}
                       for g in view.groups],
    }
    if state.last_scale_up_record:
        status["lastScaleUp"] = state.last_scale_up_record
    if state.last_scale_down_record:
        status["lastScaleDown"] = state.last_scale_down_record
    return status

