"""The Machine and MachineSet reconcilers: read state, ask the pure modules, apply one step.

Each reconcile reads the object fresh from the API server (no cache, so a restarted operator
sees exactly what the last one recorded), takes at most one side-effecting step, records it in
the object's status with a resourceVersion precondition, and asks to run again (delay ``0``)
until there is nothing left to do or something to wait for. Waiting on a hook owner needs no
polling: removing a hook is an update, and the watch brings the Machine back.

A drain attempt is kubectl's, run by :mod:`.node_drain` (cordon, evictions through the Eviction
API, PodDisruptionBudget 429s retried every ``evict_retry_delay``, kubectl drain's 5 s, until the
attempt's ``drain_wait``, upstream's 20 s, runs out; then the waits). Attempts are
paced from the Machine's own status (``deletionProgress.drainAttempts``, ``lastDrainAttemptAt``
and ``nextDrainAttemptAt``: backoff, or upstream's fixed 20 s requeue when a control-plane drain
is not permitted yet), not from memory, so a restart neither retries early nor forgets the
backoff, and the status writes a failing drain makes cannot turn into a hot loop.

A MachineSet short of Machines creates at most :data:`BURST_REPLICAS` of them per reconcile
(kube-controller-manager's ReplicaSet controller's ``BurstReplicas``, pkg/controller/replicaset/
replica_set.go; machine-api-operator's syncReplicas, pkg/controller/machineset/controller.go,
creates all of them at once, logging "Creating machine %d of %d" and posting no event), one at
a time through the client's rate limiter (``--kube-api-qps``/``--kube-api-burst``,
operator/client.py), and stops at the first refusal; the rest come in the next reconciles
(delay 0). So a MachineSet of ``replicas: 100000`` fills at the client's rate, its key is
handed back to the work queue between batches, and the other MachineSets' reconciles (other
workers) get their share of the same rate limiter meanwhile. A MachineSet's status reads its
Machines' Nodes with one LIST of the linked Nodes when it has many, not one GET each.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from berthmaster.foundation.kube import CORE, KubeClient, KubeError, resource_path
from berthmaster.foundation.times import format_rfc3339, parse_rfc3339
from berthmaster.operator.machines import (
    api,
    authority,
    drain,
    events,
    lifecycle,
    machineset,
    nodes,
    upstream_series,
)
from berthmaster.operator.machines.conditions import (
    false_condition,
    get_condition,
    same_state,
    set_condition,
    true_condition,
    unknown_condition,
)
from berthmaster.operator.machines.hooks import with_hook_conditions
from berthmaster.operator.machines.lifecycle import Step
from berthmaster.operator.machines.node_drain import NodeDrainer
from berthmaster.operator.machines.providers import (
    Instance,
    InvalidProviderSpec,
    Provider,
    RequeueAfter,
    owned,
    provider_for,
    provider_spec_kind,
    unknown_instance_state,
)

Key = tuple[str, str]
JSON = dict[str, Any]
log = logging.getLogger("berthmaster.operator.machines")

AGAIN = 0.0  # run the next step now


@dataclass(frozen=True)
class Done:
    """What a reconcile returns, decided by a helper before the reconcile's end."""

    result: float | None


def never_provisioned(machine: JSON, error: InvalidProviderSpec) -> bool:
    """Whether a Machine whose provider cannot be asked (its configuration is invalid: no
    credentials, say) never recorded an instance: then there is none to delete, and its
    deletion goes on instead of waiting for a configuration that will never come."""
    if (machine.get("spec") or {}).get("providerID"):
        return False
    log.info("machine %s/%s: no instance was recorded and the provider cannot be asked (%s): "
             "nothing to delete", *api.key_of(machine), error)
    return True


def utcnow() -> datetime:
    return datetime.now(UTC)


def error_text(error: Exception) -> str:
    """What Go's ``%v`` prints for the error: an API status error is its message alone."""
    return error.message if isinstance(error, KubeError) else str(error)


