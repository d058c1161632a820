"""The real node's configurations and the cluster shapes, as pure functions (the node itself
runs in `make e2e`)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from berthmaster.tooling.devcluster import kubelet, kwok_incluster
from berthmaster.tooling.devcluster.cluster import ClusterError, Options

LAYOUT = kubelet.NodeLayout("e2e-kubelet", Path("/state/e2e/node"))


def test_containerd_runs_sandboxes_without_cap_sys_resource_from_a_local_image() -> None:
    text = kubelet.containerd_config(LAYOUT, "berthmaster.local/pause:dev")
    assert "restrict_oom_score_adj = true" in text
    assert 'sandbox_image = "berthmaster.local/pause:dev"' in text
    assert f'address = "{LAYOUT.containerd_socket}"' in text
    assert f'conf_dir = "{LAYOUT.cni_conf_dir}"' in text
    # A private instance: nothing shared with Docker's containerd.
    assert "/var/lib/containerd" not in text and "/run/containerd" not in text


def test_the_kubelet_accepts_cgroup_v1_and_keeps_loaded_images() -> None:
    config = kubelet.kubelet_config(LAYOUT, Path("/pki/ca.crt"), 10250, 10248)
    assert config["failCgroupV1"] is False
    assert config["cgroupDriver"] == "cgroupfs"
    assert config["containerRuntimeEndpoint"] == f"unix://{LAYOUT.containerd_socket}"
    assert config["imageGCHighThresholdPercent"] == 100
    assert config["authentication"]["anonymous"]["enabled"] is False


def test_pods_get_bridge_addresses_with_the_host_as_gateway() -> None:
    """The bridge and host-local IPAM, then portmap and firewall (containernetworking/plugins
    plugins/meta/firewall: its CNI-FORWARD rules accept each pod's traffic where the FORWARD
    policy is DROP, as Docker leaves it)."""
    bridge, portmap, firewall = kubelet.cni_config(LAYOUT)["plugins"]
    assert firewall == {"type": "firewall"}
    assert bridge["bridge"] == kubelet.BRIDGE and bridge["isGateway"] is True
    ((subnet,),) = bridge["ipam"]["ranges"]
    assert subnet == {"subnet": kubelet.POD_SUBNET, "gateway": kubelet.GATEWAY}
    assert bridge["ipam"]["dataDir"].startswith(str(LAYOUT.root))
    assert portmap["type"] == "portmap"


def test_the_default_scheduler_stays_off_kwok_nodes() -> None:
    config = kubelet.default_scheduler_config(Path("/k"))
    (profile,) = config["profiles"]
    (plugin,) = profile["pluginConfig"]
    terms = plugin["args"]["addedAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"] == [{"matchExpressions": [
        {"key": kubelet.NODE_LABEL, "operator": "In", "values": [kubelet.NODE_LABEL_VALUE]}]}]
    command = kubelet.kubelet_command(Path("/bin/kubelet"), LAYOUT, Path("/k"))
    assert f"--node-labels={kubelet.NODE_LABEL}={kubelet.NODE_LABEL_VALUE}" in command


def test_the_guard_refuses_the_api_port_except_on_loopback_and_the_bridge() -> None:
    drop, accept = kubelet.NodeHost.guard_rules("-I", 6443)
    assert drop[:2] == ["-I", "INPUT"] and drop[-2:] == ["-j", "DROP"]
    assert "!" in drop and "lo" in drop
    assert accept[-4:] == ["-i", kubelet.BRIDGE, "-j", "ACCEPT"]
    assert [rule[1:] for rule in kubelet.NodeHost.guard_rules("-D", 6443)] == [
        rule[1:] for rule in (drop, accept)]


def test_mounts_under_the_node_are_released_deepest_first() -> None:
    mounts = "\n".join([
        "overlay / overlay rw 0 0",
        "tmpfs /state/e2e/node/kubelet/pods/x/volumes/kube-api-access tmpfs rw 0 0",
        "shm /state/e2e/node/containerd/state/sandboxes/abc/shm tmpfs rw 0 0",
        "overlay /state/e2e/node/containerd/state/run/k8s.io/abc/rootfs overlay rw 0 0",
        "tmpfs /state/e2e/node-other/x tmpfs rw 0 0",
        r"tmpfs /state/e2e/node/with\040space tmpfs rw 0 0",
    ])
    found = kubelet.mounts_under(mounts, LAYOUT.root)
    assert "/state/e2e/node-other/x" not in found and "/" not in found
    assert "/state/e2e/node/with space" in found
    depths = [p.count("/") for p in found]
    assert depths == sorted(depths, reverse=True)
    assert len(found) == 4


@pytest.mark.parametrize(("options", "problem"), [
    ({"kubelets": 2}, "one real node per machine"),
    ({"kwok": "cluster"}, "needs a real node"),
    ({"kwok": "elsewhere"}, "choose one of"),
    ({"node_lease_seconds": 10}, "at least 40 s"),
])
def test_cluster_shapes_that_cannot_run_say_why(options: dict[str, object], problem: str) -> None:
    with pytest.raises(ClusterError, match=problem):
        Options(**options)  # type: ignore[arg-type]


def test_each_shape_knows_its_processes() -> None:
    assert Options().components == ("etcd", "kube-apiserver", "kube-controller-manager", "kwok")
    node = Options(kubelets=1, kwok="cluster").components
    assert "kwok" not in node and {"containerd", "kubelet", "kube-proxy"} <= set(node)


def test_kwok_in_a_cluster_reads_the_stages_from_its_config_map() -> None:
    stages = "apiVersion: kwok.x-k8s.io/v1alpha1\nkind: Stage\nmetadata: {name: s}\n"
    objects = {o["kind"]: o for o in kwok_incluster.kwok_manifests("img:1", stages)}
    config = list(yaml.safe_load_all(objects["ConfigMap"]["data"]["kwok.yaml"]))
    assert [doc["kind"] for doc in config] == ["KwokConfiguration", "Stage"]
    (container,) = objects["Deployment"]["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "img:1"
    assert "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake" in container["args"]
    assert objects["ClusterRoleBinding"]["subjects"][0]["namespace"] == "kube-system"


def test_the_kind_configs_workers_become_kwok_nodes_with_their_labels_and_taints() -> None:
    from berthmaster.tooling.devcluster.nodes import kind_workers

    config = yaml.safe_load((Path(__file__).resolve().parents[3] / "deploy" /
                             "kind-cluster.yaml").read_text())
    workers = kind_workers(config)
    assert len(workers) == 5
    dedicated = [w for w in workers if w["metadata"]["labels"].get("dedicated") == "groupName"]
    assert [w["spec"]["taints"] for w in dedicated] == [
        [{"key": "dedicated", "value": "groupName", "effect": "NoSchedule"}]]
    assert {w["metadata"]["labels"]["zone"] for w in workers} == {"zone-a", "zone-b", "zone-c"}
    assert all(w["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake" for w in workers)
