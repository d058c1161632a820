"""What both example hook-implementing controllers share: finding Machines, adding a hook,
and removing one safely.

A hook-implementing controller (HIC) owns one hook name. It adds the hook to the Machines it
cares about while they run (hooks cannot be added once deletion has started), acts when a
Machine carrying its hook is being deleted, and removes its hook when done. Removal is a JSON
patch that first tests the list entry it removes, so it never removes another owner's hook even
if that owner edits the list at the same moment (a failed test means: look again next pass).
"""

from __future__ import annotations

from typing import Any

from berthmaster.foundation.kube import KubeClient, KubeError
from berthmaster.operator.machines import api

Machine = dict[str, Any]


async def machines(kube: KubeClient, namespace: str, selector: str | None) -> list[Machine]:
    items, _ = await kube.list_all(api.machine_path(namespace), labelSelector=selector)
    return items


def hooks(machine: Machine, stage: str) -> list[dict[str, str]]:
    return list(((machine.get("spec") or {}).get("lifecycleHooks") or {}).get(stage) or [])


def has_hook(machine: Machine, stage: str, name: str) -> bool:
    return any(h.get("name") == name for h in hooks(machine, stage))


async def add_hook(kube: KubeClient, machine: Machine, stage: str, name: str,
                   owner: str) -> None:
    """Add our hook to a running Machine (a no-op if present or if it is being deleted)."""
    if api.deleting(machine) or has_hook(machine, stage, name):
        return
    current = hooks(machine, stage)
    patch: list[dict[str, Any]] = []
    if not (machine.get("spec") or {}).get("lifecycleHooks"):
        patch.append({"op": "add", "path": "/spec/lifecycleHooks", "value": {}})
    if not current:
        patch.append({"op": "add", "path": f"/spec/lifecycleHooks/{stage}", "value": []})
    patch.append({"op": "add", "path": f"/spec/lifecycleHooks/{stage}/-",
                  "value": {"name": name, "owner": owner}})
    patch.insert(0, {"op": "test", "path": "/metadata/resourceVersion",
                     "value": machine["metadata"]["resourceVersion"]})
    try:
        await kube.patch(api.machine_path(*api.key_of(machine)), patch, kind="json")
    except KubeError as error:
        if error.status not in (404, 409, 422):  # changed or gone meanwhile: next pass
            raise


async def remove_hook(kube: KubeClient, machine: Machine, stage: str, name: str) -> bool:
    """Remove our hook; True when it is gone (or was never there)."""
    for index, hook in enumerate(hooks(machine, stage)):
        if hook.get("name") != name:
            continue
        path = f"/spec/lifecycleHooks/{stage}/{index}"
        try:
            await kube.patch(api.machine_path(*api.key_of(machine)), [
                {"op": "test", "path": path, "value": hook},
                {"op": "remove", "path": path}], kind="json")
        except KubeError as error:
            if error.not_found:
                return True
            if error.status in (409, 422):
                return False  # the list moved under us: try again next pass
            raise
        return True
    return True
