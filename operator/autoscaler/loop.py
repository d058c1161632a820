"""One autoscaler iteration against the API server: read, decide (pure), act, report.

Design: ``run_once`` reads what the decisions need (nodes, pods, PDBs, priority classes,
MachineSets, Machines, and the volume objects the placement engine judges claims with:
PersistentVolumes, PersistentVolumeClaims, StorageClasses, CSINodes) — from the operator's watch
caches (:mod:`.watches`), or with one LIST per kind (:func:`read_cluster`) when none are given —
and the PodGroups (none when their CRD is not installed: :func:`list_pod_groups`), builds a
fresh placement snapshot, and in this order
1. backs off MachineSets whose new nodes did not register within ``maxNodeProvisionTime`` and
   gives their unregistered Machines back (``delete-machine`` + lower replicas);
2. decides a scale-up for the pending pods older than ``newPodScaleUpDelay`` and raises
   ``spec.replicas`` of the chosen MachineSets, with TriggeredScaleUp / NotTriggerScaleUp events
   on the pods (and on a PodGroup whose gang no scale-up can start whole: :mod:`.gangs`);
3. when nothing was scaled up, finds unneeded nodes, and for those unneeded long enough and
   outside the cooldowns taints the node ``ToBeDeletedByClusterAutoscaler`` (and cordons it with
   ``cordonNodeBeforeTerminating``), evicts the pods that must move with a grace period capped
   at ``maxPodGracePeriod`` (and its DaemonSet pods, retrying refusals, waiting for
   delay-deletion annotations: :mod:`.actuation`), marks its Machine
   ``machine.openshift.io/delete-machine`` and lowers
   its MachineSet's replicas — the MachineSet controller then deletes exactly that Machine,
   through its lifecycle hooks and the drain;
4. with ``enforceNodeGroupMinSize``, raises MachineSets below their min size up to it;
5. returns the ClusterAutoscaler status and records the metrics.
Its first run removes the ToBeDeleted and DeletionCandidate taints a previous process left
(:mod:`.taints`, upstream's ``cleanUpIfRequired``).
Writes never overwrite what they did not read: replicas go through the MachineSet's ``scale``
subresource with the resourceVersion read, from the size the decision saw (a MachineSet resized
meanwhile is left alone and decided again next loop: :meth:`Actuator.set_replicas`); node taints
are guarded the same way; a node being removed has its pods judged again, on a fresh list made
after its taint, before anything is evicted (:func:`apply_scale_down`).
Before any of it, a cluster with too many unready nodes (``clusterstate``) is not autoscaled
in that loop, as upstream; ``cluster_autoscaler_cluster_safe_to_autoscale`` says so.
``logVerbosity`` sets the level of the ``berthmaster.operator.autoscaler`` logger each loop.
The in-memory :class:`AutoscalerState` (unneeded-since times, cooldown stamps, provisioning
requests, backoffs) is what upstream keeps in memory too; a restart starts the clocks afresh,
which only ever delays a scale-down. Its times are on the monotonic clock (``clock``), so a
wall-clock step (NTP, a VM resumed) neither expires nor extends a cooldown or a backoff; the
wall clock (``now``) is read only for pod ages (creationTimestamp is wall time) and for what is
written to the API (status stamps, ``backoffUntil``, the taint's value, the delete-machine mark).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from berthmaster.foundation.kube import CORE, KubeClient, KubeError, group_path, resource_path
from berthmaster.foundation.times import format_rfc3339
from berthmaster.operator.autoscaler import events, metrics, taints
from berthmaster.operator.autoscaler.actuation import (
    DELAY_DELETION_POLL,
    EVICTION_RETRY_TIME,
    MAX_POD_EVICTION_TIME,
    NODE_DELETION_DELAY_TIMEOUT,
    daemonset_pods_to_evict,
    has_delay_deletion,
    retry_until,
)
from berthmaster.operator.autoscaler.clusterstate import next_backoff, unsafe_to_autoscale
from berthmaster.operator.autoscaler.config import (
    DEBUG_VERBOSITY,
    DEFAULT_NAMESPACE,
    AutoscalerConfig,
    parse_cluster_autoscaler,
)
from berthmaster.operator.autoscaler.drainability import (
    CONTROLLER_KINDS,
    Controllers,
    Verdict,
    controllers_of,
)
from berthmaster.operator.autoscaler.expanders import (
    PRIORITY_CONFIGMAP,
    Priorities,
    read_priorities,
)
from berthmaster.operator.autoscaler.gangs import gangs_of, with_pending_members
from berthmaster.operator.autoscaler.groups import (
    DELETE_MACHINE_KEY,
    ClusterView,
    build_cluster_view,
)
from berthmaster.operator.autoscaler.limits import cluster_totals, node_totals
from berthmaster.operator.autoscaler.scaledown import (
    Cooldown,
    ScaleDownPlan,
    Unneeded,
    cooldown_reason,
    eviction_grace_period,
    find_unneeded,
    pods_to_drain,
    select_removals,
    track_unneeded,
)
from berthmaster.operator.autoscaler.scaleup import (
    ScaleUpDecision,
    decide_min_size_scale_up,
    decide_scale_up,
    nominated_node,
    old_enough,
    pod_id,
    pod_priority,
    pods_to_help,
)
from berthmaster.operator.autoscaler.simulation import Placement, Simulation
from berthmaster.operator.autoscaler.taints import TO_BE_DELETED_TAINT
from berthmaster.operator.machines import drain
from berthmaster.scheduler.volume_objects import NO_VOLUMES, VolumeObjects, list_volume_objects

JSON = dict[str, Any]
MACHINE_API = group_path("machine.openshift.io", "v1beta1")
POLICY_API = group_path("policy", "v1")
SCHEDULING_API = group_path("scheduling.k8s.io", "v1")
ACTIVE_PODS = "status.phase!=Succeeded,status.phase!=Failed"  # terminal pods need no room
CONFLICT_ATTEMPTS = 3  # GET+PUT rounds of one replicas write before leaving it to the next loop

log = logging.getLogger("berthmaster.operator.autoscaler")


def default_placement() -> Placement:
    """The scheduler's placement engine (one placement truth for scheduler and autoscaler):
    kube-scheduler 1.35's default profile, VolumeBinding and the other volume filters included,
    as upstream's simulator runs the scheduler framework's filters
    (cluster-autoscaler/simulator/scheduling/hinting_simulator.go)."""
    from berthmaster.scheduler.config import default_profile
    from berthmaster.scheduler.engine import Engine

    return Engine(default_profile())


@dataclass
class ProvisionRequest:
    since: float
    target: int


@dataclass
class AutoscalerState:
    unneeded_since: dict[str, float] = field(default_factory=dict)
    last_scale_up: float | None = None
    last_scale_down: float | None = None
    last_failure: float | None = None
    provisioning: dict[str, ProvisionRequest] = field(default_factory=dict)
    backoff_until: dict[str, float] = field(default_factory=dict)
    backoff_length: dict[str, float] = field(default_factory=dict)
    backoff_last_failure: dict[str, float] = field(default_factory=dict)
    initialized: bool = False  # start-up clean-up done (taints.clean_up_at_start)
    last_scale_up_record: JSON | None = None
    last_scale_down_record: JSON | None = None
    rng: random.Random = field(default_factory=random.Random)


@dataclass(frozen=True)
class ClusterState:
    nodes: list[JSON]
    pods: list[JSON]
    pdbs: list[JSON]
    priority_classes: dict[str, JSON]
    machine_sets: list[JSON]
    machines: list[JSON]
    priority_configmap: JSON | None
    volumes: VolumeObjects = NO_VOLUMES
    # the workload controllers that exist (ControllerNotFound); None: not known, not checked
    controllers: Controllers | None = None
    pod_groups: Sequence[JSON] = ()


POD_GROUPS_API = group_path("scheduling.x-k8s.io", "v1alpha1")


async def list_pod_groups(kube: KubeClient) -> list[JSON] | None:
    """Every PodGroup; None when the API server does not serve them (their CRD is optional)."""
    try:
        groups, _ = await kube.list_all(resource_path(POD_GROUPS_API, "podgroups"))
    except KubeError as error:
        if error.not_found:
            return None
        raise
    return groups


async def read_cluster(kube: KubeClient, config: AutoscalerConfig,
                       namespace: str = DEFAULT_NAMESPACE) -> ClusterState:
    """One LIST per kind; the Priority expander's ConfigMap from ``namespace`` only."""
    nodes, _ = await kube.list_all(resource_path(CORE, "nodes"))
    pods, _ = await kube.list_all(resource_path(CORE, "pods"), fieldSelector=ACTIVE_PODS)
    pdbs, _ = await kube.list_all(resource_path(POLICY_API, "poddisruptionbudgets"))
    classes, _ = await kube.list_all(resource_path(SCHEDULING_API, "priorityclasses"))
    machine_sets, _ = await kube.list_all(resource_path(MACHINE_API, "machinesets"))
    machines, _ = await kube.list_all(resource_path(MACHINE_API, "machines"))
    configmap = None
    if "Priority" in config.expanders:
        configmap = await kube.get_if_exists(resource_path(CORE, "configmaps", namespace,
                                                           PRIORITY_CONFIGMAP))
    controllers = {}
    for kind, (api_path, plural) in CONTROLLER_KINDS.items():
        controllers[kind], _ = await kube.list_all(resource_path(api_path, plural))
    return ClusterState(nodes, pods, pdbs, {c["metadata"]["name"]: c for c in classes},
                        machine_sets, machines, configmap, await list_volume_objects(kube),
                        controllers_of(controllers), await list_pod_groups(kube) or [])


