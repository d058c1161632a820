"""OpenShift's AWS MachineSet, as documented, on the real API server with an EC2 emulator.

The operator runs as a process with ``BERTHMASTER_MACHINE_PROVIDERS=kwok,aws`` and boto3's own
``AWS_ENDPOINT_URL_EC2`` pointing at moto's EC2 emulator in server mode (started here); the Node
of a joined instance is a kwok Node carrying the instance's providerID, as a kubelet with the
AWS cloud provider would register it. With ``BERTHMASTER_TEST_AWS_REAL_ACCOUNT=1`` the same
tests run against the account boto3's default credentials name (docs/providers.md says what
that costs and which variables it reads).

Upstream behaviour checked: machine-api-provider-aws pkg/actuators/machine/instances.go and
utils.go (tags ``Name`` and ``kubernetes.io/cluster/<id>: owned``, found by them and the
existing states, providerID ``aws:///<zone>/<id>``, subnet and security groups by filters) and
reconciler.go (create, update, delete, the instance-state annotation); pkg/client/client.go (a
missing credentials Secret is InvalidMachineConfiguration); machine-api-operator
pkg/controller/machine/controller.go (InvalidMachineConfiguration -> phase Failed; an instance
gone under a provisioned Machine -> Failed; preTerminate hooks hold the instance's deletion).
"""

from __future__ import annotations

import base64
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml

from berthmaster.foundation.kube import CORE, KubeClient, resource_path
from berthmaster.operator.machines import api
from tests.integration.operator.machines.conftest import (
    OperatorPool,
    OperatorProcess,
    condition,
    get_machine,
    machine_events,
    running_operator,
    set_hooks,
)
from tests.support.waiting import wait_for

DOC_MACHINESET = Path(__file__).parent / "openshift_docs" / "machineset-aws.yaml"
REAL_ACCOUNT = os.environ.get("BERTHMASTER_TEST_AWS_REAL_ACCOUNT") == "1"
REGION, ZONE, ROLE = "us-east-1", "us-east-1a", "worker"
FAKE_KEYS = {"aws_access_key_id": "AKIDBERTHMASTERTEST", "aws_secret_access_key": "not-secret"}
HOOK = ("wait-for-storage", "storage-controller")


class EC2World:
    """The account the documented MachineSet refers to: a VPC with the subnet and security
    group its filters name (beside decoys they must not match), the instance profile, an AMI."""

    def __init__(self, endpoint: str | None, infra: str):
        credentials = {} if REAL_ACCOUNT else FAKE_KEYS
        self.ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=endpoint,
                                **credentials)
        self.iam = boto3.client("iam", region_name=REGION, endpoint_url=endpoint,
                                **credentials)
        self.infra = infra
        vpc = self.ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        self.vpc = vpc
        self.subnet = self._subnet(vpc, "10.0.1.0/24", f"{infra}-private-{ZONE}")
        self.decoy_subnet = self._subnet(vpc, "10.0.2.0/24", f"{infra}-public-{ZONE}")
        self.group = self._group(vpc, f"{infra}-worker-sg")
        self.decoy_group = self._group(vpc, f"{infra}-master-sg")
        self.profile = f"{infra}-worker-profile"
        self.iam.create_instance_profile(InstanceProfileName=self.profile)
        if REAL_ACCOUNT:
            self.ami = os.environ["BERTHMASTER_TEST_AWS_AMI"]  # a Linux AMI in us-east-1
        else:
            self.ami = self.ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]

    def _subnet(self, vpc: str, cidr: str, name: str) -> str:
        subnet = self.ec2.create_subnet(VpcId=vpc, CidrBlock=cidr, AvailabilityZone=ZONE)
        subnet_id = str(subnet["Subnet"]["SubnetId"])
        self.ec2.create_tags(Resources=[subnet_id], Tags=[{"Key": "Name", "Value": name}])
        return subnet_id

    def _group(self, vpc: str, name: str) -> str:
        group = self.ec2.create_security_group(GroupName=name, Description=name, VpcId=vpc)
        self.ec2.create_tags(Resources=[group["GroupId"]], Tags=[{"Key": "Name", "Value": name}])
        return str(group["GroupId"])

    def instances(self, **filters: str) -> list[dict[str, Any]]:
        ec2_filters = [{"Name": k, "Values": [v]} for k, v in filters.items()]
        pages = self.ec2.describe_instances(Filters=ec2_filters)
        return [i for r in pages["Reservations"] for i in r["Instances"]]

    def instance(self, instance_id: str) -> dict[str, Any]:
        pages = self.ec2.describe_instances(InstanceIds=[instance_id])
        return dict(pages["Reservations"][0]["Instances"][0])

    def cleanup(self) -> None:
        """Everything made here, instances first (on a real account this is what it costs)."""
        made = [i["InstanceId"] for i in self.instances(**{"vpc-id": self.vpc})]
        if made:
            self.ec2.terminate_instances(InstanceIds=made)
            self.ec2.get_waiter("instance_terminated").wait(
                InstanceIds=made, WaiterConfig={"Delay": 5 if REAL_ACCOUNT else 0.1})
        for group in (self.group, self.decoy_group):
            self.ec2.delete_security_group(GroupId=group)
        for subnet in (self.subnet, self.decoy_subnet):
            self.ec2.delete_subnet(SubnetId=subnet)
        self.ec2.delete_vpc(VpcId=self.vpc)
        self.iam.delete_instance_profile(InstanceProfileName=self.profile)


