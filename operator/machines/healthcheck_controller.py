"""The MachineHealthCheck reconciler: read the check, its Machines and their Nodes; decide; act.

One reconcile (upstream's ``Reconcile``) reads everything fresh from the API server, asks
:func:`.healthcheck.decide_health_check`, writes the status (``expectedMachines``,
``currentHealthy``, ``remediationsAllowed``, ``RemediationAllowed``) and only then deletes the
Machines to remediate, posting upstream's events. It returns when to look again: the soonest a
Node matching an unhealthy condition (or a Machine waiting for its Node) becomes due.

Remediation is a plain Machine deletion: the machine controller's finalizer then runs the
preDrain hooks, the drain, the preTerminate hooks and the instance deletion as for any other
deletion, and the MachineSet replaces the Machine. A Machine already carrying a
deletionTimestamp is not deleted again, and events are named after the Machine's uid and reason
(:mod:`.events`), so an operator restarted mid-remediation repeats nothing.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Collection
from datetime import datetime
from typing import Any

from berthmaster.kube import KubeClient, KubeError
from berthmaster.operator.machines import api, upstream_series
from berthmaster.operator.machines import healthcheck as mhc_rules
from berthmaster.operator.machines.conditions import set_condition
from berthmaster.operator.machines.controller import EventRecorder, error_text, utcnow
from berthmaster.operator.machines.healthcheck import HealthCheckDecision, RefusedSpec, Target
from berthmaster.operator.machines.providers.registry import PROVIDERS_VARIABLE, enabled_kinds

Key = tuple[str, str]
JSON = dict[str, Any]
log = logging.getLogger("berthmaster.operator.machinehealthchecks")


class HealthCheckController:
    def __init__(self, kube: KubeClient, *, clock: Callable[[], datetime] = utcnow,
                 provider_kinds: Collection[str] | None = None):
        self.kube = kube
        self.clock = clock
        # the kinds the machine controller runs ($BERTHMASTER_MACHINE_PROVIDERS): only their
        # Machines are berthmaster's to remediate
        self.provider_kinds = frozenset(enabled_kinds(os.environ.get(PROVIDERS_VARIABLE))
                                        if provider_kinds is None else provider_kinds)
        self.events = EventRecorder(kube, clock)

    async def reconcile(self, key: Key) -> float | None:
        mhc = await self.kube.get_if_exists(mhc_rules.mhc_path(*key))
        if mhc is None:
            # upstream: the check's nodes-covered series goes, its short circuit reads 0
            upstream_series.mhc_nodes_covered.remove(key[1], key[0])
            upstream_series.mhc_short_circuit.set(0, key[1], key[0])
            return None
        if mhc_rules.paused(mhc) or api.deleting(mhc):
            return None
        now = self.clock()
        try:
            spec = mhc_rules.parse_spec(mhc)
        except RefusedSpec as refused:
            log.warning("machinehealthcheck %s/%s refused: %s", *key, refused)
            await self.write_status(mhc, mhc_rules.refused(refused), now)
            return None
        targets = await self.targets(key[0], spec)
        upstream_series.mhc_nodes_covered.set(len(targets), key[1], key[0])
        decision = mhc_rules.decide_health_check(mhc, spec, targets, now)
        await self.write_status(mhc, decision, now)
        upstream_series.mhc_short_circuit.set(1 if decision.restricted_message else 0,
                                              key[1], key[0])
        for target in decision.detected:
            await self.events.post(
                target.machine, mhc_rules.DETECTED_UNHEALTHY,
                f"Machine {mhc_rules.target_text(mhc, target)} has unhealthy node "
                f"{target.node_name}", component=mhc_rules.COMPONENT, series=target.node_name)
        if decision.restricted_message:
            log.warning("machinehealthcheck %s/%s: short-circuiting remediation: %s", *key,
                        decision.restricted_message)
            await self.events.post(mhc, mhc_rules.REMEDIATION_RESTRICTED,
                                   decision.restricted_message, event_type="Warning",
                                   component=mhc_rules.COMPONENT,
                                   series=decision.restricted_message)
        for target in decision.no_controller:
            await self.events.post(
                target.machine, mhc_rules.SKIPPED_NO_CONTROLLER,
                f"Machine {mhc_rules.target_text(mhc, target)} has no controller owner, "
                "skipping remediation", component=mhc_rules.COMPONENT)
        failures = [await self.remediate(mhc, target) for target in decision.delete]
        if any(failures):
            raise RuntimeError(f"machinehealthcheck {key[0]}/{key[1]}: some remediations "
                               "failed; retrying")
        return decision.next_check.total_seconds() if decision.next_check else None

    async def targets(self, namespace: str, spec: mhc_rules.HealthCheckSpec) -> list[Target]:
        machines, _ = await self.kube.list_all(api.machine_path(namespace))
        targets = []
        for machine in sorted(machines, key=lambda m: str(m["metadata"]["name"])):
            if not mhc_rules.selects(spec, machine, self.provider_kinds):
                continue
            node_name = ((machine.get("status") or {}).get("nodeRef") or {}).get("name")
            if not node_name:
                targets.append(Target(machine))
                continue
            node = await self.node(str(node_name))
            targets.append(Target(machine, node, node_missing=node is None))
        return targets

    async def node(self, name: str) -> JSON | None:
        return await self.kube.get_if_exists(api.node_path(name))

    async def write_status(self, mhc: JSON, decision: HealthCheckDecision, now: datetime) -> None:
        old = dict(mhc.get("status") or {})
        new = {**old, "expectedMachines": decision.expected,
               "currentHealthy": decision.healthy,
               "remediationsAllowed": decision.remediations_allowed,
               "conditions": set_condition(old.get("conditions"), decision.condition, now)}
        if new != old:
            await self.kube.patch(mhc_rules.mhc_path(*api.key_of(mhc), sub="status"),
                                  {"status": new})

    async def remediate(self, mhc: JSON, target: Target) -> bool:
        """Delete the target's Machine; True when that failed (event MachineDeletionFailed)."""
        text = mhc_rules.target_text(mhc, target)
        meta = target.machine["metadata"]
        log.info("%s: deleting", text)
        try:
            await self.kube.delete(api.machine_path(*api.key_of(target.machine)),
                                   {"preconditions": {"uid": meta.get("uid")}})
        except KubeError as error:
            if error.not_found or error.conflict:
                return False  # already gone, or a new Machine of that name: nothing to remediate
            await self.events.post(
                target.machine, mhc_rules.MACHINE_DELETION_FAILED,
                f"Machine {text} remediation failed: unable to delete Machine object: "
                f"{error_text(error)}", event_type="Warning", component=mhc_rules.COMPONENT)
            log.error("%s: failed to delete machine: %s", text, error_text(error))
            return True
        await self.events.post(
            target.machine, mhc_rules.MACHINE_DELETED,
            f"Machine {text} has been remediated by requesting to delete Machine object",
            component=mhc_rules.COMPONENT)
        mhc_meta = mhc["metadata"]
        upstream_series.mhc_remediation_success.inc(str(mhc_meta.get("name")),
                                                    str(mhc_meta.get("namespace")))
        return False
