"""Wiring: build the scheduler's parts from the command-line options and run their lifecycle.

Design: :class:`SchedulerService` owns every long-lived part (API clients, snapshot, queue,
cache, recorder, binder, preemptor, loop, elector, metrics server) and the order they start and
stop in (see :mod:`.command`). It is also what the integration tests run in-process:
``await SchedulerService.create(options(...), policy)`` then ``await service.run(stop_event)``,
where ``policy`` is a loaded KubeSchedulerConfiguration (every profile, served by one queue
and one cache, each pod decided by its ``schedulerName``'s profile) or one profile (a Policy
file's), which then serves ``--scheduler-name``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import logging
from dataclasses import replace
from typing import Any

from berthmaster.foundation.access import Access, Needs, Resource, check
from berthmaster.foundation.kube import KubeClient, user_agent
from berthmaster.foundation.serving import SecureServing, Served, serve
from berthmaster.scheduler.config import SchedulerConfig
from berthmaster.scheduler.daemon.binder import Binder
from berthmaster.scheduler.daemon.cache import ClusterCache
from berthmaster.scheduler.daemon.events import EventRecorder
from berthmaster.scheduler.daemon.extensions import Extensions, SchedulerHandle
from berthmaster.scheduler.daemon.leader import LeaderElector, default_identity
from berthmaster.scheduler.daemon.loop import SchedulingLoop
from berthmaster.scheduler.daemon.metrics import SchedulerMetrics
from berthmaster.scheduler.daemon.plugin_deadline import PluginDeadline
from berthmaster.scheduler.daemon.preempt import Preemptor
from berthmaster.scheduler.daemon.queue import SchedulingQueue
from berthmaster.scheduler.daemon.waiting import WaitingPods
from berthmaster.scheduler.engine import Engine
from berthmaster.scheduler.plugins import out_of_tree
from berthmaster.scheduler.snapshot import Snapshot

log = logging.getLogger("berthmaster.scheduler")

EXIT_OK, EXIT_LOST_LEASE, EXIT_CRASH = 0, 1, 1

RBAC_FIX = ("grant the scheduler's ClusterRole and lease Role (the Helm chart's templates/"
            "scheduler-rbac.yaml or deploy/manifests/) to this account, or bind it to "
            "system:kube-scheduler")


def scheduler_needs(args: argparse.Namespace) -> list[Needs]:
    """The verbs the scheduler cannot work without (kube-scheduler's own: watch pods and
    nodes, bind, record events; its Lease when it elects), checked before it starts."""
    needs = [Needs("scheduling", (), (
        Access("list", "pods"), Access("watch", "pods"),
        Access("list", "nodes"), Access("watch", "nodes"),
        Access("create", "pods/binding"), Access("patch", "pods/status"),
        Access("create", "events")))]
    if args.leader_elect:
        lease = args.leader_elect_lease_namespace, args.leader_elect_lease_name
        needs.append(Needs("leader election", (), (
            Access("get", "leases", "coordination.k8s.io", *lease),
            Access("update", "leases", "coordination.k8s.io", *lease))))
    return needs


def plugin_needs(config: SchedulerConfig) -> list[Needs]:
    """The kinds the profiles' plugins asked to have watched (framework.Watched): served, and
    listed and watched by this account (a profile enabling Coscheduling needs the PodGroup
    CRD)."""
    needs = []
    for profile in config.profiles:
        for watched in profile.watches:
            where = f"plugins of profile {profile.scheduler_name}"
            needs.append(Needs(where, (Resource(watched.group, watched.version,
                                                watched.plural),), (
                Access("list", watched.plural, watched.group),
                Access("watch", watched.plural, watched.group))))
    return needs


CRD_FIX = ("install the CRD (kubectl apply -f deploy/crds/, or the Helm chart) or disable the "
           "plugin that needs it in the configuration")


def options(**overrides: Any) -> argparse.Namespace:
    """The command's options with their defaults, overridden (for in-process use)."""
    from berthmaster.scheduler.daemon.flags import add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    parsed = parser.parse_args([])
    for key, value in overrides.items():
        if not hasattr(parsed, key):
            raise TypeError(f"unknown scheduler option {key!r}")
        setattr(parsed, key, value)
    return parsed


def as_config(policy: Any, args: argparse.Namespace) -> SchedulerConfig:
    """What the service runs: a loaded configuration as it is; a Policy (a file's, or any
    single profile) as the one profile of ``--scheduler-name``, with the flags' settings."""
    if isinstance(policy, SchedulerConfig):
        return policy
    profile = replace(policy, scheduler_name=args.scheduler_name)
    return SchedulerConfig((profile,),
                           percentage_of_nodes_to_score=args.percentage_of_nodes_to_score,
                           source=profile.source)


