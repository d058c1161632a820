"""kopf handlers of the ``machinehealthchecks`` capability: watches in, check keys onto a queue.

The ``machinehealthchecks`` capability stands beside ``machines`` (``berthmaster operator
--only machinehealthchecks``): a remediation is a Machine deletion, which the machine controller
of the ``machines`` capability carries out wherever it runs.

What triggers what (upstream's watches: the check itself, ``mhcRequestsFromMachine`` and
``mhcRequestsFromNode``):
- a MachineHealthCheck event -> that check; the runtime remembers which checks each namespace
  has (a deleted check is forgotten);
- a Machine event -> every check of the Machine's namespace (the reconcile applies selectors);
- an event on a Node annotated ``machine.openshift.io/machine`` (a deletion too) -> every check
  of the namespace the annotation names.

Each reconcile of a check runs on a :class:`~.workqueue.WorkQueue` (one worker per key at a
time, backoff on errors, a delayed re-check when a Node may become due); the controller uses the
operator's shared API client (:mod:`berthmaster.operator.client`), whose cleanup stops the queue
before it closes the client. Nothing here stores
kopf state on any object: the handlers only read.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import kopf

from berthmaster.operator.capability import install, running
from berthmaster.operator.client import operator_client
from berthmaster.operator.machines import api
from berthmaster.operator.machines.healthcheck import MACHINEHEALTHCHECKS
from berthmaster.operator.machines.healthcheck_controller import HealthCheckController
from berthmaster.operator.machines.workqueue import Reconcile, WorkQueue

Key = tuple[str, str]
CAPABILITY = "machinehealthchecks"


class HealthCheckRuntime:
    """The queue of checks to reconcile, and which checks each namespace has."""

    def __init__(self, reconcile: Reconcile[Key]):
        self.queue: WorkQueue[Key] = WorkQueue(MACHINEHEALTHCHECKS, reconcile, workers=2)
        self.checks: dict[str, set[str]] = defaultdict(set)

    def start(self) -> None:
        self.queue.start()

    async def stop(self) -> None:
        await self.queue.stop()

    def ready(self) -> tuple[bool, str]:
        if not self.queue.running:
            return False, f"the {self.queue.name} work queue's workers are not running"
        return True, "ok"

    def check_changed(self, event_type: str, check: dict[str, Any]) -> None:
        namespace, name = api.key_of(check)
        if event_type == "DELETED":
            self.checks[namespace].discard(name)
            return
        self.checks[namespace].add(name)
        self.queue.add((namespace, name))

    def namespace_changed(self, namespace: str) -> None:
        for name in sorted(self.checks.get(namespace, ())):
            self.queue.add((namespace, name))

    def node_changed(self, node: dict[str, Any]) -> None:
        link = ((node.get("metadata") or {}).get("annotations") or {}).get(api.NODE_MACHINE, "")
        namespace, _, _ = str(link).partition("/")
        if namespace:
            self.namespace_changed(namespace)


@kopf.on.startup()
async def start_machinehealthchecks(memo: kopf.Memo, settings: kopf.OperatorSettings,
                                    **_: Any) -> None:
    settings.watching.label_selectors[api.NODES_WATCH] = api.NODES_WATCH_SELECTOR
    install(memo, CAPABILITY,
            HealthCheckRuntime(HealthCheckController(await operator_client()).reconcile))


def _runtime(memo: kopf.Memo) -> HealthCheckRuntime:
    return running(memo, CAPABILITY, HealthCheckRuntime)


@kopf.on.event(api.GROUP, api.VERSION, MACHINEHEALTHCHECKS)
async def machinehealthcheck_event(type: str, body: kopf.Body, memo: kopf.Memo,
                                   **_: Any) -> None:
    _runtime(memo).check_changed(type, dict(body))


@kopf.on.event(api.GROUP, api.VERSION, api.MACHINES)
async def machinehealthcheck_machine_event(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    _runtime(memo).namespace_changed(api.key_of(dict(body))[0])


@kopf.on.event("", "v1", "nodes", annotations={api.NODE_MACHINE: kopf.PRESENT})
async def machinehealthcheck_node_event(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    _runtime(memo).node_changed(dict(body))
