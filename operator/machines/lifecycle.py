"""The Machine deletion state machine: which step comes next, decided from the Machine alone.

Order (upstream's: openshift/machine-api-operator pkg/controller/machine/controller.go
``Reconcile`` and drain_controller.go; the hooks as openshift/api machine/v1beta1
``LifecycleHooks`` documents them):

1. ``MARK_DELETING``: phase Deleting, ``status.deletionProgress.startedAt`` recorded;
2. ``SKIP_DRAIN`` when the Machine has no Node or carries
   ``machine.openshift.io/exclude-node-draining``: as upstream's drain controller, which checks
   the annotation and ``status.nodeRef`` before it looks at preDrain hooks, the drain and the
   wait on preDrain hooks are both skipped (Drained True, "Node drain skipped");
3. ``WAIT_PRE_DRAIN`` while any preDrain hook remains (Drainable False, HookPresent);
4. ``DRAIN`` (cordon, evict; Drained False/DrainError while it fails; Drained True/NodeNotOwned
   without draining when the nodeRef names a Node of another providerID, see nodes.py);
5. ``WAIT_PRE_TERMINATE`` while any preTerminate hook remains (Terminable False, HookPresent);
6. ``DELETE_INSTANCE`` through the provider, then ``WAIT_INSTANCE_GONE``;
7. ``DELETE_NODE`` (unless the Node was found not to be the Machine's: ``nodeNotOwnedAt``);
8. ``REMOVE_FINALIZER``.

Every completed step is recorded in the Machine's status before the next begins (Drained True,
``deletionProgress.instanceDeletedAt``, ``instanceGoneAt``, ``nodeDeletedAt``), so the decision
below, taken again after a restart, resumes at the first unfinished step: none is skipped, and
the recorded ones are not repeated. Steps whose side effect may have happened without being
recorded (an instance deletion, a Node deletion) are idempotent by nature (404 is success).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from berthmaster.foundation.durations import format_go_duration, parse_go_timedelta
from berthmaster.foundation.times import parse_rfc3339
from berthmaster.operator.machines import api
from berthmaster.operator.machines.conditions import is_true
from berthmaster.operator.machines.hooks import PRE_DRAIN, PRE_TERMINATE, hooks_of

Machine = dict[str, Any]


class Step(enum.Enum):
    NOTHING = "Nothing"
    MARK_DELETING = "MarkDeleting"
    WAIT_PRE_DRAIN = "WaitForPreDrainHooks"
    DRAIN = "Drain"
    SKIP_DRAIN = "SkipDrain"
    WAIT_PRE_TERMINATE = "WaitForPreTerminateHooks"
    DELETE_INSTANCE = "DeleteInstance"
    WAIT_INSTANCE_GONE = "WaitForInstanceGone"
    DELETE_NODE = "DeleteNode"
    REMOVE_FINALIZER = "RemoveFinalizer"


def progress(machine: Machine) -> dict[str, Any]:
    return dict((machine.get("status") or {}).get("deletionProgress") or {})


def node_name(machine: Machine) -> str | None:
    ref = (machine.get("status") or {}).get("nodeRef") or {}
    return ref.get("name") or None


def drain_excluded(machine: Machine) -> bool:
    return api.EXCLUDE_NODE_DRAINING in ((machine.get("metadata") or {}).get("annotations") or {})


def has_finalizer(machine: Machine) -> bool:
    return api.FINALIZER in ((machine.get("metadata") or {}).get("finalizers") or [])


def decide_deletion_step(machine: Machine) -> Step:
    """The next step for a Machine with a deletionTimestamp."""
    if not has_finalizer(machine):
        return Step.NOTHING
    status = machine.get("status") or {}
    done = progress(machine)
    if status.get("phase") != api.DELETING or not done.get("startedAt"):
        return Step.MARK_DELETING
    if not is_true(status.get("conditions"), api.DRAINED):
        if drain_excluded(machine) or node_name(machine) is None:
            return Step.SKIP_DRAIN  # upstream: no drain, so no wait on preDrain hooks either
        if hooks_of(machine, PRE_DRAIN):
            return Step.WAIT_PRE_DRAIN
        return Step.DRAIN
    if hooks_of(machine, PRE_TERMINATE):
        return Step.WAIT_PRE_TERMINATE
    if not done.get("instanceDeletedAt"):
        return Step.DELETE_INSTANCE
    if not done.get("instanceGoneAt"):
        return Step.WAIT_INSTANCE_GONE
    if node_name(machine) is not None and not done.get("nodeDeletedAt") \
            and not done.get("nodeNotOwnedAt"):
        return Step.DELETE_NODE
    return Step.REMOVE_FINALIZER


@dataclass(frozen=True)
class DrainTimeout:
    """The opt-in drain timeout of one Machine (``berthmaster.io/drain-timeout``)."""

    limit: timedelta
    proceed: bool

    @property
    def text(self) -> str:
        return format_go_duration(self.limit.total_seconds())


def drain_timeout(machine: Machine) -> DrainTimeout | None:
    """The Machine's drain timeout, None without one; ValueError names the annotation and fix."""
    annotations = (machine.get("metadata") or {}).get("annotations") or {}
    raw = annotations.get(api.DRAIN_TIMEOUT)
    if raw is None:
        return None
    try:
        limit = parse_go_timedelta(str(raw))
    except ValueError as error:
        name = (machine.get("metadata") or {}).get("name")
        raise ValueError(f"Machine {name}: annotation {api.DRAIN_TIMEOUT}: {error}") from None
    proceed = str(annotations.get(api.PROCEED_AFTER_DRAIN_TIMEOUT, "")).lower() == "true"
    return DrainTimeout(limit, proceed)


def drain_timed_out(machine: Machine, timeout: DrainTimeout, now: datetime) -> bool:
    started = parse_rfc3339(progress(machine).get("drainStartedAt"))
    return started is not None and now - started >= timeout.limit