class EventRecorder:
    """Posts events idempotently (see :mod:`.events`): same name, higher count, or nothing."""

    def __init__(self, kube: KubeClient, clock: Callable[[], datetime] = utcnow):
        self.kube = kube
        self.clock = clock

    async def post(self, involved: JSON, reason: str, message: str, *, count: int = 1,
                   event_type: str = "Normal", component: str = events.COMPONENT,
                   series: str = "") -> None:
        body = events.build_event(involved, reason, message, now=self.clock(),
                                  event_type=event_type, count=count, component=component,
                                  series=series)
        namespace = body["metadata"]["namespace"]
        try:
            await self.kube.create(resource_path(CORE, "events", namespace), body)
            return
        except KubeError as error:
            if not error.conflict:
                log.warning("could not post event %s: %s", reason, error)
                return
        path = resource_path(CORE, "events", namespace, body["metadata"]["name"])
        try:
            existing = await self.kube.get(path)
            if int(existing.get("count") or 1) < count:
                await self.kube.patch(path, {"count": count, "message": message,
                                             "lastTimestamp": body["lastTimestamp"]})
        except KubeError as error:
            log.warning("could not update event %s: %s", reason, error)


class MachineController:
    def __init__(self, kube: KubeClient, providers: dict[str, Provider], *,
                 clock: Callable[[], datetime] = utcnow, drain_wait: float = 20.0,
                 drain_backoff: float = drain.BACKOFF_BASE_SECONDS,
                 drain_backoff_cap: float = drain.BACKOFF_CAP_SECONDS,
                 evict_retry_delay: float = 5.0, pod_poll: float = 0.5,
                 instance_poll: float = 2.0, provision_poll: float = 5.0):
        self.kube = kube
        self.providers = providers
        self.clock = clock
        self.events = EventRecorder(kube, clock)
        self.drain_backoff = drain_backoff
        self.drain_backoff_cap = drain_backoff_cap
        self.drainer = NodeDrainer(kube, clock, drain_wait=drain_wait,
                                   evict_retry_delay=evict_retry_delay, pod_poll=pod_poll)
        self.instance_poll = instance_poll
        self.provision_poll = provision_poll

    # -- reading and writing the Machine ------------------------------------------------------

    async def get(self, key: Key) -> JSON | None:
        return await self.kube.get_if_exists(api.machine_path(*key))

    async def write_status(self, machine: JSON, updates: JSON,
                           progress: JSON | None = None) -> JSON:
        """Patch status with ``updates`` (conditions refreshed from the hooks) if it changes."""
        now = self.clock()
        old = dict(machine.get("status") or {})
        new = merged_status(old, updates)
        conditions = updates.get("conditions", old.get("conditions"))
        new["conditions"] = with_hook_conditions(conditions, machine, now)
        if progress:
            new["deletionProgress"] = {**(old.get("deletionProgress") or {}), **progress}
        if new == old:
            return machine
        new["lastUpdated"] = format_rfc3339(now)
        return await patch_status(self.kube, api.machine_path(*api.key_of(machine), sub="status"),
                                  machine, old, new)

    async def set_finalizers(self, machine: JSON, finalizers: list[str]) -> None:
        meta = machine["metadata"]
        await self.kube.patch(api.machine_path(*api.key_of(machine)), {
            "metadata": {"finalizers": finalizers, "resourceVersion": meta["resourceVersion"]}})

    # -- the reconcile ---------------------------------------------------------------------------

    async def reconcile(self, key: Key) -> float | None:
        machine = await self.get(key)
        if machine is None:
            return None
        if not owned(machine, self.providers):
            # Another machine controller's Machine (same API, same finalizer name): hands off.
            log.debug("machine %s/%s: provider %r is not berthmaster's, skipped", *key,
                      provider_spec_kind(machine))
            return None
        if not await self.authority_allows(machine):
            return None
        if api.deleting(machine):
            return await self.reconcile_deletion(machine)
        return await self.reconcile_live(machine)

    async def authority_allows(self, machine: JSON) -> bool:
        """Upstream's authoritativeAPI switch (see :mod:`.authority`); False: stop here."""
        return await authority_allows(
            self.kube, machine, "machine",
            api.machine_path(*api.key_of(machine), sub="status"),
            lambda conditions: self.write_status(machine, {"conditions": conditions}),
            self.clock())

    async def reconcile_live(self, machine: JSON) -> float | None:
        """A Machine not being deleted: finalizer, valid providerSpec, then its instance."""
        finalizers = list(machine["metadata"].get("finalizers") or [])
        if api.FINALIZER not in finalizers:
            await self.set_finalizers(machine, [*finalizers, api.FINALIZER])
            return AGAIN
        if (machine.get("status") or {}).get("phase") == api.FAILED:
            await self.write_status(machine, {})
            return None
        try:
            provider = provider_for(machine, self.providers)
            problems = provider.validate(machine)
            if problems:
                raise InvalidProviderSpec("; ".join(problems))
        except InvalidProviderSpec as error:
            await self.fail_invalid(machine, str(error))
            return None
        found = await self.look_up_instance(machine, provider)
        if isinstance(found, Done):
            return found.result
        if found is not None:
            return await self.reconcile_instance(machine, found)
        return await self.reconcile_without_instance(machine, provider)

    async def look_up_instance(self, machine: JSON, provider: Provider) -> Instance | Done | None:
        """The Machine's instance brought up to date, None when there is none, or what the
        reconcile returns when the provider cannot say."""
        try:
            instance = await provider.instance_exists(machine)
            if instance is not None:
                instance = await provider.update_instance(machine, instance)
        except RequeueAfter as later:
            log.info("machine %s/%s: provider asks to look again in %ss: %s",
                     *api.key_of(machine), later.delay, later)
            return Done(later.delay)
        except InvalidProviderSpec as error:
            if (machine.get("spec") or {}).get("providerID"):
                # A Machine whose instance was made: never failed over its configuration
                # (a credentials Secret deleted by mistake); asked again with backoff.
                await self.provider_check_failed(machine, error)
                raise
            await self.fail_invalid(machine, str(error))  # upstream's Create would fail it
            return Done(None)
        except Exception as error:
            await self.provider_check_failed(machine, error)
            raise  # the queue retries with backoff, as upstream returns the error
        return instance

    async def reconcile_without_instance(self, machine: JSON, provider: Provider
                                         ) -> float | None:
        """No instance: a lost one fails the Machine; else Provisioning, then create it."""
        status = machine.get("status") or {}
        if (machine.get("spec") or {}).get("providerID"):
            condition = false_condition(api.INSTANCE_EXISTS, api.INSTANCE_MISSING,
                                        "Instance not found on provider")
            # upstream posts no event here; a Warning named after the condition's reason says
            # it where `kubectl describe` looks (docs/providers.md)
            await self.fail(machine, None, api.INSTANCE_NOT_FOUND_MESSAGE, api.INSTANCE_MISSING,
                            condition=condition)
            return None
        if not status.get("phase"):
            condition = false_condition(api.INSTANCE_EXISTS, api.INSTANCE_NOT_CREATED,
                                        "Instance has not been created")
            await self.write_status(machine, {
                "phase": api.PROVISIONING,
                "conditions": set_condition(status.get("conditions"), condition, self.clock())})
            return AGAIN
        return await self.create_instance(machine, provider)

    async def create_instance(self, machine: JSON, provider: Provider) -> float | None:
        try:
            instance = await provider.create_instance(machine)
        except RequeueAfter as later:
            return later.delay
        except InvalidProviderSpec as error:
            count_failure(upstream_series.instance_create_failed, machine, error)
            await self.fail_invalid(machine, str(error))
            return None
        except KubeError as error:
            count_failure(upstream_series.instance_create_failed, machine, error)
            if error.status not in (400, 422):
                raise
            # The API server refused what the provider made of this Machine (its message names
            # the field): nothing changes by retrying, so say so instead of staying
            # Provisioning.
            await self.fail_invalid(machine, f"Machine {machine['metadata']['name']}: creating "
                                    f"its instance was refused: {error.message}; fix the "
                                    "Machine (or its MachineSet's template) and recreate it")
            return None
        except Exception as error:
            count_failure(upstream_series.instance_create_failed, machine, error)
            raise
        await self.record_created(machine, instance)
        return AGAIN

    async def fail_invalid(self, machine: JSON, message: str) -> None:
        """A Machine whose instance can never be made as specified: phase Failed with
        errorReason InvalidConfiguration, a ``FailedCreate`` Warning event and the condition
        ``InstanceExists=False`` (reason InstanceNotCreated), each with ``message``."""
        condition = false_condition(api.INSTANCE_EXISTS, api.INSTANCE_NOT_CREATED, message)
        await self.fail(machine, api.INVALID_CONFIGURATION, message, "FailedCreate",
                        condition=condition)

    async def record_created(self, machine: JSON, instance: Instance) -> None:
        """The Created event and spec.providerID: the record that the instance exists."""
        await self.events.post(machine, "Created", f"Created Machine {machine['metadata']['name']}")
        await self.record_provider_id(machine, instance)

    async def record_provider_id(self, machine: JSON, instance: Instance) -> None:
        meta: JSON = {"resourceVersion": machine["metadata"]["resourceVersion"]}
        if instance.machine_labels:
            meta["labels"] = instance.machine_labels
        if instance.machine_annotations:
            meta["annotations"] = instance.machine_annotations
        await self.kube.patch(api.machine_path(*api.key_of(machine)), {
            "metadata": meta, "spec": {"providerID": instance.provider_id}})

    async def reconcile_instance(self, machine: JSON, instance: Instance) -> float | None:
        if (machine.get("spec") or {}).get("providerID") != instance.provider_id:
            await self.record_created(machine, instance)  # created by a life that then died
            return AGAIN
        labels = machine["metadata"].get("labels") or {}
        annotations = machine["metadata"].get("annotations") or {}
        if any(labels.get(k) != v for k, v in instance.machine_labels.items()) or any(
                annotations.get(k) != v for k, v in instance.machine_annotations.items()):
            await self.record_provider_id(machine, instance)  # drifted: put them back
            return AGAIN
        node = await self.instance_node(machine, instance)
        if node is not None:
            patch = nodes.node_patch(node, machine)
            if patch is not None:
                patch.setdefault("metadata", {})["resourceVersion"] = \
                    node["metadata"]["resourceVersion"]
                await self.kube.patch(api.node_path(node["metadata"]["name"]), patch)
        status = machine.get("status") or {}
        now = self.clock()
        updates: JSON = {
            "phase": api.RUNNING if node is not None else api.PROVISIONED,
            "addresses": instance.addresses,
            "conditions": set_condition(status.get("conditions"),
                                        true_condition(api.INSTANCE_EXISTS), now),
        }
        if instance.provider_status is not None:
            updates["providerStatus"] = instance.provider_status
        if node is not None:
            updates["nodeRef"] = {"apiVersion": "v1", "kind": "Node",
                                  "name": node["metadata"]["name"],
                                  "uid": node["metadata"]["uid"]}
        await self.write_status(machine, updates)
        return None if node is not None else self.provision_poll

    async def provider_check_failed(self, machine: JSON, error: Exception) -> None:
        """InstanceExists Unknown (ErrorCheckingProvider); the phase stays as it was."""
        log.error("%s: failed to check if machine exists: %s", machine["metadata"]["name"],
                  error_text(error))
        condition = unknown_condition(api.INSTANCE_EXISTS, api.ERROR_CHECKING_PROVIDER,
                                      f"Failed to check if machine exists: {error_text(error)}")
        conditions = set_condition((machine.get("status") or {}).get("conditions"), condition,
                                   self.clock())
        await self.write_status(machine, {"conditions": conditions})

    async def fail(self, machine: JSON, reason: str | None, message: str, event: str,
                   condition: JSON | None = None) -> None:
        """Phase Failed, as upstream's updateStatus records it: the instance-state annotation
        first (a metadata write), then the status with errorReason/errorMessage and the
        provider status's instance state overridden to Unknown."""
        status = machine.get("status") or {}
        conditions = status.get("conditions")
        if condition is not None:
            conditions = set_condition(conditions, condition, self.clock())
        if event:
            await self.events.post(machine, event, message, event_type="Warning")
        machine = await self.annotate_instance_state_unknown(machine)
        updates: JSON = {"phase": api.FAILED, "errorReason": reason, "errorMessage": message,
                         "conditions": conditions}
        provider_status = unknown_instance_state(status.get("providerStatus"))
        if provider_status is not None:
            updates["providerStatus"] = provider_status
        await self.write_status(machine, updates)

    async def annotate_instance_state_unknown(self, machine: JSON) -> JSON:
        meta = machine["metadata"]
        if (meta.get("annotations") or {}).get(api.INSTANCE_STATE) == api.UNKNOWN_INSTANCE_STATE:
            return machine
        return await self.kube.patch(api.machine_path(*api.key_of(machine)), {"metadata": {
            "annotations": {api.INSTANCE_STATE: api.UNKNOWN_INSTANCE_STATE},
            "resourceVersion": meta["resourceVersion"]}})

    async def instance_node(self, machine: JSON, instance: Instance) -> JSON | None:
        """The instance's Node: by the name the provider gives, else by ``spec.providerID`` (as
        upstream's nodelink controller matches them): the recorded nodeRef when it still has
        that providerID, else the one Node that does (one LIST, until a nodeRef is recorded)."""
        if instance.node_name:
            return await self.get_node(instance.node_name)
        ref = ((machine.get("status") or {}).get("nodeRef") or {}).get("name")
        node = await self.get_node(ref)
        if node is not None and (node.get("spec") or {}).get("providerID") == \
                instance.provider_id:
            return node
        found, _ = await self.kube.list_all(api.node_path())
        return next((n for n in found
                     if (n.get("spec") or {}).get("providerID") == instance.provider_id), None)

    async def get_node(self, name: str | None) -> JSON | None:
        if not name:
            return None
        return await self.kube.get_if_exists(api.node_path(name))

    # -- deletion --------------------------------------------------------------------------------

    async def reconcile_deletion(self, machine: JSON) -> float | None:
        """One step of the deletion, chosen by the pure step table
        (:func:`.lifecycle.decide_deletion_step`) and taken by its handler here."""
        step = lifecycle.decide_deletion_step(machine)
        log.info("machine %s/%s: deletion step %s", *api.key_of(machine), step.value)
        if step is Step.NOTHING:
            return None
        handlers: dict[Step, Callable[[JSON, str], Awaitable[float | None]]] = {
            Step.MARK_DELETING: self.mark_deleting,
            Step.WAIT_PRE_DRAIN: self.wait_pre_drain,
            Step.SKIP_DRAIN: self.skip_drain,
            Step.DRAIN: self.drain_owned_node,
            Step.WAIT_PRE_TERMINATE: self.wait_pre_terminate,
            Step.DELETE_INSTANCE: self.delete_instance_step,
            Step.WAIT_INSTANCE_GONE: self.wait_instance_gone,
            Step.DELETE_NODE: self.delete_node,
            Step.REMOVE_FINALIZER: self.remove_finalizer,
        }
        return await handlers[step](machine, format_rfc3339(self.clock()))

    async def mark_deleting(self, machine: JSON, now: str) -> float | None:
        started = lifecycle.progress(machine).get("startedAt") or now
        await self.write_status(machine, {"phase": api.DELETING}, {"startedAt": started})
        return AGAIN

    async def wait_pre_drain(self, machine: JSON, now: str) -> float | None:
        await self.events.post(machine, *events.DRAIN_BLOCKED, component=events.DRAIN_COMPONENT)
        await self.write_status(machine, {})
        return None

    async def skip_drain(self, machine: JSON, now: str) -> float | None:
        await self.events.post(machine, *events.DRAIN_SKIPPED, component=events.DRAIN_COMPONENT)
        await self.mark_drained(machine, true_condition(api.DRAINED, "Node drain skipped"))
        return AGAIN

    async def drain_owned_node(self, machine: JSON, now: str) -> float | None:
        refused = await self.node_not_owned(machine)
        if refused is None:
            return await self.drain_step(machine)
        await self.events.post(machine, api.NODE_NOT_OWNED, refused, event_type="Warning",
                               component=events.DRAIN_COMPONENT)
        await self.mark_drained(machine, true_condition(
            api.DRAINED, reason=api.NODE_NOT_OWNED, message=f"Node drain skipped: {refused}"))
        return AGAIN

    async def wait_pre_terminate(self, machine: JSON, now: str) -> float | None:
        await self.write_status(machine, {})
        return None

    async def delete_instance_step(self, machine: JSON, now: str) -> float | None:
        await self.delete_instance(machine)
        await self.write_status(machine, {}, {"terminableAt": now, "instanceDeletedAt": now})
        return AGAIN

    async def wait_instance_gone(self, machine: JSON, now: str) -> float | None:
        if await self.instance_exists(machine):
            return self.instance_poll
        await self.write_status(machine, {}, {"instanceGoneAt": now})
        return AGAIN

    async def delete_node(self, machine: JSON, now: str) -> float | None:
        node = await self.get_node(lifecycle.node_name(machine))
        refused = None if node is None else nodes.not_owned(node, machine)
        if refused is not None:
            await self.events.post(machine, api.NODE_NOT_OWNED, refused, event_type="Warning")
            await self.write_status(machine, {}, {"nodeNotOwnedAt": now})
            return AGAIN
        if node is not None:
            # The uid precondition: a Node recreated under that name since the check above
            # is not the one checked (409), and the next pass checks it again.
            try:
                await self.kube.delete(api.node_path(node["metadata"]["name"]), {
                    "apiVersion": "v1", "kind": "DeleteOptions",
                    "preconditions": {"uid": node["metadata"]["uid"]}})
            except KubeError as error:
                if error.conflict:
                    return AGAIN
                if not error.not_found:
                    raise
        await self.write_status(machine, {}, {"nodeDeletedAt": now})
        return AGAIN

    async def remove_finalizer(self, machine: JSON, now: str) -> float | None:
        finalizers = [f for f in machine["metadata"].get("finalizers") or []
                      if f != api.FINALIZER]
        await self.set_finalizers(machine, finalizers)
        log.info("machine %s/%s: machine deletion successful", *api.key_of(machine))
        return None

    async def node_not_owned(self, machine: JSON) -> str | None:
        """Why the Node the nodeRef names is not this Machine's (nodes.not_owned), before a
        drain; None when it is, when it is gone, or when it cannot be read (the drain reads it
        again and reports that error as upstream's drainNode does)."""
        try:
            node = await self.get_node(lifecycle.node_name(machine))
        except KubeError:
            return None
        return None if node is None else nodes.not_owned(node, machine)

    def provider_or_none(self, machine: JSON) -> Provider | None:
        try:
            return provider_for(machine, self.providers)
        except InvalidProviderSpec:
            return None  # nothing was ever created for a Machine no provider accepts

    async def delete_instance(self, machine: JSON) -> None:
        provider = self.provider_or_none(machine)
        if provider is not None:
            try:
                await provider.delete_instance(machine)
            except InvalidProviderSpec as error:
                if not never_provisioned(machine, error):
                    count_failure(upstream_series.instance_delete_failed, machine, error)
                    raise
            except Exception as error:
                count_failure(upstream_series.instance_delete_failed, machine, error)
                raise

    async def instance_exists(self, machine: JSON) -> bool:
        provider = self.provider_or_none(machine)
        try:
            return provider is not None and await provider.instance_exists(machine) is not None
        except InvalidProviderSpec as error:
            if never_provisioned(machine, error):
                return False
            raise

    async def mark_drained(self, machine: JSON, condition: JSON,
                           progress: JSON | None = None) -> None:
        now = self.clock()
        conditions = set_condition((machine.get("status") or {}).get("conditions"),
                                   condition, now)
        stamp = format_rfc3339(now)
        done = {"drainableAt": lifecycle.progress(machine).get("drainableAt") or stamp,
                "drainedAt": stamp, **(progress or {})}
        await self.write_status(machine, {"conditions": conditions}, done)

    def drain_delay(self, failures: int) -> float:
        return drain.backoff_delay(failures, self.drain_backoff, self.drain_backoff_cap)

    def drain_due(self, done: JSON, failures: int) -> datetime | None:
        """When the next drain attempt may start: as recorded, else backoff from the last."""
        recorded = parse_rfc3339(done.get("nextDrainAttemptAt"))
        if recorded is not None:
            return recorded
        last = parse_rfc3339(done.get("lastDrainAttemptAt"))
        return None if last is None else last + timedelta(seconds=self.drain_delay(failures))

    async def drain_step(self, machine: JSON) -> float | None:
        now = self.clock()
        done = lifecycle.progress(machine)
        attempts = int(done.get("drainAttempts") or 0)
        failures = int(done.get("drainFailures") or 0)
        due = self.drain_due(done, failures)
        if due is not None and now < due:
            return (due - now).total_seconds()
        try:
            timeout = lifecycle.drain_timeout(machine)
        except ValueError as invalid:
            await self.events.post(machine, "InvalidAnnotation", str(invalid),
                                   event_type="Warning")
            timeout = None
        attempt = attempts + 1
        started = done.get("drainStartedAt") or format_rfc3339(now)
        drainable_at = done.get("drainableAt") or format_rfc3339(now)
        await self.events.post(machine, *events.DRAIN_PROCEEDS, count=attempt,
                               component=events.DRAIN_COMPONENT)
        failure = await self.drain_node(machine)
        finished = self.clock()
        record = {"drainStartedAt": started, "drainableAt": drainable_at,
                  "drainAttempts": attempt, "lastDrainAttemptAt": format_rfc3339(finished)}
        if failure is None:
            await self.events.post(machine, *events.DRAIN_SUCCEEDED,
                                   component=events.DRAIN_COMPONENT)
            await self.mark_drained(machine, true_condition(api.DRAINED,
                                                            "Drain finished successfully"), record)
            return AGAIN
        delay, record["drainFailures"] = drain.after_failure(
            failure, failures, self.drain_backoff, self.drain_backoff_cap)
        record["nextDrainAttemptAt"] = format_rfc3339(finished + timedelta(seconds=delay))
        await self.events.post(machine, events.DRAIN_REQUEUED,
                               f"Node drain requeued: {failure.message}",
                               count=attempt, component=events.DRAIN_COMPONENT)
        probe = {**machine, "status": {**(machine.get("status") or {}),
                                       "deletionProgress": {**done, "drainStartedAt": started}}}
        if timeout is not None and lifecycle.drain_timed_out(probe, timeout, self.clock()):
            return await self.drain_timed_out(machine, timeout, failure.message, record, delay)
        condition = false_condition(api.DRAINED, api.DRAIN_ERROR,
                                    f"could not drain machine: {failure.message}")
        conditions = set_condition((machine.get("status") or {}).get("conditions"),
                                   condition, self.clock())
        await self.write_status(machine, {"conditions": conditions}, record)
        return delay

    async def drain_timed_out(self, machine: JSON, timeout: lifecycle.DrainTimeout, error: str,
                              record: JSON, delay: float) -> float | None:
        await self.events.post(machine, events.DRAIN_TIMED_OUT,
                               f"Node drain did not finish within {timeout.text}: {error}",
                               event_type="Warning", component=events.DRAIN_COMPONENT)
        if timeout.proceed:
            condition = true_condition(
                api.DRAINED, reason=api.DRAIN_TIMEOUT_REASON,
                message=f"Drain did not finish within {timeout.text}; proceeding because "
                        f"{api.PROCEED_AFTER_DRAIN_TIMEOUT} is true: {error}")
            await self.mark_drained(machine, condition, record)
            return AGAIN
        condition = false_condition(
            api.DRAINED, api.DRAIN_TIMEOUT_REASON,
            f"Drain did not finish within {timeout.text}; still retrying (annotate "
            f"{api.PROCEED_AFTER_DRAIN_TIMEOUT}=true to proceed without it): {error}")
        conditions = set_condition((machine.get("status") or {}).get("conditions"),
                                   condition, self.clock())
        await self.write_status(machine, {"conditions": conditions}, record)
        return delay

    async def drain_node(self, machine: JSON) -> drain.DrainFailure | None:
        """One drain attempt of the Machine's Node (:mod:`.node_drain`); None when drained,
        after upstream's ``Deleted`` event (none when the Node was already gone)."""
        name = str(lifecycle.node_name(machine))
        outcome = await self.drainer.drain(machine["metadata"]["name"], name)
        if outcome.failure is None and outcome.node_found:
            await self.events.post(machine, events.NODE_DRAINED,
                                   drain.node_drained_message(name),
                                   component=events.DRAIN_COMPONENT)
        return outcome.failure


