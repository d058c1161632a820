"""The operator's one API client, shared by every capability.

kopf runs all handlers in one event loop; the client is opened lazily in that loop on first use
(kopf has not started its loop when the handler modules are imported), guarded by a lock so
concurrent handlers open it once, and closed at kopf's cleanup.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import kopf

from berthmaster.kube import KubeClient


class _Holder:
    client: KubeClient | None = None
    lock: asyncio.Lock | None = None


async def operator_client() -> KubeClient:
    if _Holder.lock is None:
        _Holder.lock = asyncio.Lock()
    async with _Holder.lock:
        if _Holder.client is None:
            _Holder.client = await KubeClient.connect(os.environ.get("KUBECONFIG") or None)
        return _Holder.client


@kopf.on.cleanup()
async def close_operator_client(**_: Any) -> None:
    if _Holder.client is not None:
        await _Holder.client.close()
    _Holder.client = None
    _Holder.lock = None