ClusterReader = Callable[[AutoscalerConfig], Awaitable[ClusterState]]


def log_level(verbosity: int) -> int:
    """klog's ``-v`` as a Python logging level: from 4 (upstream's debugging level) every
    decision is logged at DEBUG; below, INFO and above (klog's V(0) messages always show)."""
    return logging.DEBUG if verbosity >= DEBUG_VERBOSITY else logging.INFO


def _ready(node: Mapping[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])


def _stamp(when: float) -> str:
    return format_rfc3339(datetime.fromtimestamp(when, UTC))


class StaleDecision(KubeError):
    """A MachineSet's replicas changed between the read a decision was made on and its write:
    nothing was written; the next loop decides again from the new size."""

    def __init__(self, group_id: str, expected: int, found: int):
        super().__init__(409, "Conflict", f"MachineSet {group_id} has {found} replicas, not the "
                         f"{expected} this decision was made on; deciding again next loop")


class Actuator:
    """The writes: MachineSet replicas, Machine and Node marks, events."""

    def __init__(self, kube: KubeClient, now: float, clock: float | None = None):
        self.kube = kube
        self.now = now  # wall clock: what is written to the API (stamps, the taint's value)
        self.clock = now if clock is None else clock  # monotonic: what durations are made of
        self.when = datetime.fromtimestamp(now, UTC)
        # the live clock and the sleep of the waits inside a removal (:mod:`.actuation`)
        self.monotonic: Callable[[], float] = time.monotonic
        self.sleep: Callable[[float], Awaitable[None]] = asyncio.sleep

    async def set_replicas(self, group_id: str, expected: int, replicas: int) -> None:
        """Set the MachineSet's replicas from ``expected`` (the size the decision saw) to
        ``replicas`` through its ``scale`` subresource, as upstream's clusterapi provider
        (clusterapi_unstructured.go ``SetSize``: GET the Scale, PUT it back with the
        resourceVersion read). A size other than ``expected`` raises :class:`StaleDecision` and
        writes nothing; a 409 (the MachineSet changed between our GET and PUT) reads it again
        and re-checks, so a concurrent change of replicas is never overwritten."""
        namespace, name = group_id.split("/", 1)
        path = resource_path(MACHINE_API, "machinesets", namespace, name, "scale")
        for _ in range(CONFLICT_ATTEMPTS):
            scale = await self.kube.get(path)
            found = int((scale.get("spec") or {}).get("replicas") or 0)
            if found != expected:
                raise StaleDecision(group_id, expected, found)
            scale["spec"] = {**(scale.get("spec") or {}), "replicas": replicas}
            try:
                await self.kube.replace(path, scale)
                return
            except KubeError as error:
                if not error.conflict:
                    raise
        raise KubeError(409, "Conflict", f"MachineSet {group_id} kept changing; its replicas "
                        "were not set, deciding again next loop")

    async def mark_machine(self, namespace: str, name: str) -> None:
        await self.kube.patch(resource_path(MACHINE_API, "machines", namespace, name),
                              {"metadata": {"annotations": {DELETE_MACHINE_KEY: _stamp(self.now)}}})

    async def unmark_machine(self, namespace: str, name: str) -> None:
        """Upstream's ``UnmarkMachineForDeletion`` after a failed ``SetSize``."""
        try:
            await self.kube.patch(resource_path(MACHINE_API, "machines", namespace, name),
                                  {"metadata": {"annotations": {DELETE_MACHINE_KEY: None}}})
        except KubeError as error:
            if not error.not_found:
                log.warning("could not unmark Machine %s/%s: %s", namespace, name, error)

    async def taint_node(self, node: Mapping[str, Any], cordon: bool = False) -> None:
        """Upstream's ``MarkToBeDeleted``: the taint, and ``spec.unschedulable`` when cordoning
        (``--cordon-node-before-terminating``); guarded by the node's resourceVersion
        (:mod:`.taints`)."""
        taint = {"key": TO_BE_DELETED_TAINT, "value": str(int(self.now)),
                 "effect": "NoSchedule"}
        await taints.update_taints(self.kube, node,
                                   lambda fresh: taints.with_taint(fresh, taint, cordon))

    async def untaint_node(self, node: Mapping[str, Any], uncordon: bool = False) -> None:
        """Upstream's ``CleanToBeDeleted``: the taint goes, and the cordon it added."""
        try:
            await taints.update_taints(self.kube, node, lambda fresh: taints.without_taints(
                fresh, [TO_BE_DELETED_TAINT], uncordon))
        except KubeError as error:
            log.warning("could not remove %s from %s: %s", TO_BE_DELETED_TAINT,
                        node["metadata"]["name"], error)

    async def pods_on(self, node_name: str) -> list[JSON]:
        """The node's pods as the API server has them now (not the watch cache's)."""
        pods, _ = await self.kube.list_all(resource_path(CORE, "pods"), fieldSelector=(
            f"spec.nodeName={node_name},{ACTIVE_PODS}"))
        return pods

    async def evict(self, pod: Mapping[str, Any], grace_period: int) -> None:
        """POST a policy/v1 Eviction for ``pod`` with ``grace_period`` seconds to stop; a pod
        already gone is fine, a refusal (a PodDisruptionBudget's 429) raises."""
        meta = pod.get("metadata") or {}
        body = drain.eviction_body(dict(pod), unreachable=False)
        body["deleteOptions"] = {"gracePeriodSeconds": grace_period}
        try:
            await self.kube.create(resource_path(CORE, "pods", meta.get("namespace"),
                                                 meta.get("name"), "eviction"), body)
        except KubeError as error:
            if not error.not_found:
                raise

    async def evict_retrying(self, pod: Mapping[str, Any], grace_period: int,
                             deadline: float) -> KubeError | None:
        """:meth:`evict`, tried again every ``EVICTION_RETRY_TIME`` until ``deadline``
        (monotonic) while refused; the last refusal if it never went through."""
        async def attempt() -> KubeError | None:
            try:
                await self.evict(pod, grace_period)
            except KubeError as error:
                return error
            return None
        return await retry_until(attempt, deadline, EVICTION_RETRY_TIME, self.monotonic,
                                 self.sleep)

    async def wait_for_delay_deletion(self, node_name: str) -> bool:
        """Upstream's ``WaitForDelayDeletion``: poll the node until it carries no
        ``delay-deletion.cluster-autoscaler.kubernetes.io/`` annotation, at most
        ``NODE_DELETION_DELAY_TIMEOUT``; whether they were all removed in time."""
        path = resource_path(CORE, "nodes", name=node_name)

        async def attempt() -> str | None:
            fresh = await self.kube.get(path)
            return "annotated" if has_delay_deletion(fresh) else None
        deadline = self.monotonic() + NODE_DELETION_DELAY_TIMEOUT
        return await retry_until(attempt, deadline, DELAY_DELETION_POLL, self.monotonic,
                                 self.sleep) is None

    async def event(self, obj: Mapping[str, Any], reason: str, message: str,
                    event_type: str = "Normal") -> None:
        await events.post(self.kube, obj, reason, message, self.when, event_type)


