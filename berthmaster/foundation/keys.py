"""An object's key, ``namespace/name``: the one spelling every component indexes and logs by.

The rule is client-go's ``MetaNamespaceKeyFunc`` (staging/src/k8s.io/client-go/tools/cache/
store.go): ``<namespace>/<name>`` for a namespaced object, the bare ``<name>`` for a
cluster-scoped one (empty namespace). Callers that default an absent namespace (the scheduler's
snapshot treats a pod without one as in ``default``, as the API server would have) pass that
default; nothing else differs. Messages naming an object for a person ("MachineSet ns/x not
found") are prose, not keys, and keep their own f-strings.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def object_key(namespace: str | None, name: str | None) -> str:
    """``namespace/name``, or ``name`` when ``namespace`` is empty (a cluster-scoped object)."""
    return f"{namespace}/{name or ''}" if namespace else str(name or "")


def key_of(obj: Mapping[str, Any], default_namespace: str = "") -> str:
    """The key of an API object, from its ``metadata`` (``default_namespace`` when it has none)."""
    meta = obj.get("metadata") or {}
    return object_key(str(meta.get("namespace") or default_namespace), str(meta.get("name") or ""))

