"""The faults: each an async function over a :class:`Stage` that injects one failure, waits
as long as the failure should last, and puts things back (a restarted process, a node Ready
again). The campaign draws them in shuffled rounds, so every kind fires once per round.

Processes are the cluster's recorded components (``ControlPlane.attach`` restarts them with
their recorded command, and ``dev down`` stops them), so a killed API server or etcd comes back
exactly as it was started.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import random
import signal
import ssl
import time
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from berthmaster.chaos.checker import Checker
from berthmaster.chaos.workload import Churn, static_node
from berthmaster.devcluster.certs import Pki
from berthmaster.devcluster.cluster import ClusterError, Component, ControlPlane, RunningCluster
from berthmaster.kube import CORE, KubeClient, KubeError, resource_path

Obj = dict[str, Any]
NODE_NOT_READY = "node-not-ready.stage.kwok.x-k8s.io"  # kwok's node chaos Stage label
# A frozen leader is resumed this long after another replica took its Lease: longer than the
# checker's grace for binds in flight, so a bind made on waking is a breach.
RESUME_AFTER_TAKEOVER = 4.0


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
    counts: dict[str, int] = field(default_factory=dict)
    details: dict[str, int] = field(default_factory=dict)
    node_serial: int = 100
    fault_ended: list[float] = field(default_factory=list)
    churn: Churn | None = None
    held: set[str] = field(default_factory=set)  # components a fault is handling
    restarts: dict[str, int] = field(default_factory=dict)  # by the supervisor
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

    async def kill_and_restart(self, name: str) -> None:
        """kill -9 of ``name``, reaped; started again 1-3 s later."""
        pid = self.component(name).pid
        signal_pid(pid, signal.SIGKILL)
        reap(pid)
        await asyncio.sleep(self.rng.uniform(1, 3))
        await self.start(name)

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

    def note(self, detail: str) -> None:
        self.details[detail] = self.details.get(detail, 0) + 1


def signal_pid(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


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


def https_ok(cluster: RunningCluster, path: str) -> bool:
    pki = Pki(cluster.root / "pki")
    context = ssl.create_default_context(cafile=str(pki.ca_cert))
    context.load_cert_chain(str(pki.client_cert("admin")), str(pki.client_key("admin")))
    try:
        with urllib.request.urlopen(f"{cluster.server}{path}", timeout=2,
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


async def scheduler_leader_kill(stage: Stage) -> None:
    """kill -9 of the leading replica; it comes back (a new identity) as the standby."""
    name = await _a_leader(stage)
    if name is None:
        stage.note("no leader to kill")
        return
    async with stage.holding(name):
        await stage.kill_and_restart(name)


async def scheduler_leader_stop(stage: Stage) -> None:
    """SIGSTOP of the leader until another replica holds the Lease, then SIGCONT: it must bind
    nothing more (it exits, as kube-scheduler does, and is restarted as the standby)."""
    name = await _a_leader(stage)
    if name is None:
        stage.note("no leader to stop")
        return
    async with stage.holding(name):
        await _stop_leader(stage, name)


async def _stop_leader(stage: Stage, name: str) -> None:
    identity = stage.identity(name)
    pid = stage.component(name).pid
    signal_pid(pid, signal.SIGSTOP)
    taken = await wait_until(lambda: stage.checker.holder not in ("", identity), 30)
    await asyncio.sleep(RESUME_AFTER_TAKEOVER)
    signal_pid(pid, signal.SIGCONT)
    stage.note("lease taken while stopped" if taken else "lease not taken while stopped")
    exited = await wait_until(lambda: not stage.component(name).alive(), 15)
    reap(pid)
    if not exited:
        stage.note("stopped leader still running after SIGCONT")
        signal_pid(pid, signal.SIGKILL)
        reap(pid)
    await stage.start(name)


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


async def operator_kill(stage: Stage) -> None:
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
    stage.note(f"operator killed during {_activity(stage) or 'idle'}")
    async with stage.holding("operator"):
        await stage.kill_and_restart("operator")


# ------------------------------------------------------------------ the control plane


async def _restart_recorded(stage: Stage, name: str, ready: Callable[[], bool]) -> None:
    component = stage.component(name)
    signal_pid(component.pid, signal.SIGKILL)
    reap(component.pid)
    await asyncio.sleep(stage.rng.uniform(0.5, 2))
    async with stage.starting:
        await asyncio.to_thread(stage.plane.attach, stage.cluster, name, component.command,
                                component.endpoint, ready, 90)


async def apiserver_restart(stage: Stage) -> None:
    """kill -9 of kube-apiserver and a start with the same command line."""
    await _restart_recorded(stage, "kube-apiserver",
                            lambda: https_ok(stage.cluster, "/readyz"))


async def etcd_restart(stage: Stage) -> None:
    """kill -9 of etcd (its data kept) and a start with the same command line."""
    endpoint = stage.component("etcd").endpoint
    await _restart_recorded(stage, "etcd", lambda: http_ok(f"{endpoint}/health"))
    await wait_until(lambda: https_ok(stage.cluster, "/readyz"), 60)


async def etcd_compaction(stage: Stage) -> None:
    """Compact etcd at its current revision: the API server's watches of older revisions end,
    and clients resuming from them get 410 Gone and relist."""
    endpoint = stage.component("etcd").endpoint
    before = sum(m.relists for m in stage.checker.mirrors)
    answer = await asyncio.to_thread(etcd_call, endpoint, "kv/range",
                                     {"key": base64.b64encode(b"/").decode(), "limit": 1})
    revision = int(answer["header"]["revision"])
    await asyncio.to_thread(etcd_call, endpoint, "kv/compaction",
                            {"revision": revision, "physical": True})
    await asyncio.sleep(stage.hold)
    if sum(m.relists for m in stage.checker.mirrors) > before:
        stage.note("compaction made the checker relist")


# ------------------------------------------------------------------ nodes


def _static(stage: Stage) -> list[str]:
    return sorted(n for n in stage.checker.static_nodes
                  if f"/{n}" in stage.checker.nodes.items)


async def node_not_ready(stage: Stage) -> None:
    """kwok's node-not-ready Stage turns a static node NotReady; later it is Ready again."""
    name = stage.rng.choice(_static(stage))
    path = resource_path(CORE, "nodes", name=name)
    await stage.kube.patch(path, {"metadata": {"labels": {NODE_NOT_READY: "true"}}})
    await asyncio.sleep(stage.hold)
    await stage.kube.patch(path, {"metadata": {"labels": {NODE_NOT_READY: None}}})


