"""Scale from zero with the capacity the provider knows, on the local control plane.

An OpenShift AWS MachineSet at zero replicas without capacity annotations: the autoscaler's
template node takes its instance type's vCPU and memory from the AWS provider's table
(cluster-autoscaler's cloudprovider/aws/ec2_instance_types.go, docs/providers.md), so a pending
pod that fits an m5.xlarge (4 vCPU, 16 GiB) triggers a scale-up and one that does not is told
so. Only the autoscaler acts here: the AWS provider does not run (the MachineSet's Machines are
another controller's), so no instance is made; the decision is the MachineSet's replicas.
"""

from __future__ import annotations

from typing import Any

from berthmaster.foundation.kube import CORE, KubeClient, resource_path
from tests.integration.autoscaler.test_autoscaler import (
    AUTOSCALING,
    MACHINES,
    MAX_KEY,
    apply,
    cluster_autoscaler,
    crds,  # noqa: F401  (fixture)
    events_for,
    machine_autoscaler,
    machine_set_annotations,
    operator,  # noqa: F401  (fixture)
    pod,
    scheduler,  # noqa: F401  (fixture)
)
from tests.support.waiting import wait_for

JSON = dict[str, Any]


def aws_machine_set(name: str, namespace: str) -> JSON:
    labels = {"machine.openshift.io/cluster-api-machineset": name,
              "machine.openshift.io/cluster-api-cluster": "infra"}
    return {
        "apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"replicas": 0, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels}, "spec": {
                     "metadata": {"labels": {"pool": name}},
                     "providerSpec": {"value": {
                         "apiVersion": "machine.openshift.io/v1beta1",
                         "kind": "AWSMachineProviderConfig", "instanceType": "m5.xlarge",
                         "ami": {"id": "ami-1"},
                         "placement": {"region": "us-east-1",
                                       "availabilityZone": "us-east-1a"}}}}}},
    }


async def test_an_aws_machineset_at_zero_scales_up_by_its_instance_types_capacity(
        cluster: Any, operator: Any, scheduler: Any, kube: KubeClient,  # noqa: F811
        namespace: str) -> None:
    pool = f"aws-{namespace}"
    assert apply(cluster, aws_machine_set(pool, namespace)).returncode == 0
    assert apply(cluster, machine_autoscaler("ma", namespace, pool, 0, 3)).returncode == 0
    assert apply(cluster, cluster_autoscaler({"resourceLimits": {"maxNodesTotal": 20}})
                 ).returncode == 0
    try:
        # the pool is a node group once its MachineAutoscaler has annotated it; a pod seen
        # before that is told there is "no node group to scale up"
        async def annotated() -> bool:
            notes = await machine_set_annotations(kube, namespace, pool)
            return notes.get(MAX_KEY) == "3"

        await wait_for(annotated, timeout=60, what=f"{pool} annotated by its autoscaler")
        too_big = pod("too-big", namespace, "6", pool)  # more than m5.xlarge's 4 vCPU
        await kube.create(resource_path(CORE, "pods", namespace), too_big)

        async def told() -> list[JSON]:
            return await events_for(kube, namespace, "too-big", "NotTriggerScaleUp")
        events = await wait_for(told, timeout=60,
                                what="NotTriggerScaleUp for a pod bigger than m5.xlarge")
        # the template node's 4 CPUs were weighed (without a capacity there is no template).
        # Node groups other tests of the shared cluster leave behind while their namespaces
        # terminate add their own reason: the pod selects this pool only.
        prefix = "pod didn't trigger scale-up: "
        message = events[0]["message"]
        assert message.startswith(prefix)
        reasons = message[len(prefix):].split(", ")
        assert "1 Insufficient cpu" in reasons
        assert all(r == "1 Insufficient cpu"
                   or r.endswith(" node(s) didn't match Pod's node affinity/selector")
                   for r in reasons), message

        await kube.create(resource_path(CORE, "pods", namespace),
                          pod("fits", namespace, "3500m", pool))
        machine_set = resource_path(MACHINES, "machinesets", namespace, pool)

        async def scaled() -> bool:
            return int((await kube.get(machine_set))["spec"].get("replicas") or 0) == 1
        await wait_for(scaled, timeout=60, what="the AWS MachineSet scaled from 0 to 1")

        # the event is posted after the resize: wait for it rather than read it once
        async def triggered() -> list[JSON]:
            return await events_for(kube, namespace, "fits", "TriggeredScaleUp")
        found = await wait_for(triggered, timeout=30, what="TriggeredScaleUp for the pod")
        assert pool in found[0]["message"]
    finally:
        await kube.delete(resource_path(AUTOSCALING, "clusterautoscalers", name="default"))
