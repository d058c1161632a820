"""A real node beside the local control plane: containerd, kubelet and kube-proxy on this host.

Why: kind's node containers are privileged, and privileged containers cannot start on our
build machines (their capability bounding set lacks CAP_SYS_RESOURCE). A kubelet running on
the host itself, with its own containerd running the pods' ordinary containers, needs neither.
So ``berthmaster dev up --kubelets 1`` adds one real node to the cluster, and berthmaster's
image runs there as its users run it: from the Helm chart, under its RBAC, with in-cluster
configuration.

Design: everything the node needs lives under ``<cluster>/node/`` (containerd's root and state,
its socket, the kubelet's root, the CNI configuration and IPAM data, the configurations) and
every process is a recorded component of the cluster, so ``dev down`` stops it. The pure
builders below produce each configuration; :class:`NodeHost` does the host-side I/O: the
bridge, the firewall rule, image loading, and a teardown that leaves the host as it found it
(pod containers killed, mounts released, network namespaces and the bridge removed,
kube-proxy's rules cleaned).

The network: pods get addresses from ``POD_SUBNET`` on the bridge ``BRIDGE`` (CNI's bridge and
host-local plugins from Debian's containernetworking-plugins). The host is the bridge's gateway,
``GATEWAY``; the API server then listens on all addresses (a firewall rule refuses its port on
every interface but loopback and the bridge) and advertises ``GATEWAY``, so the ``kubernetes``
Service that kube-proxy programs leads pods to it. There is no cluster DNS: in-cluster clients
use the ``KUBERNETES_SERVICE_HOST`` address, as berthmaster and kwok do.

containerd's settings that make it work here: ``restrict_oom_score_adj`` (lowering a sandbox's
oom_score_adj needs CAP_SYS_RESOURCE) and a local sandbox image (no registry). The kubelet's:
``failCgroupV1: false`` (1.35 refuses cgroup v1 otherwise), the cgroupfs driver, image garbage
collection off (a deleted image could not be pulled back).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

BRIDGE = "bm0"
GATEWAY = "10.88.0.1"
POD_SUBNET = "10.88.0.0/24"
CNI_BIN_DIR = Path("/usr/lib/cni")
NETNS_DIR = Path("/run/netns")
NODE_LABEL = "berthmaster.io/node"  # value "kubelet": the node runs real containers
NODE_LABEL_VALUE = "kubelet"
# The sample pods name upstream's pause image; the node resolves that name to ours.
PAUSE_ALIASES = ("registry.k8s.io/pause:3.10",)

Say = Callable[[str], None]


class NodeError(RuntimeError):
    """The real node could not be set up; the message says why and what to do."""


@dataclasses.dataclass(frozen=True)
class NodeLayout:
    """Where one real node keeps everything, under ``<cluster>/node``."""

    name: str
    root: Path

    @property
    def containerd_root(self) -> Path:
        return self.root / "containerd" / "root"

    @property
    def containerd_state(self) -> Path:
        return self.root / "containerd" / "state"

    @property
    def containerd_socket(self) -> Path:
        return self.root / "containerd" / "containerd.sock"

    @property
    def containerd_config(self) -> Path:
        return self.root / "containerd" / "config.toml"

    @property
    def registry_hosts_dir(self) -> Path:
        """containerd's registry ``config_path``: one ``<host[:port]>/hosts.toml`` a registry."""
        return self.root / "containerd" / "certs.d"

    @property
    def cni_conf_dir(self) -> Path:
        return self.root / "cni" / "net.d"

    @property
    def cni_data_dir(self) -> Path:
        return self.root / "cni" / "ipam"

    @property
    def kubelet_root(self) -> Path:
        return self.root / "kubelet"

    @property
    def kubelet_config(self) -> Path:
        return self.root / "kubelet.yaml"

    @property
    def kube_proxy_config(self) -> Path:
        return self.root / "kube-proxy.yaml"

    @property
    def local_path_dir(self) -> Path:
        """Where the local-path provisioner keeps the node's volumes
        (berthmaster.tooling.devcluster.local_path)."""
        return self.root / "local-path-provisioner"

    @property
    def netns_before(self) -> Path:
        return self.root / "netns-before.txt"


