"""Any number of real nodes on this host, started and stopped one at a time (the kubelet
machine provider's instances: berthmaster.tooling.kubelet_provider).

Why a module beside :mod:`.kubelet`: ``berthmaster dev up --kubelets 1`` starts one node as
part of a cluster and stops it with the cluster; a Machine's node comes and goes on its own,
beside others. It reuses that module's pieces (:class:`~.kubelet.NodeLayout`, the containerd,
CNI and kubelet configurations, :class:`~.kubelet.NodeHost`'s container removal and release)
and adds what several nodes on one host need:

- **network**: one bridge for all of them, ``BRIDGE`` with ``GATEWAY`` in ``SUBNET`` (not the
  dev cluster's ``bm0``, so both can run); node ``slot`` N (1..254, its folder's name)
  hands out ``10.89.N.2-254`` from its own host-local data. The kubelets listen on the gateway,
  each on its own port. The bridge goes when the last node goes.
- **cgroups**: the kubelet removes every pod cgroup under its ``kubepods`` that it does not run
  (killing what is inside), so each node gets its own ``cgroupRoot`` (``/berthmaster/<name>``),
  created here and removed when the node goes.
- **no kube-proxy**: its iptables rules are the host's, one set for every node; the dev
  cluster's node runs one when Services must work (docs/providers.md).
- **identity**: a client certificate ``system:node:<name>`` (group ``system:nodes``) issued from
  the cluster's CA, so the Node authorizer and NodeRestriction treat the kubelet as that node.
- **images**: the sandbox image is compiled from ``hack/image/pause.c`` and imported as an OCI
  archive (:mod:`.oci`), no Docker daemon or registry needed; pods may use it too.

Processes are found by the configuration file on their command line, so the state survives the
operator's restart: a node *exists* while its folder does (its kubelet may have died: that is a
NotReady node, for a MachineHealthCheck to judge), and *runs* while its kubelet does.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from berthmaster.tooling.devcluster import build, oci
from berthmaster.tooling.devcluster import kubelet as node
from berthmaster.tooling.devcluster.certs import Pki, issue_client, kubeconfig
from berthmaster.tooling.devcluster.images import PAUSE_IMAGE, image_dir
from berthmaster.tooling.devcluster.ports import free_port

BRIDGE = "bmm0"
GATEWAY = "10.89.0.1"
SUBNET = "10.89.0.0/16"
CGROUP_PARENT = "berthmaster"
CGROUP_FS = Path("/sys/fs/cgroup")
SLOTS = range(1, 255)

Say = Callable[[str], None]
_LOCK = threading.Lock()  # one host: set-up and teardown of its nodes, one at a time


def pool(slot: int) -> tuple[str, str]:
    """The pod addresses of node ``slot``."""
    return f"10.89.{slot}.2", f"10.89.{slot}.254"


def free_slot(taken: set[int]) -> int:
    for slot in SLOTS:
        if slot not in taken:
            return slot
    raise node.NodeError(f"all {len(SLOTS)} node slots of bridge {BRIDGE} are taken: delete "
                         "Machines of the kubelet provider first")


def kubelet_settings(layout: node.NodeLayout, ca_cert: Path, port: int, healthz_port: int,
                     slot: int, provider_id: str, taints: list[dict[str, Any]],
                     max_pods: int) -> dict[str, Any]:
    """The dev node's kubelet configuration, for one node among several."""
    config = node.kubelet_config(layout, ca_cert, port, healthz_port)
    config.update(address=GATEWAY, podCIDR=f"10.89.{slot}.0/24", providerID=provider_id,
                  cgroupRoot=f"/{CGROUP_PARENT}/{layout.name}", maxPods=max_pods)
    if taints:
        config["registerWithTaints"] = taints
    return config


def kubelet_command(layout: node.NodeLayout, kubeconfig_path: Path) -> list[str]:
    command = node.kubelet_command(build.binary_path("kubelet"), layout, kubeconfig_path)
    return [f"--node-ip={GATEWAY}" if arg.startswith("--node-ip=") else arg for arg in command]


def root_problem(root: Path) -> str | None:
    """Whether the nodes' sockets fit under ``root`` (a Unix socket's path has 108 bytes and
    containerd allows 104; the longest here is
    ``<root>/<slot>/kubelet/device-plugins/kubelet.sock``)."""
    longest = len(str(root.absolute())) + len("/254/kubelet/device-plugins/kubelet.sock")
    if longest > 104:
        return (f"the nodes' folder {root} is too long for the Unix sockets inside it ("
                f"{longest} of 104 characters); choose a shorter one")
    return None