async def handle_provision_timeouts(act: Actuator, view: ClusterView, state: AutoscalerState,
                                    config: AutoscalerConfig, machine_sets: Sequence[JSON]
                                    ) -> list[str]:
    """Back off the groups whose requested nodes did not register in time; their ids. A
    request of a group that no longer exists (its MachineSet deleted, or no longer autoscaled)
    is forgotten: nothing will ever arrive for it, and it would keep ScaleUp InProgress."""
    existing = {group.id for group in view.groups}
    for gone in [group_id for group_id in state.provisioning if group_id not in existing]:
        del state.provisioning[gone]
    timed_out = []
    for group in view.groups:
        request = state.provisioning.get(group.id)
        if request is None:
            continue
        if len(group.nodes) >= min(request.target, group.target_size) or \
                group.target_size < request.target:
            del state.provisioning[group.id]  # arrived, or someone else resized the set
            # clusterstate.go updateScaleRequests: a finished scale-up resets the backoff
            for backoffs in (state.backoff_length, state.backoff_until,
                             state.backoff_last_failure):
                backoffs.pop(group.id, None)
            continue
        if act.clock - request.since < config.max_node_provision_time:
            continue
        del state.provisioning[group.id]
        length, until = next_backoff(state.backoff_length.get(group.id),
                                     state.backoff_until.get(group.id),
                                     state.backoff_last_failure.get(group.id), act.clock)
        state.backoff_length[group.id] = length
        state.backoff_until[group.id] = until
        state.backoff_last_failure[group.id] = act.clock
        metrics.failed_scale_ups_total.labels("timeout").inc()
        timed_out.append(group.id)
        machine_set = next(m for m in machine_sets
                           if f"{m['metadata']['namespace']}/{m['metadata']['name']}" == group.id)
        await act.event(machine_set, events.SCALE_UP_TIMED_OUT,
                        f"Nodes added to group {events.node_group_id(group.id)} failed to "
                        "register within "
                        f"{config.max_node_provision_time:g}s", "Warning")
        # Give the unregistered machines back, as upstream decreases the target size.
        stuck = [m for m in group.machines_without_node if m not in group.deleting_machines]
        for machine in stuck:
            await act.mark_machine(group.namespace, machine)
        if stuck:
            try:
                await act.set_replicas(group.id, group.target_size,
                                       max(group.min_size, group.target_size - len(stuck)))
            except StaleDecision as error:
                log.info("%s", error.message)
    return timed_out


