"""A Machine deleted through its lifecycle hooks on kind (kwok runs the Machine's Node).

The Machine carries a preDrain hook, as in the Machine lifecycle hook documentation. Deleting
it leaves it in phase Deleting with Drainable False (HookPresent) and its Node untouched; once
the hook's owner removes the hook, the operator drains, deletes the instance and the Machine
goes away.
"""

from __future__ import annotations

import json
import time
from typing import Any

import yaml

from e2e.conftest import Kind, wait_for

FINALIZER = "machine.machine.openshift.io"


def machine(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine",
        "metadata": {"name": name},
        "spec": {
            "lifecycleHooks": {"preDrain": [{"name": "MigrateImportantApp",
                                             "owner": "my-app-migration-controller"}]},
            # Keep the e2e pods off this node: they are placed by the other tests.
            "taints": [{"key": "e2e.berthmaster.io/machine", "value": "true",
                        "effect": "NoSchedule"}],
            "providerSpec": {"value": {"apiVersion": "berthmaster.io/v1alpha1",
                                       "kind": "KwokMachineProviderSpec", "zone": "zone-a",
                                       "capacity": {"cpu": "4", "memory": "16Gi"}}},
        },
    }


def condition(found: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for item in (found.get("status") or {}).get("conditions") or []:
        if item["type"] == kind:
            return dict(item)
    return None


def test_machine_waits_for_its_pre_drain_hook(kind: Kind, namespace: str) -> None:
    name = "hooked-worker"
    kind.apply(yaml.safe_dump(machine(name)), namespace)
    wait_for(lambda: FINALIZER in (kind.get("machine", name, "-n", namespace)["metadata"]
                                   .get("finalizers") or []), "the machine finalizer")
    node = wait_for(lambda: ((kind.get("machine", name, "-n", namespace).get("status") or {})
                             .get("nodeRef") or {}).get("name"), "the Machine's nodeRef")
    kind.run("delete", "machine", name, "-n", namespace, "--wait=false")

    def blocked() -> dict[str, Any] | None:
        found = kind.get("machine", name, "-n", namespace)
        drainable = condition(found, "Drainable")
        if found.get("status", {}).get("phase") == "Deleting" and drainable and (
                drainable["status"] == "False"):
            return drainable
        return None

    drainable = wait_for(blocked, "phase Deleting, Drainable False")
    assert drainable["reason"] == "HookPresent"
    time.sleep(5)  # the hook holds: no drain, the Node stays schedulable
    assert not kind.get("node", node)["spec"].get("unschedulable")
    assert kind.exists("machine", name, "-n", namespace)

    kind.run("patch", "machine", name, "-n", namespace, "--type=json", "-p",
             json.dumps([{"op": "remove", "path": "/spec/lifecycleHooks/preDrain"}]))
    wait_for(lambda: not kind.exists("machine", name, "-n", namespace), "the Machine gone")
    wait_for(lambda: not kind.exists("node", node), f"node {node} gone")


def machine_set(name: str, replicas: int) -> dict[str, Any]:
    template = machine("unused")
    spec = template["spec"]
    del spec["lifecycleHooks"]
    selector = {"machine.openshift.io/cluster-api-machineset": name}
    return {
        "apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet",
        "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": selector},
                 "template": {"metadata": {"labels": selector}, "spec": spec}},
    }


def test_a_machineset_grows_running_machines_and_shrinks(kind: Kind, namespace: str) -> None:
    name = "kwok-pool"
    kind.apply(yaml.safe_dump(machine_set(name, 2)), namespace)

    def running() -> list[dict[str, Any]] | None:
        machines = kind.items("machines", "-n", namespace)
        ready = [m for m in machines if (m.get("status") or {}).get("phase") == "Running"
                 and (m["status"].get("nodeRef") or {}).get("name")]
        return ready if len(ready) == 2 else None

    machines = wait_for(running, "two Running Machines with Nodes")
    nodes = [m["status"]["nodeRef"]["name"] for m in machines]
    for node in nodes:
        ready = [c for c in kind.get("node", node)["status"]["conditions"] if c["type"] == "Ready"]
        assert ready[0]["status"] == "True"
    status = wait_for(lambda: (kind.get("machineset", name, "-n", namespace).get("status") or {})
                      if (kind.get("machineset", name, "-n", namespace).get("status") or {})
                      .get("readyReplicas") == 2 else None, "MachineSet status readyReplicas 2")
    assert status["replicas"] == 2
    kind.run("scale", "machineset", name, "-n", namespace, "--replicas=0")
    wait_for(lambda: not kind.items("machines", "-n", namespace), "the Machines gone")
    for node in nodes:
        wait_for(lambda node=node: not kind.exists("node", node), f"node {node} gone")
