"""OpenShift's ``AWSMachineProviderConfig``, read and checked as machine-api-provider-aws does.

The schema is openshift/api machine/v1beta1/types_awsprovider.go (``apiVersion``
``machine.openshift.io/v1beta1``, or the older ``awsproviderconfig.openshift.io/v1beta1`` that
OpenShift's documentation still shows). Fields are kept as the JSON the Machine carries; this
module only says what is wrong with them (:func:`validate`, every problem at once) and reads the
few values the provider needs (:func:`cluster_id`, :func:`region`, :func:`zone`).

The cluster ID is the Machine's label ``machine.openshift.io/cluster-api-cluster`` (upstream's
``getClusterID``, falling back to ``sigs.k8s.io/cluster-api-cluster``); a Machine without it is
an invalid configuration, as upstream's ``validateMachine`` says.
"""

from __future__ import annotations

from typing import Any

from berthmaster.foundation.problems import Problems

KIND = "AWSMachineProviderConfig"
API_VERSIONS = ("machine.openshift.io/v1beta1", "awsproviderconfig.openshift.io/v1beta1")
CLUSTER_ID_LABEL = "machine.openshift.io/cluster-api-cluster"
UPSTREAM_CLUSTER_ID_LABEL = "sigs.k8s.io/cluster-api-cluster"
# The fields of types_awsprovider.go's AWSMachineProviderConfig (and TypeMeta/ObjectMeta).
FIELDS = frozenset({
    "apiVersion", "kind", "metadata", "ami", "instanceType", "tags", "iamInstanceProfile",
    "userDataSecret", "credentialsSecret", "keyName", "deviceIndex", "publicIp",
    "networkInterfaceType", "securityGroups", "subnet", "placement", "loadBalancers",
    "blockDevices", "spotMarketOptions", "metadataServiceOptions", "placementGroupName",
    "placementGroupPartition", "capacityReservationId", "marketType", "cpuOptions",
    "additionalSecurityGroupIDs", "hostPlacement"})
TENANCIES = ("default", "dedicated", "host")
VOLUME_TYPES = ("standard", "io1", "io2", "gp2", "gp3", "sc1", "st1")
METADATA_AUTHENTICATION = ("Optional", "Required")

JSON = dict[str, Any]


def provider_spec(machine: JSON) -> JSON:
    return dict(((machine.get("spec") or {}).get("providerSpec") or {}).get("value") or {})


def cluster_id(machine: JSON) -> str:
    labels = (machine.get("metadata") or {}).get("labels") or {}
    return str(labels.get(CLUSTER_ID_LABEL) or labels.get(UPSTREAM_CLUSTER_ID_LABEL) or "")


def region(value: JSON) -> str:
    return str((value.get("placement") or {}).get("region") or "")


def zone(value: JSON) -> str:
    return str((value.get("placement") or {}).get("availabilityZone") or "")


def _reference(problems: Problems, where: str, ref: Any, what: str) -> None:
    """An AWSResourceReference: one of id, arn, filters (each filter a name and values)."""
    if not isinstance(ref, dict):
        problems.add(where, f"must be a map with one of id, arn or filters naming the {what}")
        return
    if not any(ref.get(k) for k in ("id", "arn", "filters")):
        problems.add(where, f"give the {what}'s id, arn or filters (such as "
                     "filters: [{name: tag:Name, values: [...]}])")
        return
    for index, item in enumerate(ref.get("filters") or []):
        if not isinstance(item, dict) or not item.get("name") or not isinstance(
                item.get("values"), list):
            problems.add(f"{where}.filters[{index}]", "needs a name and a list of values, "
                         "as EC2's Filter (name: tag:Name, values: [my-subnet])")