async def apply_scale_up(act: Actuator, decision: ScaleUpDecision, pods: Mapping[str, JSON],
                         state: AutoscalerState) -> None:
    made = []
    for increase in decision.increases:
        try:
            await act.set_replicas(increase.group_id, increase.current, increase.new)
        except StaleDecision as error:
            # someone else resized it since our read: never overwrite, decide again next loop
            log.info("scale-up of %s skipped: %s", increase.group_id, error.message)
            continue
        made.append(increase)
        state.provisioning[increase.group_id] = ProvisionRequest(act.clock, increase.new)
        metrics.scaled_up_nodes_total.inc(increase.new - increase.current)
        log.info("scale-up: %s %d->%d (max: %d)", increase.group_id, increase.current,
                 increase.new, increase.max_size)
    if made:
        state.last_scale_up = act.clock
        state.last_scale_up_record = {
            "time": _stamp(act.now),
            "nodeGroups": [{"name": i.group_id, "from": i.current, "to": i.new,
                            "max": i.max_size} for i in made],
            "pods": sorted(decision.triggered)[:50],
        }
    for key, message in decision.triggered.items():
        await act.event(pods[key], events.TRIGGERED_SCALE_UP, message)
    for key, message in decision.not_triggered.items():
        await act.event(pods[key], events.NOT_TRIGGER_SCALE_UP, message)


