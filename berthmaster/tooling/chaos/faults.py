"""The faults: each an async function over a :class:`Stage` that injects one failure, waits
as long as the failure should last, and puts things back (a restarted process, a node Ready
again). The campaign draws them in shuffled rounds, so every kind is tried once per round.

A fault that did nothing must not count as fired: each returns an :class:`Outcome`, fired with
what it did (checked, not assumed: the process died, the node turned NotReady, the proxy
delayed traffic) or not fired and why. The campaign fails a run in which a kind never fired.

Processes are the cluster's recorded components (``ControlPlane.attach`` restarts them with
their recorded command, and ``dev down`` stops them), so a killed API server or etcd comes back
exactly as it was started.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import json
import logging
import os
import random
import signal
import socket
import ssl
import time
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from berthmaster.foundation.kube import CORE, KubeClient, KubeError, resource_path
from berthmaster.tooling.chaos.bigpod import as_large_as
from berthmaster.tooling.chaos.checker import Checker
from berthmaster.tooling.chaos.slowproxy import SlowProxy
from berthmaster.tooling.chaos.workload import WORK, Churn, bare_pod, static_node
from berthmaster.tooling.devcluster.certs import Pki
from berthmaster.tooling.devcluster.cluster import (
    APISERVER_MAX_REQUEST_BODY_BYTES,
    ClusterError,
    Component,
    ControlPlane,
    RunningCluster,
)

Obj = dict[str, Any]
log = logging.getLogger("berthmaster.tooling.chaos")
NODE_NOT_READY = "node-not-ready.stage.kwok.x-k8s.io"  # kwok's node chaos Stage label
# The big pod's request body: exactly kube-apiserver's 3 MiB limit (bigpod.py says what of it
# is stored, and why a 3 MiB body of plain text could not be)
BIG_POD_BYTES = APISERVER_MAX_REQUEST_BODY_BYTES
BIG_POD_BOUND = 60.0  # seconds in which the big pod and a small one created after it are bound
# A frozen leader is resumed this long after another replica took its Lease: longer than the
# checker's grace for binds in flight, so a bind made on waking is a breach.
RESUME_AFTER_TAKEOVER = 4.0


@dataclass(frozen=True)
class Outcome:
    """What one fault did: ``fired`` with ``what`` it did, or not, with ``what`` stopped it."""

    fired: bool
    what: str


def fired(what: str) -> Outcome:
    return Outcome(True, what)


def not_fired(why: str) -> Outcome:
    return Outcome(False, why)


def tally(outcomes: dict[str, list[Outcome]]) -> tuple[dict[str, int], dict[str, int]]:
    """Per kind: how many times it fired, and how many times it did not."""
    done = {kind: sum(o.fired for o in found) for kind, found in outcomes.items()}
    missed = {kind: sum(not o.fired for o in found) for kind, found in outcomes.items()}
    return done, missed


def never_fired(outcomes: dict[str, list[Outcome]],
                scheduled: Iterable[str]) -> dict[str, list[str]]:
    """The scheduled kinds that never fired, with the reasons given (distinct, in order;
    ``never tried`` when the run ended before their turn)."""
    out: dict[str, list[str]] = {}
    for kind in scheduled:
        found = outcomes.get(kind, [])
        if not any(o.fired for o in found):
            out[kind] = list(dict.fromkeys(o.what for o in found)) or ["never tried"]
    return out


def summary(outcomes: dict[str, list[Outcome]]) -> list[str]:
    """One line per kind: fired n, not fired m (with the reasons), what the first firing did."""
    lines = []
    for kind, found in sorted(outcomes.items()):
        done = [o.what for o in found if o.fired]
        missed = list(dict.fromkeys(o.what for o in found if not o.fired))
        line = f"{kind}: fired {len(done)}, not fired {len(found) - len(done)}"
        if missed:
            line += f" ({'; '.join(missed)})"
        if done:
            line += f"; e.g. {done[0]}"
        lines.append(line)
    return lines


@dataclass
class Launch:
    """How to (re)start one of berthmaster's processes: command and readiness check."""

    command: Callable[[int], list[str]]  # life number -> argv
    endpoint: str
    ready: Callable[[], bool]
    lives: int = 0
    identity: Callable[[int], str] | None = None


