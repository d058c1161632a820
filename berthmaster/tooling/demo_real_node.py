"""The demo's real node: one Machine of the kubelet provider beside the kwok ones.

When this host can run a real node (the provider's own preflight,
:func:`berthmaster.tooling.kubelet_provider.host_problems`: root, containerd, runc,
the CNI plugins, the kubelet built), ``berthmaster demo`` starts its operator with the kubelet
provider next to kwok (docs/providers.md, "The kubelet provider"), the cluster's CA and a
folder of the cluster for the nodes (:attr:`ControlPlane.real_nodes_dir`, which ``berthmaster
dev down`` empties). The story creates Machine ``demo-real`` (``KubeletMachineProviderSpec``),
waits for its Node to be Ready, has the berthmaster scheduler place a pause pod on it, waits
for the pod to run in the node's containerd and shows ``kubectl get machines,nodes -o wide``.

The Machine is tainted (the pod tolerates it): the demo's earlier pods, some of which the
scheduler keeps retrying, stay where the rules put them.

When the host cannot, the demo says why in one line (the provider's reasons) and shows the
kwok Machines only.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from berthmaster.foundation.kube import CORE, KubeClient, KubeError, resource_path
from berthmaster.operator.machines.providers.registry import PROVIDERS_VARIABLE
from berthmaster.tooling import kubelet_provider as kubelet
from berthmaster.tooling.demo_machines import MACHINE_API, _until
from berthmaster.tooling.devcluster.cluster import ControlPlane, RunningCluster
from berthmaster.tooling.devcluster.images import PAUSE_IMAGE

MACHINE = "demo-real"
POD = "on-real-node"
TAINT = {"key": "berthmaster.io/demo", "value": "real-node", "effect": "NoSchedule"}
NODE_SELECTOR = {"berthmaster.io/node": "kubelet"}  # the label the provider's kubelet registers


def operator_env(plane: ControlPlane) -> dict[str, str]:
    """The operator's environment for the kubelet provider beside kwok."""
    return {PROVIDERS_VARIABLE: "kwok,kubelet",
            kubelet.PKI_VARIABLE: str(plane.root / "pki"),
            kubelet.STATE_VARIABLE: str(plane.real_nodes_dir)}


def host_problems(plane: ControlPlane) -> list[str]:
    """Why this host cannot run the demo's real node (nothing when it can)."""
    return kubelet.host_problems(plane.real_nodes_dir)


def real_machine(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine",
        "metadata": {"name": MACHINE, "namespace": namespace},
        "spec": {"taints": [TAINT],
                 "providerSpec": {"value": {"apiVersion": kubelet.API_VERSION,
                                            "kind": kubelet.KIND, "maxPods": 20}}},
    }


def real_pod(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": POD, "namespace": namespace},
        "spec": {"schedulerName": "berthmaster", "nodeSelector": NODE_SELECTOR,
                 "tolerations": [{**TAINT, "operator": "Equal"}],
                 "terminationGracePeriodSeconds": 1,
                 "containers": [{"name": "pause", "image": PAUSE_IMAGE,
                                 "imagePullPolicy": "Never"}]},
    }


def _ready(node: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])


async def real_node_story(kube: KubeClient, cluster: RunningCluster,
                          namespace: str) -> list[str]:
    """Run the story; returns the lines to print."""
    machine_path = resource_path(MACHINE_API, "machines", namespace, MACHINE)
    await kube.create(resource_path(MACHINE_API, "machines", namespace), real_machine(namespace))
    started = time.monotonic()

    async def node_ready() -> str | None:
        status = (await kube.get(machine_path)).get("status") or {}
        if status.get("phase") == "Failed":
            raise KubeError(0, "MachineFailed", f"Machine {MACHINE} Failed: "
                            f"{status.get('errorMessage')}")
        name = (status.get("nodeRef") or {}).get("name")
        if status.get("phase") != "Running" or not name:
            return None
        try:
            node = await kube.get(resource_path(CORE, "nodes", None, name))
        except KubeError as error:
            if error.not_found:
                return None
            raise
        return str(name) if _ready(node) else None

    node = await _until(node_ready, f"Machine {MACHINE}'s Node to be Ready", timeout=240)
    lines = [f"Machine {MACHINE} ({kubelet.KIND}): Node {node} Ready in "
             f"{time.monotonic() - started:.1f}s"]
    pods = resource_path(CORE, "pods", namespace)
    await kube.create(pods, real_pod(namespace))
    started = time.monotonic()

    async def running() -> dict[str, Any] | None:
        pod = await kube.get(resource_path(CORE, "pods", namespace, POD))
        return pod if (pod.get("status") or {}).get("phase") == "Running" else None

    pod = await _until(running, f"pod {POD} to run on Node {node}", timeout=120)
    lines.append(f"  pod {POD} placed by the berthmaster scheduler on {pod['spec']['nodeName']}, "
                 f"Running in {time.monotonic() - started:.1f}s (pod IP "
                 f"{(pod.get('status') or {}).get('podIP', '-')})")
    shown = await asyncio.to_thread(cluster.kubectl, "-n", namespace, "get", "machines,nodes",
                                    "-o", "wide")
    lines.append(f"  kubectl -n {namespace} get machines,nodes -o wide:")
    lines += [f"    {row}" for row in (shown.stdout or shown.stderr).splitlines()]
    return lines