class ScaleDownAborted(Exception):
    """A node's removal stopped before its Machine was given back (see apply_scale_down)."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


Drain = Callable[[Sequence[JSON]], tuple[list[JSON], Verdict | None]]


async def apply_scale_down(act: Actuator, removals: Sequence[Unneeded], view: ClusterView,
                           nodes: Mapping[str, JSON], state: AutoscalerState,
                           config: AutoscalerConfig, drain_plan: Drain) -> list[str]:
    """Remove each node in turn: taint it, judge its pods again on a fresh list (``drain_plan``:
    :func:`~.scaledown.pods_to_drain`), evict those that move, mark its Machine and lower its
    MachineSet's replicas from the size the decision saw. Any failure untaints the node (and
    unmarks the Machine: upstream's clusterapi ``DeleteNodes`` after a failed ``SetSize``) and
    ends the scale-down of this loop."""
    removed = []
    targets = {g.id: g.target_size for g in view.groups}
    cordon = config.scale_down.cordon_node_before_terminating
    for removal in removals:
        node = nodes[removal.node]
        machine = view.node_machine.get(removal.node)
        marked = False
        try:
            if machine is None:
                raise ScaleDownAborted(f"node {removal.node} has no Machine")
            await act.taint_node(node, cordon=cordon)
            fresh = await act.pods_on(removal.node)
            to_move, blocked = drain_plan(fresh)
            if blocked is not None:
                raise ScaleDownAborted(f"{blocked.reason}: {blocked.message}")
            deadline = act.monotonic() + MAX_POD_EVICTION_TIME  # one budget for the node
            for pod in to_move:
                await act.event(pod, events.SCALE_DOWN, "deleting pod for node scale down")
                refused = await act.evict_retrying(
                    pod, eviction_grace_period(pod, config.max_pod_grace_period), deadline)
                if refused is not None:
                    await act.event(pod, events.SCALE_DOWN_FAILED,
                                    "failed to delete pod for ScaleDown", "Warning")
                    raise refused
            for pod in daemonset_pods_to_evict(fresh, occupied=bool(removal.pods_to_move)):
                refused = await act.evict_retrying(
                    pod, eviction_grace_period(pod, config.max_pod_grace_period), deadline)
                if refused is not None:  # best effort: the DaemonSet pod goes with the node
                    log.info("DaemonSet pod %s/%s not evicted: %s",
                             pod["metadata"].get("namespace"), pod["metadata"].get("name"),
                             refused)
            if has_delay_deletion(node) and not await act.wait_for_delay_deletion(removal.node):
                log.warning("Delay node deletion timed out for node %s, delay deletion "
                            "annotation wasn't removed within %gs", removal.node,
                            NODE_DELETION_DELAY_TIMEOUT)
            await act.mark_machine(*machine)
            marked = True
            await act.set_replicas(removal.group_id, targets[removal.group_id],
                                   targets[removal.group_id] - 1)
            targets[removal.group_id] -= 1
        except (KubeError, ScaleDownAborted) as error:
            state.last_failure = act.clock
            if marked and machine is not None:
                await act.unmark_machine(*machine)
            # a node left tainted would never take pods again
            await act.untaint_node(node, uncordon=cordon)
            await act.event(node, events.SCALE_DOWN_FAILED,
                            f"failed to delete the node: {error.message}", "Warning")
            log.warning("scale-down of %s failed: %s", removal.node, error)
            break
        removed.append(removal.node)
        state.unneeded_since.pop(removal.node, None)
        reason = "underutilized" if removal.pods_to_move else "empty"
        metrics.scaled_down_nodes_total.labels(reason).inc()
        await act.event(node, events.SCALE_DOWN, "marked the node as toBeDeleted/unschedulable")
        log.info("scale-down: node %s (machine %s/%s) of %s", removal.node, *(machine or ("", "")),
                 removal.group_id)
    if removed:
        state.last_scale_down = act.clock
        state.last_scale_down_record = {"time": _stamp(act.now), "nodes": removed}
    return removed


def _condition(kind: str, status: bool, reason: str, message: str) -> JSON:
    return {"type": kind, "status": "True" if status else "False", "reason": reason,
            "message": message}


def with_transition_times(conditions: list[JSON], previous: Sequence[Mapping[str, Any]],
                          now: float) -> list[JSON]:
    """Keep a condition's lastTransitionTime while its status does not change."""
    before = {c.get("type"): c for c in previous}
    for condition in conditions:
        old = before.get(condition["type"])
        same = old is not None and old.get("status") == condition["status"]
        condition["lastTransitionTime"] = (old or {}).get("lastTransitionTime") if same and \
            (old or {}).get("lastTransitionTime") else _stamp(now)
    return conditions


