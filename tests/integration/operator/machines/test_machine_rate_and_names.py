"""Machines at the client's rate, and Machines that can never get a Node said so.

- A MachineSet far short of Machines creates them through the operator's client rate limiter
  (``--kube-api-qps``/``--kube-api-burst``, client-go's token bucket, util/flowcontrol/
  throttle.go; kube-controller-manager's defaults, pkg/controller/apis/config/v1alpha1/
  defaults.go), in batches handed back to the work queue (kube-controller-manager's ReplicaSet
  ``BurstReplicas``, pkg/controller/replicaset/replica_set.go; machine-api-operator's
  pkg/controller/machineset/controller.go ``syncReplicas`` creates them all at once with no
  limit but its client's), so another MachineSet is reconciled meanwhile.
- A Machine whose name cannot name a Node (more than 63 characters: the Node's
  ``kubernetes.io/hostname`` label carries it) fails at once with ``InstanceExists=False`` and
  a ``FailedCreate`` Warning naming ``metadata.name``, instead of staying Provisioning.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

from berthmaster.foundation.kube import KubeClient, KubeError
from berthmaster.operator.machines import api
from berthmaster.tooling.devcluster.cluster import RunningCluster
from tests.integration.operator.machines.conftest import (
    OperatorProcess,
    condition,
    get_machine,
    kwok_machine,
    machine_events,
)
from tests.integration.operator.machines.test_machinesets import machines_of, machineset
from tests.support.waiting import wait_for

QPS, BURST = 10, 10


async def test_a_large_machineset_fills_at_the_client_rate_while_another_reconciles(
        kube: KubeClient, namespace: str, machine_api: RunningCluster, tmp_path: Path) -> None:
    operator = OperatorProcess(str(machine_api.kubeconfig), tmp_path / "operator.log",
                               args=("--kube-api-qps", str(QPS), "--kube-api-burst", str(BURST)))
    operator.start()
    big = machineset("big", 150)
    # Machines that fail validation at once: no Node per Machine, the rate is the subject
    big["spec"]["template"]["spec"]["providerSpec"]["value"]["capacity"] = {"cpu": "lots"}
    try:
        await kube.create(api.machineset_path(namespace), big)
        await wait_for(lambda: _at_least(kube, namespace, "big", 20), timeout=120,
                       what="20 Machines of the big MachineSet")
        await kube.create(api.machineset_path(namespace), machineset("small", 1))
        await wait_for(lambda: _at_least(kube, namespace, "small", 1), timeout=120,
                       what="the small MachineSet's Machine")
        # reconciled while the big one was still being filled
        assert len(await machines_of(kube, namespace, "big")) < 150
        created = await wait_for(lambda: _at_least(kube, namespace, "big", 80), timeout=240,
                                 what="80 Machines of the big MachineSet")
        per_second = Counter(_created(m) for m in created)
        first, last = min(per_second), max(per_second)
        for start in range(first, last + 1):
            for end in range(start, last + 1):
                made = sum(n for second, n in per_second.items() if start <= second <= end)
                # made within less than end - start + 1 seconds
                assert made <= BURST + QPS * (end - start + 1), (start, end, made)
    finally:
        operator.stop()
        print(operator.log()[-3000:])
        await _release_machines(kube, namespace)


async def test_a_machine_whose_name_cannot_name_a_node_fails_saying_so(
        kube: KubeClient, namespace: str, operator: OperatorProcess) -> None:
    name = "m" + "x" * 69  # 70 characters
    await kube.create(api.machine_path(namespace), kwok_machine(name))

    async def failed() -> dict[str, Any] | None:
        machine = await get_machine(kube, namespace, name)
        return machine if (machine or {}).get("status", {}).get("phase") == "Failed" else None

    machine = await wait_for(failed, timeout=60, what=f"Machine {name} Failed")
    exists = condition(machine, api.INSTANCE_EXISTS)
    assert exists["status"] == "False" and exists["reason"] == "InstanceNotCreated"
    assert "metadata.name" in exists["message"] and "63" in exists["message"]
    assert machine["status"]["errorReason"] == "InvalidConfiguration"
    events = await machine_events(kube, namespace, name)
    assert events["FailedCreate"]["type"] == "Warning"
    assert "metadata.name" in events["FailedCreate"]["message"]
    assert await kube.get_if_exists(api.node_path(name)) is None


async def _at_least(kube: KubeClient, namespace: str, name: str, count: int
                    ) -> list[dict[str, Any]] | None:
    machines = await machines_of(kube, namespace, name)
    return machines if len(machines) >= count else None


def _created(machine: dict[str, Any]) -> int:
    stamp = machine["metadata"]["creationTimestamp"].replace("Z", "+00:00")
    return int(datetime.fromisoformat(stamp).timestamp())


async def _release_machines(kube: KubeClient, namespace: str) -> None:
    """With the operator stopped: drop the finalizers, so the namespace can go."""
    items, _ = await kube.list_all(api.machine_path(namespace))
    for machine in items:
        with contextlib.suppress(KubeError):
            await kube.patch(api.machine_path(namespace, machine["metadata"]["name"]),
                             {"metadata": {"finalizers": None}})
