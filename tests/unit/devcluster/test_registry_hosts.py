"""The real node's containerd reaches a plain-HTTP registry through its hosts directory
(containerd docs/hosts.md: ``[plugins."io.containerd.grpc.v1.cri".registry] config_path``, one
``<host:port>/hosts.toml`` a registry, ``server`` and ``[host."<url>"] capabilities``)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from berthmaster.tooling.devcluster import kubelet

LAYOUT = kubelet.NodeLayout("e2e-kubelet", Path("/state/e2e/node"))


def test_containerd_reads_registry_hosts_from_the_node_folder() -> None:
    config = tomllib.loads(kubelet.containerd_config(LAYOUT, "berthmaster.local/pause:dev"))
    registry = config["plugins"]["io.containerd.grpc.v1.cri"]["registry"]
    assert registry == {"config_path": str(LAYOUT.registry_hosts_dir)}


def test_a_loopback_registry_is_pulled_over_plain_http() -> None:
    hosts = tomllib.loads(kubelet.registry_hosts_toml("127.0.0.1:40123"))
    assert hosts == {"server": "http://127.0.0.1:40123",
                     "host": {"http://127.0.0.1:40123": {"capabilities": ["pull", "resolve"]}}}


def test_hosts_toml_lands_in_the_host_port_folder(tmp_path: Path) -> None:
    layout = kubelet.NodeLayout("n", tmp_path)
    path = kubelet.write_registry_hosts(layout, "127.0.0.1:5000")
    assert path == tmp_path / "containerd" / "certs.d" / "127.0.0.1:5000" / "hosts.toml"
    assert path.read_text() == kubelet.registry_hosts_toml("127.0.0.1:5000")


@pytest.mark.parametrize("host", ["", "http://127.0.0.1:5000", "127.0.0.1:5000/path"])
def test_a_registry_given_with_a_scheme_or_path_is_refused(host: str) -> None:
    with pytest.raises(ValueError, match="give host:port"):
        kubelet.registry_hosts_toml(host)
