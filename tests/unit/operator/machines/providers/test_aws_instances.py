"""The AWS provider's pure parts: validation, tags, lookups, RunInstances, the Machine's record.

Upstream: openshift/machine-api-provider-aws pkg/actuators/machine/utils.go (getInstances'
filters, existingInstanceStates, extractNodeAddresses, validateMachine/getClusterID),
instances.go (launchInstance: tags, network interface with subnet and groups, block devices,
spot options, instance profile by name or ARN), reconciler.go (the providerID
``aws:///<zone>/<id>``, setMachineCloudProviderSpecifics).
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

from berthmaster.operator.machines import api
from berthmaster.operator.machines.providers.aws import instances
from berthmaster.operator.machines.providers.aws.spec import FIELDS, validate


def aws_machine(name: str = "infra-worker-a-x1", **value: Any) -> dict[str, Any]:
    spec = {"apiVersion": "machine.openshift.io/v1beta1", "kind": "AWSMachineProviderConfig",
            "ami": {"id": "ami-1"}, "instanceType": "m6i.large",
            "placement": {"region": "us-east-1", "availabilityZone": "us-east-1a"}, **value}
    return {"metadata": {"name": name, "namespace": "ns",
                         "labels": {"machine.openshift.io/cluster-api-cluster": "infra"}},
            "spec": {"providerSpec": {"value": spec}}}


def ec2_instance(**more: Any) -> dict[str, Any]:
    return {"InstanceId": "i-0abc", "InstanceType": "m6i.large", "State": {"Name": "running"},
            "Placement": {"AvailabilityZone": "us-east-1a"},
            "LaunchTime": "2026-01-01T00:00:00Z",
            "PrivateDnsName": "ip-10-0-1-4.ec2.internal", "PrivateIpAddress": "10.0.1.4",
            "NetworkInterfaces": [{"Status": "in-use",
                                   "PrivateIpAddresses": [{"PrivateIpAddress": "10.0.1.4"}]}],
            **more}


def test_a_valid_machine_has_no_problems() -> None:
    assert validate(aws_machine()) == []


def test_every_problem_is_reported_at_once_naming_field_and_fix() -> None:
    machine = aws_machine(instanceType="", placement={"tenancy": "shared"}, ami={},
                          securityGroups=[{"filters": [{"name": "tag:Name"}]}], bogus=1)
    del machine["metadata"]["labels"]["machine.openshift.io/cluster-api-cluster"]
    problems = validate(machine)
    assert problems == [
        "Machine infra-worker-a-x1: missing 'machine.openshift.io/cluster-api-cluster' label; "
        "label the Machine (or its MachineSet's template) with the cluster's infrastructure ID",
        "Machine infra-worker-a-x1: spec.providerSpec.value: unknown field(s) bogus; "
        "AWSMachineProviderConfig accepts " + ", ".join(sorted(FIELDS)),
        "Machine infra-worker-a-x1: spec.providerSpec.value.instanceType: required, an EC2 "
        "instance type such as m6i.large",
        "Machine infra-worker-a-x1: spec.providerSpec.value.placement.region: required, the AWS "
        "region such as us-east-1",
        "Machine infra-worker-a-x1: spec.providerSpec.value.placement.tenancy: 'shared'; use one "
        "of default, dedicated, host",
        "Machine infra-worker-a-x1: spec.providerSpec.value.ami: give the AMI's id, arn or "
        "filters (such as filters: [{name: tag:Name, values: [...]}])",
        "Machine infra-worker-a-x1: spec.providerSpec.value.securityGroups[0].filters[0]: needs "
        "a name and a list of values, as EC2's Filter (name: tag:Name, values: [my-subnet])",
    ]


def test_the_two_ownership_tags_cannot_be_overridden_by_the_spec() -> None:
    machine = aws_machine(tags=[{"name": "Name", "value": "other"},
                                {"name": "kubernetes.io/cluster/infra", "value": "shared"},
                                {"name": "team", "value": "a"}, {"name": "team", "value": "b"}])
    assert instances.tags(machine, "infra") == [
        {"Key": "team", "Value": "a"},
        {"Key": "kubernetes.io/cluster/infra", "Value": "owned"},
        {"Key": "Name", "Value": "infra-worker-a-x1"}]


def test_instances_are_found_by_both_tags_in_the_existing_states() -> None:
    assert instances.lookup_filters(aws_machine(), "infra") == [
        {"Name": "tag:Name", "Values": ["infra-worker-a-x1"]},
        {"Name": "tag:kubernetes.io/cluster/infra", "Values": ["owned"]},
        {"Name": "instance-state-name",
         "Values": ["pending", "running", "stopping", "stopped", "shutting-down"]}]


def test_a_running_instance_is_preferred_then_the_newest() -> None:
    old_running = ec2_instance(InstanceId="i-1", LaunchTime="2026-01-01")
    new_stopped = ec2_instance(InstanceId="i-2", LaunchTime="2026-02-01",
                               State={"Name": "stopped"})
    new_running = ec2_instance(InstanceId="i-3", LaunchTime="2026-03-01")
    assert instances.newest([old_running, new_stopped])["InstanceId"] == "i-1"
    assert instances.newest([old_running, new_running])["InstanceId"] == "i-3"
    assert instances.newest([new_stopped])["InstanceId"] == "i-2"
    assert instances.newest([]) is None


def test_the_machines_record_of_an_instance() -> None:
    record = instances.record(aws_machine(), ec2_instance(
        PublicIpAddress="3.3.3.3", PublicDnsName="ec2-3-3-3-3.compute-1.amazonaws.com"))
    assert record.provider_id == "aws:///us-east-1a/i-0abc"
    assert record.node_name is None  # the Node is found by providerID
    assert record.addresses == [
        {"type": "InternalIP", "address": "10.0.1.4"},
        {"type": "ExternalIP", "address": "3.3.3.3"},
        {"type": "InternalDNS", "address": "ip-10-0-1-4.ec2.internal"},
        {"type": "Hostname", "address": "ip-10-0-1-4.ec2.internal"},
        {"type": "ExternalDNS", "address": "ec2-3-3-3-3.compute-1.amazonaws.com"}]
    assert record.machine_annotations == {api.INSTANCE_STATE: "running"}
    assert record.machine_labels == {api.INSTANCE_TYPE_LABEL: "m6i.large",
                                     api.REGION_LABEL: "us-east-1",
                                     api.ZONE_LABEL: "us-east-1a"}
    assert record.provider_status == {
        "apiVersion": "machine.openshift.io/v1beta1", "kind": "AWSMachineProviderStatus",
        "instanceId": "i-0abc", "instanceState": "running"}


def test_an_interface_not_in_use_gives_no_address() -> None:
    instance = ec2_instance(NetworkInterfaces=[{"Status": "detaching", "PrivateIpAddresses": [
        {"PrivateIpAddress": "10.0.9.9"}]}], PrivateDnsName="")
    assert instances.addresses(instance) == []


def test_run_instances_request_from_the_documented_spec() -> None:
    machine = aws_machine(
        iamInstanceProfile={"id": "infra-worker-profile"}, deviceIndex=0,
        blockDevices=[{"ebs": {"iops": 0, "volumeSize": 120, "volumeType": "gp2"}}],
        spotMarketOptions={"maxPrice": "0.5"}, tags=[{"name": "team", "value": "a"}],
        metadataServiceOptions={"authentication": "Required"})
    request = instances.run_instances_request(
        machine, "infra", image_id="ami-1", subnet_id="subnet-1",
        security_group_ids=["sg-1", "sg-2"], root_device_name="/dev/xvda",
        user_data=b"#ignition")
    tags = [{"Key": "team", "Value": "a"}, {"Key": "kubernetes.io/cluster/infra",
                                           "Value": "owned"},
            {"Key": "Name", "Value": "infra-worker-a-x1"}]
    assert request == {
        "ImageId": "ami-1", "InstanceType": "m6i.large", "MinCount": 1, "MaxCount": 1,
        "TagSpecifications": [{"ResourceType": "instance", "Tags": tags},
                              {"ResourceType": "volume", "Tags": tags}],
        "NetworkInterfaces": [{"DeviceIndex": 0, "SubnetId": "subnet-1",
                               "Groups": ["sg-1", "sg-2"]}],
        "IamInstanceProfile": {"Name": "infra-worker-profile"},
        "UserData": base64.b64encode(b"#ignition").decode(),
        "BlockDeviceMappings": [{"DeviceName": "/dev/xvda", "Ebs": {
            "DeleteOnTermination": True, "VolumeSize": 120, "VolumeType": "gp2"}}],
        "InstanceMarketOptions": {"MarketType": "spot", "SpotOptions": {
            "SpotInstanceType": "one-time", "InstanceInterruptionBehavior": "terminate",
            "MaxPrice": "0.5"}},
        "MetadataOptions": {"HttpTokens": "required", "HttpEndpoint": "enabled"},
    }


@pytest.mark.parametrize(("profile", "expected"), [
    ({"arn": "arn:aws:iam::1:instance-profile/p"},
     {"Arn": "arn:aws:iam::1:instance-profile/p"}),
    ({"id": "p"}, {"Name": "p"}),
])
def test_the_instance_profile_by_arn_or_name(profile: dict[str, str],
                                             expected: dict[str, str]) -> None:
    request = instances.run_instances_request(
        aws_machine(iamInstanceProfile=profile), "infra", image_id="ami-1", subnet_id=None,
        security_group_ids=[], root_device_name=None, user_data=None)
    assert request["IamInstanceProfile"] == expected
    # no subnet: the placement's zone places the instance
    assert request["Placement"] == {"AvailabilityZone": "us-east-1a"}
