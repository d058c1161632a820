"""The AWS provider: OpenShift's ``AWSMachineProviderConfig`` Machines as EC2 instances (boto3).

Install with ``pip install 'berthmaster[aws]'`` (boto3 is an optional extra: the kwok-only
operator and the scheduler never need it, and the image stays small) and enable with
``BERTHMASTER_MACHINE_PROVIDERS=kwok,aws`` (the chart's ``operator.machineProviders``): it is
never on by default, so an OpenShift cluster's own machine-api-provider-aws keeps its Machines.

Design: the requests and the reading of answers are pure (:mod:`.instances`, :mod:`.spec`);
this class does the I/O, each boto3 call in a worker thread (``asyncio.to_thread``), as
machine-api-provider-aws's reconciler does it (pkg/actuators/machine/reconciler.go):

- exists: DescribeInstances by the Machine's tags in the existing states; none is None.
- update: the newest running instance's record; its Name and cluster tags put back when they
  drifted (``correctExistingTags``).
- create: an instance found by the tags is taken as the Machine's (never a second one);
  otherwise the instance type is checked (DescribeInstanceTypes: an unknown one is an invalid
  configuration, not a retry), the subnet and security groups are resolved (by id, or by
  filters: DescribeSubnets/DescribeSecurityGroups, the subnet filtered by the placement's
  zone), the AMI's root device read (DescribeImages) and RunInstances called.
- delete: TerminateInstances on every instance the tags find; none found is success.

Credentials: the ``credentialsSecret`` in the Machine's namespace, keys ``aws_access_key_id``
and ``aws_secret_access_key`` (upstream's pkg/client/client.go: a missing Secret or key is an
invalid configuration), or, with no ``credentialsSecret``, boto3's default chain (the pod's
web identity, instance profile, environment). The EC2 endpoint is boto3's own setting:
``AWS_ENDPOINT_URL_EC2`` (or ``AWS_ENDPOINT_URL``) in the operator's environment points it at
an emulator or a private endpoint; nothing in the providerSpec changes.
"""

from __future__ import annotations

import asyncio
import base64
import functools
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from berthmaster.foundation.kube import CORE, KubeClient, resource_path
from berthmaster.operator.machines.providers import Instance, InvalidProviderSpec
from berthmaster.operator.machines.providers.aws import instance_types, instances
from berthmaster.operator.machines.providers.aws.spec import (
    KIND,
    cluster_id,
    provider_spec,
    region,
    validate,
    zone,
)

JSON = dict[str, Any]
T = TypeVar("T")
ACCESS_KEY_ID = "aws_access_key_id"
SECRET_ACCESS_KEY = "aws_secret_access_key"
USER_DATA_KEY = "userData"
INVALID_INSTANCE_TYPE = "InvalidInstanceType"


def _error_code(error: Exception) -> str:
    return str((getattr(error, "response", None) or {}).get("Error", {}).get("Code") or "")