@pytest.fixture(scope="module")
def ec2_endpoint() -> Iterator[str | None]:
    """moto's EC2 (and IAM) emulator on a free loopback port; None on a real account."""
    if REAL_ACCOUNT:
        yield None
        return
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per EC2 call
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture
def world(ec2_endpoint: str | None, namespace: str) -> Iterator[EC2World]:
    made = EC2World(ec2_endpoint, infra=namespace)
    try:
        yield made
    finally:
        made.cleanup()


@pytest.fixture
def aws_operator(operator_pool: OperatorPool, ec2_endpoint: str | None,
                 request: pytest.FixtureRequest) -> Iterator[OperatorProcess]:
    absent = str(operator_pool.directory / "none")
    env = {"BERTHMASTER_MACHINE_PROVIDERS": "kwok,aws",
           # the pod's own identity chain must not find credentials on this host
           "AWS_SHARED_CREDENTIALS_FILE": absent,
           "AWS_CONFIG_FILE": absent, "AWS_EC2_METADATA_DISABLED": "true"}
    if ec2_endpoint is not None:
        env["AWS_ENDPOINT_URL_EC2"] = ec2_endpoint
    yield from running_operator(operator_pool, request, env)


def documented_machineset(namespace: str, world: EC2World) -> dict[str, Any]:
    """The documentation's MachineSet with its placeholders filled (and nothing else changed
    but the namespace: each test has its own)."""
    text = DOC_MACHINESET.read_text()
    for placeholder, value in (("<infrastructureID>", world.infra), ("<role>", ROLE),
                               ("<zone>", ZONE), ("ami-046fe691f52a953f9", world.ami)):
        text = text.replace(placeholder, value)
    machineset = yaml.safe_load(text)
    machineset["metadata"]["namespace"] = namespace
    return dict(machineset)


def machine_from(machineset: dict[str, Any], name: str) -> dict[str, Any]:
    template = machineset["spec"]["template"]
    return {"apiVersion": api.API_VERSION, "kind": "Machine",
            "metadata": {"name": name, "labels": dict(template["metadata"]["labels"])},
            "spec": yaml.safe_load(yaml.safe_dump(template["spec"]))}


async def create_secrets(kube: KubeClient, namespace: str, credentials: bool = True) -> None:
    keys = FAKE_KEYS
    if REAL_ACCOUNT:
        frozen = boto3.session.Session().get_credentials().get_frozen_credentials()
        keys = {"aws_access_key_id": frozen.access_key,
                "aws_secret_access_key": frozen.secret_key}
    secrets = {"worker-user-data": {"userData": "#ignition"}}
    if credentials:
        secrets["aws-cloud-credentials"] = keys
    for name, data in secrets.items():
        await kube.create(resource_path(CORE, "secrets", namespace), {
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}})