@dataclass
class Stage:
    plane: ControlPlane
    cluster: RunningCluster
    kube: KubeClient
    checker: Checker
    rng: random.Random
    launches: dict[str, Launch]
    hold: float  # how long a lasting fault lasts (seconds)
    outcomes: dict[str, list[Outcome]] = field(default_factory=dict)
    details: dict[str, int] = field(default_factory=dict)
    node_serial: int = 100
    compacted: int = 0  # the last revision etcd_compaction compacted
    fault_ended: list[float] = field(default_factory=list)
    churn: Churn | None = None
    proxy: SlowProxy | None = None  # in front of the API server for scheduler-b
    serial: int = 0
    held: set[str] = field(default_factory=set)  # components a fault is handling
    restarts: dict[str, int] = field(default_factory=dict)  # by the supervisor
    # when the API server or etcd was down (killed, until ready again): wall-clock spans
    outages: list[tuple[float, float]] = field(default_factory=list)
    starting: asyncio.Lock = field(default_factory=asyncio.Lock)  # one cluster state writer

    def component(self, name: str) -> Component:
        return self.cluster.components[name]

    @contextlib.asynccontextmanager
    async def holding(self, name: str) -> AsyncIterator[None]:
        """A fault handles component ``name`` meanwhile: the supervisor leaves it alone."""
        self.held.add(name)
        try:
            yield
        finally:
            self.held.discard(name)

    @property
    def counts(self) -> dict[str, int]:
        """Per kind, the faults that fired."""
        return {k: v for k, v in tally(self.outcomes)[0].items() if v}

    async def kill_and_restart(self, name: str) -> bool:
        """kill -9 of ``name``, reaped; started again 1-3 s later. Whether it was killed (it
        was running, and it died)."""
        pid = self.component(name).pid
        killed = signal_pid(pid, signal.SIGKILL)
        reap(pid)
        killed = killed and await wait_until(lambda: not self.component(name).alive(), 5)
        await asyncio.sleep(self.rng.uniform(1, 3))
        await self.start(name)
        return killed

    async def start(self, name: str) -> None:
        launch = self.launches[name]
        async with self.starting:
            launch.lives += 1
            await asyncio.to_thread(self.plane.attach, self.cluster, name,
                                    launch.command(launch.lives), launch.endpoint,
                                    launch.ready, 90)

    def identity(self, name: str) -> str:
        launch = self.launches[name]
        assert launch.identity is not None
        return launch.identity(launch.lives)

    @contextlib.asynccontextmanager
    async def outage(self) -> AsyncIterator[None]:
        """A control-plane component is down meanwhile: clients may fail (recorded)."""
        began = time.time()
        try:
            yield
        finally:
            self.outages.append((began, time.time()))

    def note(self, detail: str) -> None:
        self.details[detail] = self.details.get(detail, 0) + 1


def signal_pid(pid: int, sig: signal.Signals) -> bool:
    """Whether the signal was sent (the process existed)."""
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return False
    return True