# -- pure builders -------------------------------------------------------------------------
def containerd_config(layout: NodeLayout, sandbox_image: str) -> str:
    """containerd 1.6's configuration (version 2) for a private instance."""
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    return "\n".join([
        "version = 2",
        f'root = "{layout.containerd_root}"',
        f'state = "{layout.containerd_state}"',
        "[grpc]",
        f'  address = "{layout.containerd_socket}"',
        "[ttrpc]",
        '  address = ""',
        "[metrics]",
        '  address = ""',
        f"[{cri}]",
        f'  sandbox_image = "{sandbox_image}"',
        # Sandboxes would lower their oom_score_adj, which needs CAP_SYS_RESOURCE.
        "  restrict_oom_score_adj = true",
        "  enable_selinux = false",
        f"[{cri}.containerd]",
        '  snapshotter = "overlayfs"',
        '  default_runtime_name = "runc"',
        f"[{cri}.containerd.runtimes.runc]",
        '  runtime_type = "io.containerd.runc.v2"',
        f"[{cri}.containerd.runtimes.runc.options]",
        "  SystemdCgroup = false",
        f"[{cri}.cni]",
        f'  bin_dir = "{CNI_BIN_DIR}"',
        f'  conf_dir = "{layout.cni_conf_dir}"',
        # Registry hosts (containerd docs/hosts.md): a registry that `make e2e` publishes to
        # is reached through <registry_hosts_dir>/<host:port>/hosts.toml.
        f"[{cri}.registry]",
        f'  config_path = "{layout.registry_hosts_dir}"',
        "",
    ])


def registry_hosts_toml(host: str) -> str:
    """The ``hosts.toml`` (containerd docs/hosts.md) for a plain-HTTP registry at ``host``
    (``host:port``), such as the loopback registry `make e2e` publishes to: pulled and resolved
    over http, as ``server`` and one ``[host]`` entry with the pull and resolve capabilities."""
    if not host or "/" in host:
        raise ValueError(f"registry host {host!r}: give host:port, with no scheme or path")
    return "\n".join([
        f'server = "http://{host}"',
        "",
        f'[host."http://{host}"]',
        '  capabilities = ["pull", "resolve"]',
        "",
    ])


def write_registry_hosts(layout: NodeLayout, host: str) -> Path:
    """Write ``hosts.toml`` for ``host`` under the node's ``config_path``; returns its path.
    containerd reads it at each pull, so no restart is needed."""
    target = layout.registry_hosts_dir / host / "hosts.toml"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(registry_hosts_toml(host))
    return target


def cni_config(layout: NodeLayout, bridge: str = BRIDGE, subnet: str = POD_SUBNET,
               gateway: str = GATEWAY, pool: tuple[str, str] | None = None) -> dict[str, Any]:
    """A bridge network with host-local addresses; the host is the gateway. Nodes sharing one
    bridge each take their own ``pool`` (first and last address) of the subnet, as their
    host-local data stays with each node."""
    addresses: dict[str, str] = {"subnet": subnet, "gateway": gateway}
    if pool is not None:
        addresses.update(rangeStart=pool[0], rangeEnd=pool[1])
    return {
        "cniVersion": "1.0.0",
        "name": "berthmaster",
        "plugins": [
            {"type": "bridge", "bridge": bridge, "isGateway": True, "ipMasq": False,
             "hairpinMode": True,
             "ipam": {"type": "host-local", "dataDir": str(layout.cni_data_dir),
                      "ranges": [[addresses]],
                      "routes": [{"dst": "0.0.0.0/0"}]}},
            {"type": "portmap", "capabilities": {"portMappings": True}},
            # Docker sets the FORWARD policy to DROP and bridged packets pass through it
            # (br_netfilter): without a rule accepting each pod's traffic (the firewall
            # plugin's CNI-FORWARD chain) pods cannot reach each other, only the host.
            {"type": "firewall"},
        ],
    }


