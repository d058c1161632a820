"""Lifecycle hooks: ``spec.lifecycleHooks.preDrain`` / ``preTerminate`` and what they block.

A hook is ``{name, owner}``. While any preDrain hook remains the Machine is not Drainable; while
any preTerminate hook remains it is not Terminable. The conditions say who blocks, in upstream's
words: Go's ``%+v`` of the hook list (``[{Name:X Owner:y} {Name:Z Owner:w}]``), which is also the
shape of the refusal message when a hook is added or changed during deletion (enforced by the
ValidatingAdmissionPolicy in ``deploy/``; :func:`changed_hooks` is its pure twin).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from berthmaster.operator.machines.api import DRAINABLE, HOOK_PRESENT, TERMINABLE
from berthmaster.operator.machines.conditions import (
    Condition,
    false_condition,
    set_condition,
    true_condition,
)

Hook = dict[str, Any]

PRE_DRAIN = "preDrain"
PRE_TERMINATE = "preTerminate"


def hooks_of(machine: dict[str, Any], stage: str) -> list[Hook]:
    hooks = ((machine.get("spec") or {}).get("lifecycleHooks") or {}).get(stage) or []
    return [h for h in hooks if isinstance(h, dict)]


def go_format(hooks: list[Hook]) -> str:
    """Go's ``%+v`` of a ``[]LifecycleHook``: ``[{Name:a Owner:b} {Name:c Owner:d}]``."""
    return "[" + " ".join(f"{{Name:{h.get('name', '')} Owner:{h.get('owner', '')}}}"
                          for h in hooks) + "]"


def drainable_condition(machine: dict[str, Any]) -> Condition:
    return _hook_condition(machine, PRE_DRAIN, DRAINABLE, "Drain")


def terminable_condition(machine: dict[str, Any]) -> Condition:
    return _hook_condition(machine, PRE_TERMINATE, TERMINABLE, "Terminate")


def _hook_condition(machine: dict[str, Any], stage: str, kind: str, operation: str) -> Condition:
    """``kind`` False/HookPresent while any hook of ``stage`` remains, in upstream's words."""
    blocking = hooks_of(machine, stage)
    if blocking:
        return false_condition(kind, HOOK_PRESENT,
                               f"{operation} operation currently blocked by: {go_format(blocking)}")
    return true_condition(kind)


def with_hook_conditions(conditions: list[Condition] | None, machine: dict[str, Any],
                         now: datetime) -> list[Condition]:
    """Drainable and Terminable as the hooks make them (upstream refreshes them on every write)."""
    result = set_condition(conditions, drainable_condition(machine), now)
    return set_condition(result, terminable_condition(machine), now)


def changed_hooks(old: list[Hook], new: list[Hook]) -> list[Hook]:
    """Hooks of ``new`` that are not in ``old`` with the same name and owner."""
    before = {(h.get("name"), h.get("owner")) for h in old}
    return [h for h in new if (h.get("name"), h.get("owner")) not in before]


def hook_change_refusals(old_machine: dict[str, Any], new_machine: dict[str, Any]) -> list[str]:
    """Upstream's webhook messages for hooks added or changed on a Machine being deleted."""
    if not (new_machine.get("metadata") or {}).get("deletionTimestamp"):
        return []
    refusals = []
    for stage, label in ((PRE_DRAIN, "pre-drain"), (PRE_TERMINATE, "pre-terminate")):
        changed = changed_hooks(hooks_of(old_machine, stage), hooks_of(new_machine, stage))
        if changed:
            refusals.append(
                f"spec.lifecycleHooks.{stage}: Forbidden: {label} hooks are immutable when "
                f"machine is marked for deletion: the following hooks are new or changed: "
                f"{go_format(changed)}")
    return refusals
