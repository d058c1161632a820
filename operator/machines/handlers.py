"""kopf handlers for Machines and MachineSets: watches in, keys onto the reconcile queues.

Concurrency: kopf runs one watch per resource kind and calls these handlers serially per object;
each handler only adds keys to a :class:`~.workqueue.WorkQueue`, whose workers reconcile (one
worker per key at a time; see :mod:`.workqueue` for why kopf's own retries are not used). The
startup handler takes the operator's shared API client (:mod:`berthmaster.operator.client`) and
creates the controllers and the queues (with the providers ``$BERTHMASTER_MACHINE_PROVIDERS``
names, the chart's ``operator.machineProviders``; unset: those enabled by default, see
:mod:`.providers.registry`); the queues'
workers are stopped by that module's cleanup, before it closes the client. Nothing here adds a
kopf finalizer or kopf annotations to Machines: the only finalizer is upstream's
``machine.machine.openshift.io``.

What triggers what:
- a Machine event -> that Machine, and the MachineSet that controls it;
- a MachineSet event -> that MachineSet;
- an event on a Node annotated ``machine.openshift.io/machine`` -> that Machine (a removed
  taint is put back, a deleted Node is noticed). The API server sends only Nodes labelled
  ``machine.openshift.io/machine`` (the node link sets both; ``api.NODES_WATCH_SELECTOR``).
"""

from __future__ import annotations

import os
from typing import Any

import kopf

from berthmaster.kube import KubeClient
from berthmaster.operator.client import operator_client, stop_before_close
from berthmaster.operator.machines import api
from berthmaster.operator.machines.controller import MachineController, MachineSetController
from berthmaster.operator.machines.metrics import machine_metrics
from berthmaster.operator.machines.providers import Provider
from berthmaster.operator.machines.providers.registry import PROVIDERS_VARIABLE, enabled_providers
from berthmaster.operator.machines.workqueue import WorkQueue

Key = tuple[str, str]


class MachinesRuntime:
    """The controllers and queues of the machines capability (the client is the operator's)."""

    def __init__(self, kube: KubeClient, *, drain_backoff: float = 5.0,
                 providers: dict[str, Provider] | None = None):
        self.kube = kube
        if providers is None:
            providers = enabled_providers(kube, os.environ.get(PROVIDERS_VARIABLE))
        self.machines = MachineController(kube, providers, drain_backoff=drain_backoff)
        self.machinesets = MachineSetController(kube, providers)
        self.machine_queue: WorkQueue[Key] = WorkQueue("machines", self.machines.reconcile)
        self.machineset_queue: WorkQueue[Key] = WorkQueue("machinesets",
                                                          self.machinesets.reconcile, workers=2)

    def start(self) -> None:
        self.machine_queue.start()
        self.machineset_queue.start()

    async def stop(self) -> None:
        await self.machine_queue.stop()
        await self.machineset_queue.stop()

    def machine_changed(self, machine: dict[str, Any]) -> None:
        namespace, name = api.key_of(machine)
        self.machine_queue.add((namespace, name))
        for ref in machine.get("metadata", {}).get("ownerReferences") or []:
            if ref.get("controller") and ref.get("kind") == "MachineSet":
                self.machineset_queue.add((namespace, str(ref.get("name"))))

    def machineset_changed(self, machineset: dict[str, Any]) -> None:
        self.machineset_queue.add(api.key_of(machineset))

    def node_changed(self, node: dict[str, Any]) -> None:
        link = ((node.get("metadata") or {}).get("annotations") or {}).get(api.NODE_MACHINE, "")
        namespace, _, name = str(link).partition("/")
        if namespace and name:
            self.machine_queue.add((namespace, name))


@kopf.on.startup()
async def start_machines(memo: kopf.Memo, settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.watching.label_selectors[api.NODES_WATCH] = api.NODES_WATCH_SELECTOR
    backoff = float(os.environ.get("BERTHMASTER_DRAIN_BACKOFF_SECONDS", "5"))
    runtime = MachinesRuntime(await operator_client(), drain_backoff=backoff)
    runtime.start()
    stop_before_close(runtime.stop)
    memo["machines_runtime"] = runtime


def _runtime(memo: kopf.Memo) -> MachinesRuntime:
    runtime = memo.get("machines_runtime")
    if not isinstance(runtime, MachinesRuntime):
        raise kopf.TemporaryError("the machines capability is still starting", delay=1)
    return runtime


@kopf.on.event(api.GROUP, api.VERSION, api.MACHINES)
async def machine_event(type: str | None, body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    machine_metrics.machine_seen(body, deleted=type == "DELETED")
    _runtime(memo).machine_changed(dict(body))


@kopf.on.event(api.GROUP, api.VERSION, api.MACHINESETS)
async def machineset_event(type: str | None, body: kopf.Body, memo: kopf.Memo,
                           **_: Any) -> None:
    machine_metrics.machineset_seen(body, deleted=type == "DELETED")
    _runtime(memo).machineset_changed(dict(body))


@kopf.on.event("", "v1", "nodes", annotations={api.NODE_MACHINE: kopf.PRESENT})
async def node_event(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    _runtime(memo).node_changed(dict(body))
