"""The invariant checker: mirrors the cluster through watches and applies ``invariants``.

Design: one :class:`Mirror` per resource keeps a local copy (list, then watch from the list's
resourceVersion; on 410 Gone, a closed or malformed stream or an unreachable API server it
relists and turns the difference into the events it missed, so faults on the API server or etcd
never blind it).
Each mirror feeds :class:`Checker` in its own stream's order; the pod stream is the one order
bind-time rules are judged in. Every task the checker runs (mirrors, delayed checks, the
liveness loop) is registered with a :class:`~berthmaster.tooling.chaos.watchdog.Watchdog`: a task
that
raises, or a mirror that stops progressing, is a breach, so a checker that stops looking fails
the run instead of passing it. Who bound a pod comes from the API server's audit log
(:mod:`.audit`); the binder's own ``Scheduled`` Events are the second signal. Rules whose
facts arrive on two streams (a Node deleted, its Machine's hooks; an audited bind, the Lease)
are judged a few seconds later, when both streams have caught up. Liveness of the Machine API
(a deletion with no hooks left finishes, a MachineSet converges) is judged every 2 s against
the bounds below. A breach is
recorded with the checker's clock; the campaign stops at the first one.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from berthmaster.foundation.kube import CORE, KubeClient, KubeError, group_path, resource_path
from berthmaster.scheduler.model import NodeView, PodView
from berthmaster.tooling.chaos import invariants as rules
from berthmaster.tooling.chaos.audit import Act, stamp_seconds
from berthmaster.tooling.chaos.watchdog import Watchdog

Obj = dict[str, Any]
Handler = Callable[[str, Obj, Obj | None], None]
MACHINE_API = group_path("machine.openshift.io", "v1beta1")
AUTOSCALING = group_path("autoscaling.openshift.io", "v1")
COORDINATION = group_path("coordination.k8s.io", "v1")
POLICY = group_path("policy", "v1")
RECENT = 10.0  # seconds a departed pod still counts for rules judged on a lagging view
# A bind in flight when the Lease ran out (event stamps have 1 s resolution); the leader-stop
# fault resumes a frozen leader only after a longer while (faults.RESUME_AFTER_TAKEOVER).
LEASE_GRACE = 3.0
BIND_WINDOW = 5.0  # bindings this close after one may have been decided before it
WATCH_SECONDS = 60  # a watch's timeoutSeconds: a quiet mirror relists this often
# Liveness of the Machine API, judged throughout (docs/reliability.md). Drains wait for
# PodDisruptionBudgets and replacements, and the operator is killed and frozen meanwhile.
MACHINE_DELETION_BOUND = 180.0  # a deleted Machine with no hooks left is gone by then
MACHINE_SET_BOUND = 180.0  # a MachineSet's Machines match its replicas within this
# A Machine whose Node a MachineHealthCheck sees NotReady is deleted and replaced by one with a
# Ready Node within this (the fault: berthmaster/tooling/chaos/remediation.py)
REMEDIATION_BOUND = 180.0
log = logging.getLogger("berthmaster.tooling.chaos")


def key_of(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or ''}/{meta.get('name')}"


class Mirror:
    """A local copy of one collection, kept by list + watch, robust to API server faults."""

    def __init__(self, kube: KubeClient, path: str, handler: Handler, **params: Any):
        self.kube, self.path, self.handler, self.params = kube, path, handler, params
        self.items: dict[str, Obj] = {}
        self.relists = 0
        self.synced = asyncio.Event()
        self.last_progress = time.monotonic()  # a list or a watch event (bookmarks included)

    async def run(self) -> None:
        while True:
            try:
                version = await self._relist()
                async for event in self.kube.watch(self.path, version,
                                                   timeout_seconds=WATCH_SECONDS, **self.params):
                    obj = event["object"]
                    self.last_progress = time.monotonic()
                    if event["type"] == "BOOKMARK":
                        continue
                    key = key_of(obj)
                    old = self.items.get(key)
                    if event["type"] == "DELETED":
                        self.items.pop(key, None)
                    else:
                        self.items[key] = obj
                    self.handler(event["type"], obj, old)
            except KubeError as error:
                log.debug("watch %s: %s; relisting", self.path, error)
                await asyncio.sleep(0.5 if error.gone else 1.0)
            except (TimeoutError, OSError, ValueError) as error:
                # ValueError: a line that is not JSON, or longer than kube.MAX_LINE_BYTES
                log.debug("watch %s: %r; relisting", self.path, error)
                await asyncio.sleep(1.0)

    async def _relist(self) -> str:
        items, version = await self.kube.list_all(self.path, **self.params)
        self.relists += 1
        self.last_progress = time.monotonic()
        fresh = {key_of(i): i for i in items}
        before, self.items = self.items, dict(fresh)
        # The copy is whole before the missed events are told: a rule counting over the copy
        # (a budget's healthy pods) sees the cluster as listed, not half-updated.
        for key, gone in before.items():
            if key not in fresh:
                self.handler("DELETED", gone, gone)
        for key, obj in fresh.items():
            old = before.get(key)
            if old is None or (old.get("metadata") or {}).get("resourceVersion") != \
                    (obj.get("metadata") or {}).get("resourceVersion"):
                self.handler("ADDED" if old is None else "MODIFIED", obj, old)
        self.synced.set()
        return version


@dataclass
class Figures:
    pods_created: int = 0
    pods_bound: int = 0
    binds_by_reporter: dict[str, int] = field(default_factory=dict)  # Scheduled Events
    binds_by_user: dict[str, int] = field(default_factory=dict)  # the audit log
    preemptions_by_user: dict[str, int] = field(default_factory=dict)
    machine_deletions_judged: int = 0
    machine_set_convergences: int = 0
    remediations: int = 0  # MachineHealthCheck remediations seen through, within the bound
    takeovers: int = 0
    evictions_seen: int = 0
    machines_deleted: int = 0
    scale_ups: int = 0
    scale_downs: int = 0


class Checker:
    """Applies the rules to what the mirrors see; ``breaches`` grows, never shrinks."""

    def __init__(self, kube: KubeClient, scheduler_name: str, lease: tuple[str, str],
                 machine_namespace: str, on_breach: Callable[[str], None]):
        self.kube = kube
        self.scheduler_name = scheduler_name
        self.lease_namespace, self.lease_name = lease
        self.machine_namespace = machine_namespace
        self.on_breach = on_breach
        self.breaches: list[str] = []
        self.figures = Figures()
        self.first_node: dict[str, str] = {}  # pod uid -> the node it was first seen bound to
        self.created_at: dict[str, float] = {}
        self.bound_at: dict[str, float] = {}
        self.gone: list[tuple[float, PodView]] = []
        self.takeovers: list[rules.Takeover] = []
        self.holder = ""
        self.scheduled: dict[str, dict[str, int]] = {}  # pod uid -> event uid -> count
        self.failed_scheduling: dict[str, float] = {}  # pod uid -> last FailedScheduling seen
        self.machine_events: dict[str, dict[str, tuple[str, int, str]]] = {}
        self.max_nodes_total: int | None = None
        self.static_nodes: set[str] = set()
        self.taint_since: dict[str, dict[tuple[Any, Any], float]] = {}
        self.tasks: list[asyncio.Task[None]] = []
        self.watchdog = Watchdog(self.breach, time.monotonic)
        self.bound_keys: dict[str, str] = {}  # pod uid -> namespace/name, when seen bound
        self.audited_binds: set[str] = set()  # namespace/name the audit log saw bound
        self.deletion_free_since: dict[str, float] = {}  # Machine key -> deleting, no hooks
        self.diverged_since: dict[str, float] = {}  # MachineSet key -> not converged since
        # Machine key -> (its MachineSet, since when its remediation is expected)
        self.remediations: dict[str, tuple[str, float]] = {}
        self.pods = Mirror(kube, resource_path(CORE, "pods"), self._pod)
        self.nodes = Mirror(kube, resource_path(CORE, "nodes"), self._node)
        self.events = Mirror(kube, resource_path(CORE, "events"), self._event)
        self.leases = Mirror(kube, resource_path(COORDINATION, "leases", self.lease_namespace),
                             self._lease)
        self.machines = Mirror(kube, resource_path(MACHINE_API, "machines",
                                                   machine_namespace), self._machine)
        self.machine_sets = Mirror(kube, resource_path(MACHINE_API, "machinesets",
                                                       machine_namespace), self._machine_set)
        self.pdbs = Mirror(kube, resource_path(POLICY, "poddisruptionbudgets"), self._ignore)
        self.autoscalers = Mirror(kube, resource_path(AUTOSCALING, "clusterautoscalers"),
                                  self._autoscaler)
        self.mirrors = [self.nodes, self.pdbs, self.leases, self.machines, self.machine_sets,
                        self.autoscalers, self.pods, self.events]

    # ---------------------------------------------------------------- running
    async def start(self) -> None:
        for mirror in self.mirrors:
            task = asyncio.create_task(mirror.run())
            self.tasks.append(task)
            self.watchdog.watch(f"mirror {mirror.path}", task)
            await asyncio.wait_for(mirror.synced.wait(), timeout=60)
            self.watchdog.probe(mirror.path, functools.partial(self._progress, mirror))
        self.spawn("liveness", self._liveness_loop())
        self.tasks.append(asyncio.create_task(self.watchdog.run()))

    @staticmethod
    def _progress(mirror: Mirror) -> tuple[bool, float]:
        return mirror.synced.is_set(), mirror.last_progress

    def spawn(self, name: str, work: Awaitable[None], may_finish: bool = False) -> None:
        """Run ``work`` as a task the watchdog watches."""
        async def run() -> None:
            await work
        task = asyncio.create_task(run())
        self.tasks.append(task)
        self.watchdog.watch(name, task, may_finish)

    async def stop(self) -> None:
        """Stop the watchdog first (a last look), then cancel the tasks."""
        self.watchdog.stop()
        for task in self.tasks:
            task.cancel()
        for task in self.tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def breach(self, what: str) -> None:
        if what not in self.breaches:
            self.breaches.append(what)
            log.error("INVARIANT BREACH: %s", what)
            self.on_breach(what)

    def later(self, delay: float, check: Callable[[], Awaitable[None] | None],
              name: str) -> None:
        """``check`` in ``delay`` seconds; an exception in it is a breach (the watchdog)."""
        async def run() -> None:
            await asyncio.sleep(delay)
            result = check()
            if result is not None:
                await result
        self.tasks = [t for t in self.tasks if not t.done()]
        self.spawn(f"delayed {name}", run(), may_finish=True)

    # ---------------------------------------------------------------- pods
    def _ours(self, pod: Obj) -> bool:
        return (pod.get("spec") or {}).get("schedulerName") == self.scheduler_name

    def node_views(self, now: float) -> dict[str, NodeView]:
        """Nodes as a scheduler may rightly have seen them: taints younger than ``RECENT``
        seconds left out (the node-lifecycle controller's not-ready taint lands while pods
        are being bound; a scheduler's cache learns of it a moment later)."""
        views = {}
        for node in self.nodes.items.values():
            name = str((node.get("metadata") or {}).get("name"))
            since = self.taint_since.get(name, {})
            taints = (node.get("spec") or {}).get("taints") or []
            settled = [t for t in taints
                       if now - since.get((t.get("key"), t.get("effect")), 0.0) >= RECENT]
            if len(settled) != len(taints):
                node = {**node, "spec": {**(node.get("spec") or {}), "taints": settled},
                        "metadata": {**(node.get("metadata") or {}), "uid": None}}
            views[name] = NodeView.from_dict(node)
        return views

    def _pod(self, kind: str, pod: Obj, old: Obj | None) -> None:
        now = time.time()
        meta = pod.get("metadata") or {}
        uid = str(meta.get("uid"))
        node_name = (pod.get("spec") or {}).get("nodeName") or ""
        self._pdb_transition(pod, old, kind)
        if kind == "DELETED":
            self.gone.append((now, PodView.from_dict(pod)))
            self.gone = [(t, p) for t, p in self.gone if now - t < RECENT]
            self.first_node.pop(uid, None)
            return
        if uid not in self.created_at and self._ours(pod):
            self.created_at[uid] = stamp_seconds(meta.get("creationTimestamp")) or now
            self.figures.pods_created += 1
        if not node_name:
            return
        first = self.first_node.get(uid)
        twice = rules.rebinding(first, node_name)
        if twice:
            self.breach(f"{key_of(pod)}: {twice}")
        if first is not None or (old is not None and (old.get("spec") or {}).get("nodeName")):
            self.first_node.setdefault(uid, node_name)
            return
        self.first_node[uid] = node_name
        if not self._ours(pod) or uid in self.bound_at:
            return
        self.bound_at[uid] = now
        self.bound_keys[uid] = key_of(pod)
        self.figures.pods_bound += 1
        nodes = self.node_views(now)
        others = [PodView.from_dict(p) for p in self.pods.items.values()]
        node = nodes.get(node_name)
        if node is not None:
            for problem in rules.overcommit(node, others):
                self.breach(problem)
        self.later(BIND_WINDOW, functools.partial(self._bind_check, pod, nodes, now),
                   f"bind check of {key_of(pod)}")

    def _bind_check(self, pod: Obj, nodes: dict[str, NodeView], bound: float) -> None:
        """The hard constraints of one binding, judged ``BIND_WINDOW`` seconds later.

        A scheduler binds concurrently: it decides pod after pod against what it has assumed,
        and the bindings may reach the API server in another order. So the pods bound up to
        ``BIND_WINDOW`` after this one, like those that left up to ``RECENT`` before it, count
        in the other domains only (the lenient side); the pods bound before it count fully."""
        view = PodView.from_dict(pod)
        before: list[PodView] = []
        racing: list[PodView] = []
        for other in self.pods.items.values():
            other_view = PodView.from_dict(other)
            at = self.bound_at.get(other_view.uid, 0.0)
            (racing if bound < at <= bound + BIND_WINDOW else before).append(other_view)
        lenient = racing + [p for t, p in self.gone if bound - RECENT < t]
        before = [p for p in before if self.bound_at.get(p.uid, 0.0) <= bound]
        for problem in rules.bind_breaches(view, nodes.get(view.node_name), before, nodes,
                                           lenient):
            self.breach(problem)

    # ---------------------------------------------------------------- budgets
    def _pdb_transition(self, pod: Obj, old: Obj | None, kind: str) -> None:
        before_healthy = old is not None and rules.healthy(old)
        after_healthy = kind != "DELETED" and rules.healthy(pod)
        if not before_healthy or after_healthy:
            return
        if kind != "DELETED" and not (pod.get("metadata") or {}).get("deletionTimestamp"):
            return  # turned unready (a NotReady node), not disrupted through the API
        labels = (pod.get("metadata") or {}).get("labels") or {}
        namespace = (pod.get("metadata") or {}).get("namespace")
        for pdb in self.pdbs.items.values():
            if (pdb.get("metadata") or {}).get("namespace") != namespace:
                continue
            selector = ((pdb.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
            if not selector or any(labels.get(k) != v for k, v in selector.items()):
                continue
            members = [p for p in self.pods.items.values()
                       if (p.get("metadata") or {}).get("namespace") == namespace and
                       all(((p.get("metadata") or {}).get("labels") or {}).get(k) == v
                           for k, v in selector.items())]
            after = sum(1 for p in members if rules.healthy(p))
            expected = int((pdb.get("status") or {}).get("expectedPods") or len(members))
            minimum = rules.pdb_minimum(pdb, expected)
            if minimum is None:
                continue
            problem = rules.pdb_breach(key_of(pdb), minimum, after + 1, after, key_of(pod))
            if problem:
                self.breach(problem)

    def _ignore(self, kind: str, obj: Obj, old: Obj | None) -> None:
        return None

    # ---------------------------------------------------------------- nodes
    def _node(self, kind: str, node: Obj, old: Obj | None) -> None:
        name = str((node.get("metadata") or {}).get("name"))
        if kind != "DELETED":
            since = self.taint_since.setdefault(name, {})
            now = time.time()
            current = {(t.get("key"), t.get("effect"))
                       for t in (node.get("spec") or {}).get("taints") or []}
            for taint in current - set(since):
                since[taint] = now if old is not None else 0.0
            for taint in set(since) - current:
                del since[taint]
            return
        self.taint_since.pop(name, None)
        for machine in list(self.machines.items.values()):
            if ((machine.get("status") or {}).get("nodeRef") or {}).get("name") == name:
                self.later(3.0, functools.partial(self._instance_check, key_of(machine)),
                           f"instance check of Machine {key_of(machine)}")

    def _instance_check(self, machine_key: str) -> None:
        machine = self.machines.items.get(machine_key)
        if machine is None:
            return
        node = ((machine.get("status") or {}).get("nodeRef") or {}).get("name")
        problem = rules.instance_gone_early(machine, f"/{node}" in self.nodes.items)
        if problem:
            self.breach(problem)

    # ---------------------------------------------------------------- events
    def _event(self, kind: str, event: Obj, old: Obj | None) -> None:
        if kind == "DELETED":
            return
        involved = event.get("involvedObject") or {}
        reason = str(event.get("reason") or "")
        when = event.get("firstTimestamp") or event.get("eventTime") or ""
        if involved.get("kind") == "Pod" and reason == "Scheduled":
            reporter = str(event.get("reportingInstance") or "")
            if old is None and reporter:
                self.figures.binds_by_reporter[reporter] = \
                    self.figures.binds_by_reporter.get(reporter, 0) + 1
            counts = self.scheduled.setdefault(str(involved.get("uid")), {})
            counts[str((event.get("metadata") or {}).get("uid"))] = int(event.get("count") or 1)
            twice = rules.scheduled_twice(f"{involved.get('namespace')}/{involved.get('name')}",
                                          counts.values())
            if twice:
                self.breach(twice)
            stamped = stamp_seconds(when)
            observed = self.bound_at.get(str(involved.get("uid")))
            at = min(x for x in (stamped, observed, time.time()) if x is not None)
            problem = rules.bind_after_lost_lease(reporter, at, self.takeovers, LEASE_GRACE)
            if problem:
                self.breach(f"{involved.get('namespace')}/{involved.get('name')}: {problem}")
        elif involved.get("kind") == "Pod" and reason == "Preempted" and old is None:
            reporter = str(event.get("reportingInstance") or "")
            at = stamp_seconds(when) or time.time()
            problem = rules.bind_after_lost_lease(reporter, at, self.takeovers, LEASE_GRACE,
                                                  "preempted a pod")
            if problem:
                self.breach(f"{involved.get('namespace')}/{involved.get('name')}: {problem}")
        elif involved.get("kind") == "Pod" and reason == "FailedScheduling":
            self.failed_scheduling[str(involved.get("uid"))] = time.time()
        elif involved.get("kind") == "Machine" and (reason in rules.DELETION_EVENTS
                                                     or reason == rules.DRAIN_REQUEUED):
            uid = str((event.get("metadata") or {}).get("uid"))
            self.machine_events.setdefault(str(involved.get("name")), {})[uid] = (
                reason, int(event.get("count") or 1), str(when))
            name = str(involved.get("name"))
            for problem in rules.deletion_event_breaches(
                    name, list(self.machine_events[name].values())):
                self.breach(problem)

    # ---------------------------------------------------------------- the audit log
    def follow_audit(self, read: Callable[[], list[Act]], interval: float = 0.5) -> None:
        """Judge the scheduler lives' writes the audit log records (``read``: the new ones)."""
        async def loop() -> None:
            while True:
                for act in read():
                    # judged once the Lease mirror has caught up with the takeovers before it
                    self.later(BIND_WINDOW, functools.partial(self._judge_act, act),
                               f"audit check of {act.verb} {act.pod}")
                await asyncio.sleep(interval)
        self.spawn("audit log", loop())

    def _judge_act(self, act: Act) -> None:
        if not act.succeeded:
            return
        if act.verb == "bind":
            self.audited_binds.add(act.pod)
        tally = self.figures.binds_by_user if act.verb == "bind" else \
            self.figures.preemptions_by_user
        tally[act.user] = tally.get(act.user, 0) + 1
        action = "bound a pod" if act.verb == "bind" else "deleted a pod (a preemption)"
        problem = rules.bind_after_lost_lease(act.user, act.at, self.takeovers, LEASE_GRACE,
                                              action)
        if problem:
            self.breach(f"{act.pod}: {problem} (audit log)")

    # ---------------------------------------------------------------- leases
    def _lease(self, kind: str, lease: Obj, old: Obj | None) -> None:
        if (lease.get("metadata") or {}).get("name") != self.lease_name or kind == "DELETED":
            return
        spec = lease.get("spec") or {}
        holder = str(spec.get("holderIdentity") or "")
        if holder and holder != self.holder:
            if self.holder:
                at = stamp_seconds(spec.get("acquireTime")) or time.time()
                self.takeovers.append(rules.Takeover(at, self.holder, holder))
                self.figures.takeovers += 1
            self.holder = holder

    # ---------------------------------------------------------------- machines
    def _machine(self, kind: str, machine: Obj, old: Obj | None) -> None:
        if kind == "DELETED":
            self.figures.machines_deleted += 1
            if self.deletion_free_since.pop(key_of(machine), None) is not None:
                self.figures.machine_deletions_judged += 1
            return
        for problem in rules.machine_breaches(machine):
            self.breach(problem)

    def _machine_set(self, kind: str, machine_set: Obj, old: Obj | None) -> None:
        if kind == "DELETED":
            return
        problem = rules.replicas_breach(machine_set)
        if problem:
            self.breach(problem)
        if old is not None:
            before = int((old.get("spec") or {}).get("replicas") or 0)
            after = int((machine_set.get("spec") or {}).get("replicas") or 0)
            if after > before:
                self.figures.scale_ups += 1
                problem = rules.cluster_limit_breach(self.machine_sets.items.values(),
                                                     len(self.static_nodes),
                                                     self.max_nodes_total)
                if problem:
                    self.breach(problem)
            elif after < before:
                self.figures.scale_downs += 1

    def _autoscaler(self, kind: str, obj: Obj, old: Obj | None) -> None:
        limits = (obj.get("spec") or {}).get("resourceLimits") or {}
        if kind != "DELETED" and "maxNodesTotal" in limits:
            self.max_nodes_total = int(limits["maxNodesTotal"])

    # ---------------------------------------------------------------- liveness
    async def _liveness_loop(self, interval: float = 2.0) -> None:
        while True:
            self.liveness(time.time())
            await asyncio.sleep(interval)

    def expect_remediation(self, machine_key: str, machine_set: str, since: float) -> None:
        """A MachineHealthCheck must remediate Machine ``machine_key`` (of ``machine_set``),
        whose Node was made NotReady at ``since``: judged by :meth:`liveness`."""
        self.remediations[machine_key] = (machine_set, since)

    def ready_nodes(self) -> set[str]:
        return {str((n.get("metadata") or {}).get("name"))
                for n in self.nodes.items.values() if rules.node_ready(n)}

    def _remediation_liveness(self, now: float) -> None:
        ready = self.ready_nodes()
        for key, (machine_set, since) in list(self.remediations.items()):
            owner = self.machine_sets.items.get(f"{self.machine_namespace}/{machine_set}") or {}
            wanted = int((owner.get("spec") or {}).get("replicas") or 0)
            waits = rules.remediation_awaits(key, self.machines.items, machine_set, wanted,
                                             ready)
            if waits is None:
                del self.remediations[key]
                self.figures.remediations += 1
                continue
            problem = rules.overdue(f"Machine {key}: its Node NotReady under a "
                                    f"MachineHealthCheck but not {waits}", since, now,
                                    REMEDIATION_BOUND)
            if problem:
                del self.remediations[key]  # one breach for one remediation
                self.breach(problem)

    def liveness(self, now: float) -> None:
        """Deleted Machines with no hooks left go, MachineSets converge, Machines a
        MachineHealthCheck must remediate are replaced, within the bounds."""
        self._remediation_liveness(now)
        for key, machine in self.machines.items.items():
            if rules.deletion_unblocked(machine):
                since = self.deletion_free_since.setdefault(key, now)
                problem = rules.overdue(f"Machine {key}: deleted with no hooks left but not "
                                        "gone", since, now, MACHINE_DELETION_BOUND)
                if problem:
                    self.breach(problem)
            else:
                self.deletion_free_since.pop(key, None)
        for key, machine_set in self.machine_sets.items.items():
            if rules.machine_set_converged(machine_set):
                if self.diverged_since.pop(key, None) is not None:
                    self.figures.machine_set_convergences += 1
                continue
            since = self.diverged_since.setdefault(key, now)
            problem = rules.overdue(f"MachineSet {key}: replicas, Machines and ready Machines "
                                    "not equal", since, now, MACHINE_SET_BOUND)
            if problem:
                self.breach(problem)

    # ---------------------------------------------------------------- at the end
    def unaudited_binds(self, before: float) -> list[str]:
        """Pods seen bound before ``before`` whose binding the audit log did not record (an
        API server killed between its write and its audit entry can leave one; many mean the
        attribution is blind)."""
        return sorted(key for uid, key in self.bound_keys.items()
                      if self.bound_at[uid] < before and key not in self.audited_binds)

    def pending(self) -> list[Obj]:
        return [p for p in self.pods.items.values() if self._ours(p)
                and not (p.get("spec") or {}).get("nodeName")
                and not (p.get("metadata") or {}).get("deletionTimestamp")
                and (p.get("status") or {}).get("phase") in (None, "Pending")]
