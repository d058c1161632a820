"""Start, inspect and stop a real Kubernetes control plane on loopback.

Design: a cluster is a folder (``<state root>/<name>/``) holding its certificates, etcd data,
logs, kubeconfigs and ``state.json`` (each component's pid, command line, ports and log). The
components start in dependency order — etcd, kube-apiserver, kube-controller-manager, kwok —
each as its own session leader so the cluster outlives the command that started it, and each
is waited on until its health endpoint answers. A component that exits or never becomes ready
stops the start-up with :class:`ClusterError`, whose message carries the tail of its log.

``up`` is idempotent: when every recorded process is alive and the API server answers, it
returns the running cluster; a half-dead cluster is torn down and started afresh. ``down``
stops every recorded process (SIGTERM, then SIGKILL), checking a pid still runs the binary it
started before signalling it, and removes the folder. Ports are chosen free on 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from berthmaster.devcluster import build
from berthmaster.devcluster.certs import Pki, ensure_pki, kubeconfig
from berthmaster.devcluster.paths import state_root

SERVICE_CIDR = "10.96.0.0/16"
SERVICE_IP = "10.96.0.1"
FAKE_NODE_ANNOTATION = "kwok.x-k8s.io/node"
FAKE_NODE_VALUE = "fake"
CONTROLLERS = (
    "job-controller", "cronjob-controller", "replicaset-controller", "deployment-controller",
    "statefulset-controller", "daemonset-controller", "replicationcontroller-controller",
    "disruption-controller", "garbage-collector-controller", "namespace-controller",
    "serviceaccount-controller", "serviceaccount-token-controller", "node-lifecycle-controller",
    "taint-eviction-controller", "endpointslice-controller", "pod-garbage-collector-controller",
    "ttl-after-finished-controller", "resourcequota-controller",
)
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kwok")


class ClusterError(RuntimeError):
    """The control plane could not be started or inspected; the message says why."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def log_tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.strip().splitlines()[-lines:]) or "(empty log)"


def _pid_alive(pid: int, binary: str) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
    except OSError:
        return False
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        if "\nState:\tZ" in status:
            return False
    except OSError:
        return False
    return Path(cmdline).name == Path(binary).name


@dataclasses.dataclass
class Component:
    name: str
    pid: int
    command: list[str]
    log: str
    endpoint: str

    def alive(self) -> bool:
        return _pid_alive(self.pid, self.command[0])


@dataclasses.dataclass
class RunningCluster:
    """What a started cluster offers its users."""

    name: str
    root: Path
    server: str
    kubeconfig: Path
    components: dict[str, Component]
    started_in: float = 0.0

    def kubectl(self, *args: str, input: str | None = None, check: bool = False,
                timeout: float = 120) -> subprocess.CompletedProcess[str]:
        command = [str(build.binary_path("kubectl")), "--kubeconfig", str(self.kubeconfig), *args]
        return subprocess.run(command, input=input, capture_output=True, text=True,
                              check=check, timeout=timeout)

    def binary(self, name: str) -> Path:
        return build.binary_path(name)

    def env_line(self) -> str:
        return f"export KUBECONFIG={self.kubeconfig}"


