"""Every command fails fast and readably: one line naming the problem and the fix, exit 2 for
configuration and 3 for connectivity, a traceback only with ``-v``.

Each case runs the real CLI as a subprocess (``python -m berthmaster.cli``), as an administrator
would, and reads its stderr and exit status; the API-server cases talk to the session's real
kube-apiserver or to a closed loopback port. Before this change the scheduler printed 45- to
86-line tracebacks (exit 1) and ``berthmaster operator --kubeconfig /nonexistent`` never exited.

Upstream reference for the exit contract: kube-scheduler's cmd/kube-scheduler/app/server.go
``NewSchedulerCommand`` prints the error and exits non-zero without a stack trace;
client-go's tools/clientcmd ``ClientConfig`` errors name the kubeconfig.
"""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from berthmaster.tooling.python import BERTHMASTER_CLI

# Commands that connect, with flags that keep them from binding ports or electing.
CONNECTING = {
    "scheduler": ["scheduler", "--no-leader-elect", "--metrics-bind-address="],
    "operator": ["operator", "--liveness=", "--standalone"],
    "admission": ["admission", "--listen=127.0.0.1:1"],
}


def berthmaster(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, **(env or {})}
    return subprocess.run([*BERTHMASTER_CLI, *argv], capture_output=True,
                          text=True, timeout=120, env=environment, check=False)


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    """The last stderr line (retries may log warnings before it), checked to be no traceback."""
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines, result
    return lines[-1]


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def kubeconfig(path: Path, server: str, user: dict[str, Any], ca: str | None = None) -> Path:
    cluster: dict[str, Any] = {"server": server}
    if ca:
        cluster["certificate-authority-data"] = ca
    else:
        cluster["insecure-skip-tls-verify"] = True
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    return path


@pytest.mark.parametrize("command", sorted(CONNECTING))
def test_nonexistent_kubeconfig(command: str) -> None:
    result = berthmaster(*CONNECTING[command], "--kubeconfig", "/nonexistent/kubeconfig")
    assert result.returncode == 2
    assert one_line(result) == (
        f"berthmaster {command}: the kubeconfig /nonexistent/kubeconfig does not exist; pass "
        "--kubeconfig with an existing file (or run in a Pod, without --kubeconfig, for the "
        "in-cluster config)")


