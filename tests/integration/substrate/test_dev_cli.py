"""`berthmaster dev up|status|env|down` as a user runs them: idempotent, clear, leaves nothing."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from berthmaster.tooling.devcluster.cluster import RunningCluster


def dev(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    # The console script, as a user runs it (and never `python -m` from the checkout, where
    # operator/ would shadow the standard library's operator module).
    script = str(Path(sys.executable).parent / "berthmaster")
    return subprocess.run([script, "dev", *args],
                          capture_output=True, text=True, env=env, timeout=240)


def test_up_is_idempotent_and_down_leaves_no_process(cluster: RunningCluster,
                                                     tmp_path: Path) -> None:
    # `cluster` ensures the binaries are built; this test runs a second, separate cluster.
    env = dict(os.environ, BERTHMASTER_STATE=str(tmp_path))
    name = ["--name", "cli"]
    first = dev(*name, "up", env=env)
    assert first.returncode == 0, first.stderr + first.stdout
    assert "export KUBECONFIG=" in first.stdout
    second = dev(*name, "up", env=env)
    assert second.returncode == 0
    assert "already running" in second.stdout
    status = dev(*name, "status", env=env)
    assert status.returncode == 0, status.stdout
    pids = [int(line.split()[2]) for line in status.stdout.splitlines()[1:]
            if line and line.split()[0].startswith(("etcd", "kube-", "kwok"))]
    assert len(pids) == 4
    env_line = dev(*name, "env", env=env).stdout.strip()
    kubeconfig = env_line.split("=", 1)[1]
    nodes = subprocess.run([str(cluster.binary("kubectl")), "--kubeconfig", kubeconfig,
                            "get", "namespaces", "-o", "name"],
                           capture_output=True, text=True, timeout=60)
    assert "namespace/default" in nodes.stdout
    down = dev(*name, "down", env=env)
    assert down.returncode == 0
    assert not any(Path(f"/proc/{pid}").exists() and
                   "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2] for pid in pids)
    assert not (tmp_path / "cli").exists()
    assert dev(*name, "status", env=env).returncode == 1


def test_a_taken_port_is_reported_clearly(cluster: RunningCluster, tmp_path: Path) -> None:
    env = dict(os.environ, BERTHMASTER_STATE=str(tmp_path))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        result = dev("--name", "taken", "up", "--port", str(port), env=env)
    assert result.returncode == 1
    assert f"port {port} on 127.0.0.1 is already in use" in result.stderr
    assert "Traceback" not in result.stderr
