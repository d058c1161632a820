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
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from berthmaster.tooling.devcluster import build, images, kwok_incluster, local_path
from berthmaster.tooling.devcluster import kubelet as node
from berthmaster.tooling.devcluster.certs import (
    FRONT_PROXY_CLIENT_NAME,
    Pki,
    ensure_client,
    ensure_pki,
    kubeconfig,
)
from berthmaster.tooling.devcluster.paths import state_root
from berthmaster.tooling.devcluster.ports import free_port, port_in_use

SERVICE_CIDR = "10.96.0.0/16"
SERVICE_IP = "10.96.0.1"
# kube-apiserver's request body limit (k8s.io/apiserver pkg/server/config.go
# MaxRequestBodyBytes; a body of more bytes is refused with 413, endpoints/handlers/rest.go
# limitedReadBody), and what the dev cluster's etcd takes in one request (see _start).
APISERVER_MAX_REQUEST_BODY_BYTES = 3 * 1024 * 1024
ETCD_MAX_REQUEST_BYTES = APISERVER_MAX_REQUEST_BODY_BYTES
FAKE_NODE_ANNOTATION = "kwok.x-k8s.io/node"
FAKE_NODE_VALUE = "fake"
CONTROLLERS = (
    "job-controller", "cronjob-controller", "replicaset-controller", "deployment-controller",
    "statefulset-controller", "daemonset-controller", "replicationcontroller-controller",
    "disruption-controller", "garbage-collector-controller", "namespace-controller",
    "serviceaccount-controller", "serviceaccount-token-controller", "node-lifecycle-controller",
    "taint-eviction-controller", "endpointslice-controller", "pod-garbage-collector-controller",
    # v1 Endpoints: the API server's Service proxy (/services/NAME:PORT/proxy) still reads them.
    "endpoints-controller",
    "ttl-after-finished-controller", "resourcequota-controller",
    # Publishes kube-root-ca.crt in every namespace, which service-account token volumes mount.
    "root-ca-certificate-publisher-controller",
    # Binds claims to volumes: the scheduler's VolumeBinding PreBind waits for it.
    "persistentvolume-binder-controller",
    # Release a claim (and its volume) once no pod uses it: without them a deleted namespace
    # with claims never finishes (kubernetes.io/pvc-protection, kubernetes.io/pv-protection).
    "persistentvolumeclaim-protection-controller", "persistentvolume-protection-controller",
)
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kwok")
NODE_COMPONENTS = ("containerd", "kube-scheduler", "kubelet", "kube-proxy")
KWOK_MODES = ("host", "cluster", "none")


class ClusterError(RuntimeError):
    """The control plane could not be started or inspected; the message says why."""


@dataclasses.dataclass(frozen=True)
class Options:
    """How a cluster is shaped: real kubelets (0 or 1), where kwok runs (a host process,
    a pod in the cluster from a local image, or nowhere) and how long a fake node's lease lasts.

    kwok renews every lease at a quarter of its duration (as the kubelet does), so 5,000 nodes
    on the default 40 s send 500 lease updates a second, more than this machine's control plane
    can serve beside a benchmark: leases then lapse and the node lifecycle controller taints
    healthy nodes not-ready. A benchmark lengthens the lease; the controller-manager's
    ``--node-monitor-grace-period`` follows it, so a node is only declared lost once its lease
    has really run out."""

    kubelets: int = 0
    kwok: str = "host"
    node_lease_seconds: int = 40

    def __post_init__(self) -> None:
        if self.kubelets not in (0, 1):
            raise ClusterError(f"--kubelets {self.kubelets}: one real node per machine is "
                               "supported (its bridge, ports and cgroups are the host's)")
        if self.kwok not in KWOK_MODES:
            raise ClusterError(f"--kwok {self.kwok}: choose one of {', '.join(KWOK_MODES)}")
        if self.node_lease_seconds < 40:
            raise ClusterError(f"node lease {self.node_lease_seconds}s: at least 40 s (the "
                               "kubelet's default), or nodes flap NotReady under load")
        if self.kwok == "cluster" and not self.kubelets:
            raise ClusterError("--kwok cluster runs kwok as a pod, which needs a real node: "
                               "add --kubelets 1")

    @property
    def components(self) -> tuple[str, ...]:
        """The processes a complete cluster of this shape runs."""
        base = tuple(c for c in COMPONENTS if c != "kwok" or self.kwok == "host")
        return base + (NODE_COMPONENTS if self.kubelets else ())


