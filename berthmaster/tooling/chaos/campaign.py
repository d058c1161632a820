"""The campaign: one local control plane, every component, churn, faults, invariants, figures.

Order of a run: start the control plane and apply the CRDs; create the scene (static nodes,
priority classes, MachineSets with MachineAutoscalers, the ClusterAutoscaler, a guarded
Deployment and its PodDisruptionBudget); start two scheduler replicas with leader election, the
operator with every capability and the two example hook controllers, all as processes recorded
with the cluster; start the checker. Then, until the fault phase ends, the churn runs, the
descheduler runs from the CLI on a schedule, and faults are injected one at a time in shuffled
rounds (each kind once per round). The first breach ends the run. After the last fault the
churn stops and the run waits ``BIND_BOUND`` seconds: then every pending pod that fits somewhere
is a breach, and every other pending pod must carry an up-to-date scheduling failure. The last
line is ``invariant breaches: N`` and the figures; the exit code is 1 on any breach, and on a
fault kind that never fired (``faults not fired: ...``).

A run must not pass vacuously: the checker's tasks are watched (``watchdog``), each fault
reports whether it did anything (``faults.Outcome``), binds are attributed from the API
server's audit log (``audit``: kube-apiserver is restarted once at the start with the audit
flags, and each scheduler process life has its own client certificate named after its
leader-election identity), and resident memory is judged over the whole run per component as
well as per process life.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import json
import logging
import os
import random
import shutil
import signal
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from berthmaster.foundation.kube import (
    CORE,
    KubeClient,
    KubeError,
    group_path,
    resource_path,
    user_agent,
)
from berthmaster.operator.admission.registration import apply_configurations
from berthmaster.scheduler.engine import Engine
from berthmaster.scheduler.model import PodView
from berthmaster.scheduler.policy import load_policy
from berthmaster.scheduler.snapshot import Snapshot
from berthmaster.tooling.chaos import (
    admissionchaos,
    audit,
    deschedruns,
    faults,
    remediation,
    throttle,
)
from berthmaster.tooling.chaos import invariants as rules
from berthmaster.tooling.chaos import workload as scene
from berthmaster.tooling.chaos.checker import (
    AUTOSCALING,
    BIND_WINDOW,
    MACHINE_API,
    MACHINE_DELETION_BOUND,
    MACHINE_SET_BOUND,
    REMEDIATION_BOUND,
    Checker,
)
from berthmaster.tooling.chaos.rrproxy import RoundRobinProxy
from berthmaster.tooling.chaos.slowproxy import SlowProxy
from berthmaster.tooling.devcluster import certs
from berthmaster.tooling.devcluster.cluster import ControlPlane, RunningCluster
from berthmaster.tooling.python import BERTHMASTER_CLI

ROOT = Path(__file__).resolve().parents[3]
HOOKS = ROOT / "examples" / "machine_hooks"
SCHEDULER_NAME = "chaos"
LEASE = (scene.SYSTEM, "chaos-scheduler")
BIND_BOUND = 60.0  # every pod that fits is bound this long after the last fault
OURS_RSS_BOUND_MIB = 96  # berthmaster's processes, per process life
PLANE_RSS_BOUND_MIB = 512  # etcd, kube-apiserver, kube-controller-manager, kwok
RSS_WARMUP = 20.0  # a process life's first sample is taken this long after it started
DESCHEDULER_POLICY = """apiVersion: descheduler/v1alpha1
kind: DeschedulerPolicy
strategies:
  RemoveDuplicates: {enabled: true}
  RemovePodsViolatingNodeTaints: {enabled: true}
  RemovePodsViolatingInterPodAntiAffinity: {enabled: true}
