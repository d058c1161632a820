"""The EC2 table generated from cluster-autoscaler's (kubernetes/autoscaler
cluster-autoscaler/cloudprovider/aws/ec2_instance_types.go) by hack/gen-ec2-instance-types.py."""

from __future__ import annotations

import pytest

from berthmaster.operator.machines.providers.aws import instance_types


@pytest.mark.parametrize(("name", "vcpu", "memory_mb", "gpu", "arch"), [
    ("m4.large", 2, 8192, 0, "amd64"),
    ("m5.large", 2, 8192, 0, "amd64"),
    ("m6g.large", 2, 8192, 0, "arm64"),
    ("c5.xlarge", 4, 8192, 0, "amd64"),
    ("r5.large", 2, 16384, 0, "amd64"),
    ("g4dn.xlarge", 4, 16384, 1, "amd64"),
    ("p3.8xlarge", 32, 249856, 4, "amd64"),
])
def test_lookups_match_cluster_autoscalers_table(name: str, vcpu: int, memory_mb: int,
                                                 gpu: int, arch: str) -> None:
    assert instance_types.lookup(name) == instance_types.InstanceType(
        name, vcpu, memory_mb, gpu, arch)


def test_capacity_in_node_terms() -> None:
    assert instance_types.capacity("m5.large") == {"cpu": "2", "memory": "8192Mi"}
    assert instance_types.capacity("g4dn.xlarge") == {"cpu": "4", "memory": "16384Mi",
                                                      "nvidia.com/gpu": "1"}
    assert instance_types.capacity("m4.enormous") is None


def test_the_table_covers_the_families_it_names() -> None:
    families = {name.split(".")[0] for name in instance_types.table()}
    assert {"t3", "m5", "m6i", "c5", "r5", "g4dn", "p3"} <= families