async def machine_where(kube: KubeClient, namespace: str, name: str, what: str,
                        check: Any, timeout: float = 90) -> dict[str, Any]:
    async def matches() -> dict[str, Any] | None:
        machine = await get_machine(kube, namespace, name)
        return machine if machine is not None and check(machine) else None
    return await wait_for(matches, timeout=timeout, what=f"machine {name} {what}")


def phase(machine: dict[str, Any]) -> str:
    return str((machine.get("status") or {}).get("phase") or "")


async def join_node(kube: KubeClient, instance: dict[str, Any], provider_id: str,
                    cleanup_nodes: list[str]) -> str:
    """The kwok Node a kubelet on ``instance`` would register (named by its private DNS)."""
    name = str(instance["PrivateDnsName"])
    cleanup_nodes.append(name)
    await kube.create(api.node_path(), {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"},
                     "labels": {"kubernetes.io/hostname": name, "type": "kwok"}},
        "spec": {"providerID": provider_id},
        "status": {"capacity": {"cpu": "2", "memory": "8Gi", "pods": "110"},
                   "allocatable": {"cpu": "2", "memory": "8Gi", "pods": "110"}}})
    return name


async def test_the_documented_aws_machineset_makes_tagged_instances_and_hooks_hold_termination(
        kube: KubeClient, namespace: str, world: EC2World, aws_operator: OperatorProcess,
        cleanup_nodes: list[str]) -> None:
    """The MachineSet from OpenShift's documentation, applied unchanged, makes one instance
    tagged as upstream's buildTagList does, in the subnet and security group its tag filters
    select (not the decoys beside them), with its instance type, profile and root volume; the
    Machine records providerID ``aws:///<zone>/<id>``, addresses, the instance-state annotation
    and labels, and runs once a Node with that providerID joins. Scaled to 0 with a
    preTerminate hook, the instance keeps running until the hook is removed; then it is
    terminated and the Node deleted. An instance with the Machine's name but another cluster's
    tag is never touched."""
    await create_secrets(kube, namespace)
    machineset = documented_machineset(namespace, world)
    name = machineset["metadata"]["name"]
    other = world.ec2.run_instances(
        ImageId=world.ami, InstanceType="t3.micro", MinCount=1, MaxCount=1,
        SubnetId=world.decoy_subnet,
        TagSpecifications=[{"ResourceType": "instance", "Tags": [
            {"Key": "kubernetes.io/cluster/another-cluster", "Value": "owned"}]}],
    )["Instances"][0]["InstanceId"]
    await kube.create(api.machineset_path(namespace), machineset)

    async def one_machine() -> str | None:
        items, _ = await kube.list_all(api.machine_path(namespace))
        return str(items[0]["metadata"]["name"]) if len(items) == 1 else None
    machine_name = await wait_for(one_machine, timeout=60, what="the MachineSet's Machine")
    machine = await machine_where(kube, namespace, machine_name, "Provisioned",
                                  lambda m: phase(m) == "Provisioned")

    provider_id = machine["spec"]["providerID"]
    assert provider_id.startswith(f"aws:///{ZONE}/i-")
    instance = world.instance(provider_id.rsplit("/", 1)[1])
    tags = {t["Key"]: t["Value"] for t in instance["Tags"]}
    assert tags["Name"] == machine_name
    assert tags[f"kubernetes.io/cluster/{world.infra}"] == "owned"
    assert instance["SubnetId"] == world.subnet
    # the groups go on the primary interface, as upstream's launchInstance puts them
    interface = instance["NetworkInterfaces"][0]
    assert [g["GroupId"] for g in interface["Groups"]] == [world.group]
    assert interface["SubnetId"] == world.subnet
    assert instance["InstanceType"] == "m4.large"
    assert instance["IamInstanceProfile"]["Arn"].endswith(f"/{world.profile}")
    assert instance["Placement"]["AvailabilityZone"] == ZONE
    assert machine["metadata"]["annotations"][api.INSTANCE_STATE] == instance["State"]["Name"]
    assert machine["metadata"]["labels"][api.INSTANCE_TYPE_LABEL] == "m4.large"
    assert machine["metadata"]["labels"][api.ZONE_LABEL] == ZONE
    assert machine["status"]["providerStatus"]["instanceId"] == instance["InstanceId"]
    addresses = {(a["type"], a["address"]) for a in machine["status"]["addresses"]}
    assert ("InternalIP", instance["PrivateIpAddress"]) in addresses
    assert ("InternalDNS", instance["PrivateDnsName"]) in addresses
    assert len(world.instances(**{"tag:Name": machine_name})) == 1  # never a second one

    node = await join_node(kube, instance, provider_id, cleanup_nodes)
    machine = await machine_where(kube, namespace, machine_name, "Running with its Node",
                                  lambda m: phase(m) == "Running")
    assert machine["status"]["nodeRef"]["name"] == node
    assert machine["metadata"]["annotations"][api.INSTANCE_STATE] == "running"

    await set_hooks(kube, namespace, machine_name, "preTerminate", [HOOK])
    await kube.patch(api.machineset_path(namespace, name, "scale"), {"spec": {"replicas": 0}})
    held = await machine_where(
        kube, namespace, machine_name, "waiting on its preTerminate hook",
        lambda m: condition(m, api.TERMINABLE).get("status") == "False"
        and condition(m, api.DRAINED).get("status") == "True")
    assert phase(held) == "Deleting"
    assert world.instance(instance["InstanceId"])["State"]["Name"] == "running"

    await set_hooks(kube, namespace, machine_name, "preTerminate", [])

    async def machine_gone() -> bool:
        return await get_machine(kube, namespace, machine_name) is None
    await wait_for(machine_gone, timeout=90, what="the Machine deleted")
    assert world.instance(instance["InstanceId"])["State"]["Name"] in (
        "shutting-down", "terminated")
    assert await kube.get_if_exists(api.node_path(node)) is None
    assert world.instance(other)["State"]["Name"] == "running"


