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