"""
RBAC = group_path("rbac.authorization.k8s.io", "v1")
log = logging.getLogger("berthmaster.tooling.chaos")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclasses.dataclass
class Settings:
    minutes: float
    seed: int
    hold: float = 6.0  # seconds a lasting fault lasts
    gap: float = 4.0  # mean seconds between faults
    churn_interval: float = 1.5
    max_live: int = 24
    descheduler_every: float = 40.0
    warmup: float = 20.0


@dataclasses.dataclass
class Rss:
    """RSS samples (KiB) of every process life, taken from ``RSS_WARMUP`` s into the life."""

    lives: dict[tuple[str, int], list[int]] = dataclasses.field(default_factory=dict)
    born: dict[tuple[str, int], float] = dataclasses.field(default_factory=dict)

    def sample(self, cluster: RunningCluster) -> None:
        now = time.monotonic()
        for name, component in cluster.components.items():
            life = (name, component.pid)
            self.born.setdefault(life, now)
            kib = read_rss(component.pid)
            if kib is None or now - self.born[life] < RSS_WARMUP:
                continue
            self.lives.setdefault(life, []).append(kib)

    def per_component(self) -> dict[str, tuple[int, int, int, int]]:
        """component -> (start, max, end, process lives) over the run, in KiB."""
        return rules.rss_summary(self.lives)

    def breaches(self) -> list[str]:
        """Growth within one life, and over the run across lives (a leak that outlives a
        restart, or lives that each start bigger), against the component's bound."""
        found = []
        for (name, pid), samples in self.lives.items():
            problem = rules.rss_breach(f"{name} (pid {pid})", samples[0], samples[-1],
                                       rss_bound(name))
            if problem:
                found.append(problem)
        for name, (start, peak, _, lives) in self.per_component().items():
            problem = rules.rss_breach(f"{name} over the run ({lives} lives, at its largest)",
                                       start, peak, rss_bound(name))
            if problem:
                found.append(problem)
        return found


def rss_bound(name: str) -> int:
    """How much (KiB) a component's resident memory may grow: ours, or the control plane's."""
    ours = not name.startswith(("etcd", "kube-", "kwok"))
    return (OURS_RSS_BOUND_MIB if ours else PLANE_RSS_BOUND_MIB) * 1024