def build_status(view: ClusterView, state: AutoscalerState, decision: ScaleUpDecision,
                 plan: ScaleDownPlan, cooldown: str | None, unschedulable: int,
                 config: AutoscalerConfig, now: float,
                 previous: Sequence[Mapping[str, Any]] = (), clock: float | None = None
                 ) -> JSON:
    """The ClusterAutoscaler status. ``now`` is the wall clock (the stamps written), ``clock``
    the monotonic one the state's times are on (``now`` when not given)."""
    clock = now if clock is None else clock
    backing_off = sorted(g for g, until in state.backoff_until.items() if until > clock)
    if decision.increases:
        scale_up = _condition("ScaleUp", True, "InProgress",
                              "scaling up " + ", ".join(str(i) for i in decision.increases))
    elif state.provisioning:
        scale_up = _condition("ScaleUp", True, "InProgress", "waiting for nodes of " +
                              ", ".join(sorted(state.provisioning)))
    elif backing_off:
        scale_up = _condition("ScaleUp", False, "Backoff", "in backoff after failed scale-up: " +
                              ", ".join(backing_off))
    elif decision.not_triggered:
        scale_up = _condition("ScaleUp", False, "NoOptions",
                              f"{len(decision.not_triggered)} pod(s) cannot be helped")
    else:
        scale_up = _condition("ScaleUp", False, "NoActivity", "no unschedulable pods to help")
    if not config.scale_down.enabled:
        scale_down = _condition("ScaleDown", False, "Disabled", "scaleDown.enabled is false")
    elif plan.unneeded:
        scale_down = _condition("ScaleDown", True, "CandidatesPresent",
                                "unneeded: " + ", ".join(u.node for u in plan.unneeded)
                                + (f" (waiting: {cooldown})" if cooldown else ""))
    else:
        scale_down = _condition("ScaleDown", False, "NoCandidates", "no unneeded nodes")
    healthy = _condition("Healthy", not view.problems, "Healthy" if not view.problems
                         else "InvalidNodeGroups", "; ".join(view.problems) or "all node "
                         "groups readable")
    status: JSON = {
        "conditions": with_transition_times([healthy, scale_up, scale_down], previous, now),
        "unschedulablePods": unschedulable,
        "unneededNodes": len(plan.unneeded),
        # Why autoscaled nodes stay (first 50; upstream's UnremovableReason names).
        "unremovableNodes": [
            {"name": node, "reason": reason, "message": plan.messages.get(node, "")}
            for node, reason in sorted(plan.unremovable.items())
            if reason != "NotAutoscaled"][:50],
        "nodeGroups": [{"name": g.id, "minSize": g.min_size, "maxSize": g.max_size,
                        "targetSize": g.target_size, "registered": len(g.nodes),
                        **({"backoffUntil": _stamp(now + state.backoff_until[g.id] - clock)}
                           if state.backoff_until.get(g.id, 0) > clock else {})}
                       for g in view.groups],
    }
    if state.last_scale_up_record:
        status["lastScaleUp"] = state.last_scale_up_record
    if state.last_scale_down_record:
        status["lastScaleDown"] = state.last_scale_down_record
    return status


