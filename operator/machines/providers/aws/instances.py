"""EC2 requests and answers for one Machine, as pure functions over plain dicts.

What upstream's machine-api-provider-aws does (pkg/actuators/machine/instances.go and
utils.go), restated:

- an instance belongs to a Machine through its tags: ``Name: <machine name>`` and
  ``kubernetes.io/cluster/<cluster ID>: owned`` (:func:`tags`; the providerSpec's own tags come
  first, but never override those two); it is found by the same tags and the states an
  instance "exists" in, everything but ``terminated`` (:func:`lookup_filters`,
  ``existingInstanceStates``);
- the providerID is ``aws:///<availability zone>/<instance id>`` (:func:`provider_id`);
- the Machine's addresses are the in-use interfaces' private IPs (InternalIP), the public IP
  (ExternalIP), the private DNS name (InternalDNS and Hostname) and the public DNS name
  (ExternalDNS), in that order (:func:`addresses`, ``extractNodeAddresses``);
- the instance's state is the Machine's ``machine.openshift.io/instance-state`` annotation and
  its providerStatus ``instanceState`` (:func:`record`), with labels
  ``machine.openshift.io/instance-type``, ``region``, ``zone``
  (``setMachineCloudProviderSpecifics``).

:func:`run_instances_request` turns the providerSpec into the ``RunInstances`` parameters once
the subnet, security groups and root device name have been looked up (the only reads).
"""

from __future__ import annotations

import base64
from typing import Any

from berthmaster.operator.machines.api import (
    INSTANCE_STATE,
    INSTANCE_TYPE_LABEL,
    REGION_LABEL,
    ZONE_LABEL,
)
from berthmaster.operator.machines.providers import Instance
from berthmaster.operator.machines.providers.aws.spec import provider_spec, region

JSON = dict[str, Any]

CLUSTER_TAG_PREFIX = "kubernetes.io/cluster/"
OWNED = "owned"
NAME_TAG = "Name"
# upstream's existingInstanceStates: anything but terminated
EXISTING_STATES = ("pending", "running", "stopping", "stopped", "shutting-down")
PROVIDER_STATUS_KIND = "AWSMachineProviderStatus"
PROVIDER_STATUS_API_VERSION = "machine.openshift.io/v1beta1"


def tags(machine: JSON, cluster_id: str) -> list[JSON]:
    """The instance's tags (EC2 Key/Value): the providerSpec's, then the two that make it the
    Machine's; the first value of a key wins (upstream's buildTagList/removeDuplicatedTags)."""
    name = str(machine["metadata"]["name"])
    wanted: dict[str, str] = {}
    for tag in provider_spec(machine).get("tags") or []:
        key = str(tag.get("name"))
        if key != NAME_TAG and not key.startswith(CLUSTER_TAG_PREFIX):
            wanted.setdefault(key, str(tag.get("value") or ""))
    wanted[CLUSTER_TAG_PREFIX + cluster_id] = OWNED
    wanted[NAME_TAG] = name
    return [{"Key": k, "Value": v} for k, v in wanted.items()]


def lookup_filters(machine: JSON, cluster_id: str) -> list[JSON]:
    """DescribeInstances filters for the Machine's existing instances."""
    return [{"Name": f"tag:{NAME_TAG}", "Values": [str(machine["metadata"]["name"])]},
            {"Name": f"tag:{CLUSTER_TAG_PREFIX}{cluster_id}", "Values": [OWNED]},
            {"Name": "instance-state-name", "Values": list(EXISTING_STATES)}]


def newest(instances: list[JSON]) -> JSON | None:
    """The instance a Machine is: a running one first, then the newest (upstream's
    sortInstances + getRunningFromInstances)."""
    if not instances:
        return None
    ordered = sorted(instances, key=lambda i: str(i.get("LaunchTime") or ""), reverse=True)
    running = [i for i in ordered if (i.get("State") or {}).get("Name") == "running"]
    return (running or ordered)[0]


def provider_id(instance: JSON) -> str:
    zone = (instance.get("Placement") or {}).get("AvailabilityZone") or ""
    return f"aws:///{zone}/{instance['InstanceId']}"


def addresses(instance: JSON) -> list[dict[str, str]]:
    found: list[dict[str, str]] = []
    for interface in instance.get("NetworkInterfaces") or []:
        if interface.get("Status") != "in-use":
            continue
        for ipv6 in interface.get("Ipv6Addresses") or []:
            if ipv6.get("Ipv6Address"):
                found.append({"type": "InternalIP", "address": ipv6["Ipv6Address"]})
        for private in interface.get("PrivateIpAddresses") or []:
            if private.get("PrivateIpAddress"):
                found.append({"type": "InternalIP", "address": private["PrivateIpAddress"]})
    if instance.get("PublicIpAddress"):
        found.append({"type": "ExternalIP", "address": instance["PublicIpAddress"]})
    if instance.get("PrivateDnsName"):
        found.append({"type": "InternalDNS", "address": instance["PrivateDnsName"]})
        found.append({"type": "Hostname", "address": instance["PrivateDnsName"]})
    if instance.get("PublicDnsName"):
        found.append({"type": "ExternalDNS", "address": instance["PublicDnsName"]})
    return found


