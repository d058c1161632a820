"""The kubelet provider's pure parts: the providerSpec's validation, the environment it needs,
the node's kubelet settings, slots and addresses, and the sandbox image archive.

Upstream references: machine-api-operator pkg/controller/machine/actuator.go (an invalid
providerSpec is terminal, InvalidMachineConfiguration); kubernetes
pkg/kubelet/apis/config/types.go (cgroupRoot, providerID, registerWithTaints, maxPods);
opencontainers/image-spec image-layout.md (oci-layout, index.json, blobs/sha256).
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

from berthmaster.tooling.devcluster import host_nodes, oci
from berthmaster.tooling.devcluster import kubelet as node
from berthmaster.tooling.kubelet_provider import (
    PKI_VARIABLE,
    provider_id,
    settings_problems,
    taints,
    validate,
)


def machine(name: str = "w-1", **value: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns"},
            "spec": {"providerSpec": {"value": {"apiVersion": "berthmaster.io/v1alpha1",
                                                "kind": "KubeletMachineProviderSpec",
                                                **value}},
                     "taints": [{"key": "k", "value": "v", "effect": "NoSchedule",
                                 "timeAdded": "2026-01-01T00:00:00Z"}]}}


def test_a_plain_spec_is_valid_and_names_its_provider_id() -> None:
    assert validate(machine(maxPods=20)) == []
    assert provider_id(machine()) == "berthmaster-kubelet://w-1"
    assert taints(machine()) == [{"key": "k", "value": "v", "effect": "NoSchedule"}]


@pytest.mark.parametrize(("value", "expected"), [
    ({"maxPods": 0}, "spec.providerSpec.value.maxPods: 0 is not a positive whole number"),
    ({"maxPods": "ten"}, "spec.providerSpec.value.maxPods: 'ten'"),
    ({"instanceType": "m5"}, "unknown field(s) instanceType; KubeletMachineProviderSpec accepts"),
])
def test_bad_specs_name_the_field_and_the_fix(value: dict[str, Any], expected: str) -> None:
    problems = validate(machine(**value))
    assert len(problems) == 1 and expected in problems[0], problems
    assert problems[0].startswith("Machine w-1: ")


def test_a_name_no_node_may_carry_is_refused() -> None:
    assert "is not a valid Node name" in validate(machine("W_1"))[0]


def test_the_ca_folder_must_be_set_and_hold_the_ca(tmp_path: Path) -> None:
    assert "is not set" in settings_problems({})[0]
    assert "has no ca.crt or ca.key" in settings_problems({PKI_VARIABLE: str(tmp_path)})[0]
    (tmp_path / "ca.crt").write_text("x")
    (tmp_path / "ca.key").write_text("x")
    assert settings_problems({PKI_VARIABLE: str(tmp_path)}) == []


def test_slots_and_their_addresses() -> None:
    assert host_nodes.free_slot({1, 2, 4}) == 3
    assert host_nodes.pool(3) == ("10.89.3.2", "10.89.3.254")
    with pytest.raises(node.NodeError, match="all 254 node slots"):
        host_nodes.free_slot(set(host_nodes.SLOTS))


def test_long_node_folders_are_refused_for_their_sockets() -> None:
    assert host_nodes.root_problem(Path("/var/lib/bm")) is None
    assert "too long for the Unix sockets" in str(host_nodes.root_problem(Path("/" + "x" * 80)))


def test_kubelet_settings_keep_each_node_apart() -> None:
    layout = node.NodeLayout("w-1", Path("/s/3"))
    config = host_nodes.kubelet_settings(layout, Path("/ca.crt"), 1, 2, 3,
                                         "berthmaster-kubelet://w-1",
                                         [{"key": "k", "effect": "NoSchedule"}], 20)
    assert config["cgroupRoot"] == "/berthmaster/w-1"
    assert config["providerID"] == "berthmaster-kubelet://w-1"
    assert config["registerWithTaints"] == [{"key": "k", "effect": "NoSchedule"}]
    assert (config["address"], config["port"], config["healthzPort"]) == ("10.89.0.1", 1, 2)
    assert (config["podCIDR"], config["maxPods"]) == ("10.89.3.0/24", 20)
    assert config["containerRuntimeEndpoint"] == "unix:///s/3/containerd/containerd.sock"
    cni = node.cni_config(layout, host_nodes.BRIDGE, host_nodes.SUBNET, host_nodes.GATEWAY,
                          host_nodes.pool(3))
    plugin = cni["plugins"][0]
    assert plugin["bridge"] == "bmm0"
    assert plugin["ipam"]["ranges"] == [[{"subnet": "10.89.0.0/16", "gateway": "10.89.0.1",
                                          "rangeStart": "10.89.3.2",
                                          "rangeEnd": "10.89.3.254"}]]


def test_the_dev_node_network_is_unchanged() -> None:
    ipam = node.cni_config(node.NodeLayout("n", Path("/n")))["plugins"][0]["ipam"]
    assert ipam["ranges"] == [[{"subnet": node.POD_SUBNET, "gateway": node.GATEWAY}]]


def test_the_sandbox_archive_is_an_oci_layout_containerd_names() -> None:
    archive = oci.one_file_archive("berthmaster.local/pause:dev", {"pause": (b"ELF", 0o755)},
                                   ["/pause"])
    assert archive == oci.one_file_archive("berthmaster.local/pause:dev",
                                           {"pause": (b"ELF", 0o755)}, ["/pause"])
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        files = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}  # type: ignore[union-attr]
    for name, blob in files.items():
        if name.startswith("blobs/sha256/"):
            assert name.rsplit("/", 1)[1] == hashlib.sha256(blob).hexdigest()
    assert json.loads(files["oci-layout"]) == {"imageLayoutVersion": "1.0.0"}
    entry = json.loads(files["index.json"])["manifests"][0]
    assert entry["annotations"] == {"io.containerd.image.name": "berthmaster.local/pause:dev",
                                    "org.opencontainers.image.ref.name": "dev"}
    manifest = json.loads(files[f"blobs/sha256/{entry['digest'].split(':')[1]}"])
    config = json.loads(files[f"blobs/sha256/{manifest['config']['digest'].split(':')[1]}"])
    assert config["config"]["Entrypoint"] == ["/pause"]
    layer = files[f"blobs/sha256/{manifest['layers'][0]['digest'].split(':')[1]}"]
    assert config["rootfs"]["diff_ids"] == [manifest["layers"][0]["digest"]]
    with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
        member = tar.getmember("pause")
        assert (member.mode, tar.extractfile(member).read()) == (0o755, b"ELF")  # type: ignore[union-attr]
