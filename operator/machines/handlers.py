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
- a Machine event -> that Machine, and the MachineSet that controls it (a Machine no MachineSet
  controls: every MachineSet of its namespace seen so far, which adopt it if their selector
  matches, as upstream's MachineToMachineSets maps it);
- a MachineSet event -> that MachineSet;
- an event on a Node annotated ``machine.openshift.io/machine`` -> that Machine (a removed
  taint is put back, a deleted Node is noticed), and, when the Node's Ready condition changed
  or the Node is gone (:func:`.machineset.node_readiness`), the MachineSet controlling that
  Machine, whose readyReplicas and availableReplicas read it. The API server sends only Nodes
  labelled ``machine.openshift.io/machine`` (the node link sets both;
  ``api.NODES_WATCH_SELECTOR``).

A MachineSet at rest is not reconciled on a timer (:func:`.machineset.next_sync`): these
events are what bring it back, so an idle cluster costs the API server no MachineSet reads.
"""

from __future__ import annotations

import os
from typing import Any

import kopf

from berthmaster.foundation.kube import KubeClient
from berthmaster.operator.capability import install, running
from berthmaster.operator.client import operator_client
from berthmaster.operator.machines import api, machineset
from berthmaster.operator.machines.controller import MachineController, MachineSetController
from berthmaster.operator.machines.metrics import machine_metrics
from berthmaster.operator.machines.providers import Provider
from berthmaster.operator.machines.providers.registry import PROVIDERS_VARIABLE, enabled_providers
from berthmaster.operator.machines.workqueue import WorkQueue

Key = tuple[str, str]
CAPABILITY = "machines"


class MachinesRuntime:
    """The controllers and queues of the machines capability (the client is the operator's)."""

    def __init__(self, kube: KubeClient, *, drain_backoff: float = 5.0, drain_wait: float = 20.0,
                 providers: dict[str, Provider] | None = None):
        self.kube = kube
        if providers is None:
            providers = enabled_providers(kube, os.environ.get(PROVIDERS_VARIABLE))
        self.machines = MachineController(kube, providers, drain_backoff=drain_backoff,
                                          drain_wait=drain_wait)
        self.machinesets = MachineSetController(kube, providers)
        self.machine_queue: WorkQueue[Key] = WorkQueue("machines", self.machines.reconcile)
        self.machineset_queue: WorkQueue[Key] = WorkQueue("machinesets",
                                                          self.machinesets.reconcile, workers=2)
        # what the watches told so far: each Machine's controlling MachineSet, the MachineSets,
        # and each linked Node's readiness (the node_changed filter)
        self.controller_of: dict[Key, Key] = {}
        self.known_machinesets: set[Key] = set()
        self.readiness: dict[str, tuple[str, str] | None] = {}

    def start(self) -> None:
        self.machine_queue.start()
        self.machineset_queue.start()

    async def stop(self) -> None:
        await self.machine_queue.stop()
        await self.machineset_queue.stop()

    def ready(self) -> tuple[bool, str]:
        for queue in (self.machine_queue, self.machineset_queue):
            if not queue.running:
                return False, f"the {queue.name} work queue's workers are not running"
        return True, "ok"

    def machine_changed(self, machine: dict[str, Any], *, deleted: bool = False) -> None:
        namespace, name = api.key_of(machine)
        self.machine_queue.add((namespace, name))
        owner = machineset.controller_name(machine)
        if deleted:
            self.controller_of.pop((namespace, name), None)
        elif owner is not None:
            self.controller_of[(namespace, name)] = (namespace, owner)
        if owner is not None:
            self.machineset_queue.add((namespace, owner))
        elif not deleted:
            for key in sorted(self.known_machinesets):
                if key[0] == namespace:
                    self.machineset_queue.add(key)  # an orphan: whose selector matches adopts

    def machineset_changed(self, ms: dict[str, Any], *, deleted: bool = False) -> None:
        key = api.key_of(ms)
        if deleted:
            self.known_machinesets.discard(key)
        else:
            self.known_machinesets.add(key)
        self.machineset_queue.add(key)

    def node_changed(self, node: dict[str, Any], *, deleted: bool = False) -> None:
        meta = node.get("metadata") or {}
        link = (meta.get("annotations") or {}).get(api.NODE_MACHINE, "")
        namespace, _, name = str(link).partition("/")
        if not (namespace and name):
            return
        self.machine_queue.add((namespace, name))
        node_name = str(meta.get("name"))
        readiness = None if deleted else machineset.node_readiness(node)
        if node_name in self.readiness and self.readiness[node_name] == readiness:
            return  # a heartbeat, a label: nothing a MachineSet's status reads
        if deleted:
            self.readiness.pop(node_name, None)
        else:
            self.readiness[node_name] = readiness
        owner = self.controller_of.get((namespace, name))
        if owner is not None:
            self.machineset_queue.add(owner)


@kopf.on.startup()
async def start_machines(memo: kopf.Memo, settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.watching.label_selectors[api.NODES_WATCH] = api.NODES_WATCH_SELECTOR
    # upstream's timings (a drain attempt of 20 s, then a backoff); the tests shorten them
    # (docs/testing.md): the drain's behaviour is the same, only sooner
    backoff = float(os.environ.get("BERTHMASTER_DRAIN_BACKOFF_SECONDS", "5"))
    attempt = float(os.environ.get("BERTHMASTER_DRAIN_ATTEMPT_SECONDS", "20"))
    install(memo, CAPABILITY, MachinesRuntime(await operator_client(), drain_backoff=backoff,
                                              drain_wait=attempt))


def _runtime(memo: kopf.Memo) -> MachinesRuntime:
    return running(memo, CAPABILITY, MachinesRuntime)


@kopf.on.event(api.GROUP, api.VERSION, api.MACHINES)
async def machine_event(type: str | None, body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    machine_metrics.machine_seen(body, deleted=type == "DELETED")
    _runtime(memo).machine_changed(dict(body), deleted=type == "DELETED")


@kopf.on.event(api.GROUP, api.VERSION, api.MACHINESETS)
async def machineset_event(type: str | None, body: kopf.Body, memo: kopf.Memo,
                           **_: Any) -> None:
    machine_metrics.machineset_seen(body, deleted=type == "DELETED")
    _runtime(memo).machineset_changed(dict(body), deleted=type == "DELETED")


@kopf.on.event("", "v1", "nodes", annotations={api.NODE_MACHINE: kopf.PRESENT})
async def node_event(type: str | None, body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    _runtime(memo).node_changed(dict(body), deleted=type == "DELETED")
