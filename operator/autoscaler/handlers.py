"""kopf handlers: the ClusterAutoscaler loop and the MachineAutoscaler -> MachineSet annotations.

Design: what runs
- the capability's runtime (:class:`AutoscalerRuntime`, the contract of
  operator/capability.py) is made by a startup handler: what the loop keeps between runs
  (upstream's in-memory state, the placement engine, the watch caches of :mod:`.watches`);
  it stops the caches before the shared client closes and reports them to ``/readyz``.
- a kopf timer on the ClusterAutoscaler named ``default`` every 10 s (upstream's scan interval;
  ``BERTHMASTER_AUTOSCALER_SCAN_INTERVAL`` shortens it for tests) calls ``loop.run_once`` with
  that runtime and writes the status it returns; kopf never overlaps two runs of one timer, so
  one decision finishes before the next starts; the status is written only where it changed.
  The watches start with the first run (an operator with no ClusterAutoscaler watches no
  pods). An invalid ClusterAutoscaler gets a ``Healthy=False`` condition naming every problem,
  and no scaling.
- MachineAutoscaler create/update/resume write the min/max annotations, and the owner
  annotation ``autoscaling.openshift.io/machineautoscaler: <namespace>/<name>``, onto the target
  MachineSet, record it as ``status.lastTargetRef`` and add upstream's finalizer
  ``machinetarget.autoscaling.openshift.io``; when the target changes the previous MachineSet
  loses the annotations. A MachineSet already owned by another MachineAutoscaler is left alone:
  the newcomer gets a ``FailedSetOwner`` warning and is retried (upstream's ``SetOwner``).
- Deletion is held by that finalizer, not kopf's: a watch on MachineAutoscalers sees the
  deletionTimestamp, removes the annotations from the targets it still owns and then drops the
  finalizer (upstream's ``HandleDelete``); a failed release is retried on the next event of
  the object, at the latest when the watch relists.
- Drift: a kopf index maps (namespace, MachineSet) to the annotations its MachineAutoscalers
  want; every MachineSet watch event compares them with the owner's and re-applies them when
  someone edited or removed them (or the MachineSet appeared after its MachineAutoscaler). The
  watch only reads: no kopf state is stored on MachineSets.
The API client is the operator's shared one (operator/client.py). The metrics are
served by ``berthmaster operator --metrics-bind-address``. The operator's namespace
(``--autoscaler-namespace``, else ``$POD_NAMESPACE``, else ``berthmaster``; :func:`configure`)
is the only one the Priority expander's ConfigMap is read from.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import kopf

from berthmaster.foundation.keys import object_key
from berthmaster.foundation.kube import KubeClient, KubeError, group_path, resource_path
from berthmaster.operator.autoscaler import events, metrics
from berthmaster.operator.autoscaler.config import (
    ONLY_NAME,
    SCAN_INTERVAL,
    ConfigError,
    operator_namespace,
    parse_cluster_autoscaler,
)
from berthmaster.operator.autoscaler.groups import MAX_SIZE_KEY, MIN_SIZE_KEY
from berthmaster.operator.autoscaler.loop import (
    MACHINE_API,
    AutoscalerState,
    default_placement,
    run_once,
)
from berthmaster.operator.autoscaler.simulation import Placement
from berthmaster.operator.autoscaler.watches import WatchedCluster
from berthmaster.operator.capability import install, running
from berthmaster.operator.client import operator_client as kube
from berthmaster.operator.retrying import transient_only

GROUP = "autoscaling.openshift.io"
GROUP_API_BETA = group_path(GROUP, "v1beta1")
MACHINE_API_GROUP = "machine.openshift.io"
OWNER_KEY = "autoscaling.openshift.io/machineautoscaler"  # upstream's target-owner annotation
# upstream's MachineTargetFinalizer (machineautoscaler_controller.go)
FINALIZER = "machinetarget.autoscaling.openshift.io"
ALREADY_OWNED = "already owned by another MachineAutoscaler"  # upstream's ErrTargetAlreadyOwned
OWNER_RETRY_DELAY = 60.0
INTERVAL = float(os.environ.get("BERTHMASTER_AUTOSCALER_SCAN_INTERVAL", SCAN_INTERVAL))

log = logging.getLogger("berthmaster.operator.autoscaler")


CAPABILITY = "autoscaler"


class _Settings:
    namespace = operator_namespace()


def configure(namespace: str = "") -> None:
    """The operator's namespace (``berthmaster operator --autoscaler-namespace``), before kopf
    starts: a setting read by the startup handler, not state."""
    _Settings.namespace = operator_namespace(namespace)


class AutoscalerRuntime:
    """What the autoscaler keeps between loops (operator/capability.py's ``Runtime``): the
    memory upstream keeps in its StaticAutoscaler (:class:`AutoscalerState`), the placement
    engine, and the watch caches the loop reads."""

    def __init__(self, cluster: WatchedCluster, placement: Placement | None = None) -> None:
        self.cluster = cluster
        self.state = AutoscalerState()
        self._placement = placement

    @property
    def placement(self) -> Placement:
        """The scheduler's placement engine, made on the first loop (an operator with no
        ClusterAutoscaler never builds one)."""
        if self._placement is None:
            self._placement = default_placement()
        return self._placement

    def start(self) -> None:
        """Nothing runs before the first loop: the informers start with its first read."""

    async def stop(self) -> None:
        await self.cluster.stop()

    def ready(self) -> tuple[bool, str]:
        """The watch caches' condition (:meth:`WatchedCluster.ready`)."""
        return self.cluster.ready()


