"""Pods waiting at Permit: the map between the scheduling cycle and the binding cycle.

As kube-scheduler 1.35 (``pkg/scheduler/framework/runtime/waiting_pods_map.go``, and
``runtime/framework.go`` RunPermitPlugins / WaitOnPermit): a pod some Permit plugin answered
``Wait`` for is added here, assumed on its node, with one timer per waiting plugin. The pod's
binding task awaits :meth:`WaitingPod.wait`; it ends

- allowed, once every waiting plugin called :meth:`WaitingPod.allow` (``None``);
- rejected, when any plugin calls :meth:`WaitingPod.reject` or a plugin's timer fires first
  (a :class:`~berthmaster.scheduler.plugins.base.Status`, Unschedulable, naming the plugin in
  ``rejected_by``; the timeout's message is upstream's ``rejected due to timeout after waiting
  <d> at plugin <name>``).

Everything runs in the one asyncio thread, so no locks are needed; the first outcome wins and
later calls change nothing. The binding task removes the pod from the map when the wait ends.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from typing import Any

from berthmaster.foundation.durations import format_go_duration
from berthmaster.scheduler.framework import MAX_PERMIT_TIMEOUT_SECONDS
from berthmaster.scheduler.plugins.base import Status, unschedulable
from berthmaster.scheduler.snapshot import pod_key

JSON = dict[str, Any]


class WaitingPod:
    """One pod held at Permit; see the module docstring."""

    def __init__(self, pod: JSON, timeouts: Mapping[str, float]):
        self._pod = pod
        self._pending = dict(timeouts)
        self._outcome: asyncio.Future[Status | None] = (
            asyncio.get_running_loop().create_future())
        self.rejected_by = ""
        loop = asyncio.get_running_loop()
        self._timers = [
            loop.call_later(wait, self.reject, plugin, "rejected due to timeout after waiting "
                            f"{format_go_duration(wait)} at plugin {plugin}")
            for plugin, wait in ((p, min(t, MAX_PERMIT_TIMEOUT_SECONDS))
                                 for p, t in timeouts.items())]

    @property
    def pod(self) -> JSON:
        return self._pod

    @property
    def uid(self) -> str:
        return pod_key(self._pod)

    def pending_plugins(self) -> list[str]:
        return list(self._pending)

    def allow(self, plugin: str) -> None:
        """``plugin`` no longer holds the pod; the last one lets it go on to PreBind."""
        self._pending.pop(plugin, None)
        if not self._pending and not self._outcome.done():
            self._stop_timers()
            self._outcome.set_result(None)

    def reject(self, plugin: str, message: str) -> None:
        if self._outcome.done():
            return
        self._stop_timers()
        self.rejected_by = plugin
        self._outcome.set_result(unschedulable(message))

    def _stop_timers(self) -> None:
        for timer in self._timers:
            timer.cancel()

    async def wait(self) -> Status | None:
        """The outcome: None (allowed) or the rejection."""
        return await asyncio.shield(self._outcome)


class WaitingPods:
    """The waiting pods by uid (upstream's waitingPodsMap)."""

    def __init__(self) -> None:
        self._pods: dict[str, WaitingPod] = {}

    def add(self, waiting: WaitingPod) -> None:
        self._pods[waiting.uid] = waiting

    def remove(self, uid: str) -> None:
        self._pods.pop(uid, None)

    def get(self, uid: str) -> WaitingPod | None:
        return self._pods.get(uid)

    def __iter__(self) -> Iterator[WaitingPod]:
        return iter(list(self._pods.values()))

    def __len__(self) -> int:
        return len(self._pods)