class SchedulerService:
    def __init__(self, args: argparse.Namespace, policy: Any, kube: KubeClient,
                 event_kube: KubeClient, election_kube: KubeClient | None):
        self.args = args
        self.config = as_config(policy, args)
        # one process, one queue, one cache for every profile (as kube-scheduler); metrics,
        # Events and the Lease carry the first profile's name
        self.names = self.config.scheduler_names
        self.name: str = self.names[0]
        self.identity: str = args.leader_elect_identity or default_identity()
        self.kube = kube
        self.event_kube = event_kube
        self.election_kube = election_kube
        self.metrics = SchedulerMetrics(self.name)
        self.snapshot = Snapshot()
        self.queue = SchedulingQueue(
            initial_backoff=float(self.config.pod_initial_backoff_seconds),
            max_backoff=float(self.config.pod_max_backoff_seconds))
        self.queue.on_change = self.metrics.pending
        self.queue.on_incoming = self.metrics.incoming
        self.queue.on_unschedulable = self.metrics.unschedulable
        self.cache = ClusterCache(kube, self.snapshot, self.queue, self.names,
                                  on_restart=self.metrics.informer_restart,
                                  watches=[w for profile in self.config.profiles
                                           for w in profile.watches])
        self.recorder = EventRecorder(event_kube, self.name, self.identity,
                                      profiles=self.names, may_act=self.may_act)
        self.elector: LeaderElector | None = None
        if election_kube is not None:
            self.elector = LeaderElector(
                election_kube, args.leader_elect_lease_namespace, args.leader_elect_lease_name,
                identity=self.identity, lease_duration=args.leader_elect_lease_duration,
                renew_deadline=args.leader_elect_renew_deadline,
                retry_period=args.leader_elect_retry_period,
                on_leading=lambda leading: self.metrics.leading(
                    args.leader_elect_lease_name, leading))
        self.binder = Binder(kube, self.snapshot, self.queue, self.recorder, self.metrics,
                             concurrency=args.bind_concurrency, may_act=self.may_act,
                             volume_bind_timeout=args.volume_bind_timeout_seconds)
        self.preemptor = Preemptor(kube, self.recorder, self.name, may_act=self.may_act)
        self.engines = {
            profile.scheduler_name: Engine(
                profile, percentage_of_nodes_to_score=self.config.percentage_of_nodes_to_score)
            for profile in self.config.profiles}
        contained = 0
        for profile_name, engine in self.engines.items():
            contained += out_of_tree.observe(engine.policy.predicates, engine.policy.priorities,
                                out_of_tree.Observers(self.metrics.plugin_execution,
                                                      functools.partial(
                                                          self.metrics.plugin_evaluated,
                                                          profile=profile_name)))
        self.engine = self.engines[self.name]
        # one waiting-pods map and one handle for every profile (framework.Handle)
        self.waiting = WaitingPods()
        self.handle = SchedulerHandle(self.snapshot, self.waiting, self.queue.activate)
        self.extensions = {
            name: Extensions.build(engine.policy, self.handle, self.binder.volumes, self.may_act,
                                   self.metrics.permit_waited)
            for name, engine in self.engines.items()}
        foreign = [plugin for ext in self.extensions.values()
                   for point in ("reserve", "permit") for plugin in ext.plugins(point)
                   if not type(plugin).__module__.startswith("berthmaster.")]
        # out-of-tree plugins in the cycle: a call that hangs is interrupted (plugin_deadline)
        self.deadline = (PluginDeadline(args.plugin_timeout) if contained or foreign
                         else None)
        self.cache.on_pod_deleted = self.handle.reject_waiting_pod
        self.cache.pending_pod_events = any(ext.plugins("permit")
                                            for ext in self.extensions.values())
        # one queue: its order is the profiles' QueueSort plugin (the loader makes them agree)
        self.queue.sort_key = self.extensions[self.name].sort_key()
        self.loop = SchedulingLoop(self.engine, self.snapshot, self.queue, self.binder,
                                   self.preemptor, self.recorder, self.metrics, self.may_act,
                                   engines=self.engines, extensions=self.extensions)
        self._http: Served | None = None
        self.leading = asyncio.Event()

    @classmethod
    async def create(cls, args: argparse.Namespace, policy: Any) -> SchedulerService:
        qps, burst = args.kube_api_qps, args.kube_api_burst
        pool = max(64, args.bind_concurrency * 2)
        agent = user_agent("berthmaster-scheduler")
        kube = await KubeClient.connect(args.kubeconfig, qps=qps, burst=burst, pool_size=pool,
                                        agent=agent)
        try:
            await check(kube, scheduler_needs(args) + plugin_needs(as_config(policy, args)),
                        crd_fix=CRD_FIX, rbac_fix=RBAC_FIX)
        except BaseException:
            await kube.close()
            raise
        event_kube = await KubeClient.connect(args.kubeconfig, qps=qps, burst=burst, agent=agent)
        election_kube = None
        if args.leader_elect:
            # "/leader-election" after the agent, as client-go's resourcelock.NewFromKubeconfig
            # (tools/leaderelection/resourcelock/interface.go) names its client
            election_kube = await KubeClient.connect(
                args.kubeconfig, qps=qps, burst=burst, pool_size=4,
                agent=user_agent("berthmaster-scheduler", "leader-election"))
        return cls(args, policy, kube, event_kube, election_kube)

    # ---- state --------------------------------------------------------------------------
    def may_act(self) -> bool:
        return self.elector is None or self.elector.is_leader()

    def healthy(self) -> tuple[bool, str]:
        if self.elector is not None and self.leading.is_set() and not self.elector.is_leader():
            return False, "leaderElection: lease not renewed within the renew deadline"
        return True, "ok"

    def ready(self) -> tuple[bool, str]:
        """Every informer has listed: at start, and again after an informer restarted."""
        unsynced = [informer.resource_name() for informer in self.cache.informers
                    if not informer.synced.is_set()]
        if unsynced:
            return False, f"caches not synced: {', '.join(unsynced)}"
        return True, "ok"

    # ---- lifecycle ----------------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> int:
        try:
            secure = SecureServing.from_args(self.args)
            if self.args.metrics_bind_address or secure is not None:
                self._http = await serve(self.metrics.exposition, self.args.metrics_bind_address,
                                         self.healthy, self.ready, secure, self.args.kubeconfig)
            self.recorder.start()
            if self.deadline is not None:
                self.deadline.start()
            await self.cache.start()
            return await self._lead_and_schedule(stop)
        finally:
            await self._shutdown()

    async def _lead_and_schedule(self, stop: asyncio.Event) -> int:
        stopping = asyncio.create_task(stop.wait(), name="stop")
        tasks: set[asyncio.Task[Any]] = {stopping}
        holding: asyncio.Task[None] | None = None
        try:
            if self.elector is not None:
                acquiring = asyncio.create_task(self.elector.acquire(), name="acquire")
                done, _ = await asyncio.wait({acquiring, stopping},
                                             return_when=asyncio.FIRST_COMPLETED)
                if stopping in done:
                    acquiring.cancel()
                    return EXIT_OK
                holding = asyncio.create_task(self.elector.hold(), name="hold-lease")
                tasks.add(holding)
            self.leading.set()
            log.info("scheduling", extra={"scheduler": self.name, "identity": self.identity})
            scheduling = asyncio.create_task(self.loop.run(), name="scheduling-loop")
            tasks.add(scheduling)
            housekeeping = asyncio.create_task(self._housekeeping(), name="housekeeping")
            tasks.add(housekeeping)
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            scheduling.cancel()
            if stopping in done:
                await self.binder.drain(timeout=5.0)
                return EXIT_OK
            if scheduling in done and not scheduling.cancelled() and scheduling.exception():
                log.error("scheduling loop crashed", exc_info=scheduling.exception())
                return EXIT_CRASH
            # The Lease was lost: the elector saw it (and logged why), or the loop found it no
            # longer leads first (a renewal late past the renew deadline, e.g. a slow API
            # server) and the elector is cancelled below before it could say so.
            if holding is not None and holding not in done and self.elector is not None:
                self.elector.log_lost()
            if housekeeping in done and not housekeeping.cancelled() and \
                    housekeeping.exception():
                log.error("housekeeping crashed", exc_info=housekeeping.exception())
                return EXIT_CRASH
            self.binder.cancel()
            self.preemptor.cancel()
            return EXIT_LOST_LEASE
        finally:
            for task in tasks:
                task.cancel()
            if self.elector is not None:
                await self.elector.release()

    async def _housekeeping(self, every: float = 5.0) -> None:
        """Refresh the gauges that are cheaper to sample than to track."""
        while True:
            described = self.snapshot.describe()
            self.metrics.cache_size.labels("nodes").set(described["nodes"])
            self.metrics.cache_size.labels("pods").set(described["assigned"])
            self.metrics.cache_size.labels("assumed_pods").set(described["assumed"])
            self.metrics.pending(self.queue.counts())
            await asyncio.sleep(every)

    async def _shutdown(self) -> None:
        if self.deadline is not None:
            self.deadline.stop()
        self.binder.cancel()
        self.preemptor.cancel()
        await self.recorder.stop(drain_seconds=2.0)
        await self.cache.stop()
        if self._http is not None:
            await self._http.cleanup()
        for client in (self.kube, self.event_kube, self.election_kube):
            if client is not None:
                with contextlib.suppress(Exception):
                    await client.close()
        log.info("stopped", extra={"scheduler": self.name})
