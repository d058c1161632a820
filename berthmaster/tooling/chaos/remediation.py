"""The ``mhc-remediation`` fault and its liveness: a MachineHealthCheck remediates under churn.

The scene has a MachineSet (``workload.MHC_POOL``, tainted so no workload lands there, not
autoscaled) and a MachineHealthCheck over it that remediates a Node NotReady or Unknown for 1 s
(``workload.health_check``). The fault turns one of its Machines' Node NotReady with kwok's
node-not-ready Stage (the Node stops being reported Ready, as a kubelet that stopped
heartbeating) and leaves it so: remediation is machine-api-operator's
(pkg/controller/machinehealthcheck/machinehealthcheck_controller.go ``internalRemediation``):
the Machine is deleted, and its MachineSet creates a replacement whose Node becomes Ready.

Fired when the Machine was seen deleted (its ``deletionTimestamp`` set, or gone) after its Node
was labelled; the checker then judges, in its liveness loop, that the Machine is gone and the
MachineSet has as many Ready Machines other than it as it asks for within
``checker.REMEDIATION_BOUND`` seconds of the fault (``invariants.remediation_awaits``), a
breach otherwise (a remediation that never comes, or a replacement that never joins).
"""

from __future__ import annotations

import time

from berthmaster.foundation.kube import CORE, resource_path
from berthmaster.tooling.chaos.faults import (
    NODE_NOT_READY,
    Outcome,
    Stage,
    fired,
    not_fired,
    wait_until,
)
from berthmaster.tooling.chaos.invariants import deleting, in_machine_set, machine_node
from berthmaster.tooling.chaos.workload import MHC_POOL

DELETION_WAIT = 60.0  # how long the fault waits to see the remediation start


async def mhc_remediation(stage: Stage) -> Outcome:
    """A Node of the MachineHealthCheck's MachineSet NotReady, and left so: fired when its
    Machine is seen deleted within :data:`DELETION_WAIT` s; the checker judges the rest."""
    checker = stage.checker
    ready = checker.ready_nodes()
    candidates = sorted(key for key, m in checker.machines.items.items()
                        if in_machine_set(m, MHC_POOL) and not deleting(m)
                        and machine_node(m) in ready)
    if not candidates:
        return not_fired(f"no Machine of {MHC_POOL} with a Ready Node")
    key = stage.rng.choice(candidates)
    node = machine_node(checker.machines.items[key])
    assert node is not None
    since = time.time()
    await stage.kube.patch(resource_path(CORE, "nodes", name=node),
                           {"metadata": {"labels": {NODE_NOT_READY: "true"}}})
    checker.expect_remediation(key, MHC_POOL, since)

    def remediating() -> bool:
        machine = checker.machines.items.get(key)
        return machine is None or deleting(machine)

    if not await wait_until(remediating, DELETION_WAIT):
        return not_fired(f"Machine {key} not deleted {DELETION_WAIT:.0f}s after its Node "
                         f"{node} turned NotReady")
    return fired(f"Machine {key} remediated {time.time() - since:.1f}s after its Node {node} "
                 "turned NotReady")