class AWSProvider:
    """EC2 instances for ``AWSMachineProviderConfig`` Machines."""

    kind = KIND
    name = "aws"
    enabled_by_default = False

    def __init__(self, kube: KubeClient):
        self.kube = kube
        self._clients: dict[tuple[str, str, str], Any] = {}
        # The instance ``instance_exists`` just described, by Machine uid: the reconcile's
        # ``update_instance`` that follows reads it instead of describing it again.
        self._described: dict[str, JSON] = {}

    @staticmethod
    def template_capacity(provider_spec: Mapping[str, Any]) -> dict[str, str] | None:
        return instance_types.capacity(str(provider_spec.get("instanceType") or ""))

    def validate(self, machine: JSON) -> list[str]:
        return validate(machine)

    # -- I/O helpers -----------------------------------------------------------------------------

    async def _secret(self, machine: JSON, name: str, what: str) -> dict[str, bytes]:
        namespace = str(machine["metadata"].get("namespace"))
        secret = await self.kube.get_if_exists(resource_path(CORE, "secrets", namespace, name))
        if secret is None:
            raise InvalidProviderSpec(
                f"Machine {machine['metadata']['name']}: aws {what} secret {namespace}/{name} "
                f"not found; create it or fix spec.providerSpec.value")
        return {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()}

    async def _ec2(self, machine: JSON) -> Any:
        value = provider_spec(machine)
        ref = (value.get("credentialsSecret") or {}).get("name")
        key_id = secret_key = ""
        if ref:
            data = await self._secret(machine, str(ref), "credentials")
            for key in (ACCESS_KEY_ID, SECRET_ACCESS_KEY):
                if key not in data:
                    raise InvalidProviderSpec(
                        f"Machine {machine['metadata']['name']}: AWS credentials secret {ref} "
                        f"did not contain key {key}; give it the keys {ACCESS_KEY_ID} and "
                        f"{SECRET_ACCESS_KEY}")
            key_id, secret_key = data[ACCESS_KEY_ID].decode(), data[SECRET_ACCESS_KEY].decode()
        cache_key = (region(value), key_id, secret_key)
        if cache_key not in self._clients:
            self._clients[cache_key] = await asyncio.to_thread(
                _make_client, region(value), key_id or None, secret_key or None)
        return self._clients[cache_key]

    @staticmethod
    async def _call(method: Callable[..., T], **params: Any) -> T:
        return await asyncio.to_thread(functools.partial(method, **params))

    async def _find(self, ec2: Any, machine: JSON) -> list[JSON]:
        pages = await self._call(ec2.describe_instances,
                                 Filters=instances.lookup_filters(machine, cluster_id(machine)))
        return [i for r in pages.get("Reservations") or [] for i in r.get("Instances") or []]

    # -- the contract ----------------------------------------------------------------------------

    async def instance_exists(self, machine: JSON) -> Instance | None:
        found = instances.newest(await self._find(await self._ec2(machine), machine))
        uid = str(machine["metadata"].get("uid") or "")
        if found is None:
            self._described.pop(uid, None)
            return None
        self._described[uid] = found
        return instances.record(machine, found)

    async def update_instance(self, machine: JSON, instance: Instance) -> Instance:
        ec2 = await self._ec2(machine)
        found = self._described.pop(str(machine["metadata"].get("uid") or ""), None)
        if found is None:
            found = instances.newest(await self._find(ec2, machine))
        if found is None:
            return instance
        wanted = instances.tags(machine, cluster_id(machine))[-2:]  # cluster tag and Name
        have = {t.get("Key"): t.get("Value") for t in found.get("Tags") or []}
        if any(have.get(t["Key"]) != t["Value"] for t in wanted):
            await self._call(ec2.create_tags, Resources=[found["InstanceId"]], Tags=wanted)
        return instances.record(machine, found)

    async def create_instance(self, machine: JSON) -> Instance:
        ec2 = await self._ec2(machine)
        existing = instances.newest(await self._find(ec2, machine))
        if existing is not None:
            return instances.record(machine, existing)
        name = machine["metadata"]["name"]
        value = provider_spec(machine)
        where = f"Machine {name}: spec.providerSpec.value"
        try:
            await self._call(ec2.describe_instance_types, InstanceTypes=[value["instanceType"]])
        except Exception as error:
            if _error_code(error) != INVALID_INSTANCE_TYPE:
                raise
            raise InvalidProviderSpec(
                f"{where}.instanceType: {value['instanceType']!r} is not an EC2 instance type "
                f"in {region(value)}; use one EC2 offers there, such as m6i.large") from error
        image_id, root_device = await self._image(ec2, machine)
        user_data = None
        user_data_ref = (value.get("userDataSecret") or {}).get("name")
        if user_data_ref:
            data = await self._secret(machine, str(user_data_ref), "user data")
            user_data = data.get(USER_DATA_KEY)
        request = instances.run_instances_request(
            machine, cluster_id(machine), image_id=image_id,
            subnet_id=await self._subnet(ec2, machine),
            security_group_ids=await self._security_groups(ec2, machine),
            root_device_name=root_device, user_data=user_data)
        answer = await self._call(ec2.run_instances, **request)
        return instances.record(machine, answer["Instances"][0])

    async def delete_instance(self, machine: JSON) -> None:
        self._described.pop(str(machine["metadata"].get("uid") or ""), None)
        ec2 = await self._ec2(machine)
        found = await self._find(ec2, machine)
        if found:
            await self._call(ec2.terminate_instances,
                             InstanceIds=[i["InstanceId"] for i in found])

    # -- lookups for create ----------------------------------------------------------------------

    async def _image(self, ec2: Any, machine: JSON) -> tuple[str, str | None]:
        ref = provider_spec(machine).get("ami") or {}
        where = f"Machine {machine['metadata']['name']}: spec.providerSpec.value.ami"
        if ref.get("id"):
            params: JSON = {"ImageIds": [ref["id"]]}
        else:
            params = {"Filters": instances.reference_filters(ref)}
        try:
            images = (await self._call(ec2.describe_images, **params)).get("Images") or []
        except Exception as error:
            if not _error_code(error).startswith("InvalidAMIID"):
                raise
            images = []
        if not images:
            raise InvalidProviderSpec(f"{where}: no AMI matches {ref}; give the id of an AMI "
                                      f"in {region(provider_spec(machine))}")
        image = sorted(images, key=lambda i: str(i.get("CreationDate") or ""))[-1]
        return str(image["ImageId"]), image.get("RootDeviceName")

    async def _subnet(self, ec2: Any, machine: JSON) -> str | None:
        value = provider_spec(machine)
        ref = value.get("subnet") or {}
        if ref.get("id"):
            return str(ref["id"])
        if not ref.get("filters"):
            return None
        filters = instances.reference_filters(ref)
        if zone(value):
            filters.append({"Name": "availability-zone", "Values": [zone(value)]})
        subnets = (await self._call(ec2.describe_subnets, Filters=filters)).get("Subnets") or []
        if not subnets:
            raise InvalidProviderSpec(
                f"Machine {machine['metadata']['name']}: spec.providerSpec.value.subnet: no "
                f"subnet matches {ref['filters']} in zone {zone(value) or '(any)'}; fix the "
                "filters or give the subnet's id")
        return str(subnets[0]["SubnetId"])

    async def _security_groups(self, ec2: Any, machine: JSON) -> list[str]:
        ids: list[str] = []
        for index, ref in enumerate(provider_spec(machine).get("securityGroups") or []):
            if ref.get("id"):
                ids.append(str(ref["id"]))
                continue
            groups = (await self._call(ec2.describe_security_groups,
                                       Filters=instances.reference_filters(ref))
                      ).get("SecurityGroups") or []
            if not groups:
                raise InvalidProviderSpec(
                    f"Machine {machine['metadata']['name']}: spec.providerSpec.value."
                    f"securityGroups[{index}]: no security group matches {ref.get('filters')}; "
                    "fix the filters or give the group's id")
            ids += [str(g["GroupId"]) for g in groups]
        return ids


def _make_client(region_name: str, key_id: str | None, secret_key: str | None) -> Any:
    """An EC2 client (boto3 imported here: only a running AWS provider needs it)."""
    try:
        import boto3
    except ImportError as error:
        raise RuntimeError("the aws machine provider needs boto3: install "
                           "'berthmaster[aws]' in the operator's image") from error
    session = boto3.session.Session(aws_access_key_id=key_id, aws_secret_access_key=secret_key,
                                    region_name=region_name)
    return session.client("ec2")