@kopf.on.startup()
async def start_autoscaler(memo: kopf.Memo, **_: Any) -> None:
    install(memo, CAPABILITY, AutoscalerRuntime(
        WatchedCluster(await kube(), namespace=_Settings.namespace)))


# ---------------------------------------------------------------- ClusterAutoscaler


def _is_default(name: str | None, **_: Any) -> bool:
    return name == ONLY_NAME


@kopf.on.create(GROUP, "v1", "clusterautoscalers")
@kopf.on.update(GROUP, "v1", "clusterautoscalers")
@kopf.on.resume(GROUP, "v1", "clusterautoscalers")
def clusterautoscaler_validate(body: kopf.Body, patch: kopf.Patch, **_: Any) -> None:
    try:
        parse_cluster_autoscaler(body)
    except ConfigError as error:
        patch.status["conditions"] = [{"type": "Healthy", "status": "False",
                                       "reason": "InvalidConfiguration", "message": str(error)}]
        raise kopf.PermanentError(str(error)) from error


@kopf.timer(GROUP, "v1", "clusterautoscalers", interval=INTERVAL, when=_is_default)
async def clusterautoscaler_loop(body: kopf.Body, patch: kopf.Patch, memo: kopf.Memo,
                                 **_: Any) -> None:
    try:
        parse_cluster_autoscaler(body)
    except ConfigError:
        return  # reported by clusterautoscaler_validate
    runtime = running(memo, CAPABILITY, AutoscalerRuntime)
    try:
        status = await run_once(await kube(), body, runtime.state, runtime.placement,
                                read=runtime.cluster.read, namespace=runtime.cluster.namespace)
    except KubeError as error:
        metrics.errors_total.labels("apiCallError").inc()
        log.warning("autoscaler loop failed: %s", error)
        return
    status["observedGeneration"] = body.get("metadata", {}).get("generation")
    patch.status.update(status_changes(body.get("status") or {}, status))