async def delete_and_wait_gone(kube: KubeClient, namespace: str, name: str) -> None:
    await kube.delete(api.machine_path(namespace, name))

    async def gone() -> bool:
        return await get_machine(kube, namespace, name) is None
    await wait_for(gone, timeout=60, what=f"machine {name} deleted")


async def failed_machine(kube: KubeClient, namespace: str, machine: dict[str, Any]
                         ) -> dict[str, Any]:
    await kube.create(api.machine_path(namespace), machine)
    return await machine_where(kube, namespace, machine["metadata"]["name"], "Failed",
                               lambda m: phase(m) == "Failed")


def assert_invalid_configuration(machine: dict[str, Any], events: dict[str, Any],
                                 needle: str) -> None:
    """controller.go: InvalidMachineConfiguration -> Failed; berthmaster adds the FailedCreate
    Warning and InstanceExists False (InstanceNotCreated), each with the message."""
    assert machine["status"]["errorReason"] == api.INVALID_CONFIGURATION
    assert needle in machine["status"]["errorMessage"]
    exists = condition(machine, api.INSTANCE_EXISTS)
    assert (exists["status"], exists["reason"]) == ("False", api.INSTANCE_NOT_CREATED)
    assert events["FailedCreate"]["type"] == "Warning"
    assert needle in events["FailedCreate"]["message"]
    assert machine["metadata"]["annotations"][api.INSTANCE_STATE] == "Unknown"


async def test_a_missing_credentials_secret_fails_the_machine_and_creates_nothing(
        kube: KubeClient, namespace: str, world: EC2World,
        aws_operator: OperatorProcess) -> None:
    """pkg/client/client.go: a credentialsSecret that does not exist is
    InvalidMachineConfiguration (``aws credentials secret <ns>/<name>: ... not found``)."""
    await create_secrets(kube, namespace, credentials=False)
    name = f"{namespace}-nocreds"
    machine = await failed_machine(
        kube, namespace, machine_from(documented_machineset(namespace, world), name))
    events = await machine_events(kube, namespace, name)
    assert_invalid_configuration(
        machine, events, f"aws credentials secret {namespace}/aws-cloud-credentials not found")
    assert world.instances(**{"tag:Name": name}) == []
    # nothing was made, so nothing waits on the cloud: the Failed Machine deletes
    await delete_and_wait_gone(kube, namespace, name)