def host_problems() -> list[str]:
    """What this host lacks to run real nodes, each with how to get it."""
    problems = []
    if os.geteuid() != 0:
        problems.append("the operator runs as a user that is not root: a real kubelet runs "
                        "pods on this host and needs root")
    needs = {"containerd": "apt-get install containerd", "ctr": "apt-get install containerd",
             "runc": "apt-get install runc", "ip": "apt-get install iproute2",
             "gcc": "apt-get install gcc libc6-dev (to build the pod sandbox image)"}
    problems += [f"{tool} is not installed ({hint})" for tool, hint in needs.items()
                 if shutil.which(tool) is None]
    if not (node.CNI_BIN_DIR / "bridge").is_file():
        problems.append(f"no CNI plugins in {node.CNI_BIN_DIR} (apt-get install "
                        "containernetworking-plugins)")
    if build.missing_binaries(("kubelet",)):
        problems.append("the kubelet is not built (berthmaster dev up --kubelets 1 builds "
                        "it once, as make e2e MODE=kubelet does)")
    return problems


class HostNodes:
    """The real nodes under ``root`` (one folder each), joined to ``server`` with identities
    from ``pki``'s CA (both needed only to start nodes)."""

    def __init__(self, root: Path, pki: Pki | None = None, server: str = "",
                 say: Say = print):
        self.root = root
        self.pki = pki
        self.server = server
        self.say = say

    def layouts(self) -> dict[str, node.NodeLayout]:
        """The nodes here by name. A node's folder is named by its slot, not its name: the
        sockets containerd and the kubelet make inside must stay within the 108 bytes of a
        Unix socket's path (:func:`root_problem`)."""
        found = {}
        for record in self.root.glob("*/name"):
            with contextlib.suppress(OSError):
                name = record.read_text().strip()
                found[name] = node.NodeLayout(name, record.parent)
        return found

    def find(self, name: str) -> node.NodeLayout | None:
        return self.layouts().get(name)

    def kubelet_running(self, name: str) -> bool:
        layout = self.find(name)
        return layout is not None and bool(
            node.pids_with_argument(f"--config={layout.kubelet_config}"))

    def processes(self, name: str) -> list[int]:
        """Every process of the node: containerd, its shims, the kubelet."""
        layout = self.find(name)
        if layout is None:
            return []
        return sorted({*node.pids_with_argument(f"--config={layout.containerd_config}"),
                       *node.pids_with_argument(str(layout.containerd_socket)),
                       *node.pids_with_argument(f"--config={layout.kubelet_config}")})

    # -- create ------------------------------------------------------------------------------
    def start(self, name: str, provider_id: str, taints: list[dict[str, Any]],
              max_pods: int) -> None:
        """Start the node's containerd and kubelet (again, when they stopped); idempotent."""
        if self.pki is None or not self.server:
            raise node.NodeError("starting a node needs the cluster's CA and API server")
        with _LOCK:
            layout = self.find(name)
            if layout is None:
                taken = {int(p.parent.name) for p in self.root.glob("*/name")
                         if p.parent.name.isdigit()}
                slot = free_slot(taken)
                layout = node.NodeLayout(name, self.root / str(slot))
                layout.root.mkdir(parents=True, exist_ok=True)
                (layout.root / "name").write_text(name)
                self._prepare(layout, slot)
            slot = int(layout.root.name)
            if self.kubelet_running(name):
                return
            logs = layout.root / "logs"
            logs.mkdir(exist_ok=True)
            if not node.pids_with_argument(f"--config={layout.containerd_config}"):
                containerd = self._spawn(["containerd", f"--config={layout.containerd_config}"],
                                         logs / "containerd.log")
                host = node.NodeHost(layout)
                self._wait(lambda: host.ctr("version", check=False, timeout=10).returncode == 0,
                           containerd, f"containerd of node {name}", logs / "containerd.log")
                self._load_pause(layout)
            layout.kubelet_config.write_text(yaml.safe_dump(kubelet_settings(
                layout, self.pki.ca_cert, free_port(), free_port(), slot, provider_id, taints,
                max_pods)))
            self._spawn(kubelet_command(layout, layout.root / "kubelet.kubeconfig"),
                        logs / "kubelet.log")

    def _prepare(self, layout: node.NodeLayout, slot: int) -> None:
        assert self.pki is not None
        for folder in (layout.containerd_root, layout.containerd_state, layout.cni_conf_dir,
                       layout.cni_data_dir, layout.kubelet_root):
            folder.mkdir(parents=True, exist_ok=True)
        if not (Path("/sys/class/net") / BRIDGE).exists():
            node._run("ip", "link", "add", BRIDGE, "type", "bridge")
            node._run("ip", "addr", "add", f"{GATEWAY}/{SUBNET.split('/')[1]}", "dev", BRIDGE)
        node._run("ip", "link", "set", BRIDGE, "up")
        make_cgroup(f"{CGROUP_PARENT}/{layout.name}")
        layout.containerd_config.write_text(node.containerd_config(layout, PAUSE_IMAGE))
        (layout.cni_conf_dir / "10-berthmaster.conflist").write_text(json.dumps(
            node.cni_config(layout, BRIDGE, SUBNET, GATEWAY, pool(slot)), indent=2))
        cert, key = layout.root / "kubelet.crt", layout.root / "kubelet.key"
        issue_client(self.pki, cert, key, f"system:node:{layout.name}", ("system:nodes",))
        config = kubeconfig(self.server, self.pki, "kubelet", layout.name)
        config["users"] = [{"name": f"{layout.name}-kubelet", "user": {
            "client-certificate": str(cert), "client-key": str(key)}}]
        path = layout.root / "kubelet.kubeconfig"
        path.write_text(yaml.safe_dump(config))
        path.chmod(0o600)

    def _load_pause(self, layout: node.NodeLayout) -> None:
        archive = self.root / "pause.oci.tar"
        if not archive.is_file():
            binary = self.root / "pause"
            node._run("gcc", "-Os", "-static", "-s", "-o", str(binary),
                      str(image_dir() / "pause.c"))
            archive.write_bytes(oci.one_file_archive(
                PAUSE_IMAGE, {"pause": (binary.read_bytes(), 0o755)}, ["/pause"]))
        host = node.NodeHost(layout)
        host.ctr("images", "import", "-", input=archive.read_bytes())
        for alias in node.PAUSE_ALIASES:
            host.ctr("images", "rm", alias, check=False)
            host.ctr("images", "tag", PAUSE_IMAGE, alias)

    @staticmethod
    def _spawn(command: list[str], log: Path) -> subprocess.Popen[bytes]:
        with log.open("ab") as out:
            # Its own session: the node outlives the operator, as a machine would.
            return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)

    @staticmethod
    def _wait(check: Callable[[], bool], process: subprocess.Popen[bytes], what: str,
              log: Path, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if process.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace")[-800:] if log.exists() else ""
                raise node.NodeError(f"{what} did not start; its log ({log}) "
                                     f"ends:\n{tail}")
            time.sleep(0.3)

    # -- delete ------------------------------------------------------------------------------
    def remove(self, name: str) -> None:
        """Stop the kubelet, remove every container, stop containerd, release the node's
        mounts, namespaces and cgroups, delete its folder; the bridge goes with the last
        node. A node already gone is success."""
        with _LOCK:
            layout = self.find(name)
            if layout is None:
                return
            _stop(node.pids_with_argument(f"--config={layout.kubelet_config}"))
            host = node.NodeHost(layout, self.say)
            netns = host.sandbox_netns() if layout.containerd_socket.exists() else []
            host.remove_containers()
            _stop(node.pids_with_argument(f"--config={layout.containerd_config}"))
            host.release_node(netns)
            remove_cgroup(f"{CGROUP_PARENT}/{name}")
            shutil.rmtree(layout.root, ignore_errors=True)
            if not any(self.root.glob("*/name")):
                node._run("ip", "link", "delete", BRIDGE, check=False)
                remove_cgroup(CGROUP_PARENT)


def _stop(pids: list[int], grace: float = 10) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _hierarchies() -> list[Path]:
    """The mounted cgroup hierarchies (v1 controllers, or the single v2 one)."""
    if (CGROUP_FS / "cgroup.controllers").exists():
        return [CGROUP_FS]
    return sorted(p for p in CGROUP_FS.iterdir()
                  if p.is_dir() and not p.is_symlink() and (p / "cgroup.procs").exists())


def node_cgroups(name: str) -> list[Path]:
    """The node's cgroups that still exist (none once it is removed: a cgroup with a process
    left in it cannot be)."""
    return [path for path in (h / CGROUP_PARENT / name for h in _hierarchies())
            if path.is_dir()]


def make_cgroup(relative: str) -> None:
    """Create ``relative`` in every hierarchy (a cpuset cgroup gets its parent's CPUs and
    memory nodes, without which no process may join it)."""
    for hierarchy in _hierarchies():
        path = hierarchy
        for part in relative.split("/"):
            parent, path = path, path / part
            path.mkdir(exist_ok=True)
            for setting in ("cpuset.cpus", "cpuset.mems"):
                if (path / setting).exists() and not (path / setting).read_text().strip():
                    (path / setting).write_text((parent / setting).read_text())


def remove_cgroup(relative: str) -> None:
    """Remove ``relative`` and every cgroup below it (all empty by now), deepest first."""
    for hierarchy in _hierarchies():
        top = hierarchy / relative
        if not top.is_dir():
            continue
        for folder, _, _ in sorted(os.walk(top), key=lambda entry: -len(entry[0])):
            with contextlib.suppress(OSError):
                os.rmdir(folder)
