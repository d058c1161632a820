"""A KubeClient stand-in that dies right after its first successful write.

The worst moment for a controller to crash is just after a write reached the API server and
before the code after it ran. ``OneWriteLife`` wraps a real client: reads pass through, the
first create/patch/delete is sent and recorded in a ledger, then :class:`Crash` is raised, and
every later write of that life is refused. A test restarts the controller with a fresh life
after each crash and checks what the ledger and the cluster hold.
"""

from __future__ import annotations

import json
from typing import Any

from berthmaster.foundation.kube import KubeClient


class Crash(Exception):
    """The simulated operator death right after a write reached the API server."""


class OneWriteLife:
    """A KubeClient stand-in whose life ends right after its first successful write."""

    def __init__(self, kube: KubeClient, ledger: list[tuple[str, str, str]]):
        self.kube = kube
        self.ledger = ledger
        self.writes = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.kube, name)

    async def _write(self, method: str, path: str, body: Any, call: Any) -> Any:
        if self.writes:
            raise Crash("this life already wrote")
        await call()
        self.writes += 1
        clean = json.loads(json.dumps(body or {}))
        if isinstance(clean, dict):
            clean.get("metadata", {}).pop("resourceVersion", None)
        self.ledger.append((method, path, json.dumps(clean, sort_keys=True)))
        raise Crash(f"died after {method} {path}")

    async def create(self, path: str, body: Any, **params: Any) -> Any:
        return await self._write("POST", path, body,
                                 lambda: self.kube.create(path, body, **params))

    async def patch(self, path: str, body: Any, kind: str = "merge", **params: Any) -> Any:
        return await self._write("PATCH", path, body,
                                 lambda: self.kube.patch(path, body, kind, **params))

    async def delete(self, path: str, body: Any = None, **params: Any) -> Any:
        return await self._write("DELETE", path, body,
                                 lambda: self.kube.delete(path, body, **params))