@pytest.mark.parametrize("command", sorted(CONNECTING))
@pytest.mark.parametrize(("content", "reason"), [
    ("clusters: [1\n", "while parsing a flow sequence"),
    ("apiVersion: v1\nkind: Config\n", "Expected key current-context"),
    ("\x89PNG\r\n", "can't decode byte"),
])
def test_malformed_kubeconfig(command: str, content: str, reason: str, tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_bytes(content.encode("latin-1"))
    result = berthmaster(*CONNECTING[command], "--kubeconfig", str(path))
    assert result.returncode == 2
    line = one_line(result)
    assert line.startswith(f"berthmaster {command}: the kubeconfig {path} is not valid (")
    assert reason in line
    assert line.endswith("fix it or pass --kubeconfig with a working one "
                         "(kubectl --kubeconfig FILE version checks one)")


@pytest.mark.parametrize("command", sorted(CONNECTING))
def test_no_kubeconfig_outside_a_pod(command: str, tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "KUBECONFIG": "", "KUBERNETES_SERVICE_HOST": "",
           "KUBERNETES_SERVICE_PORT": ""}
    result = berthmaster(*CONNECTING[command], env=env)
    assert result.returncode == 2
    assert one_line(result) == (
        f"berthmaster {command}: no kubeconfig and not running in a Pod "
        "(KUBERNETES_SERVICE_HOST is not set); pass --kubeconfig FILE or set KUBECONFIG")


@pytest.mark.parametrize("command", sorted(CONNECTING))
def test_unreachable_api_server_after_bounded_retries(command: str, tmp_path: Path) -> None:
    server = f"https://127.0.0.1:{closed_port()}"
    path = kubeconfig(tmp_path / "kubeconfig", server, {"token": "t"})
    result = berthmaster(*CONNECTING[command], "--kubeconfig", str(path))
    assert result.returncode == 3
    line = one_line(result)
    assert line.startswith(f"berthmaster {command}: cannot reach the API server at {server} "
                           "after 4 attempts (Cannot connect to host")
    assert line.endswith("check that it is running and that the kubeconfig's server address "
                         "is right")
    # each retry is logged, bounded: three retries before giving up
    assert result.stderr.count("is not answering") == 3


def test_deschedule_unreachable_api_server(tmp_path: Path) -> None:
    server = f"https://127.0.0.1:{closed_port()}"
    path = kubeconfig(tmp_path / "kubeconfig", server, {"token": "t"})
    policy = tmp_path / "policy.yaml"
    policy.write_text("apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles:\n"
                      "- name: p\n  pluginConfig: [{name: RemoveDuplicates}]\n"
                      "  plugins: {balance: {enabled: [RemoveDuplicates]}}\n")
    result = berthmaster("deschedule", "--policy-config-file", str(policy),
                         "--kubeconfig", str(path))
    assert result.returncode == 3
    assert one_line(result).startswith(
        f"berthmaster deschedule: cannot reach the API server at {server} after 4 attempts")


def test_refused_credentials_on_the_real_api_server(cluster: Any, tmp_path: Path) -> None:
    admin = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    real = admin["clusters"][0]["cluster"]
    path = kubeconfig(tmp_path / "kubeconfig", real["server"], {"token": "not-a-valid-token"},
                      ca=real.get("certificate-authority-data"))
    result = berthmaster(*CONNECTING["scheduler"], "--kubeconfig", str(path))
    assert result.returncode == 2
    assert one_line(result) == (
        f"berthmaster scheduler: the API server at {real['server']} refused the credentials "
        "(401 Unauthorized); renew the kubeconfig's token or certificate")


def test_verbose_adds_the_traceback() -> None:
    result = berthmaster(*CONNECTING["scheduler"], "-v", "--kubeconfig", "/nonexistent/k")
    assert result.returncode == 2
    assert "Traceback (most recent call last)" in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith(
        "berthmaster scheduler: the kubeconfig /nonexistent/k does not exist")


BINARY = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR"


@pytest.mark.parametrize(("argv", "prefix"), [
    (["scheduler", "--no-leader-elect", "--metrics-bind-address=", "--policy"],
     "berthmaster scheduler: --policy: "),
    (["deschedule", "--policy-config-file"], "berthmaster deschedule: --policy-config-file: "),
    (["simulate", "--cluster"], "berthmaster simulate: "),
])
def test_binary_input_files(argv: list[str], prefix: str, tmp_path: Path) -> None:
    binary = tmp_path / "image.png"
    binary.write_bytes(BINARY)
    result = berthmaster(*argv, str(binary))
    assert result.returncode == 2
    assert one_line(result) == f"{prefix}{binary} is a binary file, not YAML or JSON; give " \
                               "the text file"


NODE = ("apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n"
        "status: {allocatable: {cpu: '2', memory: 4Gi, pods: '110'}}\n---\n")


@pytest.mark.parametrize(("pod", "problem"), [
    ("metadata: {name: a, namespace: default}\nspec: [1]\n",
     "Pod default/a: spec must be an object, got [1]"),
    ("metadata: {name: b, namespace: default}\nspec: {schedulerName: berthmaster, "
     "containers: x}\n", "Pod default/b: spec.containers must be a list, got 'x'"),
    ("metadata: {name: c, namespace: default}\nspec: {nodeName: n1, containers: [{name: c, "
     "resources: {requests: [1]}}]}\n",
     "Pod default/c: spec.containers[0].resources.requests must be an object, got [1]"),
    ("metadata: [1]\nspec: {}\n", "Pod <unnamed>: metadata must be an object, got [1]"),
])
def test_malformed_pods_in_a_simulate_snapshot(pod: str, problem: str, tmp_path: Path) -> None:
    snapshot = tmp_path / "cluster.yaml"
    snapshot.write_text(NODE + "apiVersion: v1\nkind: Pod\n" + pod)
    result = berthmaster("simulate", "--cluster", str(snapshot))
    assert result.returncode == 2
    assert one_line(result) == f"berthmaster simulate: {snapshot}: {problem}; fix or remove " \
                               "the object"