WEBHOOK_CLIENT = "apiserver-webhook-client"


def webhook_client_config(root: Path, pki: Pki) -> Path:
    """kube-apiserver's AdmissionConfiguration giving both webhook admission plugins a
    kubeConfigFile whose ``*`` user is a client certificate signed by the cluster CA
    (k8s.io/apiserver/pkg/util/webhook/authentication.go: ``*`` is the default for every
    webhook). The API server presents it only to a webhook that asks for one, such as
    ``berthmaster admission --client-ca-file`` (docs/admission.md)."""
    ensure_client(pki, WEBHOOK_CLIENT, "kube-apiserver-webhook-client")
    users = root / "webhook-client.kubeconfig"
    users.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config",
        "users": [{"name": "*", "user": {
            "client-certificate": str(pki.client_cert(WEBHOOK_CLIENT)),
            "client-key": str(pki.client_key(WEBHOOK_CLIENT))}}]}))
    users.chmod(0o600)
    plugin = {"apiVersion": "apiserver.config.k8s.io/v1", "kind": "WebhookAdmissionConfiguration",
              "kubeConfigFile": str(users)}
    config = root / "admission-control.yaml"
    config.write_text(yaml.safe_dump({
        "apiVersion": "apiserver.config.k8s.io/v1", "kind": "AdmissionConfiguration",
        "plugins": [{"name": name, "configuration": plugin}
                    for name in ("ValidatingAdmissionWebhook", "MutatingAdmissionWebhook")]}))
    return config


