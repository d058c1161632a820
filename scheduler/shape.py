"""Shape checks for objects read from files (``simulate`` snapshots), before the engine sees them.

Design: the API server never hands the scheduler a Pod whose ``spec`` is a list, but a snapshot
file can hold anything. The engine reads objects as plain dicts, trusting their shape, so a
hand-edited snapshot could end in an AttributeError deep inside a predicate. This module checks,
once per object, that every field the engine reads has the JSON type Kubernetes gives it (an
object or a list of objects), and names the first one that does not. Values inside (quantities,
label values) are checked where they are parsed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# A path is a tuple of keys; "[]" stands for every item of a list. Each entry says the value at
# that path, when present and not null, must be a mapping ("object") or a list ("list").
_CONTAINER = (("resources", "object"), ("resources", "requests", "object"),
              ("resources", "limits", "object"), ("ports", "list"), ("ports", "[]", "object"),
              ("env", "list"))
# what the requests of a resized pod read (scheduler/pod_resources.py)
_CONTAINER_STATUS = (("list",), ("[]", "object"), ("[]", "resources", "object"),
                     ("[]", "resources", "requests", "object"),
                     ("[]", "allocatedResources", "object"))
_METADATA = (("metadata", "object"), ("metadata", "labels", "object"),
             ("metadata", "annotations", "object"), ("metadata", "ownerReferences", "list"),
             ("metadata", "ownerReferences", "[]", "object"))

SHAPES: dict[str, tuple[tuple[str, ...], ...]] = {
    "Pod": (*_METADATA, ("spec", "object"), ("status", "object"),
            ("spec", "containers", "list"), ("spec", "containers", "[]", "object"),
            *(("spec", "containers", "[]", *p) for p in _CONTAINER),
            ("spec", "initContainers", "list"), ("spec", "initContainers", "[]", "object"),
            *(("spec", "initContainers", "[]", *p) for p in _CONTAINER),
            ("spec", "nodeSelector", "object"), ("spec", "affinity", "object"),
            ("spec", "tolerations", "list"), ("spec", "tolerations", "[]", "object"),
            ("spec", "volumes", "list"), ("spec", "volumes", "[]", "object"),
            ("spec", "topologySpreadConstraints", "list"),
            ("spec", "topologySpreadConstraints", "[]", "object"),
            ("spec", "overhead", "object"), ("spec", "resources", "object"),
            ("spec", "resources", "requests", "object"), ("spec", "resources", "limits", "object"),
            ("status", "conditions", "list"), ("status", "conditions", "[]", "object"),
            *(("status", key, *p) for key in ("containerStatuses", "initContainerStatuses")
              for p in _CONTAINER_STATUS)),
    "Node": (*_METADATA, ("spec", "object"), ("status", "object"),
             ("spec", "taints", "list"), ("spec", "taints", "[]", "object"),
             ("status", "allocatable", "object"), ("status", "capacity", "object"),
             ("status", "conditions", "list"), ("status", "conditions", "[]", "object"),
             ("status", "images", "list"), ("status", "images", "[]", "object")),
}
_EXPECTED = {"object": (Mapping, "an object"), "list": (list, "a list")}


def _values(obj: Any, path: tuple[str, ...], where: str) -> list[tuple[str, Any]]:
    """Every (field path, value) at ``path`` in ``obj``; absent or null values are skipped."""
    found: list[tuple[str, Any]] = [(where, obj)]
    for key in path:
        step: list[tuple[str, Any]] = []
        for name, value in found:
            if key == "[]":
                if isinstance(value, list):
                    step.extend((f"{name}[{i}]", item) for i, item in enumerate(value)
                                if item is not None)
            elif isinstance(value, Mapping) and value.get(key) is not None:
                step.append((f"{name}.{key}" if name else key, value[key]))
        found = step
    return found


def shape_problem(kind: str, obj: Mapping[str, Any]) -> str | None:
    """The first field of ``obj`` (a ``kind``) whose type is wrong, as ``field must be ...``."""
    for entry in SHAPES.get(kind, _METADATA):
        *path, expected = entry
        wanted, description = _EXPECTED[expected]
        for name, value in _values(obj, tuple(path), ""):
            if not isinstance(value, wanted):
                shown = repr(value)
                shown = shown if len(shown) <= 40 else shown[:37] + "..."
                return f"{name} must be {description}, got {shown}"
    return None
