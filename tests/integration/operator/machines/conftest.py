"""Fixtures for the machines integration tests: CRDs + admission policy, the operator process.

``machine_api`` applies the Machine/MachineSet/MachineHealthCheck CRDs and the lifecycle-hook
admission policy from ``deploy/`` once per session (what a user applies). ``operator`` is
``berthmaster operator --only machines --standalone`` as a real subprocess, shared by the tests
of a module (``OperatorPool``): starting one costs a second or two of CPU, and every test works
in a namespace of its own, so a test needs no operator of its own unless it kills the process
(``own_operator``) or runs it with other capabilities, flags or environment (the pool then
stops the shared one first: never two operators at once). A failing test prints the part of
the operator's log written while it ran.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from berthmaster.foundation.kube import CORE, KubeClient, KubeError, resource_path
from berthmaster.operator.machines import api
from berthmaster.tooling.devcluster.cluster import RunningCluster
from berthmaster.tooling.processes import terminate
from berthmaster.tooling.python import BERTHMASTER_CLI
from tests.support.waiting import wait_for

ROOT = Path(__file__).resolve().parents[4]
MANIFESTS = [ROOT / "deploy/crds/machine.openshift.io_machines.yaml",
             ROOT / "deploy/crds/machine.openshift.io_machinesets.yaml",
             ROOT / "deploy/crds/machine.openshift.io_machinehealthchecks.yaml",
             ROOT / "deploy/machine-lifecycle-hooks-policy.yaml"]


@pytest.fixture(scope="session")
def machine_api(cluster: RunningCluster) -> RunningCluster:
    for manifest in MANIFESTS:
        result = cluster.kubectl("apply", "-f", str(manifest))
        assert result.returncode == 0, result.stderr
    for crd in ("machines.machine.openshift.io", "machinesets.machine.openshift.io",
                "machinehealthchecks.machine.openshift.io"):
        result = cluster.kubectl("wait", "--for=condition=Established", f"crd/{crd}",
                                 "--timeout=60s")
        assert result.returncode == 0, result.stderr
    # Established is not the end: the new resources' storage answers 429 while it initialises.
    deadline = time.monotonic() + 60
    while True:
        result = cluster.kubectl("get", "machines,machinesets,machinehealthchecks", "-A")
        if result.returncode == 0:
            return cluster
        assert time.monotonic() < deadline, result.stderr
        time.sleep(0.5)


# The test operator's drain attempt (upstream's is 20 s; operator/machines/handlers.py): the
# same drain, its timeouts and requeues reached sooner.
DRAIN_ATTEMPT_SECONDS = 5


class OperatorProcess:
    def __init__(self, kubeconfig: str, log: Path,
                 capabilities: tuple[str, ...] = ("machines",), args: tuple[str, ...] = (),
                 env: dict[str, str] | None = None):
        self.kubeconfig = kubeconfig
        self.env = dict(env or {})  # more environment (the machine providers, their endpoints)
        self.capabilities = capabilities
        self.args = args  # more command-line flags
        self.log_path = log
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        # KUBECONFIG too: kopf's login reads kubernetes_asyncio's default path, fixed at import.
        env = {**os.environ, "BERTHMASTER_DRAIN_BACKOFF_SECONDS": "1",
               "BERTHMASTER_DRAIN_ATTEMPT_SECONDS": str(DRAIN_ATTEMPT_SECONDS),
               "KUBECONFIG": self.kubeconfig, **self.env}
        log = self.log_path.open("ab")
        log.write(f"--- start #{self.starts}\n".encode())
        log.flush()
        only = [arg for capability in self.capabilities for arg in ("--only", capability)]
        self.process = subprocess.Popen(
            [*BERTHMASTER_CLI, "operator", "--kubeconfig",
             self.kubeconfig, *only, "--standalone", "--liveness", "", *self.args],
            stdout=log, stderr=subprocess.STDOUT, env=env, cwd=str(ROOT))

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)
        self.process = None

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            terminate(self.process, 10)
        self.process = None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_of_this_start(self) -> str:
        """What the process started last has logged (the log file holds every start's)."""
        return self.log().rpartition(f"--- start #{self.starts}\n")[2]


class OperatorPool:
    """The operator processes of one test module, one at a time: ``shared`` hands out the
    running process when it was started with the same capabilities and environment (and is
    alive), else stops it and starts that one; ``exclusive`` stops it for a test that runs an
    operator of its own."""

    def __init__(self, kubeconfig: str, directory: Path):
        self.kubeconfig = kubeconfig
        self.directory = directory
        self.current: OperatorProcess | None = None
        self.key: tuple[tuple[str, ...], tuple[tuple[str, str], ...]] | None = None

    def shared(self, capabilities: tuple[str, ...], env: dict[str, str]) -> OperatorProcess:
        key = (capabilities, tuple(sorted(env.items())))
        current = self.current
        alive = current is not None and current.process is not None \
            and current.process.poll() is None
        if current is not None and (key != self.key or not alive):
            self.exclusive()
        if self.current is None:
            log = self.directory / f"operator-{len(list(self.directory.iterdir()))}.log"
            self.current = OperatorProcess(self.kubeconfig, log, capabilities, env=env)
            self.current.start()
            self.key = key
        return self.current

    def exclusive(self) -> None:
        if self.current is not None:
            self.current.stop()
        self.current, self.key = None, None


_POOLS: dict[str, OperatorPool] = {}  # by test module


@pytest.fixture(scope="module")
def operator_pool(machine_api: RunningCluster, tmp_path_factory: pytest.TempPathFactory,
                  request: pytest.FixtureRequest) -> Iterator[OperatorPool]:
    pool = OperatorPool(str(machine_api.kubeconfig), tmp_path_factory.mktemp("operators"))
    _POOLS[request.module.__name__] = pool
    try:
        yield pool
    finally:
        del _POOLS[request.module.__name__]
        pool.exclusive()


@pytest.fixture(autouse=True)
def _no_shared_operator_unless_asked(request: pytest.FixtureRequest) -> None:
    """A test that asks for no operator from the pool runs with none: it may run its own
    process or a controller in-process, and two controllers must never reconcile one Machine."""
    pool = _POOLS.get(request.module.__name__)
    if pool is not None and "operator_pool" not in request.fixturenames:
        pool.exclusive()


def _print_log_on_failure(request: pytest.FixtureRequest, process: OperatorProcess,
                          since: int) -> None:
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        print("---- operator log (tail) ----\n" + process.log()[since:][-8000:])


def running_operator(pool: OperatorPool, request: pytest.FixtureRequest,
                     env: dict[str, str] | None = None,
                     capabilities: tuple[str, ...] = ("machines",)) -> Iterator[OperatorProcess]:
    """The module's shared operator with these capabilities and environment, for one test
    (``yield from`` it in a fixture); the log it wrote during the test is printed when the test
    fails."""
    process = pool.shared(capabilities, dict(env or {}))
    since = len(process.log())
    try:
        yield process
    finally:
        _print_log_on_failure(request, process, since)


def own_running_operator(pool: OperatorPool, tmp_path: Path, request: pytest.FixtureRequest,
                         capabilities: tuple[str, ...] = ("machines",)
                         ) -> Iterator[OperatorProcess]:
    """An operator process for one test alone, which it may kill and restart (``yield from`` it
    in a fixture); the module's shared one is stopped first."""
    pool.exclusive()
    process = OperatorProcess(pool.kubeconfig, tmp_path / "operator.log", capabilities)
    process.start()
    try:
        yield process
    finally:
        process.stop()
        _print_log_on_failure(request, process, 0)


@pytest.fixture
def operator(operator_pool: OperatorPool,
             request: pytest.FixtureRequest) -> Iterator[OperatorProcess]:
    yield from running_operator(operator_pool, request)


@pytest.fixture
def own_operator(operator_pool: OperatorPool, tmp_path: Path,
                 request: pytest.FixtureRequest) -> Iterator[OperatorProcess]:
    yield from own_running_operator(operator_pool, tmp_path, request)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report


def kwok_machine(name: str, *, pre_drain: list[tuple[str, str]] = (),
                 pre_terminate: list[tuple[str, str]] = (), taints: list[dict[str, str]] = (),
                 annotations: dict[str, str] | None = None,
                 labels: dict[str, str] | None = None) -> dict[str, Any]:
    hooks: dict[str, Any] = {}
    if pre_drain:
        hooks["preDrain"] = [{"name": n, "owner": o} for n, o in pre_drain]
    if pre_terminate:
        hooks["preTerminate"] = [{"name": n, "owner": o} for n, o in pre_terminate]
    return {
        "apiVersion": api.API_VERSION, "kind": "Machine",
        "metadata": {"name": name, "annotations": dict(annotations or {}),
                     "labels": dict(labels or {})},
        "spec": {"lifecycleHooks": hooks, "taints": list(taints),
                 "metadata": {"labels": {"node-role.kubernetes.io/worker": ""}},
                 "providerSpec": {"value": {"apiVersion": "berthmaster.io/v1alpha1",
                                            "kind": "KwokMachineProviderSpec",
                                            "instanceType": "kwok.small",
                                            "capacity": {"cpu": "4", "memory": "8Gi"}}}},
    }


async def get_machine(kube: KubeClient, namespace: str, name: str) -> dict[str, Any] | None:
    return await kube.get_if_exists(api.machine_path(namespace, name))


def condition(machine: dict[str, Any] | None, kind: str) -> dict[str, Any]:
    for found in ((machine or {}).get("status") or {}).get("conditions") or []:
        if found.get("type") == kind:
            return dict(found)
    return {}


async def machine_events(kube: KubeClient, namespace: str, name: str) -> dict[str, dict[str, Any]]:
    items, _ = await kube.list_all(resource_path(CORE, "events", namespace),
                                   fieldSelector=f"involvedObject.name={name}")
    by_reason: dict[str, dict[str, Any]] = {}
    for event in items:
        reason = event.get("reason")
        assert reason not in by_reason, f"duplicate {reason} events for {name}: {items}"
        by_reason[reason] = event
    return by_reason


async def running_machine(kube: KubeClient, namespace: str, name: str,
                          timeout: float = 60) -> dict[str, Any]:
    async def running() -> dict[str, Any] | None:
        machine = await get_machine(kube, namespace, name)
        if machine and (machine.get("status") or {}).get("phase") == "Running":
            return machine
        return None

    return await wait_for(running, timeout=timeout, what=f"machine {name} Running")


async def set_hooks(kube: KubeClient, namespace: str, name: str, stage: str,
                    hooks: list[tuple[str, str]]) -> None:
    await kube.patch(api.machine_path(namespace, name), {"spec": {"lifecycleHooks": {
        stage: [{"name": n, "owner": o} for n, o in hooks]}}})


async def node_or_none(kube: KubeClient, name: str) -> dict[str, Any] | None:
    return await kube.get_if_exists(api.node_path(name))


def elapsed(since: float) -> float:
    return time.monotonic() - since


@pytest.fixture
async def cleanup_nodes(kube: KubeClient) -> AsyncIterator[list[str]]:
    """Names of Nodes a test's Machines made, deleted afterwards if still there."""
    names: list[str] = []
    yield names
    for name in names:
        with contextlib.suppress(KubeError):
            await kube.delete(api.node_path(name))
