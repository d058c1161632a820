"""The MachineHealthCheck reconciler: read the check, its Machines and their Nodes; decide; act.

One reconcile (upstream's ``Reconcile``) reads everything fresh from the API server, asks
:func:`.healthcheck.decide_health_check`, writes the status (``expectedMachines``,
``currentHealthy``, ``remediationsAllowed``, ``RemediationAllowed``) and only then deletes the
Machines to remediate, posting upstream's events. It returns when to look again: the soonest a
Node matching an unhealthy condition (or a Machine waiting for its Node) becomes due.

Remediation is a plain Machine deletion: the machine controller's finalizer then runs the
preDrain hooks, the drain, the preTerminate hooks and the instance deletion as for any other
deletion, and the MachineSet replaces the Machine. With ``spec.remediationTemplate`` it is a
remediation request made from the template instead (:meth:`remediate_externally`, upstream's
``externalRemediation`` and ``cleanEMR``): the template's kind and the request's are looked up
in the API server's discovery first, so a kind no CRD serves sets
``ExternalRemediationTemplateAvailable=False`` (``ExternalRemediationTemplateNotFound``) with a
Warning event and touches no Machine; the template and request conditions are written with the
status (upstream sets them on its in-memory copy only). With metal3's ``external-baremetal``
strategy the Machine is annotated (:meth:`annotate_external`). A Machine already carrying a
deletionTimestamp is not deleted again, and events are named after the Machine's uid and reason
(:mod:`.events`), so an operator restarted mid-remediation repeats nothing.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Collection
from datetime import datetime
from typing import Any

from berthmaster.foundation.kube import KubeClient, KubeError, group_path, resource_path
from berthmaster.operator.machines import api, upstream_series
from berthmaster.operator.machines import healthcheck as mhc_rules
from berthmaster.operator.machines.conditions import (
    Condition,
    false_condition,
    set_condition,
    true_condition,
)
from berthmaster.operator.machines.controller import EventRecorder, error_text, utcnow
from berthmaster.operator.machines.healthcheck import (
    HealthCheckDecision,
    RefusedSpec,
    Target,
    TemplateRef,
)
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
        external: list[Condition] = []
        if spec.remediation_template is not None:
            external = await self.remediate_externally(mhc, spec.remediation_template, decision)
        await self.write_status(mhc, decision, now, external)
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
        failures += [await self.annotate_external(mhc, target) for target in decision.annotate]
        failures += [c.get("status") == "False" for c in external]
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

    async def write_status(self, mhc: JSON, decision: HealthCheckDecision, now: datetime,
                           extra: list[Condition] | None = None) -> None:
        old = dict(mhc.get("status") or {})
        conditions = set_condition(old.get("conditions"), decision.condition, now)
        for condition in extra or ():
            conditions = set_condition(conditions, condition, now)
        new = {**old, "expectedMachines": decision.expected,
               "currentHealthy": decision.healthy,
               "remediationsAllowed": decision.remediations_allowed,
               "conditions": conditions}
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

    async def plural(self, api_version: str, kind: str) -> str | None:
        """The resource serving ``kind`` in ``api_version`` (API discovery), or None."""
        try:
            listing = await self.kube.get(group_path(*_group_version(api_version)))
        except KubeError as error:
            if error.not_found:
                return None
            raise
        return next((str(r["name"]) for r in listing.get("resources") or []
                     if r.get("kind") == kind and "/" not in str(r.get("name"))), None)

    async def remediate_externally(self, mhc: JSON, ref: TemplateRef,
                                   decision: HealthCheckDecision) -> list[Condition]:
        """Requests for the unhealthy, none left for the recovered; the conditions to write."""
        if not decision.external and not decision.recovered:
            return []
        namespace, name = api.key_of(mhc)
        template_plural = await self.plural(ref.api_version, ref.kind)
        request_plural = await self.plural(ref.api_version, ref.request_kind)
        if template_plural is None or request_plural is None:
            missing = ref.kind if template_plural is None else ref.request_kind
            return [await self.template_not_found(mhc, (
                f"MachineHealthCheck {namespace}/{name}: spec.remediationTemplate: the API "
                f"server serves no kind {missing} in {ref.api_version}; install the CRDs of the "
                "remediation controller that provides it, or remove spec.remediationTemplate "
                "to have unhealthy Machines deleted and replaced; no Machine was remediated"))]
        api_path = group_path(*_group_version(ref.api_version))
        for target in decision.recovered:
            await self.clean_request(api_path, request_plural, namespace, target)
        if not decision.external:
            return []
        template = await self.kube.get_if_exists(
            resource_path(api_path, template_plural, namespace, ref.name))
        if template is None:
            return [await self.template_not_found(mhc, (
                f"failed to retrieve {ref.kind} external object {namespace}/{ref.name}: not "
                f"found; create it, or fix spec.remediationTemplate of MachineHealthCheck "
                f"{namespace}/{name}"))]
        for target in decision.external:
            path = resource_path(api_path, request_plural, namespace)
            if await self.kube.get_if_exists(f"{path}/{target.name}") is not None:
                continue  # requested already: the external controller is on it
            try:
                request = mhc_rules.build_remediation_request(template, ref, target.machine)
                await self.kube.create(path, request)
            except (KubeError, ValueError) as error:
                message = (f"error creating remediation request for machine {target.name!r} in "
                           f"namespace {namespace!r}: {error_text(error)}")
                await self.events.post(mhc, mhc_rules.EXTERNAL_REMEDIATION_REQUEST_CREATION_FAILED,
                                       message, event_type="Warning",
                                       component=mhc_rules.COMPONENT, series=message)
                return [true_condition(mhc_rules.EXTERNAL_REMEDIATION_TEMPLATE_AVAILABLE),
                        false_condition(mhc_rules.EXTERNAL_REMEDIATION_REQUEST_AVAILABLE,
                                        mhc_rules.EXTERNAL_REMEDIATION_REQUEST_CREATION_FAILED,
                                        message, severity=api.SEVERITY_ERROR)]
            log.info("%s: remediation request %s %s/%s created", mhc_rules.target_text(
                mhc, target), ref.request_kind, namespace, target.name)
        return [true_condition(mhc_rules.EXTERNAL_REMEDIATION_TEMPLATE_AVAILABLE),
                true_condition(mhc_rules.EXTERNAL_REMEDIATION_REQUEST_AVAILABLE)]

    async def template_not_found(self, mhc: JSON, message: str) -> Condition:
        await self.events.post(mhc, mhc_rules.EXTERNAL_REMEDIATION_TEMPLATE_NOT_FOUND, message,
                               event_type="Warning", component=mhc_rules.COMPONENT,
                               series=message)
        return false_condition(mhc_rules.EXTERNAL_REMEDIATION_TEMPLATE_AVAILABLE,
                               mhc_rules.EXTERNAL_REMEDIATION_TEMPLATE_NOT_FOUND, message,
                               severity=api.SEVERITY_ERROR)

    async def clean_request(self, api_path: str, plural: str, namespace: str,
                            target: Target) -> None:
        """A healthy Machine's request is deleted: its remediation worked (``cleanEMR``)."""
        path = resource_path(api_path, plural, namespace, target.name)
        request = await self.kube.get_if_exists(path)
        if request is None or request["metadata"].get("deletionTimestamp"):
            return
        try:
            await self.kube.delete(path, {"preconditions": {
                "uid": request["metadata"].get("uid")}})
        except KubeError as error:
            if not (error.not_found or error.conflict):
                raise

    async def annotate_external(self, mhc: JSON, target: Target) -> bool:
        """metal3's strategy: annotate the Machine; True when that failed."""
        text = mhc_rules.target_text(mhc, target)
        try:
            await self.kube.patch(api.machine_path(*api.key_of(target.machine)), {
                "metadata": {"annotations": {mhc_rules.EXTERNAL_REMEDIATION_ANNOTATION: ""}}})
        except KubeError as error:
            if error.not_found:
                return False
            await self.events.post(
                target.machine, mhc_rules.EXTERNAL_ANNOTATION_FAILED,
                f"Requesting external remediation of node associated with machine {text} "
                f"failed: {error_text(error)}", event_type="Warning",
                component=mhc_rules.COMPONENT)
            return True
        await self.events.post(
            target.machine, mhc_rules.EXTERNAL_ANNOTATION_ADDED,
            f"Requesting external remediation of node associated with machine {text}",
            component=mhc_rules.COMPONENT)
        return False


def _group_version(api_version: str) -> tuple[str, str]:
    group, _, version = api_version.rpartition("/")
    return group, version