def record(machine: JSON, instance: JSON) -> Instance:
    """What the Machine records about ``instance``."""
    value = provider_spec(machine)
    state = str((instance.get("State") or {}).get("Name") or "")
    zone = str((instance.get("Placement") or {}).get("AvailabilityZone") or "")
    labels = {INSTANCE_TYPE_LABEL: str(instance.get("InstanceType") or value.get("instanceType")),
              REGION_LABEL: region(value)}
    if zone:
        labels[ZONE_LABEL] = zone
    return Instance(
        provider_id=provider_id(instance), addresses=addresses(instance),
        machine_labels=labels, machine_annotations={INSTANCE_STATE: state},
        provider_status={"apiVersion": PROVIDER_STATUS_API_VERSION,
                         "kind": PROVIDER_STATUS_KIND,
                         "instanceId": instance["InstanceId"], "instanceState": state})


def reference_filters(ref: JSON) -> list[JSON]:
    """An AWSResourceReference's filters as EC2 Filters."""
    return [{"Name": str(f["name"]), "Values": [str(v) for v in f.get("values") or []]}
            for f in ref.get("filters") or []]


def block_device_mappings(value: JSON, root_device_name: str | None) -> list[JSON]:
    """The providerSpec's blockDevices; the one without a deviceName is the AMI's root
    device (upstream's getBlockDeviceMappings)."""
    mappings = []
    for device in value.get("blockDevices") or []:
        ebs = device.get("ebs") or {}
        name = device.get("deviceName") or root_device_name
        if not name:
            continue
        volume: JSON = {"DeleteOnTermination": ebs.get("deleteOnTermination", True)}
        if ebs.get("volumeSize"):
            volume["VolumeSize"] = int(ebs["volumeSize"])
        if ebs.get("volumeType"):
            volume["VolumeType"] = ebs["volumeType"]
        if ebs.get("iops") and ebs.get("volumeType") in ("io1", "io2", "gp3"):
            volume["Iops"] = int(ebs["iops"])
        if ebs.get("throughput") and ebs.get("volumeType") == "gp3":
            volume["Throughput"] = int(ebs["throughput"])
        if ebs.get("encrypted"):
            volume["Encrypted"] = True
            key = ebs.get("kmsKey") or {}
            if key.get("arn") or key.get("id"):
                volume["KmsKeyId"] = key.get("arn") or key.get("id")
        mappings.append({"DeviceName": name, "Ebs": volume})
    return mappings


def run_instances_request(machine: JSON, cluster_id: str, *, image_id: str, subnet_id: str | None,
                          security_group_ids: list[str], root_device_name: str | None,
                          user_data: bytes | None) -> JSON:
    """The RunInstances parameters for ``machine`` (one instance, tagged as the Machine's)."""
    value = provider_spec(machine)
    placement = value.get("placement") or {}
    instance_tags = tags(machine, cluster_id)
    request: JSON = {
        "ImageId": image_id, "InstanceType": value["instanceType"], "MinCount": 1,
        "MaxCount": 1,
        "TagSpecifications": [{"ResourceType": "instance", "Tags": instance_tags},
                              {"ResourceType": "volume", "Tags": instance_tags}],
    }
    interface: JSON = {"DeviceIndex": int(value.get("deviceIndex") or 0)}
    if subnet_id:
        interface["SubnetId"] = subnet_id
    if security_group_ids:
        interface["Groups"] = security_group_ids
    if value.get("publicIp"):
        interface["AssociatePublicIpAddress"] = True
    if value.get("networkInterfaceType") == "EFA":
        interface["InterfaceType"] = "efa"
    request["NetworkInterfaces"] = [interface]
    ec2_placement: JSON = {}
    if placement.get("availabilityZone") and not subnet_id:
        ec2_placement["AvailabilityZone"] = placement["availabilityZone"]
    if placement.get("tenancy"):
        ec2_placement["Tenancy"] = placement["tenancy"]
    if value.get("placementGroupName"):
        ec2_placement["GroupName"] = value["placementGroupName"]
    if ec2_placement:
        request["Placement"] = ec2_placement
    profile = value.get("iamInstanceProfile") or {}
    if profile.get("arn"):
        request["IamInstanceProfile"] = {"Arn": profile["arn"]}
    elif profile.get("id"):
        request["IamInstanceProfile"] = {"Name": profile["id"]}
    if value.get("keyName"):
        request["KeyName"] = value["keyName"]
    if user_data:
        request["UserData"] = base64.b64encode(user_data).decode()
    mappings = block_device_mappings(value, root_device_name)
    if mappings:
        request["BlockDeviceMappings"] = mappings
    spot = value.get("spotMarketOptions")
    if spot is not None:
        options: JSON = {"SpotInstanceType": "one-time",
                         "InstanceInterruptionBehavior": "terminate"}
        if (spot or {}).get("maxPrice"):
            options["MaxPrice"] = str(spot["maxPrice"])
        request["InstanceMarketOptions"] = {"MarketType": "spot", "SpotOptions": options}
    if (value.get("metadataServiceOptions") or {}).get("authentication") == "Required":
        request["MetadataOptions"] = {"HttpTokens": "required", "HttpEndpoint": "enabled"}
    if value.get("capacityReservationId"):
        request["CapacityReservationSpecification"] = {
            "CapacityReservationTarget": {"CapacityReservationId":
                                          value["capacityReservationId"]}}
    return request