async def test_an_instance_type_ec2_does_not_have_fails_the_machine(
        kube: KubeClient, namespace: str, world: EC2World,
        aws_operator: OperatorProcess) -> None:
    """An instance type EC2 does not offer: moto's RunInstances accepts any name, so the
    provider asks DescribeInstanceTypes first (InvalidInstanceType there, as on AWS) and
    reports an invalid configuration instead of retrying forever."""
    await create_secrets(kube, namespace)
    name = f"{namespace}-badtype"
    spec = machine_from(documented_machineset(namespace, world), name)
    spec["spec"]["providerSpec"]["value"]["instanceType"] = "m4.enormous"
    machine = await failed_machine(kube, namespace, spec)
    events = await machine_events(kube, namespace, name)
    assert_invalid_configuration(machine, events, "'m4.enormous' is not an EC2 instance type")
    assert world.instances(**{"tag:Name": name}) == []
    await delete_and_wait_gone(kube, namespace, name)


async def test_an_unknown_provider_kind_opted_in_fails_the_machine(
        kube: KubeClient, namespace: str, world: EC2World,
        aws_operator: OperatorProcess) -> None:
    """A providerSpec kind no installed provider implements, on a Machine that opted in to
    berthmaster: Failed, InvalidConfiguration, naming the kinds it could use. (Without the
    opt-in label such a Machine is left untouched: test_foreign_provider.py.)"""
    name = f"{namespace}-azure"
    spec = machine_from(documented_machineset(namespace, world), name)
    spec["metadata"]["labels"]["berthmaster.io/machine-controller"] = "berthmaster"
    spec["spec"]["providerSpec"]["value"]["kind"] = "AzureMachineProviderSpec"
    machine = await failed_machine(kube, namespace, spec)
    events = await machine_events(kube, namespace, name)
    assert_invalid_configuration(
        machine, events, "spec.providerSpec.value.kind 'AzureMachineProviderSpec' is not "
        "supported by berthmaster; use one of: AWSMachineProviderConfig, "
        "KwokMachineProviderSpec")
    assert world.instances(**{"tag:Name": name}) == []


async def test_an_instance_terminated_under_its_machine_fails_the_machine(
        kube: KubeClient, namespace: str, world: EC2World,
        aws_operator: OperatorProcess) -> None:
    """controller.go, Reconcile: Exists false for a provisioned Machine (a terminated instance
    does not exist for reconciler.go's exists) -> Failed, ``can't find created instance``,
    InstanceExists False / InstanceMissing, the instance-state annotation and providerStatus
    ``Unknown``. The Failed Machine then deletes."""
    await create_secrets(kube, namespace)
    name = f"{namespace}-vanishes"
    await kube.create(api.machine_path(namespace),
                      machine_from(documented_machineset(namespace, world), name))
    machine = await machine_where(kube, namespace, name, "Provisioned",
                                  lambda m: phase(m) == "Provisioned")
    instance_id = machine["spec"]["providerID"].rsplit("/", 1)[1]
    world.ec2.terminate_instances(InstanceIds=[instance_id])

    machine = await machine_where(kube, namespace, name, "Failed",
                                  lambda m: phase(m) == "Failed")
    assert machine["status"]["errorMessage"] == api.INSTANCE_NOT_FOUND_MESSAGE
    exists = condition(machine, api.INSTANCE_EXISTS)
    assert (exists["status"], exists["reason"]) == ("False", api.INSTANCE_MISSING)
    assert machine["metadata"]["annotations"][api.INSTANCE_STATE] == "Unknown"
    assert machine["status"]["providerStatus"]["instanceState"] == "Unknown"
    events = await machine_events(kube, namespace, name)
    assert events[api.INSTANCE_MISSING]["type"] == "Warning"

    await delete_and_wait_gone(kube, namespace, name)