async def run_once(kube: KubeClient, autoscaler: Mapping[str, Any], state: AutoscalerState,
                   placement: Placement, now: float | None = None,
                   read: ClusterReader | None = None, namespace: str = DEFAULT_NAMESPACE,
                   clock: float | None = None) -> JSON:
    """One iteration; returns the ClusterAutoscaler ``status`` to write. ``read`` gives the
    cluster (the watch caches' ``read``); without it every kind is LISTed. ``namespace`` is
    the operator's, the Priority expander's ConfigMap's (the watch caches' own). ``now`` is
    the wall clock (pod ages, the stamps written), ``clock`` the monotonic one every duration
    kept in ``state`` is measured on (see the module docstring)."""
    started = time.monotonic()
    now = time.time() if now is None else now
    clock = started if clock is None else clock
    config = parse_cluster_autoscaler(autoscaler)
    log.setLevel(log_level(config.log_verbosity))
    cluster = await (read(config) if read is not None else read_cluster(kube, config, namespace))
    view = build_cluster_view(cluster.machine_sets, cluster.machines, cluster.nodes,
                              config.startup_taints)
    act = Actuator(kube, now, clock)
    if not state.initialized:
        await taints.clean_up_at_start(kube, cluster.nodes,
                                       config.scale_down.cordon_node_before_terminating,
                                       act.event)
        state.initialized = True
    for problem in view.problems:
        log.warning("%s", problem)
    previous = (autoscaler.get("status") or {}).get("conditions") or []
    starting = {name for group in view.groups for name in group.starting_nodes}
    ready_nodes = sum(1 for n in cluster.nodes if _ready(n))
    unready_nodes = sum(1 for n in cluster.nodes
                        if not _ready(n) and n["metadata"]["name"] not in starting)
    unsafe = unsafe_to_autoscale(len(cluster.nodes), unready_nodes)
    if unsafe is not None:
        # upstream skips the whole loop (and forgets the unneeded nodes) until it recovers
        log.warning("Cluster is not ready for autoscaling: %s (%d of %d nodes unready)",
                    unsafe, unready_nodes, len(cluster.nodes))
        state.unneeded_since = {}
        metrics.record_loop(metrics.LoopFigures(
            ready_nodes=ready_nodes, unready_nodes=len(cluster.nodes) - ready_nodes,
            node_groups=len(view.groups), max_nodes=sum(g.max_size for g in view.groups),
            safe_to_autoscale=False), now)
        return build_status(view, state, ScaleUpDecision(), ScaleDownPlan(), None, 0, config,
                            now, previous, clock)

    await handle_provision_timeouts(act, view, state, config, cluster.machine_sets)
    in_backoff = [g for g, until in state.backoff_until.items() if until > clock]

    pods_by_key = {pod_id(p): p for p in cluster.pods}
    sim = Simulation.build(placement, cluster.nodes, cluster.pods, pdbs=cluster.pdbs,
                           priority_classes=list(cluster.priority_classes.values()),
                           **cluster.volumes.snapshot_args())
    # Starting nodes are registered (counted among the nodes) though upcoming for placement.
    upcoming = [(g.template, g.upcoming - len(g.starting_nodes)) for g in view.groups
                if g.template is not None]
    totals = cluster_totals(cluster.nodes, config.limits, upcoming)
    pending, preempting = pods_to_help(cluster.pods, config.pod_priority_threshold,
                                       cluster.priority_classes, set(sim.node_names()))
    for pod in preempting:  # the room preemption makes is theirs
        sim.place(pod, nominated_node(pod))
    old = old_enough(pending, now, config.scale_up.new_pod_scale_up_delay)
    kept = {id(p) for p in old}
    for young in (p for p in pending if id(p) not in kept):
        log.debug("pod %s is younger than its scale-up delay; left to the scheduler",
                  pod_id(young))
    gangs = gangs_of(cluster.pods, cluster.pod_groups)
    pending = with_pending_members(old, cluster.pods, gangs)
    priorities: Priorities = {}
    if "Priority" in config.expanders:
        reading = read_priorities(cluster.priority_configmap, namespace)
        priorities = reading.priorities
        if reading.problem:
            # never fatal: the expanders after Priority decide (expanders.py)
            log.warning("%s", reading.problem)
            await act.event(autoscaler, reading.reason, reading.problem, "Warning")
    scale_up_started = time.monotonic()
    decision = decide_scale_up(pending, view, sim, config, totals, in_backoff, state.rng,
                               priorities, gangs)
    metrics.function_duration_seconds.labels("scaleUp").observe(
        time.monotonic() - scale_up_started)
    await apply_scale_up(act, decision, pods_by_key, state)
    for key, message in decision.not_triggered_gangs.items():
        if key in gangs:
            await act.event(gangs[key].pod_group, events.NOT_TRIGGER_SCALE_UP, message)
    log.debug("scale-up: %d pending pod(s), %d waiting for upcoming nodes, increases %s, "
              "groups that cannot help: %s", len(pending), len(decision.waiting),
              [str(i) for i in decision.increases] or "none",
              dict(decision.group_reasons) or "none")

    plan = ScaleDownPlan()
    cooldown = None
    if config.scale_down.enabled:
        by_node: dict[str, list[JSON]] = {}
        for pod in cluster.pods:
            node_name = (pod.get("spec") or {}).get("nodeName")
            if node_name:
                by_node.setdefault(node_name, []).append(pod)
        plan = find_unneeded(cluster.nodes, by_node, view, sim, config, cluster.pdbs,
                             cluster_totals(cluster.nodes, config.limits),
                             lambda pod: pod_priority(pod, cluster.priority_classes), now,
                             cluster.controllers, gangs)
        state.unneeded_since = track_unneeded(state.unneeded_since, plan, clock)
        cooldown = cooldown_reason(config, Cooldown(state.last_scale_up, state.last_scale_down,
                                                     state.last_failure), clock)
        if decision.increases:
            cooldown = "scaled up in this loop"
        log.debug("scale-down: unneeded %s, unremovable %s, cooldown %s",
                  [u.node for u in plan.unneeded] or "none", dict(plan.unremovable) or "none",
                  cooldown or "none")
        if cooldown is None:
            removals = select_removals(plan, state.unneeded_since, clock, config)
            nodes = {n["metadata"]["name"]: n for n in cluster.nodes}
            await apply_scale_down(act, removals, view, nodes, state, config, lambda pods: (
                pods_to_drain(pods, config, cluster.pdbs,
                              lambda pod: pod_priority(pod, cluster.priority_classes), now,
                              cluster.controllers, gangs)))

    if config.enforce_node_group_min_size:
        # Groups grown in this loop are judged next loop, on their new size.
        grown = {i.group_id for i in decision.increases}
        gpu_types = [g.type for g in config.limits.gpus]
        after = totals
        for increase in decision.increases:
            group = view.group(increase.group_id)
            if group is not None and group.template is not None:
                after = after.plus(node_totals(group.template, gpu_types),
                                   increase.new - increase.current)
        raise_to_min = decide_min_size_scale_up(view, config, after, [*in_backoff, *grown])
        if raise_to_min:
            log.info("scale-up to node group min size: %s",
                     ", ".join(str(i) for i in raise_to_min))
            await apply_scale_up(act, ScaleUpDecision(increases=raise_to_min), pods_by_key, state)

    metrics.record_loop(metrics.LoopFigures(
        ready_nodes=ready_nodes, unready_nodes=len(cluster.nodes) - ready_nodes,
        upcoming_nodes=sum(g.upcoming for g in view.groups),
        node_groups=len(view.groups), max_nodes=sum(g.max_size for g in view.groups),
        unschedulable_pods=len(pending), unneeded_nodes=len(plan.unneeded),
        unremovable=dict(Counter(plan.unremovable.values())), in_cooldown=cooldown is not None,
    ), now)
    metrics.function_duration_seconds.labels("main").observe(time.monotonic() - started)
    return build_status(view, state, decision, plan, cooldown, len(pending), config, now,
                        previous, clock)