class ControlPlane:
    """One named local cluster. ``up()`` to start (or reuse), ``down()`` to remove."""

    def __init__(self, name: str = "berthmaster", root: Path | None = None,
                 apiserver_port: int | None = None,
                 say: Callable[[str], None] = print):
        self.name = name
        self.root = (root or state_root()) / name
        self.apiserver_port = apiserver_port
        self.say = say

    # -- state -------------------------------------------------------------------------
    @property
    def state_file(self) -> Path:
        return self.root / "state.json"

    def load(self) -> RunningCluster | None:
        try:
            data = json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            return None
        return RunningCluster(
            name=data["name"], root=Path(data["root"]), server=data["server"],
            kubeconfig=Path(data["kubeconfig"]),
            components={k: Component(**v) for k, v in data["components"].items()},
        )

    def _save(self, cluster: RunningCluster) -> None:
        data = {
            "name": cluster.name, "root": str(cluster.root), "server": cluster.server,
            "kubeconfig": str(cluster.kubeconfig),
            "components": {k: dataclasses.asdict(v) for k, v in cluster.components.items()},
        }
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2))
        tmp.replace(self.state_file)

    def status(self) -> list[tuple[str, str, str, str]]:
        """(component, state, pid, endpoint) rows for the recorded cluster."""
        cluster = self.load()
        if cluster is None:
            return []
        return [
            (name, "running" if c.alive() else "stopped", str(c.pid), c.endpoint)
            for name, c in cluster.components.items()
        ]

    # -- lifecycle ---------------------------------------------------------------------
    def up(self) -> RunningCluster:
        existing = self.load()
        if existing is not None:
            dead = [n for n, c in existing.components.items() if not c.alive()]
            complete = all(name in existing.components for name in COMPONENTS)
            if not dead and complete and _healthy(existing):
                self.say(f"Cluster {self.name!r} is already running ({existing.server}).")
                return existing
            self.say(f"Cluster {self.name!r} is partly down ({', '.join(dead) or 'unhealthy'}); "
                     "restarting it from scratch.")
            self.down(quiet=True)
        missing = build.missing_binaries(("etcd", "kube-apiserver", "kube-controller-manager",
                                          "kwok", "kubectl"))
        if missing or not build.kwok_stages_path().is_file():
            build.build_all(self.say)
        started = time.monotonic()
        try:
            cluster = self._start()
        except BaseException:
            self.down(quiet=True, keep_logs=True)
            raise
        cluster.started_in = time.monotonic() - started
        return cluster

    def _start(self) -> RunningCluster:
        if self.apiserver_port is not None and port_in_use(self.apiserver_port):
            raise ClusterError(
                f"port {self.apiserver_port} on 127.0.0.1 is already in use: choose another with "
                "--port, or stop what listens there (ss -ltnp | grep :PORT shows it)"
            )
        for sub in ("logs", "etcd"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        pki = ensure_pki(self.root / "pki", SERVICE_IP)
        api_port = self.apiserver_port or free_port()
        server = f"https://127.0.0.1:{api_port}"
        kubeconfigs = {}
        for client in ("admin", "controller-manager", "kwok"):
            path = self.root / f"{client}.kubeconfig"
            path.write_text(yaml.safe_dump(kubeconfig(server, pki, client, self.name)))
            path.chmod(0o600)
            kubeconfigs[client] = path
        cluster = RunningCluster(self.name, self.root, server, kubeconfigs["admin"], {})

        etcd_port, etcd_peer = free_port(), free_port()
        etcd_url = f"http://127.0.0.1:{etcd_port}"
        self._launch(cluster, "etcd", [
            str(build.binary_path("etcd")),
            f"--name={self.name}", f"--data-dir={self.root / 'etcd'}",
            f"--listen-client-urls={etcd_url}", f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls=http://127.0.0.1:{etcd_peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{etcd_peer}",
            f"--initial-cluster={self.name}=http://127.0.0.1:{etcd_peer}",
            "--unsafe-no-fsync=true", "--quota-backend-bytes=8589934592",
            "--log-level=warn",
        ], etcd_url, lambda: _http_ok(f"{etcd_url}/health"))

        self._launch(cluster, "kube-apiserver", [
            str(build.binary_path("kube-apiserver")),
            f"--etcd-servers={etcd_url}", "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1", f"--secure-port={api_port}",
            f"--tls-cert-file={pki.serving_cert}", f"--tls-private-key-file={pki.serving_key}",
            f"--client-ca-file={pki.ca_cert}", "--authorization-mode=Node,RBAC",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki.service_account_pub}",
            f"--service-account-signing-key-file={pki.service_account_key}",
            f"--service-cluster-ip-range={SERVICE_CIDR}", "--allow-privileged=true",
            "--max-requests-inflight=2000", "--max-mutating-requests-inflight=1000",
            "--enable-priority-and-fairness=false", "--profiling=false",
        ], server, lambda: _https_ok(f"{server}/readyz", pki))

        cm_port = free_port()
        self._launch(cluster, "kube-controller-manager", [
            str(build.binary_path("kube-controller-manager")),
            f"--kubeconfig={kubeconfigs['controller-manager']}",
            f"--authentication-kubeconfig={kubeconfigs['controller-manager']}",
            f"--authorization-kubeconfig={kubeconfigs['controller-manager']}",
            "--bind-address=127.0.0.1", f"--secure-port={cm_port}",
            f"--service-account-private-key-file={pki.service_account_key}",
            f"--root-ca-file={pki.ca_cert}", "--leader-elect=false",
            "--use-service-account-credentials=true",
            f"--controllers={','.join(CONTROLLERS)}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--kube-api-qps=500", "--kube-api-burst=1000",
            "--concurrent-gc-syncs=20", "--node-monitor-grace-period=40s",
        ], f"https://127.0.0.1:{cm_port}", lambda: _https_ok(f"https://127.0.0.1:{cm_port}/healthz",
                                                              pki, verify=False))

        kwok_port = free_port()
        kwok_config = self.root / "kwok.yaml"
        kwok_config.write_text(yaml.safe_dump({
            "apiVersion": "config.kwok.x-k8s.io/v1alpha1", "kind": "KwokConfiguration",
            "options": {
                "serverAddress": f"127.0.0.1:{kwok_port}", "nodeLeaseDurationSeconds": 40,
                # Set explicitly: a configuration file leaves unset parallelism at 0.
                "nodeLeaseParallelism": 16, "podPlayStageParallelism": 16,
                "nodePlayStageParallelism": 16, "podsOnNodeSyncParallelism": 16,
            },
        }))
        self._launch(cluster, "kwok", [
            str(build.binary_path("kwok")), f"--kubeconfig={kubeconfigs['kwok']}",
            f"--config={kwok_config}", f"--config={build.kwok_stages_path()}",
            f"--config={build.berthmaster_stages_path()}",
            "--manage-all-nodes=false",
            f"--manage-nodes-with-annotation-selector={FAKE_NODE_ANNOTATION}={FAKE_NODE_VALUE}",
            "--cidr=10.244.0.0/16", "--node-ip=127.0.0.1",
        ], f"http://127.0.0.1:{kwok_port}", lambda: _http_ok(f"http://127.0.0.1:{kwok_port}/healthz"))
        return cluster

    def attach(self, cluster: RunningCluster, name: str, command: list[str], endpoint: str,
               ready: Callable[[], bool], timeout: float = 60) -> Component:
        """Start one more process with the cluster (the scheduler, the operator, ...), recorded
        in its state so ``down`` stops it too. An earlier instance of the same name is stopped."""
        previous = cluster.components.get(name)
        if previous is not None and previous.alive():
            _terminate(previous)
        self._launch(cluster, name, command, endpoint, ready, timeout)
        return cluster.components[name]

    def _launch(self, cluster: RunningCluster, name: str, command: list[str], endpoint: str,
                ready: Callable[[], bool], timeout: float = 90) -> None:
        log = self.root / "logs" / f"{name}.log"
        self.say(f"  starting {name} ...")
        started = time.monotonic()
        with log.open("ab") as sink:
            process = subprocess.Popen(
                command, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, cwd=self.root,
            )
        component = Component(name, process.pid, command, str(log), endpoint)
        cluster.components[name] = component
        self._save(cluster)
        deadline = started + timeout
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise ClusterError(
                    f"{name} exited with code {process.returncode} during start-up. "
                    f"Last lines of {log}:\n{log_tail(log)}"
                )
            if ready():
                self.say(f"  {name} ready at {endpoint} ({time.monotonic() - started:.1f}s)")
                return
            time.sleep(0.2)
        raise ClusterError(
            f"{name} did not become ready within {timeout:.0f}s ({endpoint}). "
            f"Last lines of {log}:\n{log_tail(log)}"
        )

    def down(self, quiet: bool = False, keep_logs: bool = False) -> list[str]:
        """Stop every recorded process and remove the cluster's folder; returns what stopped."""
        cluster = self.load()
        stopped: list[str] = []
        if cluster is not None:
            for name in reversed(list(cluster.components)):
                component = cluster.components[name]
                if component.alive():
                    _terminate(component)
                    stopped.append(name)
        if keep_logs and (self.root / "logs").exists():
            # Keep the logs of a failed start beside the (removed) state for the user to read.
            keep = self.root.with_name(self.root.name + "-failed-logs")
            shutil.rmtree(keep, ignore_errors=True)
            shutil.copytree(self.root / "logs", keep)
        shutil.rmtree(self.root, ignore_errors=True)
        if not quiet:
            if stopped:
                self.say(f"Stopped {', '.join(stopped)}; removed {self.root}.")
            else:
                self.say(f"No running cluster {self.name!r}; removed {self.root} if it existed.")
        return stopped


def _terminate(component: Component, grace: float = 10) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(component.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not component.alive():
            break
        with contextlib.suppress(ChildProcessError):
            os.waitpid(component.pid, os.WNOHANG)
        time.sleep(0.1)
    else:
        with contextlib.suppress(ProcessLookupError):
            os.kill(component.pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(component.pid, os.WNOHANG)


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(200 <= response.status < 300)
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _https_ok(url: str, pki: Pki, verify: bool = True) -> bool:
    context = ssl.create_default_context(cafile=str(pki.ca_cert))
    if not verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    context.load_cert_chain(str(pki.client_cert("admin")), str(pki.client_key("admin")))
    try:
        with urllib.request.urlopen(url, timeout=2, context=context) as response:
            return bool(200 <= response.status < 300)
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _healthy(cluster: RunningCluster) -> bool:
    return _https_ok(f"{cluster.server}/readyz", Pki(cluster.root / "pki"))


def describe(cluster: RunningCluster) -> dict[str, Any]:
    return {
        "name": cluster.name,
        "server": cluster.server,
        "kubeconfig": str(cluster.kubeconfig),
        "components": {n: {"pid": c.pid, "endpoint": c.endpoint, "log": c.log}
                       for n, c in cluster.components.items()},
    }