BURST_REPLICAS = 500  # Machines created per MachineSet reconcile (see the module docstring)
NODE_GETS = 10  # up to this many Nodes are read one by one; more with one LIST


class MachineSetController:
    def __init__(self, kube: KubeClient, provider_kinds: Collection[str], *,
                 clock: Callable[[], datetime] = utcnow,
                 status_poll: float = 5.0):
        self.kube = kube
        self.provider_kinds = frozenset(provider_kinds)
        self.clock = clock
        self.events = EventRecorder(kube, clock)
        self.status_poll = status_poll

    async def reconcile(self, key: Key) -> float | None:
        ms = await self.kube.get_if_exists(api.machineset_path(*key))
        if ms is None:
            return None
        if api.deleting(ms) or not owned(ms, self.provider_kinds):
            return None
        if not await authority_allows(
                self.kube, ms, "machine set", api.machineset_path(*key, sub="status"),
                lambda conditions: self.write_status(ms, {"conditions": conditions}),
                self.clock()):
            return None
        problems = machineset.validate(ms)
        if problems:
            message = "; ".join(problems)
            await self.events.post(ms, "ReconcileError", message, event_type="Warning")
            await self.write_status(ms, {"errorReason": api.INVALID_CONFIGURATION,
                                         "errorMessage": message})
            return None
        namespace = key[0]
        all_machines, _ = await self.kube.list_all(api.machine_path(namespace))
        counted, orphans = machineset.owned_machines(ms, all_machines)
        for orphan in orphans:
            refs = list(orphan["metadata"].get("ownerReferences") or [])
            await self.kube.patch(api.machine_path(*api.key_of(orphan)), {"metadata": {
                "ownerReferences": [*refs, machineset.owner_reference(ms)],
                "resourceVersion": orphan["metadata"]["resourceVersion"]}})
        replicas = int((ms.get("spec") or {}).get("replicas", 1))
        diff = len(counted) - replicas
        more = False
        if diff < 0:
            batch = min(-diff, BURST_REPLICAS)
            more = batch < -diff
            log.info("Too few replicas for MachineSet %s/%s, need %d, creating %d",
                     *key, replicas, batch)
            for number in range(1, batch + 1):
                log.debug("Creating machine %d of %d, ( spec.replicas(%d) > "
                          "currentMachineCount(%d) )", number, -diff, replicas, len(counted))
                created = await self.kube.create(api.machine_path(namespace),
                                                 machineset.build_machine(ms))
                counted.append(created)
        elif diff > 0:
            policy = (ms.get("spec") or {}).get("deletePolicy") or "Random"
            log.info("Too many replicas for MachineSet %s/%s, need %d, deleting %d (%s)",
                     *key, replicas, diff, policy)
            doomed = machineset.machines_to_delete(counted, diff, policy, self.clock())
            for machine in doomed:
                try:
                    await self.kube.delete(api.machine_path(*api.key_of(machine)))
                except KubeError as error:
                    if not error.not_found:
                        raise
            names = {m["metadata"]["name"] for m in doomed}
            counted = [m for m in counted if m["metadata"]["name"] not in names]
        node_objects = await self.nodes_of(counted)
        status = machineset.build_status(ms, counted, node_objects, self.clock())
        await self.write_status(ms, {**status, "errorReason": None, "errorMessage": None})
        # more: the next batch, after the other keys waiting in the queue
        return machineset.next_sync(replicas, diff, status, more, self.status_poll)

    async def nodes_of(self, machines: list[JSON]) -> dict[str, JSON]:
        """The Nodes of ``machines`` (by name) that exist."""
        names = {name for machine in machines
                 if (name := ((machine.get("status") or {}).get("nodeRef") or {}).get("name"))}
        if len(names) > NODE_GETS:
            linked, _ = await self.kube.list_all(api.node_path(),
                                                 labelSelector=api.NODES_WATCH_SELECTOR)
            return {n["metadata"]["name"]: n for n in linked if n["metadata"]["name"] in names}
        found = {}
        for name in sorted(names):
            try:
                found[name] = await self.kube.get(api.node_path(name))
            except KubeError as error:
                if not error.not_found:
                    raise
        return found

    async def write_status(self, ms: JSON, updates: JSON) -> None:
        old = dict(ms.get("status") or {})
        new = merged_status(old, updates)
        if new != old:
            await patch_status(self.kube, api.machineset_path(*api.key_of(ms), sub="status"),
                               ms, old, new)