def process_state(pid: int) -> str:
    """The state letter of /proc/<pid>/stat (``T``: stopped), or ``?`` when gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "?"


def reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


async def wait_until(check: Callable[[], bool | Awaitable[bool]], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if not isinstance(result, bool):
            result = await result
        if result:
            return True
        await asyncio.sleep(0.25)
    return False


def https_ok(cluster: RunningCluster, path: str, server: str | None = None) -> bool:
    """``path`` of the API server (or of ``server``, whose self-signed certificate is not
    checked: kube-controller-manager's) answers 2xx to the cluster's admin."""
    pki = Pki(cluster.root / "pki")
    context = ssl.create_default_context(cafile=str(pki.ca_cert))
    if server is not None:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    context.load_cert_chain(str(pki.client_cert("admin")), str(pki.client_key("admin")))
    try:
        with urllib.request.urlopen(f"{server or cluster.server}{path}", timeout=2,
                                    context=context) as answer:
            return bool(200 <= answer.status < 300)
    except (OSError, ValueError):
        return False


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            return bool(200 <= answer.status < 300)
    except (OSError, ValueError):
        return False


def etcd_call(endpoint: str, method: str, body: Obj) -> Obj:
    request = urllib.request.Request(f"{endpoint}/v3/{method}", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        result: Obj = json.loads(answer.read())
        return result


# ------------------------------------------------------------------ schedulers


def _leader(stage: Stage) -> str | None:
    holder = stage.checker.holder
    for name in ("scheduler-a", "scheduler-b"):
        if stage.identity(name) == holder and stage.component(name).alive():
            return name
    return None


async def _a_leader(stage: Stage) -> str | None:
    await wait_until(lambda: _leader(stage) is not None, 30)
    return _leader(stage)


async def scheduler_leader_kill(stage: Stage) -> Outcome:
    """kill -9 of the leading replica; it comes back (a new identity) as the standby."""
    name = await _a_leader(stage)
    if name is None:
        return not_fired("no leader to kill")
    async with stage.holding(name):
        if await stage.kill_and_restart(name):
            return fired(f"{name} killed")
    return not_fired(f"{name} was not running")


async def scheduler_leader_stop(stage: Stage) -> Outcome:
    """SIGSTOP of the leader until another replica holds the Lease, then SIGCONT: it must bind
    nothing more (it exits, as kube-scheduler does, and is restarted as the standby). Fired
    when the Lease passed while the leader was stopped."""
    name = await _a_leader(stage)
    if name is None:
        return not_fired("no leader to stop")
    async with stage.holding(name):
        return await _stop_leader(stage, name)


async def _stop_leader(stage: Stage, name: str) -> Outcome:
    identity = stage.identity(name)
    pid = stage.component(name).pid
    signal_pid(pid, signal.SIGSTOP)
    stopped = await wait_until(lambda: process_state(pid) == "T", 5)
    taken = await wait_until(lambda: stage.checker.holder not in ("", identity), 30)
    await asyncio.sleep(RESUME_AFTER_TAKEOVER)
    signal_pid(pid, signal.SIGCONT)
    exited = await wait_until(lambda: not stage.component(name).alive(), 15)
    reap(pid)
    if not exited:
        stage.note("stopped leader still running after SIGCONT")
        signal_pid(pid, signal.SIGKILL)
        reap(pid)
    await stage.start(name)
    if not stopped:
        return not_fired(f"{name} did not stop")
    if not taken:
        return not_fired("Lease not taken while the leader was stopped")
    return fired(f"{name} stopped, Lease taken by {stage.checker.holder}")


# ------------------------------------------------------------------ the operator


def _activity(stage: Stage) -> str | None:
    for machine in stage.checker.machines.items.values():
        meta = machine.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            return "drain" if not any(c.get("type") == "Drained" and c.get("status") == "True"
                                      for c in (machine.get("status") or {}).get("conditions")
                                      or ()) else "termination"
    for machine_set in stage.checker.machine_sets.items.values():
        wanted = int((machine_set.get("spec") or {}).get("replicas") or 0)
        ready = int((machine_set.get("status") or {}).get("readyReplicas") or 0)
        have = int((machine_set.get("status") or {}).get("replicas") or 0)
        if wanted > ready:
            return "scale-up"
        if wanted < have:
            return "scale-down"
    return None


async def operator_kill(stage: Stage) -> Outcome:
    """kill -9 of the operator in the middle of a drain (a Machine deleted for it), a scale-up
    (pending pods made for it) or whatever is under way (a scale-down when there is one), and
    a restart a moment later."""
    modes = ("scale-up", "drain", "under way")
    mode = modes[stage.counts.get("operator-kill", 0) % len(modes)]
    if mode == "drain" and stage.churn is not None:
        await stage.churn.delete_a_machine()
    elif mode == "scale-up" and stage.churn is not None:
        await stage.churn.pool_burst(5)
    await wait_until(lambda: _activity(stage) is not None, 5 * stage.hold)
    during = _activity(stage) or "idle"
    async with stage.holding("operator"):
        if await stage.kill_and_restart("operator"):
            return fired(f"operator killed during {during}")
    return not_fired("the operator was not running")


async def operator_stop(stage: Stage) -> Outcome:
    """SIGSTOP of the operator (a long GC pause, a throttled container) for twice the hold
    time, then SIGCONT: it must resume its work where it was (and its liveness holds)."""
    async with stage.holding("operator"):
        pid = stage.component("operator").pid
        if not signal_pid(pid, signal.SIGSTOP):
            return not_fired("the operator was not running")
        stopped = await wait_until(lambda: process_state(pid) == "T", 5)
        during = _activity(stage) or "idle"
        await asyncio.sleep(2 * stage.hold)
        signal_pid(pid, signal.SIGCONT)
    if not stopped:
        return not_fired("the operator did not stop")
    return fired(f"operator stopped {2 * stage.hold:.0f}s during {during}")


# ------------------------------------------------------------------ the control plane


def port_free(endpoint: str) -> bool:
    """Whether the endpoint's port on this host can be listened on again: a killed component's
    listener may outlive its process for a moment, and a restart on a taken port exits with
    ``bind: address already in use``."""
    parsed = urllib.parse.urlsplit(endpoint)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((parsed.hostname or "127.0.0.1", parsed.port or 0))
        except OSError:
            return False
    return True


async def restart_recorded(stage: Stage, name: str, ready: Callable[[], bool],
                           extra: tuple[str, ...] = ()) -> bool:
    """kill -9 of a control-plane component and a start with its recorded command line (plus
    ``extra`` flags, recorded too). Whether the old process died."""
    component = stage.component(name)
    signal_pid(component.pid, signal.SIGKILL)
    reap(component.pid)
    died = await wait_until(lambda: not component.alive(), 5)
    await asyncio.sleep(stage.rng.uniform(0.5, 2))
    await start_recorded(stage, name, ready, extra)
    return died


async def start_recorded(stage: Stage, name: str, ready: Callable[[], bool],
                         extra: tuple[str, ...] = ()) -> None:
    """Start a stopped control-plane component with its recorded command line (plus
    ``extra``), once its port is free."""
    component = stage.component(name)
    await wait_until(lambda: port_free(component.endpoint), 10)
    command = [*component.command, *(f for f in extra if f not in component.command)]
    async with stage.starting:
        await asyncio.to_thread(stage.plane.attach, stage.cluster, name, command,
                                component.endpoint, ready, 90)


async def apiserver_restart(stage: Stage) -> Outcome:
    """kill -9 of kube-apiserver and a start with the same command line."""
    async with stage.outage():
        died = await restart_recorded(stage, "kube-apiserver",
                                      lambda: https_ok(stage.cluster, "/readyz"))
    return fired("kube-apiserver killed and started again") if died else \
        not_fired("kube-apiserver did not die")


async def etcd_restart(stage: Stage) -> Outcome:
    """kill -9 of etcd (its data kept) and a start with the same command line."""
    endpoint = stage.component("etcd").endpoint
    async with stage.outage():
        died = await restart_recorded(stage, "etcd", lambda: http_ok(f"{endpoint}/health"))
        await wait_until(lambda: https_ok(stage.cluster, "/readyz"), 60)
    return fired("etcd killed and started again") if died else not_fired("etcd did not die")


async def etcd_compaction(stage: Stage) -> Outcome:
    """Compact etcd at its current revision: the API server's watches of older revisions end,
    and clients resuming from them get 410 Gone and relist. Fired when etcd compacted a
    revision it had not compacted before."""
    endpoint = stage.component("etcd").endpoint
    before = sum(m.relists for m in stage.checker.mirrors)
    answer = await asyncio.to_thread(etcd_call, endpoint, "kv/range",
                                     {"key": base64.b64encode(b"/").decode(), "limit": 1})
    revision = int(answer["header"]["revision"])
    if revision <= stage.compacted:
        return not_fired(f"revision {revision} already compacted")
    await asyncio.to_thread(etcd_call, endpoint, "kv/compaction",
                            {"revision": revision, "physical": True})
    stage.compacted = revision
    await asyncio.sleep(stage.hold)
    relists = sum(m.relists for m in stage.checker.mirrors) - before
    return fired(f"compacted at revision {revision}; the checker relisted {relists} times")


# ------------------------------------------------------------------ nodes


def _static(stage: Stage) -> list[str]:
    return sorted(n for n in stage.checker.static_nodes
                  if f"/{n}" in stage.checker.nodes.items)


def _ready(stage: Stage, name: str) -> str | None:
    node = stage.checker.nodes.items.get(f"/{name}") or {}
    for condition in (node.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "Ready":
            return str(condition.get("status"))
    return None


async def node_not_ready(stage: Stage) -> Outcome:
    """kwok's node-not-ready Stage turns a static node NotReady; later it is Ready again.
    Fired when the node was seen not Ready."""
    candidates = _static(stage)
    if not candidates:
        return not_fired("no static node")
    name = stage.rng.choice(candidates)
    path = resource_path(CORE, "nodes", name=name)
    await stage.kube.patch(path, {"metadata": {"labels": {NODE_NOT_READY: "true"}}})
    turned = await wait_until(lambda: _ready(stage, name) not in ("True", None), stage.hold)
    await asyncio.sleep(stage.hold)
    await stage.kube.patch(path, {"metadata": {"labels": {NODE_NOT_READY: None}}})
    if not turned:
        return not_fired(f"node {name} was never seen NotReady")
    return fired(f"node {name} NotReady")


async def node_delete(stage: Stage) -> Outcome:
    """Delete a static node under its running pods; a new node of its kind joins later.
    Fired when the node was seen gone."""
    candidates = _static(stage)
    if not candidates:
        return not_fired("no static node")
    with_pods = [n for n in candidates
                 if any((p.get("spec") or {}).get("nodeName") == n
                        for p in stage.checker.pods.items.values())]
    name = stage.rng.choice(with_pods or candidates)
    kind = name.rsplit("-", 1)[0]
    with contextlib.suppress(KubeError):
        await stage.kube.delete(resource_path(CORE, "nodes", name=name))
    stage.checker.static_nodes.discard(name)
    gone = await wait_until(lambda: f"/{name}" not in stage.checker.nodes.items, stage.hold)
    await asyncio.sleep(stage.hold / 2)
    stage.node_serial += 1
    node = static_node(kind, stage.node_serial)
    await stage.kube.create(resource_path(CORE, "nodes"), node)
    stage.checker.static_nodes.add(node["metadata"]["name"])
    if not gone:
        return not_fired(f"node {name} was not seen gone")
    pods = sum(1 for p in stage.checker.pods.items.values()
               if (p.get("spec") or {}).get("nodeName") == name)
    return fired(f"node {name} deleted under {pods} pods")


# ------------------------------------------------------------------ hook controllers


async def hook_controller_fault(stage: Stage) -> Outcome:
    """A hook controller dies (kill -9) or turns slow (SIGSTOP) for a while, leaving its hooks
    in place; then it is back."""
    name = stage.rng.choice(("hook-replacement", "hook-log-flush"))
    async with stage.holding(name):
        return await _hook_fault(stage, name)


async def _hook_fault(stage: Stage, name: str) -> Outcome:
    pid = stage.component(name).pid
    if stage.rng.random() < 0.5:
        sent = signal_pid(pid, signal.SIGKILL)
        reap(pid)
        died = sent and await wait_until(lambda: not stage.component(name).alive(), 5)
        await asyncio.sleep(2 * stage.hold)
        await stage.start(name)
        return fired(f"{name} dead") if died else not_fired(f"{name} was not running")
    if not signal_pid(pid, signal.SIGSTOP):
        return not_fired(f"{name} was not running")
    stopped = await wait_until(lambda: process_state(pid) == "T", 5)
    await asyncio.sleep(2 * stage.hold)
    signal_pid(pid, signal.SIGCONT)
    return fired(f"{name} slow") if stopped else not_fired(f"{name} did not stop")


# ------------------------------------------------------------------ the API server, slow


async def apiserver_slow(stage: Stage) -> Outcome:
    """The proxy in front of kube-apiserver for scheduler-b delays every chunk both ways for
    twice the hold time: Lease renewals, watches and bindings of that replica arrive late.
    Fired when the proxy delayed traffic."""
    proxy = stage.proxy
    if proxy is None:
        return not_fired("no proxy in front of the API server")
    before = proxy.delayed
    proxy.delay = stage.rng.uniform(0.2, 0.6)
    try:
        await asyncio.sleep(2 * stage.hold)
    finally:
        delay, proxy.delay = proxy.delay, 0.0
    if proxy.delayed == before:
        return not_fired("no traffic through the proxy while it was slow")
    return fired(f"{proxy.delayed - before} chunks delayed {delay:.1f}s for scheduler-b")


# ------------------------------------------------------------------ a big pod


def big_pod(name: str, scheduler: str, size: int) -> Obj:
    """A plain pod whose JSON is exactly ``size`` bytes (bigpod.as_large_as): the watch
    streams of every component carry it whole."""
    return as_large_as(bare_pod(name, "plain", scheduler, random.Random(0)), size)


def _processed(stage: Stage, name: str, since: float) -> bool:
    """The scheduler bound the pod, or reported it unschedulable, after ``since``."""
    pod = stage.checker.pods.items.get(f"{WORK}/{name}") or {}
    uid = str((pod.get("metadata") or {}).get("uid"))
    return bool((pod.get("spec") or {}).get("nodeName")) or \
        stage.checker.failed_scheduling.get(uid, 0.0) >= since


async def big_pod_fault(stage: Stage) -> Outcome:
    """A pod whose request body is exactly the API server's 3 MiB limit, then a small one:
    within ``BIG_POD_BOUND`` seconds the scheduler must have dealt with both (bound, or
    reported unschedulable): a breach otherwise. Fired when the big pod was created."""
    stage.serial += 1
    big, small = f"big-{stage.serial}", f"after-big-{stage.serial}"
    pods = resource_path(CORE, "pods", WORK)
    scheduler = stage.checker.scheduler_name
    since = time.time()
    await stage.kube.create(pods, big_pod(big, scheduler, BIG_POD_BYTES))
    try:
        await stage.kube.create(pods, bare_pod(small, "plain", scheduler, stage.rng))
        for name in (big, small):
            if not await wait_until(functools.partial(_processed, stage, name, since),
                                    BIG_POD_BOUND):
                stage.checker.breach(f"{WORK}/{name}: neither bound nor reported unschedulable "
                                     f"{BIG_POD_BOUND:.0f}s after a {BIG_POD_BYTES} byte pod "
                                     "was created")
    finally:
        for name in (big, small):
            with contextlib.suppress(KubeError):
                await stage.kube.delete(resource_path(CORE, "pods", WORK, name))
    return fired(f"a {BIG_POD_BYTES} byte pod created")


# Control-plane components no fault stops, restarted when they exit as their kubelet would a
# static pod: kube-controller-manager exits at start-up when the API server it reads is
# restarted under it ("Error building controllers": a 403 before the new API server has its
# RBAC), which the campaign's first audit restart can do.
SUPERVISED_PLANE = ("kube-controller-manager",)


async def supervise(stage: Stage, stop: asyncio.Event) -> None:
    """Restart berthmaster's processes that exit on their own (a scheduler that lost its Lease
    exits, as kube-scheduler does, for its kubelet to restart it): what a Deployment does; and
    :data:`SUPERVISED_PLANE` with its recorded command line."""
    while not stop.is_set():
        for name in stage.launches:
            if name in stage.held or stage.component(name).alive():
                continue
            reap(stage.component(name).pid)
            stage.restarts[name] = stage.restarts.get(name, 0) + 1
            with contextlib.suppress(ClusterError):
                await stage.start(name)
        for name in SUPERVISED_PLANE:
            component = stage.cluster.components.get(name)
            if component is None or name in stage.held or component.alive():
                continue
            reap(component.pid)
            stage.restarts[name] = stage.restarts.get(name, 0) + 1
            with contextlib.suppress(ClusterError):
                await start_recorded(stage, name, functools.partial(
                    https_ok, stage.cluster, "/healthz", component.endpoint))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 2)


FAULTS: dict[str, Callable[[Stage], Awaitable[Outcome]]] = {
    "scheduler-leader-kill": scheduler_leader_kill,
    "scheduler-leader-stop": scheduler_leader_stop,
    "operator-kill": operator_kill,
    "operator-stop": operator_stop,
    "apiserver-restart": apiserver_restart,
    "apiserver-slow": apiserver_slow,
    "etcd-restart": etcd_restart,
    "etcd-compaction": etcd_compaction,
    "node-not-ready": node_not_ready,
    "node-delete": node_delete,
    "hook-controller": hook_controller_fault,
    "big-pod": big_pod_fault,
}


async def inject(stage: Stage, kind: str,
                 table: dict[str, Callable[[Stage], Awaitable[Outcome]]] | None = None
                 ) -> Outcome:
    """One fault of ``kind``, its outcome recorded (a fault that raises did not fire, and the
    campaign goes on)."""
    try:
        outcome = await (table or FAULTS)[kind](stage)
    except (KubeError, OSError, TimeoutError, ValueError, ClusterError) as error:
        outcome = not_fired(f"failed: {type(error).__name__}: {str(error)[:120]}")
    stage.outcomes.setdefault(kind, []).append(outcome)
    log.info("fault %s: %s%s", kind, "" if outcome.fired else "NOT FIRED: ", outcome.what)
    stage.fault_ended.append(time.time())
    return outcome