def aggregation_flags(pki: Pki, route_to_endpoints: bool) -> list[str]:
    """The kube-apiserver flags of the aggregation layer, as kubeadm writes them (kubernetes
    cmd/kubeadm/app/phases/controlplane/manifests.go getAPIServerCommand): the front-proxy CA
    that aggregated API servers trust for the identity headers, the one name allowed to send
    them, the header names, and the client certificate the API server presents.
    ``route_to_endpoints`` adds ``--enable-aggregator-routing=true``: the API server dials an
    APIService's endpoint (the pod's IP) instead of its Service's ClusterIP. With a real node
    the API server runs on the host whose bridge reaches pod IPs directly, so it does not
    depend on the host's kube-proxy rules for the ClusterIP."""
    flags = [
        f"--requestheader-client-ca-file={pki.front_proxy_ca_cert}",
        f"--requestheader-allowed-names={FRONT_PROXY_CLIENT_NAME}",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-username-headers=X-Remote-User",
        f"--proxy-client-cert-file={pki.front_proxy_client_cert}",
        f"--proxy-client-key-file={pki.front_proxy_client_key}",
    ]
    if route_to_endpoints:
        flags.append("--enable-aggregator-routing=true")
    return flags


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
    options: Options = dataclasses.field(default_factory=Options)

    @property
    def node_name(self) -> str | None:
        """The real node's name, when the cluster has one."""
        return node_name(self.name) if self.options.kubelets else None

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
                 say: Callable[[str], None] = print, options: Options | None = None,
                 images_to_load: tuple[str, ...] = ()):
        self.name = name
        self.root = (root or state_root()) / name
        self.apiserver_port = apiserver_port
        self.say = say
        self.options = options or Options()
        self.images_to_load = images_to_load

    @property
    def node_layout(self) -> node.NodeLayout:
        return node.NodeLayout(node_name(self.name), self.root / "node")

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
            options=Options(**data.get("options", {})),
        )

    def _save(self, cluster: RunningCluster) -> None:
        data = {
            "name": cluster.name, "root": str(cluster.root), "server": cluster.server,
            "kubeconfig": str(cluster.kubeconfig),
            "components": {k: dataclasses.asdict(v) for k, v in cluster.components.items()},
            "options": dataclasses.asdict(cluster.options),
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
            complete = all(name in existing.components for name in self.options.components)
            if not dead and complete and existing.options == self.options and _healthy(existing):
                self.say(f"Cluster {self.name!r} is already running ({existing.server}).")
                return existing
            why = (", ".join(dead) if dead else "shaped otherwise"
                   if existing.options != self.options else "unhealthy")
            self.say(f"Cluster {self.name!r} is partly down or differs ({why}); restarting it "
                     "from scratch.")
            self.down(quiet=True)
        missing = build.missing_binaries(("etcd", "kube-apiserver", "kube-controller-manager",
                                          "kwok", "kubectl"))
        if missing or not build.kwok_stages_path().is_file():
            build.build_all(self.say)
        if self.options.kubelets:
            node.preflight()
            images.require_docker()
            if build.missing_binaries((*build.NODE_BINARIES, "kube-scheduler")):
                build.build_all(self.say)
                build.build_node(self.say)
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
        kubelets = self.options.kubelets
        pki = ensure_pki(self.root / "pki", SERVICE_IP, (node.GATEWAY,) if kubelets else ())
        api_port = self.apiserver_port or free_port()
        server = f"https://127.0.0.1:{api_port}"
        admission_config = webhook_client_config(self.root, pki)
        clients = ["admin", "controller-manager", "kwok"]
        if kubelets:
            layout = self.node_layout
            ensure_client(pki, "kubelet", f"system:node:{layout.name}", ("system:nodes",))
            ensure_client(pki, "kube-proxy", "system:kube-proxy")
            ensure_client(pki, "apiserver-kubelet-client", "kube-apiserver-kubelet-client")
            clients += ["scheduler", "kubelet", "kube-proxy"]
            node.NodeHost(layout, self.say).prepare(api_port)
        kubeconfigs = {}
        for client in clients:
            path = self.root / f"{client}.kubeconfig"
            path.write_text(yaml.safe_dump(kubeconfig(server, pki, client, self.name)))
            path.chmod(0o600)
            kubeconfigs[client] = path
        cluster = RunningCluster(self.name, self.root, server, kubeconfigs["admin"], {},
                                 options=self.options)

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
            # etcd's default, 1.5 MiB (server/embed/config.go DefaultMaxRequestBytes), refuses
            # objects the API server sends: its etcd client sends up to 2 MiB (client/v3
            # options.go defaultMaxCallSendMsgSize; k8s.io/apiserver pkg/storage/
            # storagebackend/factory/etcd3.go sets no other), so etcd takes what the API
            # server's request limit allows (pkg/server/config.go MaxRequestBodyBytes, 3 MiB).
            f"--max-request-bytes={ETCD_MAX_REQUEST_BYTES}",
            "--log-level=warn",
        ], etcd_url, lambda: _http_ok(f"{etcd_url}/health"))

        # With a real node, pods reach the API server through the bridge (kubelet.py).
        reach = (["--bind-address=0.0.0.0", f"--advertise-address={node.GATEWAY}",
                  f"--kubelet-client-certificate={pki.client_cert('apiserver-kubelet-client')}",
                  f"--kubelet-client-key={pki.client_key('apiserver-kubelet-client')}",
                  # There is no DNS for the node's name: logs and exec go to its address.
                  "--kubelet-preferred-address-types=InternalIP"]
                 if kubelets else ["--bind-address=127.0.0.1", "--advertise-address=127.0.0.1"])
        self._launch(cluster, "kube-apiserver", [
            str(build.binary_path("kube-apiserver")),
            f"--etcd-servers={etcd_url}", *reach, f"--secure-port={api_port}",
            f"--tls-cert-file={pki.serving_cert}", f"--tls-private-key-file={pki.serving_key}",
            f"--client-ca-file={pki.ca_cert}", "--authorization-mode=Node,RBAC",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki.service_account_pub}",
            f"--service-account-signing-key-file={pki.service_account_key}",
            f"--service-cluster-ip-range={SERVICE_CIDR}", "--allow-privileged=true",
            "--max-requests-inflight=2000", "--max-mutating-requests-inflight=1000",
            "--enable-priority-and-fairness=false", "--profiling=false",
            f"--admission-control-config-file={admission_config}",
            *aggregation_flags(pki, route_to_endpoints=bool(kubelets)),
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
            "--concurrent-gc-syncs=20",
            f"--node-monitor-grace-period={self.options.node_lease_seconds}s",
        ], f"https://127.0.0.1:{cm_port}", lambda: _https_ok(f"https://127.0.0.1:{cm_port}/healthz",
                                                              pki, verify=False))

        if self.options.kwok == "host":
            self._start_host_kwok(cluster, kubeconfigs["kwok"])
        if kubelets:
            self._start_node(cluster, pki, kubeconfigs)
        return cluster

    def _start_host_kwok(self, cluster: RunningCluster, kwok_kubeconfig: Path) -> None:
        kwok_port = free_port()
        kwok_config = self.root / "kwok.yaml"
        kwok_config.write_text(yaml.safe_dump({
            "apiVersion": "config.kwok.x-k8s.io/v1alpha1", "kind": "KwokConfiguration",
            "options": {
                "serverAddress": f"127.0.0.1:{kwok_port}",
                "nodeLeaseDurationSeconds": self.options.node_lease_seconds,
                # Set explicitly: a configuration file leaves unset parallelism at 0.
                "nodeLeaseParallelism": 16, "podPlayStageParallelism": 16,
                "nodePlayStageParallelism": 16, "podsOnNodeSyncParallelism": 16,
            },
        }))
        self._launch(cluster, "kwok", [
            str(build.binary_path("kwok")), f"--kubeconfig={kwok_kubeconfig}",
            f"--config={kwok_config}", f"--config={build.kwok_stages_path()}",
            f"--config={build.berthmaster_stages_path()}",
            "--manage-all-nodes=false",
            f"--manage-nodes-with-annotation-selector={FAKE_NODE_ANNOTATION}={FAKE_NODE_VALUE}",
            "--cidr=10.244.0.0/16", "--node-ip=127.0.0.1",
        ], f"http://127.0.0.1:{kwok_port}", lambda: _http_ok(f"http://127.0.0.1:{kwok_port}/healthz"))

    def _start_node(self, cluster: RunningCluster, pki: Pki,
                    kubeconfigs: dict[str, Path]) -> None:
        """containerd, the default scheduler, kubelet and kube-proxy; then the images, the Node
        turning Ready and, with ``--kwok cluster``, kwok running as a pod."""
        layout = self.node_layout
        host = node.NodeHost(layout, self.say)
        wanted = [images.PAUSE_IMAGE, images.LOCAL_PATH_IMAGE, images.LOCAL_PATH_HELPER_IMAGE,
                  *([images.KWOK_IMAGE] if self.options.kwok == "cluster" else [])]
        for image, make in ((images.PAUSE_IMAGE, images.pause_image),
                            (images.KWOK_IMAGE, images.kwok_image),
                            (images.LOCAL_PATH_IMAGE, images.local_path_image),
                            (images.LOCAL_PATH_HELPER_IMAGE, images.local_path_helper_image)):
            if image in wanted and not images.image_exists(image):
                make(self.say)
        layout.containerd_config.write_text(node.containerd_config(layout, images.PAUSE_IMAGE))
        (layout.cni_conf_dir / "10-berthmaster.conflist").write_text(
            json.dumps(node.cni_config(layout), indent=2))
        self._launch(cluster, "containerd", [
            "containerd", f"--config={layout.containerd_config}",
        ], f"unix://{layout.containerd_socket}",
            lambda: host.ctr("version", check=False, timeout=10).returncode == 0)
        started = time.monotonic()
        host.load_images([*wanted, *self.images_to_load],
                         aliases={images.PAUSE_IMAGE: node.PAUSE_ALIASES})
        self.say(f"  images loaded into the node: {', '.join([*wanted, *self.images_to_load])} "
                 f"({time.monotonic() - started:.1f}s)")

        scheduler_port = free_port()
        scheduler_config = self.root / "kube-scheduler.yaml"
        scheduler_config.write_text(yaml.safe_dump(
            node.default_scheduler_config(kubeconfigs["scheduler"])))
        self._launch(cluster, "kube-scheduler", [
            str(build.binary_path("kube-scheduler")), f"--config={scheduler_config}",
            f"--authentication-kubeconfig={kubeconfigs['scheduler']}",
            f"--authorization-kubeconfig={kubeconfigs['scheduler']}",
            "--bind-address=127.0.0.1", f"--secure-port={scheduler_port}",
        ], f"https://127.0.0.1:{scheduler_port}",
            lambda: _https_ok(f"https://127.0.0.1:{scheduler_port}/healthz", pki, verify=False))

        kubelet_port, kubelet_healthz = free_port(), free_port()
        layout.kubelet_config.write_text(yaml.safe_dump(
            node.kubelet_config(layout, pki.ca_cert, kubelet_port, kubelet_healthz)))
        self._launch(cluster, "kubelet", node.kubelet_command(
            build.binary_path("kubelet"), layout, kubeconfigs["kubelet"]),
            f"https://{node.GATEWAY}:{kubelet_port}",
            lambda: _http_ok(f"http://127.0.0.1:{kubelet_healthz}/healthz"))

        proxy_metrics, proxy_healthz = free_port(), free_port()
        layout.kube_proxy_config.write_text(yaml.safe_dump(node.kube_proxy_config(
            layout, kubeconfigs["kube-proxy"], proxy_metrics, proxy_healthz)))
        self._launch(cluster, "kube-proxy", [
            str(build.binary_path("kube-proxy")), f"--config={layout.kube_proxy_config}",
        ], f"http://127.0.0.1:{proxy_healthz}",
            lambda: _http_ok(f"http://127.0.0.1:{proxy_healthz}/healthz"))

        self._wait(f"node {layout.name} Ready", lambda: _node_ready(cluster, layout.name),
                   timeout=120, log=cluster.components["kubelet"].log)
        self._install_storage(cluster, layout)
        if self.options.kwok == "cluster":
            manifests = kwok_incluster.kwok_manifests(images.KWOK_IMAGE,
                                                      kwok_incluster.stage_documents())
            applied = cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(manifests))
            if applied.returncode != 0:
                raise ClusterError(f"applying kwok's manifests failed: {applied.stderr.strip()}")
            rollout = cluster.kubectl("rollout", "status", "-n", kwok_incluster.NAMESPACE,
                                      f"deployment/{kwok_incluster.NAME}", "--timeout=120s",
                                      timeout=150)
            if rollout.returncode != 0:
                raise ClusterError(f"kwok did not start in the cluster: "
                                   f"{rollout.stderr.strip() or rollout.stdout.strip()}")
            self.say("  kwok running in the cluster (kube-system/kwok-controller)")

    def _install_storage(self, cluster: RunningCluster, layout: node.NodeLayout) -> None:
        """kind's default storage (berthmaster.tooling.devcluster.local_path): StorageClass
        ``standard``, provisioned on the real node into a folder of the cluster's state."""
        layout.local_path_dir.mkdir(parents=True, exist_ok=True)
        manifests = local_path.manifests(
            images.LOCAL_PATH_IMAGE, images.LOCAL_PATH_HELPER_IMAGE, layout.local_path_dir,
            {node.NODE_LABEL: node.NODE_LABEL_VALUE})
        applied = cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(manifests))
        if applied.returncode != 0:
            raise ClusterError(f"applying the local-path provisioner's manifests failed: "
                               f"{applied.stderr.strip()}")
        rollout = cluster.kubectl("rollout", "status", "-n", local_path.NAMESPACE,
                                  f"deployment/{local_path.NAME}", "--timeout=120s", timeout=150)
        if rollout.returncode != 0:
            raise ClusterError(f"the local-path provisioner did not start: "
                               f"{rollout.stderr.strip() or rollout.stdout.strip()}")
        self.say(f"  StorageClass {local_path.STORAGE_CLASS} (default, {local_path.PROVISIONER})"
                 f": volumes in {layout.local_path_dir}")

    def _wait(self, what: str, ready: Callable[[], bool], timeout: float, log: str) -> None:
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            if ready():
                self.say(f"  {what} ({time.monotonic() - started:.1f}s)")
                return
            time.sleep(1)
        raise ClusterError(f"timed out after {timeout:.0f}s waiting for {what}. "
                           f"Last lines of {log}:\n{log_tail(Path(log))}")

    def attach(self, cluster: RunningCluster, name: str, command: list[str], endpoint: str,
               ready: Callable[[], bool], timeout: float = 60,
               env: Mapping[str, str] | None = None) -> Component:
        """Start one more process with the cluster (the scheduler, the operator, ...), recorded
        in its state so ``down`` stops it too. An earlier instance of the same name is stopped.
        ``env`` is added to this process's environment for it."""
        previous = cluster.components.get(name)
        if previous is not None and previous.alive():
            _terminate(previous)
        self._launch(cluster, name, command, endpoint, ready, timeout, env)
        return cluster.components[name]

    @property
    def real_nodes_dir(self) -> Path:
        """Where the kubelet machine provider of an operator beside this cluster keeps its
        nodes (``BERTHMASTER_KUBELET_STATE``): ``down`` removes every node in it."""
        return self.root / "kubelet-machines"

    def _launch(self, cluster: RunningCluster, name: str, command: list[str], endpoint: str,
                ready: Callable[[], bool], timeout: float = 90,
                env: Mapping[str, str] | None = None) -> None:
        log = self.root / "logs" / f"{name}.log"
        self.say(f"  starting {name} ...")
        started = time.monotonic()
        with log.open("ab") as sink:
            process = subprocess.Popen(
                command, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, cwd=self.root,
                env={**os.environ, **env} if env else None,
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
        host = node.NodeHost(self.node_layout, self.say)
        if cluster is not None:
            for name in reversed(list(cluster.components)):
                component = cluster.components[name]
                if name == "containerd" and component.alive():
                    host.remove_containers()
                if component.alive():
                    _terminate(component)
                    stopped.append(name)
        if self.node_layout.root.exists():
            host.release_host(build.binary_path("kube-proxy"))
        stopped += self._remove_real_nodes()
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


    def _remove_real_nodes(self) -> list[str]:
        """Remove the kubelet machine provider's nodes of this cluster (their kubelets and
        containerds outlive the operator, as machines would): what the Machines' deletion would
        have done, now that the operator is stopped."""
        from berthmaster.tooling.devcluster.host_nodes import HostNodes

        if not self.real_nodes_dir.is_dir():
            return []
        nodes = HostNodes(self.real_nodes_dir, say=self.say)
        names = sorted(nodes.layouts())
        for name in names:
            nodes.remove(name)
        return [f"real node {name}" for name in names]


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


def node_name(cluster_name: str) -> str:
    return f"{cluster_name}-kubelet"


def _node_ready(cluster: RunningCluster, name: str) -> bool:
    found = cluster.kubectl("get", "node", name, "-o", "json", timeout=30)
    if found.returncode != 0:
        return False
    conditions = json.loads(found.stdout).get("status", {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _healthy(cluster: RunningCluster) -> bool:
    return _https_ok(f"{cluster.server}/readyz", Pki(cluster.root / "pki"))


def describe(cluster: RunningCluster) -> dict[str, Any]:
    return {
        "name": cluster.name,
        "server": cluster.server,
        "node": cluster.node_name,
        "kwok": cluster.options.kwok,
        "kubeconfig": str(cluster.kubeconfig),
        "components": {n: {"pid": c.pid, "endpoint": c.endpoint, "log": c.log}
                       for n, c in cluster.components.items()},
    }