def kubelet_config(layout: NodeLayout, ca_cert: Path, port: int, healthz_port: int
                   ) -> dict[str, Any]:
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        # Kubernetes 1.35 refuses cgroup v1 hosts unless told otherwise.
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "containerRuntimeEndpoint": f"unix://{layout.containerd_socket}",
        "address": GATEWAY,
        "port": port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": healthz_port,
        # The API server reaches the kubelet (logs, exec) with a client certificate of our CA;
        # metrics-server with its service account's token, which the kubelet checks with a
        # TokenReview (webhook authentication, on as kubeadm sets it: kubernetes
        # cmd/kubeadm/app/componentconfigs/kubelet.go kubeletAuthenticationWebhookEnabled).
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True},
                           "x509": {"clientCAFile": str(ca_cert)}},
        "authorization": {"mode": "AlwaysAllow"},
        "clusterDomain": "cluster.local",
        "failSwapOn": False,
        "registerNode": True,
        # No registry answers: images loaded into containerd must never be collected.
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%",
                         "imagefs.available": "1%", "nodefs.inodesFree": "1%"},
        "serializeImagePulls": False,
        "maxPods": 110,
        "podCIDR": POD_SUBNET,
        # Container logs stay with the cluster's state, removed with it.
        "podLogsDir": str(layout.root / "pod-logs"),
    }


def kube_proxy_config(layout: NodeLayout, kubeconfig: Path, metrics_port: int,
                      healthz_port: int) -> dict[str, Any]:
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "hostnameOverride": layout.name,
        "mode": "iptables",
        "clusterCIDR": POD_SUBNET,
        "bindAddress": "127.0.0.1",
        "metricsBindAddress": f"127.0.0.1:{metrics_port}",
        "healthzBindAddress": f"127.0.0.1:{healthz_port}",
        # Leave the host's conntrack sysctls alone (0 = do not set).
        "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s",
                      "tcpCloseWaitTimeout": "0s"},
        # Service traffic from a pod to a pod on the same bridge needs its source rewritten
        # (no br_netfilter here): masquerade every Service connection.
        "iptables": {"masqueradeAll": True, "syncPeriod": "10s", "minSyncPeriod": "1s"},
    }


def default_scheduler_config(kubeconfig: Path) -> dict[str, Any]:
    """kube-scheduler as the cluster's default scheduler, kept off kwok's fake nodes: a pod
    the default scheduler places must really run (the chart's pods, kwok itself, descheduler
    Jobs); kwok nodes are for the workloads berthmaster places and the Machines it runs."""
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "leaderElection": {"leaderElect": False},
        "profiles": [{
            "schedulerName": "default-scheduler",
            "pluginConfig": [{"name": "NodeAffinity", "args": {"addedAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{
                    "matchExpressions": [{"key": NODE_LABEL, "operator": "In",
                                          "values": [NODE_LABEL_VALUE]}]}]}}}}],
        }],
    }


def kubelet_command(binary: Path, layout: NodeLayout, kubeconfig: Path) -> list[str]:
    return [
        str(binary), f"--config={layout.kubelet_config}", f"--kubeconfig={kubeconfig}",
        f"--root-dir={layout.kubelet_root}", f"--cert-dir={layout.kubelet_root / 'pki'}",
        f"--hostname-override={layout.name}", f"--node-ip={GATEWAY}",
        f"--node-labels={NODE_LABEL}={NODE_LABEL_VALUE}", "--v=1",
    ]


def mounts_under(mounts_text: str, root: Path) -> list[str]:
    """Mount points at or below ``root`` in /proc/self/mounts, deepest first (the order to
    release them in). Octal escapes (``\\040`` for a space) are decoded."""
    prefix = str(root).rstrip("/") + "/"
    found = []
    for line in mounts_text.splitlines():
        fields = line.split()
        if len(fields) < 2:
            continue
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[1])
        if point == str(root) or point.startswith(prefix):
            found.append(point)
    return sorted(set(found), key=lambda p: (-p.count("/"), p))