async def authority_allows(kube: KubeClient, obj: JSON, kind: str, status_path: str,
                           write_conditions: Callable[[list[JSON]], Awaitable[Any]],
                           now: datetime) -> bool:
    """Upstream's authoritativeAPI switch for a Machine or MachineSet (:mod:`.authority`):
    False when the reconcile stops here (a write made, which the watch brings back; paused;
    or an invalid value)."""
    name = obj["metadata"]["name"]
    decision = authority.decide(obj)
    if decision.set_status is not None:
        log.info("%s: %s .status.authoritativeAPI is not yet set, setting it to "
                 ".spec.authoritativeAPI", name, kind)
        if decision.set_status:
            old = dict(obj.get("status") or {})
            await patch_status(kube, status_path, obj, old,
                               {**old, "authoritativeAPI": decision.set_status})
        return False
    if decision.invalid is not None:
        log.error("%s: invalid .status.authoritativeAPI '%s'", name, decision.invalid)
        return False
    wanted = decision.condition
    conditions = (obj.get("status") or {}).get("conditions")
    current = get_condition(conditions, authority.PAUSED)
    if wanted is not None and (current is None or not same_state(current, wanted)):
        await write_conditions(set_condition(conditions, wanted, now))
        return False
    if not decision.proceed:
        log.info("%s: %s is paused, taking no further action", name, kind)
    return decision.proceed


def count_failure(series: upstream_series.Series, machine: JSON, error: Exception) -> None:
    """Upstream providers' RegisterFailedInstance*: the Machine, and the error's text as reason."""
    meta = machine["metadata"]
    series.inc(str(meta.get("name")), str(meta.get("namespace")), error_text(error))


# -- status writes, shared by both controllers -------------------------------------------------


def merged_status(old: JSON, updates: JSON) -> JSON:
    """``old`` with ``updates`` applied; a field updated to ``None`` is dropped."""
    return {k: v for k, v in {**old, **updates}.items() if v is not None}


def status_patch(old: JSON, new: JSON) -> JSON:
    """The merge-patch ``status`` that turns ``old`` into ``new``: ``new``'s fields, and a null
    for each field ``new`` dropped (a merge patch removes a field only when told null)."""
    return {**new, **{field: None for field in old if field not in new}}


async def patch_status(kube: KubeClient, path: str, obj: JSON, old: JSON, new: JSON) -> JSON:
    """Write ``new`` over ``old`` with ``obj``'s resourceVersion as precondition: a status
    computed from a stale read is refused (409) and the reconcile runs again."""
    return await kube.patch(path, {
        "metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]},
        "status": status_patch(old, new)})
