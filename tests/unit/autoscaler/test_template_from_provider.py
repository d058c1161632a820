"""Scale from zero with the capacity the provider knows: an AWS MachineSet's instance type.

The provider's capacity stands where cluster-autoscaler's clusterapi provider reads the
infrastructure template's ``status.capacity``; the annotations override it, as there
(kubernetes/autoscaler cluster-autoscaler/cloudprovider/clusterapi/clusterapi_unstructured.go,
InstanceCapacity: "The annotations should override any values from the status block").
OpenShift's AWS MachineSet controller (machine-api-provider-aws pkg/actuators/machineset/
controller.go) writes the same table's vCPU/memoryMb/GPU into annotations; berthmaster reads
the table directly and writes nothing.
"""

from __future__ import annotations

from typing import Any

import pytest

from berthmaster.operator.autoscaler.template import TemplateError, template_node
from tests.unit.autoscaler.builders import make_machine_set


def aws_machine_set(instance_type: str, annotations: dict[str, str] | None = None
                    ) -> dict[str, Any]:
    machine_set = make_machine_set("w", annotations=annotations)
    machine_set["spec"]["template"]["spec"]["providerSpec"]["value"] = {
        "apiVersion": "machine.openshift.io/v1beta1", "kind": "AWSMachineProviderConfig",
        "instanceType": instance_type, "placement": {"region": "us-east-1"}}
    return machine_set


@pytest.mark.parametrize(("instance_type", "cpu", "memory", "gpus"), [
    ("m5.large", "2", "8192Mi", None),
    ("m6i.4xlarge", "16", "65536Mi", None),
    ("g4dn.xlarge", "4", "16384Mi", "1"),
    ("p3.8xlarge", "32", "249856Mi", "4"),
])
def test_an_aws_machine_set_at_zero_takes_its_instance_types_capacity(
        instance_type: str, cpu: str, memory: str, gpus: str | None) -> None:
    capacity = template_node(aws_machine_set(instance_type))["status"]["capacity"]
    assert (capacity["cpu"], capacity["memory"]) == (cpu, memory)
    assert capacity.get("nvidia.com/gpu") == gpus
    assert capacity["pods"] == "110"


def test_openshift_annotations_override_the_table() -> None:
    capacity = template_node(aws_machine_set("m5.large", {
        "machine.openshift.io/vCPU": "3", "machine.openshift.io/memoryMb": "5000",
        "machine.openshift.io/GPU": "2"}))["status"]["capacity"]
    assert (capacity["cpu"], capacity["memory"], capacity["nvidia.com/gpu"]) == (
        "3", "5000Mi", "2")


def test_upstream_annotations_override_the_table() -> None:
    prefix = "capacity.cluster-autoscaler.kubernetes.io/"
    capacity = template_node(aws_machine_set("m5.large", {
        prefix + "memory": "6Gi"}))["status"]["capacity"]
    assert (capacity["cpu"], capacity["memory"]) == ("2", "6Gi")  # cpu still the table's


def test_an_instance_type_outside_the_table_still_needs_annotations() -> None:
    with pytest.raises(TemplateError, match="annotate it with"):
        template_node(aws_machine_set("x9.mega"))