# -- host I/O ------------------------------------------------------------------------------
def _run(*command: str, check: bool = True, input: bytes | None = None,
         timeout: float = 120) -> subprocess.CompletedProcess[bytes]:
    result = subprocess.run(list(command), input=input, capture_output=True, check=False,
                            timeout=timeout)
    if check and result.returncode != 0:
        raise NodeError(f"{' '.join(command[:4])} failed (exit {result.returncode}): "
                        f"{result.stderr.decode(errors='replace').strip()[-600:]}")
    return result


def preflight() -> None:
    """What the host must offer; each failure says how to get it."""
    if os.geteuid() != 0:
        raise NodeError("a real kubelet runs pods on this host and needs root: run as root "
                        "(CI and our build machines do)")
    if (Path("/sys/class/net") / BRIDGE).exists():
        raise NodeError(f"bridge {BRIDGE} exists: another cluster with a real kubelet runs here "
                        "(berthmaster dev down --name NAME), or a crashed one left it (ip link "
                        f"delete {BRIDGE})")
    needs = {"containerd": "apt-get install containerd (comes with docker.io)",
             "ctr": "apt-get install containerd", "runc": "apt-get install runc",
             "iptables": "apt-get install iptables", "ip": "apt-get install iproute2"}
    missing = [f"{tool} ({hint})" for tool, hint in needs.items() if shutil.which(tool) is None]
    if not (CNI_BIN_DIR / "bridge").is_file():
        missing.append(f"CNI plugins in {CNI_BIN_DIR} (apt-get install "
                       "containernetworking-plugins)")
    if missing:
        raise NodeError("a real kubelet needs: " + "; ".join(missing))