def validate(machine: JSON) -> list[str]:
    """Every problem with an AWS Machine's providerSpec, each naming the Machine, the field and
    the fix."""
    name = (machine.get("metadata") or {}).get("name")
    value = provider_spec(machine)
    problems = Problems()
    if not cluster_id(machine):
        problems.add("", f"missing {CLUSTER_ID_LABEL!r} label; label the Machine (or its "
                     "MachineSet's template) with the cluster's infrastructure ID")
    _instance(problems, VALUE, value)
    _references(problems, VALUE, value)
    _options(problems, VALUE, value)
    return problems.lines(f"Machine {name}")


VALUE = "spec.providerSpec.value"


def _instance(problems: Problems, where: str, value: JSON) -> None:
    """The API version, the known fields, the instance type and the placement."""
    if value.get("apiVersion") not in API_VERSIONS:
        problems.add(f"{where}.apiVersion", f"{value.get('apiVersion')!r}; use "
                     f"{' or '.join(API_VERSIONS)}")
    unknown = sorted(set(value) - FIELDS)
    if unknown:
        problems.add(where, f"unknown field(s) {', '.join(unknown)}; {KIND} accepts "
                     f"{', '.join(sorted(FIELDS))}")
    if not isinstance(value.get("instanceType"), str) or not value.get("instanceType"):
        problems.add(f"{where}.instanceType", "required, an EC2 instance type such as m6i.large")
    if not region(value):
        problems.add(f"{where}.placement.region", "required, the AWS region such as us-east-1")
    tenancy = (value.get("placement") or {}).get("tenancy")
    if tenancy and tenancy not in TENANCIES:
        problems.add(f"{where}.placement.tenancy", f"{tenancy!r}; use one of "
                     f"{', '.join(TENANCIES)}")


def _references(problems: Problems, where: str, value: JSON) -> None:
    """The AMI, subnet, instance profile and security groups (AWSResourceReferences)."""
    _reference(problems, f"{where}.ami", value.get("ami"), "AMI")
    if value.get("subnet") is not None:
        _reference(problems, f"{where}.subnet", value["subnet"], "subnet")
    if value.get("iamInstanceProfile") is not None:
        _reference(problems, f"{where}.iamInstanceProfile", value["iamInstanceProfile"],
                   "instance profile")
    groups = value.get("securityGroups") or []
    if not isinstance(groups, list):
        problems.add(f"{where}.securityGroups", "must be a list of id/arn/filters references")
        return
    for index, group in enumerate(groups):
        _reference(problems, f"{where}.securityGroups[{index}]", group, "security group")


def _options(problems: Problems, where: str, value: JSON) -> None:
    """Tags, secrets, block devices, spot and metadata-service options."""
    tags = value.get("tags") or []
    if not isinstance(tags, list) or not all(
            isinstance(t, dict) and isinstance(t.get("name"), str) and t["name"] for t in tags):
        problems.add(f"{where}.tags", "must be a list of {name, value} pairs")
    for key in ("credentialsSecret", "userDataSecret"):
        secret = value.get(key)
        if secret is not None and (not isinstance(secret, dict) or not secret.get("name")):
            problems.add(f"{where}.{key}", "must be {name: <Secret in the Machine's namespace>}")
    for index, device in enumerate(value.get("blockDevices") or []):
        volume_type = ((device or {}).get("ebs") or {}).get("volumeType")
        if volume_type and volume_type not in VOLUME_TYPES:
            problems.add(f"{where}.blockDevices[{index}].ebs.volumeType", f"{volume_type!r}; "
                         f"use one of {', '.join(VOLUME_TYPES)}")
    spot = value.get("spotMarketOptions")
    if spot is not None and not isinstance(spot, dict):
        problems.add(f"{where}.spotMarketOptions", 'must be a map ({} or {maxPrice: "0.1"})')
    auth = (value.get("metadataServiceOptions") or {}).get("authentication")
    if auth and auth not in METADATA_AUTHENTICATION:
        problems.add(f"{where}.metadataServiceOptions.authentication", f"{auth!r}; use "
                     f"{' or '.join(METADATA_AUTHENTICATION)}")