def status_changes(current: Mapping[str, Any], wanted: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of ``wanted`` that differ from ``current``: a loop that changed nothing
    writes nothing (no PATCH, and no watch event of our own to read back every 10 s)."""
    return {key: value for key, value in wanted.items() if current.get(key) != value}


# ---------------------------------------------------------------- MachineAutoscaler


def _target(ref: Any) -> tuple[str, str] | None:
    if not ref or not ref.get("name"):
        return None
    return str(ref.get("kind", "MachineSet")), str(ref["name"])


async def _annotate(client: KubeClient, namespace: str, name: str,
                    annotations: Mapping[str, str | None]) -> bool:
    """Merge ``annotations`` into MachineSet ``namespace/name``; False when it does not exist."""
    try:
        await client.patch(resource_path(MACHINE_API, "machinesets", namespace, name),
                           {"metadata": {"annotations": annotations}})
    except KubeError as error:
        if error.not_found:
            return False
        raise
    return True


async def _release(client: KubeClient, namespace: str, name: str, owner: str) -> None:
    """Remove our annotations from a MachineSet we (still) own."""
    try:
        machine_set = await client.get(resource_path(MACHINE_API, "machinesets", namespace, name))
    except KubeError as error:
        if error.not_found:
            return
        raise
    current = (machine_set.get("metadata") or {}).get("annotations") or {}
    if current.get(OWNER_KEY) not in (None, owner):
        return  # another MachineAutoscaler took it over
    await _annotate(client, namespace, name,
                    {MIN_SIZE_KEY: None, MAX_SIZE_KEY: None, OWNER_KEY: None})


def owner_conflict(annotations: Mapping[str, str], owner: str) -> str | None:
    """The other MachineAutoscaler that owns a target, if any (upstream's ``SetOwner``: the
    first owner keeps it until it lets go)."""
    current = annotations.get(OWNER_KEY)
    return current if current is not None and current != owner else None


async def _persist_finalizer(client: KubeClient, namespace: str, name: str,
                             finalizers: list[str], resource_version: str | None) -> None:
    """Write upstream's finalizer onto a MachineAutoscaler now (not through kopf's patch, which
    lands only after the handler returns); a conflict means a newer version to reconcile."""
    try:
        await client.patch(resource_path(GROUP_API_BETA, "machineautoscalers", namespace, name),
                           {"metadata": {"finalizers": [*finalizers, FINALIZER],
                                         "resourceVersion": resource_version}})
    except KubeError as error:
        if error.conflict:
            raise kopf.TemporaryError(f"MachineAutoscaler {namespace}/{name} changed while its "
                                      "finalizer was added; retrying", delay=1) from error
        raise


def wanted_annotations(spec: Any, owner: str) -> dict[str, str]:
    """What a MachineAutoscaler writes onto its MachineSet."""
    return {MIN_SIZE_KEY: str(spec.get("minReplicas", 0)),
            MAX_SIZE_KEY: str(spec.get("maxReplicas", 0)),
            OWNER_KEY: owner}


def _not_deleted(body: kopf.Body, **_: Any) -> bool:
    return not body.metadata.get("deletionTimestamp")


# kopf updates indices before it calls handlers, and drops an object from the index once it
# stops matching ``when``: a MachineAutoscaler being deleted leaves the index before its delete
# handler releases the MachineSet, so the drift handler never re-adds what was just released.
@kopf.index(GROUP, "v1beta1", "machineautoscalers", when=_not_deleted)
def machineautoscaler_targets(spec: kopf.Spec, name: str, namespace: str | None, **_: Any
                              ) -> dict[tuple[str, str], dict[str, str]]:
    target = _target(spec.get("scaleTargetRef"))
    if target is None:
        return {}  # replaces (so removes) what an earlier version indexed
    namespace = namespace or "default"
    return {(namespace, target[1]): wanted_annotations(spec, object_key(namespace, name))}


@kopf.on.event(MACHINE_API_GROUP, "v1beta1", "machinesets")
async def machineset_autoscaling_drift(type: str, body: kopf.Body, name: str,
                                       namespace: str | None, **kwargs: Any) -> None:
    targets: kopf.Index[tuple[str, str], dict[str, str]] = kwargs["machineautoscaler_targets"]
    if type == "DELETED" or body.metadata.get("deletionTimestamp"):
        return
    namespace = namespace or "default"
    annotations = body.metadata.annotations
    claims = list(targets.get((namespace, name), ()))
    owner = annotations.get(OWNER_KEY)
    if owner is not None:
        claims = [claim for claim in claims if claim[OWNER_KEY] == owner]
    if len(claims) != 1:
        return  # not autoscaled, or claimed by several and owned by none: nothing to repair
    wanted = claims[0]
    if all(annotations.get(key) == value for key, value in wanted.items()):
        return
    log.info("restoring autoscaling annotations on MachineSet %s/%s", namespace, name)
    await _annotate(await kube(), namespace, name, wanted)


@kopf.on.create(GROUP, "v1beta1", "machineautoscalers")
@kopf.on.update(GROUP, "v1beta1", "machineautoscalers")
@kopf.on.resume(GROUP, "v1beta1", "machineautoscalers")
@transient_only
async def machineautoscaler_reconcile(body: kopf.Body, spec: kopf.Spec, status: kopf.Status,
                                      name: str, namespace: str | None, patch: kopf.Patch,
                                      **_: Any) -> None:
    client = await kube()
    namespace = namespace or "default"
    owner = object_key(namespace, name)
    target = _target(spec.get("scaleTargetRef"))
    if target is None:
        raise kopf.PermanentError("spec.scaleTargetRef.name is required; name a MachineSet")
    last = _target(status.get("lastTargetRef"))
    if last is not None and last != target:
        await _release(client, namespace, last[1], owner)
        kopf.info(body, reason="SuccessfulUpdate",
                  message=f"Removed autoscaling from previous target: {namespace}/{last[1]}")
    try:
        machine_set = await client.get(resource_path(MACHINE_API, "machinesets", namespace,
                                                     target[1]))
    except KubeError as error:
        if not error.not_found:
            raise
        kopf.warn(body, reason="FailedGetTarget",
                  message=f"Error getting target: MachineSet {namespace}/{target[1]} not found")
        raise kopf.TemporaryError(f"MachineSet {namespace}/{target[1]} not found",
                                  delay=30) from error
    other = owner_conflict((machine_set.get("metadata") or {}).get("annotations") or {}, owner)
    if other is not None:
        kopf.warn(body, reason="FailedSetOwner",
                  message=f"Error setting target owner: {ALREADY_OWNED}")
        raise kopf.TemporaryError(f"MachineSet {namespace}/{target[1]} is {ALREADY_OWNED} "
                                  f"({other}); point one of them at another MachineSet",
                                  delay=OWNER_RETRY_DELAY)
    finalizers = list(body.metadata.get("finalizers") or [])
    if FINALIZER not in finalizers:
        # Persisted before the MachineSet is touched (upstream's Reconcile adds the finalizer
        # and updates first): an operator killed right after annotating must leave a
        # finalizer behind, or nothing would ever remove the annotations.
        await _persist_finalizer(client, namespace, name, finalizers,
                                 body.metadata.get("resourceVersion"))
    wanted_limits = wanted_annotations(spec, owner)
    current = (machine_set.get("metadata") or {}).get("annotations") or {}
    if any(current.get(k) != wanted_limits[k] for k in (MIN_SIZE_KEY, MAX_SIZE_KEY)) \
            and events.has_gpu_capacity(machine_set):
        # upstream's UpdateTarget: on a limits change, warn about the GPU accelerator label
        warning = events.gpu_label_warning(machine_set)
        if warning:
            log.warning("%s", warning)
            await events.post(client, machine_set, events.INVALID_GPU_LABEL, warning,
                              datetime.now(UTC), "Warning", events.MACHINE_AUTOSCALER_COMPONENT)
    if not await _annotate(client, namespace, target[1], wanted_limits):
        raise kopf.TemporaryError(f"MachineSet {namespace}/{target[1]} not found", delay=30)
    wanted = {"apiVersion": spec["scaleTargetRef"].get("apiVersion",
                                                      "machine.openshift.io/v1beta1"),
              "kind": target[0], "name": target[1]}
    if dict(status.get("lastTargetRef") or {}) != wanted:
        patch.status["lastTargetRef"] = wanted
        kopf.info(body, reason="SuccessfulUpdate",
                  message=f"Updated MachineAutoscaler target: {namespace}/{target[1]}")


@kopf.on.event(GROUP, "v1beta1", "machineautoscalers")
async def machineautoscaler_delete(type: str, body: kopf.Body, name: str, namespace: str | None,
                                   **_: Any) -> None:
    finalizers = list(body.metadata.get("finalizers") or [])
    if type == "DELETED" or not body.metadata.get("deletionTimestamp") \
            or FINALIZER not in finalizers:
        return
    client = await kube()
    namespace = namespace or "default"
    owner = object_key(namespace, name)
    spec, status = body.get("spec") or {}, body.get("status") or {}
    try:
        for ref in (spec.get("scaleTargetRef"), status.get("lastTargetRef")):
            target = _target(ref)
            if target is not None:
                await _release(client, namespace, target[1], owner)
        await client.patch(resource_path(GROUP_API_BETA, "machineautoscalers", namespace, name),
                           {"metadata": {"finalizers": [f for f in finalizers if f != FINALIZER],
                                         "resourceVersion": body.metadata.get("resourceVersion")}})
    except KubeError as error:
        if not error.not_found:
            log.warning("MachineAutoscaler %s: releasing its target failed, retried on its next "
                        "event: %s", owner, error)