class NodeHost:
    """The host-side set-up and teardown of one real node."""

    def __init__(self, layout: NodeLayout, say: Say = print):
        self.layout = layout
        self.say = say

    def ctr(self, *args: str, input: bytes | None = None, check: bool = True,
            timeout: float = 600) -> subprocess.CompletedProcess[bytes]:
        return _run("ctr", "--address", str(self.layout.containerd_socket), "--namespace",
                    "k8s.io", *args, input=input, check=check, timeout=timeout)

    # set-up
    def prepare(self, api_port: int) -> None:
        for folder in (self.layout.containerd_root, self.layout.containerd_state,
                       self.layout.cni_conf_dir, self.layout.cni_data_dir,
                       self.layout.kubelet_root, self.layout.registry_hosts_dir):
            folder.mkdir(parents=True, exist_ok=True)
        names = sorted(p.name for p in NETNS_DIR.iterdir()) if NETNS_DIR.is_dir() else []
        self.layout.netns_before.write_text("\n".join(names))
        if _run("ip", "link", "show", BRIDGE, check=False).returncode != 0:
            _run("ip", "link", "add", BRIDGE, "type", "bridge")
        addresses = _run("ip", "-4", "addr", "show", "dev", BRIDGE).stdout.decode()
        if f"inet {GATEWAY}/" not in addresses:
            _run("ip", "addr", "add", f"{GATEWAY}/{POD_SUBNET.split('/')[1]}", "dev", BRIDGE)
        _run("ip", "link", "set", BRIDGE, "up")
        Path("/proc/sys/net/ipv4/ip_forward").write_text("1")
        # The API server listens on every address so pods reach it through the bridge; refuse
        # its port anywhere else.
        for rule in self.guard_rules("-I", api_port):
            _run("iptables", *rule)
        (self.layout.root / "api-port").write_text(str(api_port))

    @staticmethod
    def guard_rules(action: str, api_port: int) -> list[list[str]]:
        """iptables arguments, in insertion order: drop the API port unless it arrives on
        loopback or the bridge (inserted at the top, the ACCEPT ends up first)."""
        common = ["INPUT", "-p", "tcp", "--dport", str(api_port), "-m", "comment",
                  "--comment", "berthmaster dev apiserver"]
        return [[action, *common, "!", "-i", "lo", "-j", "DROP"],
                [action, *common, "-i", BRIDGE, "-j", "ACCEPT"]]

    def load_images(self, names: Iterable[str], aliases: dict[str, Iterable[str]] | None = None
                    ) -> None:
        """Copy images from Docker into the node's containerd (as ``kind load`` does)."""
        names = list(names)
        saved = subprocess.run(["docker", "save", *names], capture_output=True, check=False)
        if saved.returncode != 0:
            raise NodeError(f"docker save {' '.join(names)} failed: "
                            f"{saved.stderr.decode(errors='replace').strip()}: build them first "
                            "(make image; berthmaster dev image --node-images)")
        self.ctr("images", "import", "--no-unpack", "-", input=saved.stdout)
        for source, targets in (aliases or {}).items():
            for target in targets:
                self.ctr("images", "rm", target, check=False)
                self.ctr("images", "tag", _qualified(source), target)

    # teardown
    def remove_containers(self) -> None:
        """Kill and remove every container of the node's containerd (before it stops)."""
        if not self.layout.containerd_socket.exists():
            return
        listed = self.ctr("tasks", "ls", "-q", check=False, timeout=30)
        for task in listed.stdout.decode().split():
            self.ctr("tasks", "kill", "--signal", "SIGKILL", task, check=False, timeout=30)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            running = self.ctr("tasks", "ls", "-q", check=False,
                               timeout=30).stdout.decode().split()
            for task in running:
                self.ctr("tasks", "delete", task, check=False, timeout=30)
            if not running:
                break
            time.sleep(0.5)
        for container in self.ctr("containers", "ls", "-q", check=False,
                                  timeout=30).stdout.decode().split():
            self.ctr("containers", "rm", container, check=False, timeout=30)

    def sandbox_netns(self) -> list[str]:
        """The network namespaces of the node's pod sandboxes (from each container's OCI
        spec): the ones to delete when only this node goes, not its neighbours'."""
        found = set()
        for container in self.ctr("containers", "ls", "-q", check=False,
                                  timeout=30).stdout.decode().split():
            info = self.ctr("containers", "info", container, check=False, timeout=30)
            with contextlib.suppress(ValueError):
                spec = json.loads(info.stdout.decode() or "{}").get("Spec") or {}
                for namespace in (spec.get("linux") or {}).get("namespaces") or []:
                    path = str(namespace.get("path") or "")
                    if namespace.get("type") == "network" and path.startswith(f"{NETNS_DIR}/"):
                        found.add(Path(path).name)
        return sorted(found)

    def release_node(self, netns: Iterable[str] = ()) -> None:
        """After the node's processes stopped: its shims, its mounts, the given namespaces."""
        socket_path = str(self.layout.containerd_socket)
        for pid in pids_with_argument(socket_path):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            mounts = Path("/proc/self/mounts").read_text()
            for point in mounts_under(mounts, self.layout.root):
                _run("umount", "-l", point, check=False)
        for name in netns:
            _run("ip", "netns", "delete", name, check=False)

    def release_host(self, kube_proxy: Path | None) -> None:
        """After every node process stopped: shims, mounts, namespaces, rules, the bridge."""
        before = set(self.layout.netns_before.read_text().split()) if (
            self.layout.netns_before.exists()) else None
        created = [] if before is None or not NETNS_DIR.is_dir() else [
            netns.name for netns in NETNS_DIR.iterdir()
            if netns.name.startswith("cni-") and netns.name not in before]
        self.release_node(created)
        if kube_proxy is not None and kube_proxy.is_file():
            _run(str(kube_proxy), "--cleanup", check=False)
        port_file = self.layout.root / "api-port"
        if port_file.exists():
            for rule in self.guard_rules("-D", int(port_file.read_text())):
                _run("iptables", *rule, check=False)
        _run("ip", "link", "delete", BRIDGE, check=False)


def _qualified(image: str) -> str:
    """How containerd names an image Docker calls ``image`` (``berthmaster:dev`` is
    ``docker.io/library/berthmaster:dev``)."""
    first = image.split("/", 1)[0]
    if "/" not in image:
        return f"docker.io/library/{image}"
    if "." in first or ":" in first or first == "localhost":
        return image
    return f"docker.io/{image}"


def pids_with_argument(argument: str) -> list[int]:
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argument.encode() in args:
            pids.append(int(proc.name))
    return pids