async def node_delete(stage: Stage) -> None:
    """Delete a static node under its running pods; a new node of its kind joins later."""
    candidates = _static(stage)
    with_pods = [n for n in candidates
                 if any((p.get("spec") or {}).get("nodeName") == n
                        for p in stage.checker.pods.items.values())]
    name = stage.rng.choice(with_pods or candidates)
    kind = name.rsplit("-", 1)[0]
    with contextlib.suppress(KubeError):
        await stage.kube.delete(resource_path(CORE, "nodes", name=name))
    stage.checker.static_nodes.discard(name)
    await asyncio.sleep(stage.hold / 2)
    stage.node_serial += 1
    node = static_node(kind, stage.node_serial)
    await stage.kube.create(resource_path(CORE, "nodes"), node)
    stage.checker.static_nodes.add(node["metadata"]["name"])


# ------------------------------------------------------------------ hook controllers


async def hook_controller_fault(stage: Stage) -> None:
    """A hook controller dies (kill -9) or turns slow (SIGSTOP) for a while, leaving its hooks
    in place; then it is back."""
    name = stage.rng.choice(("hook-replacement", "hook-log-flush"))
    async with stage.holding(name):
        await _hook_fault(stage, name)


async def _hook_fault(stage: Stage, name: str) -> None:
    pid = stage.component(name).pid
    if stage.rng.random() < 0.5:
        stage.note(f"{name} dead")
        signal_pid(pid, signal.SIGKILL)
        reap(pid)
        await asyncio.sleep(2 * stage.hold)
        await stage.start(name)
    else:
        stage.note(f"{name} slow")
        signal_pid(pid, signal.SIGSTOP)
        await asyncio.sleep(2 * stage.hold)
        signal_pid(pid, signal.SIGCONT)


async def supervise(stage: Stage, stop: asyncio.Event) -> None:
    """Restart berthmaster's processes that exit on their own (a scheduler that lost its Lease
    exits, as kube-scheduler does, for its kubelet to restart it): what a Deployment does."""
    while not stop.is_set():
        for name in stage.launches:
            if name in stage.held or stage.component(name).alive():
                continue
            reap(stage.component(name).pid)
            stage.restarts[name] = stage.restarts.get(name, 0) + 1
            with contextlib.suppress(ClusterError):
                await stage.start(name)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 2)


FAULTS: dict[str, Callable[[Stage], Awaitable[None]]] = {
    "scheduler-leader-kill": scheduler_leader_kill,
    "scheduler-leader-stop": scheduler_leader_stop,
    "operator-kill": operator_kill,
    "apiserver-restart": apiserver_restart,
    "etcd-restart": etcd_restart,
    "etcd-compaction": etcd_compaction,
    "node-not-ready": node_not_ready,
    "node-delete": node_delete,
    "hook-controller": hook_controller_fault,
}


async def inject(stage: Stage, kind: str) -> None:
    """One fault of ``kind``; counted when it has run (a fault that fails is counted under
    ``<kind> failed`` and the campaign goes on)."""
    try:
        await FAULTS[kind](stage)
    except (KubeError, OSError, TimeoutError, ValueError, ClusterError) as error:
        stage.note(f"{kind} failed: {type(error).__name__}")
    else:
        stage.counts[kind] = stage.counts.get(kind, 0) + 1
    stage.fault_ended.append(time.time())