def read_rss(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


class Campaign:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.rng = random.Random(settings.seed)
        self.plane = ControlPlane(f"chaos-{settings.seed}-{os.getpid()}",
                                  say=lambda line: log.info(line.strip()))
        self.breached = asyncio.Event()
        self.rss = Rss()
        self.descheduler_runs = deschedruns.Runs()
        self.started = time.time()
        self.workdir = Path(tempfile.mkdtemp(prefix="berthmaster-chaos-"))
        self.audit_log = self.workdir / "audit.log"
        self.proxy: SlowProxy | None = None
        self.admission_backends = [("127.0.0.1", free_port()) for _ in admissionchaos.REPLICAS]
        self.admission_proxy: RoundRobinProxy | None = None
        self.admission_since = 0.0
        self.faults = {**faults.FAULTS, **fault_table(self.scheduler_kubeconfig,
                                                        lambda: self.admission_proxy)}

    # ---------------------------------------------------------------- set-up
    def _policy(self) -> Path:
        """The default Policy plus ``PodTopologySpread`` (and its priority): the default
        policy predates spread constraints and does not enforce them (docs/engine.md), and
        the churn's spread pods ask for ``DoNotSchedule``."""
        document = json.loads(
            (ROOT / "scheduler" / "data" / "default-policy.json").read_text())
        document["predicates"].append({"name": "PodTopologySpread"})
        document["priorities"].append({"name": "EvenPodsSpreadPriority", "weight": 1})
        path = self.workdir / "scheduler-policy.json"
        path.write_text(json.dumps(document, indent=2))
        return path

    def _scheduler_kubeconfig(self, cluster: RunningCluster, identity: str,
                              server: str) -> str:
        """A client certificate and kubeconfig of one scheduler process life: its user is its
        leader-election identity, in the group the audit policy records."""
        pki = certs.Pki(cluster.root / "pki")
        certs.ensure_client(pki, f"scheduler-{identity}", identity, (audit.SCHEDULERS,))
        document = certs.kubeconfig(server, pki, f"scheduler-{identity}", cluster.name)
        path = self.scheduler_kubeconfig(identity)
        path.write_text(yaml.safe_dump(document))
        path.chmod(0o600)
        return str(path)

    def scheduler_kubeconfig(self, identity: str) -> Path:
        return self.workdir / f"scheduler-{identity}.kubeconfig"

    def _launches(self, cluster: RunningCluster) -> dict[str, faults.Launch]:
        python = sys.executable
        kubeconfig = str(cluster.kubeconfig)
        policy = str(self._policy())
        launches: dict[str, faults.Launch] = {}
        servers = {"a": cluster.server, "b": cluster.server}
        if self.proxy is not None and self.proxy.server is not None:
            port = self.proxy.server.sockets[0].getsockname()[1]
            servers["b"] = f"https://127.0.0.1:{port}"  # apiserver-slow delays its traffic
        for replica in ("a", "b"):
            port = free_port()

            def identity(life: int, replica: str = replica) -> str:
                return f"chaos-{replica}-{life}"

            def scheduler(life: int, port: int = port, identity: Any = identity,
                          server: str = servers[replica]) -> list[str]:
                own = self._scheduler_kubeconfig(cluster, identity(life), server)
                return [*BERTHMASTER_CLI, "scheduler", "--kubeconfig",
                        own, "--scheduler-name", SCHEDULER_NAME, "--policy", policy,
                        "--leader-elect-lease-namespace", LEASE[0],
                        "--leader-elect-lease-name", LEASE[1],
                        "--leader-elect-lease-duration", "4s",
                        "--leader-elect-renew-deadline", "3s",
                        "--leader-elect-retry-period", "1s",
                        "--leader-elect-identity", identity(life),
                        "--metrics-bind-address", f"127.0.0.1:{port}"]

            health = f"http://127.0.0.1:{port}/healthz"
            launches[f"scheduler-{replica}"] = faults.Launch(
                scheduler, f"http://127.0.0.1:{port}",
                functools.partial(faults.http_ok, health), identity=identity)
        liveness = f"http://127.0.0.1:{free_port()}/healthz"
        launches["operator"] = faults.Launch(
            lambda life: [*BERTHMASTER_CLI, "operator", "--kubeconfig",
                          kubeconfig, "--standalone", "--liveness", liveness],
            liveness, lambda: faults.http_ok(liveness))
        selector = "machine.openshift.io/cluster-api-machineset=pool-a"
        launches["hook-replacement"] = faults.Launch(
            lambda life: [python, str(HOOKS / "replacement_hook.py"), "--kubeconfig", kubeconfig,
                          "--namespace", scene.MACHINES, "--selector", selector,
                          "--interval", "1"], "-", lambda: True)
        launches["hook-log-flush"] = faults.Launch(
            lambda life: [python, str(HOOKS / "log_flush_hook.py"), "--kubeconfig", kubeconfig,
                          "--namespace", scene.MACHINES, "--delay", "3", "--interval", "1"],
            "-", lambda: True)
        pki = certs.Pki(cluster.root / "pki")
        for name, (_host, port) in zip(admissionchaos.REPLICAS, self.admission_backends,
                                      strict=True):
            launches[name] = admissionchaos.launch(kubeconfig, scene.SYSTEM, port, free_port(),
                                                   str(pki.serving_cert), str(pki.serving_key))
        return launches

    async def _admission_on(self, cluster: RunningCluster, kube: KubeClient) -> None:
        """The webhook's configurations, pointing at the round-robin proxy, and the workload
        namespace's default toleration (admissionchaos)."""
        assert self.admission_proxy is not None
        ca = certs.Pki(cluster.root / "pki").ca_cert.read_text()
        await kube.patch(resource_path(CORE, "namespaces", name=scene.WORK),
                         admissionchaos.namespace_patch())
        await apply_configurations(kube, admissionchaos.configurations(
            f"https://127.0.0.1:{self.admission_proxy.port}", ca, scene.SYSTEM))
        self.admission_since = time.time()

    def _apply_crds(self, cluster: RunningCluster) -> None:
        manifests = sorted((ROOT / "deploy" / "crds").glob("*.yaml"))
        for manifest in [*manifests, ROOT / "deploy" / "machine-lifecycle-hooks-policy.yaml"]:
            result = cluster.kubectl("apply", "--server-side", "-f", str(manifest))
            if result.returncode != 0:
                raise RuntimeError(f"applying {manifest.name}: {result.stderr.strip()}")
        result = cluster.kubectl("wait", "--for=condition=Established", "crd", "--all",
                                 "--timeout=60s")
        if result.returncode != 0:
            raise RuntimeError(f"CRDs not established: {result.stderr.strip()}")

    async def _create(self, kube: KubeClient, path: str, body: dict[str, Any]) -> None:
        for _ in range(60):
            try:
                await kube.create(path, body)
                return
            except KubeError as error:
                if error.conflict:
                    return  # already there
                if error.status not in (0, 403, 404, 429, 500, 503):
                    raise
            await asyncio.sleep(1)
        raise RuntimeError(f"could not create {path} {body['metadata']['name']}")

    async def _scene(self, kube: KubeClient) -> None:
        for namespace in (scene.WORK, scene.MACHINES, scene.SYSTEM):
            await self._create(kube, resource_path(CORE, "namespaces"), {
                "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        await faults.wait_until(lambda: self._has_default_account(kube), 60)
        # the schedulers' certificates are not in system:masters (APF exempts that group,
        # throttle.py): their group is bound to cluster-admin instead
        await self._create(kube, resource_path(RBAC, "clusterrolebindings"), {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "chaos-schedulers"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": "cluster-admin"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                          "name": audit.SCHEDULERS}]})
        for name, value in ((scene.HIGH, 1000), (scene.LOW, 10)):
            await self._create(kube, resource_path(scene.SCHEDULING, "priorityclasses"),
                               scene.priority_class(name, value))
        for node in scene.static_nodes():
            await self._create(kube, resource_path(CORE, "nodes"), node)
        for name, (low, high, replicas) in scene.POOLS.items():
            await self._create(kube, resource_path(MACHINE_API, "machinesets", scene.MACHINES),
                               scene.machine_set(name, replicas))
            await self._create(kube, resource_path(scene.AUTOSCALING_BETA, "machineautoscalers",
                                                   scene.MACHINES),
                               scene.machine_autoscaler(name, low, high))
        await self._create(kube, resource_path(MACHINE_API, "machinesets", scene.MACHINES),
                           scene.machine_set(scene.MHC_POOL, scene.MHC_REPLICAS, "mhc",
                                             [scene.MHC_TAINT]))
        await self._create(kube, resource_path(MACHINE_API, "machinehealthchecks",
                                               scene.MACHINES),
                           scene.health_check(scene.MHC_POOL))
        await self._create(kube, resource_path(AUTOSCALING, "clusterautoscalers"),
                           scene.cluster_autoscaler())
        deployment, pdb = scene.guarded(SCHEDULER_NAME)
        await self._create(kube, resource_path(scene.APPS, "deployments", scene.WORK),
                           deployment)
        await self._create(kube, resource_path(scene.POLICY, "poddisruptionbudgets",
                                               scene.WORK), pdb)

    async def _has_default_account(self, kube: KubeClient) -> bool:
        try:
            await kube.get(resource_path(CORE, "serviceaccounts", scene.WORK, "default"))
        except KubeError:
            return False
        return True

    # ---------------------------------------------------------------- loops
    async def _rss_loop(self, cluster: RunningCluster, stop: asyncio.Event) -> None:
        while not stop.is_set():
            self.rss.sample(cluster)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 5)

    async def _audit_on(self, cluster: RunningCluster) -> None:
        """kube-apiserver restarted once with the audit flags and API Priority and Fairness on
        (throttle.py) (recorded, so the apiserver-restart fault keeps them)."""
        policy = self.workdir / "audit-policy.yaml"
        policy.write_text(audit.POLICY)
        component = cluster.components["kube-apiserver"]
        faults.signal_pid(component.pid, signal.SIGKILL)
        faults.reap(component.pid)
        await faults.wait_until(lambda: not component.alive(), 10)
        await faults.wait_until(lambda: faults.port_free(component.endpoint), 10)
        await asyncio.to_thread(
            self.plane.attach, cluster, "kube-apiserver",
            throttle.with_apf([*component.command, *audit.flags(policy, self.audit_log)]),
            component.endpoint,
            lambda: faults.https_ok(cluster, "/readyz"), 120)

    async def _fault_loop(self, stage: faults.Stage, until: float) -> None:
        kinds = list(self.faults)
        while True:
            self.rng.shuffle(kinds)
            for kind in kinds:
                if self.breached.is_set():
                    return
                # past the end, go on until every kind has fired once (a short run), but
                # not for ever (a kind that keeps failing is reported as such)
                fired = set(stage.counts) >= set(kinds)
                if time.time() >= until and (fired or time.time() >= until + 300):
                    return
                log.info("fault: %s", kind)
                await faults.inject(stage, kind, self.faults)
                await asyncio.sleep(self.rng.uniform(0.5, 1.5) * self.settings.gap)

    # ---------------------------------------------------------------- the run
    async def run(self) -> int:
        cluster = await asyncio.to_thread(self.plane.up)
        try:
            return await self._run(cluster)
        finally:
            # every component's log is kept in the work folder, for a breach's reader
            with contextlib.suppress(OSError):
                shutil.copytree(self.plane.root / "logs", self.workdir / "logs")
            await asyncio.to_thread(self.plane.down, True)

    async def _run(self, cluster: RunningCluster) -> int:
        os.environ.update({
            "KUBECONFIG": str(cluster.kubeconfig),
            "BERTHMASTER_AUTOSCALER_SCAN_INTERVAL": "3",
            "BERTHMASTER_DRAIN_BACKOFF_SECONDS": "1",
            "PYTHONPATH": os.pathsep.join(filter(None, (str(HOOKS),
                                                        os.environ.get("PYTHONPATH")))),
            "PYTHONUNBUFFERED": "1"})
        await self._audit_on(cluster)
        address = cluster.server.rsplit(":", 1)
        self.proxy = SlowProxy("127.0.0.1", int(address[1]))
        await self.proxy.start()
        self.admission_proxy = RoundRobinProxy(self.admission_backends)
        await self.admission_proxy.start()
        await asyncio.to_thread(self._apply_crds, cluster)
        kube = await KubeClient.from_kubeconfig(str(cluster.kubeconfig),
                                                agent=user_agent("berthmaster-chaos"))
        try:
            return await self._campaign(cluster, kube)
        finally:
            await kube.close()
            if self.proxy is not None:
                await self.proxy.close()
            if self.admission_proxy is not None:
                await self.admission_proxy.close()

    async def _campaign(self, cluster: RunningCluster, kube: KubeClient) -> int:
        settings = self.settings
        await self._scene(kube)
        checker = Checker(kube, SCHEDULER_NAME, LEASE, scene.MACHINES,
                          lambda what: self.breached.set())
        checker.static_nodes = {n["metadata"]["name"] for n in scene.static_nodes()}
        stage = faults.Stage(self.plane, cluster, kube, checker, self.rng,
                             self._launches(cluster), settings.hold, proxy=self.proxy)
        for name in stage.launches:
            await stage.start(name)
        await self._admission_on(cluster, kube)
        await checker.start()
        checker.follow_audit(audit.AuditTail(self.audit_log).read)
        churn = scene.Churn(kube, SCHEDULER_NAME, self.rng, settings.churn_interval,
                            settings.max_live)
        stop_churn, stop_all = asyncio.Event(), asyncio.Event()
        stage.churn = churn

        def refused(error: KubeError) -> None:
            if admissionchaos.webhook_refusal(error):
                checker.breach(f"the churn's create refused because of the webhook under "
                               f"failurePolicy Ignore: {error.message[:160]}")

        churn.on_error = refused
        background = [asyncio.create_task(self._rss_loop(cluster, stop_all)),
                      asyncio.create_task(faults.supervise(stage, stop_all)),
                      asyncio.create_task(deschedruns.scheduled(
                          cluster.kubeconfig, self.workdir, DESCHEDULER_POLICY,
                          settings.descheduler_every, stage.outages, checker, stop_churn,
                          self.descheduler_runs)),
                      asyncio.create_task(churn.run(stop_churn))]
        for name, task, may_finish in zip(("rss sampler", "supervisor", "descheduler loop",
                                           "churn"), background, (False, False, True, True),
                                          strict=True):
            checker.watchdog.watch(name, task, may_finish)
        began = time.time()
        fault_phase_end = began + max(settings.minutes * 60 - BIND_BOUND - 15,
                                      settings.warmup + 30)
        await asyncio.sleep(settings.warmup)
        await self._fault_loop(stage, fault_phase_end)
        stop_churn.set()
        last_fault = max(stage.fault_ended, default=time.time())
        if not self.breached.is_set():
            await asyncio.sleep(max(0.0, last_fault + BIND_BOUND - time.time()))
            await self._final_checks(checker, last_fault)
        self.rss.sample(cluster)
        for problem in self.rss.breaches():
            checker.breach(problem)
        if checker.figures.pods_bound and not checker.figures.binds_by_user:
            checker.breach(f"the audit log attributed none of the {checker.figures.pods_bound} "
                           f"bindings ({self.audit_log}): bind attribution is blind")
        checker.watchdog.stop()
        stop_all.set()
        for task in background:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await checker.stop()
        missed = self._report(checker, stage, churn, time.time() - began)
        return 1 if checker.breaches or missed else 0

    async def _final_checks(self, checker: Checker, last_fault: float) -> None:
        """Liveness: every pending pod that fits somewhere is a breach; every other pending pod
        must carry an up-to-date reason."""
        nodes = list(checker.nodes.items.values())
        pods = [p for p in checker.pods.items.values()
                if rules.occupies(PodView.from_dict(p))]
        engine = Engine(load_policy(self._policy().read_text(), "the campaign's policy"),
                        seed=self.settings.seed)
        cutoff = time.time() - 15
        for pod in checker.pending():
            uid = str(pod["metadata"]["uid"])
            if checker.created_at.get(uid, 0) > cutoff:
                continue
            snapshot = Snapshot.build(nodes=nodes, pods=pods)
            decision = engine.schedule(pod, snapshot)
            key = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
            if decision.node is not None:
                checker.breach(f"{key}: fits on {decision.node} but still pending "
                               f"{BIND_BOUND:.0f}s after the last fault")
                continue
            problem = rules.stale_reason(pod, len(nodes), checker.failed_scheduling.get(uid),
                                         last_fault)
            if problem:
                checker.breach(problem)

    def _report(self, checker: Checker, stage: faults.Stage, churn: scene.Churn,
                elapsed: float) -> dict[str, list[str]]:
        """Print the figures; returns the fault kinds that never fired (with why)."""
        latencies = []
        for uid, bound in checker.bound_at.items():
            created = checker.created_at.get(uid, bound)
            ended = [f for f in stage.fault_ended if created <= f <= bound]
            if ended:
                latencies.append(bound - max(ended))
        figures = checker.figures
        print(f"run: {elapsed / 60:.1f} min, seed {self.settings.seed}, breaches: "
              f"{len(checker.breaches)}")
        for breach in checker.breaches:
            print(f"  BREACH: {breach}")
        print(f"pods created {figures.pods_created}, bound {figures.pods_bound}; binds by "
              f"scheduler life (audit log) {dict(sorted(figures.binds_by_user.items()))}, "
              f"(Scheduled events) {dict(sorted(figures.binds_by_reporter.items()))}; "
              f"preemptions (audit log) {dict(sorted(figures.preemptions_by_user.items()))}; "
              f"leader takeovers {figures.takeovers}")
        unaudited = checker.unaudited_binds(time.time() - 2 * BIND_WINDOW)
        print(f"binds the audit log did not record: {len(unaudited)} {unaudited[:5]}")
        runs = self.descheduler_runs
        print(f"churn: {dict(sorted(churn.counts.items()))}; descheduler runs {runs.started}: "
              f"completed {runs.completed} (within {deschedruns.RUN_BOUND:.0f}s), failed while "
              f"the control plane was down {runs.failed_in_outage}, exit codes "
              f"{dict(sorted(runs.exit_codes.items()))}; MachineSet scale-ups {figures.scale_ups}, "
              f"scale-downs {figures.scale_downs}; Machines gone {figures.machines_deleted}")
        print(f"Machine API liveness: {figures.machine_deletions_judged} Machines gone within "
              f"{MACHINE_DELETION_BOUND:.0f}s of their last hook, "
              f"{figures.machine_set_convergences} MachineSet convergences within "
              f"{MACHINE_SET_BOUND:.0f}s, {figures.remediations} MachineHealthCheck "
              f"remediations (deleted and replaced by a Ready Node) within "
              f"{REMEDIATION_BOUND:.0f}s")
        for line in faults.summary(stage.outcomes):
            print(f"fault {line}")
        print(f"fault details: {dict(sorted(stage.details.items()))}")
        missed = faults.never_fired(stage.outcomes, self.faults)
        if missed:
            print("faults not fired: " + "; ".join(f"{kind} ({', '.join(why)})"
                                                   for kind, why in sorted(missed.items())))
        admitted = [p for p in checker.pods.items.values()
                    if admissionchaos.created_after(p, self.admission_since)]
        proxy = self.admission_proxy
        print(f"admission webhook: pods created in {scene.WORK} after it was registered "
              f"{len(admitted)}, without its default toleration "
              f"{sum(not admissionchaos.marked(p) for p in admitted)}; churn write errors "
              f"{churn.counts.get('write errors', 0)}; proxy connections by replica "
              f"{dict(sorted(proxy.served.items())) if proxy else {}}, refused "
              f"{dict(sorted(proxy.refused.items())) if proxy else {}}, dropped "
              f"{proxy.dropped if proxy else 0}")
        print(f"restarts after exiting on their own: {dict(sorted(stage.restarts.items()))}")
        print(f"watch relists by the checker: "
              f"{sum(m.relists for m in checker.mirrors) - len(checker.mirrors)}")
        rss = ", ".join(f"{name} {start // 1024}/{peak // 1024}/{end // 1024} ({lives} lives)"
                        for name, (start, peak, end, lives)
                        in sorted(self.rss.per_component().items()))
        print(f"RSS MiB start/max/end over the run: {rss}")
        print(f"logs (kept after the run): {self.workdir}")
        worst = max(latencies, default=0.0)
        median = statistics.median(latencies) if latencies else 0.0
        counts = " ".join(f"{k}={v}" for k, v in sorted(stage.counts.items()))
        print(f"invariant breaches: {len(checker.breaches)} | pods created "
              f"{figures.pods_created} bound {figures.pods_bound} | faults {counts} | "
              f"worst time-to-bind after a fault {worst:.1f}s (median {median:.1f}s, "
              f"{len(latencies)} pods) | bound {BIND_BOUND:.0f}s after the last fault"
              + (f" | faults not fired: {','.join(sorted(missed))}" if missed else ""))
        return missed


def fault_table(kubeconfig_of: Any, proxy: Any) -> dict[str, Any]:
    """The faults beyond faults.FAULTS: the admission webhook's, API Priority and
    Fairness' and a MachineHealthCheck's remediation."""
    return {"admission-kill": admissionchaos.fault(proxy),
            "apf-throttle": throttle.fault(kubeconfig_of),
            "mhc-remediation": remediation.mhc_remediation}


FAULTS = {**faults.FAULTS, **fault_table(Path, lambda: None)}  # the kinds


def main(minutes: float, seed: int, **overrides: Any) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s",
                        datefmt="%H:%M:%S")
    logging.getLogger("aiohttp").setLevel(logging.WARNING)
    settings = Settings(minutes=minutes, seed=seed, **overrides)
    return asyncio.run(Campaign(settings).run())
