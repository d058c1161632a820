"""`berthmaster simulate` on a snapshot taken with kubectl from the local control plane."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from berthmaster.foundation.kube import CORE, KubeClient, resource_path
from berthmaster.scheduler import simulate
from tests.support.waiting import wait_for


async def test_simulate_on_kubectl_get_nodes_pods(kube: KubeClient, namespace: str, nodes: Any,
                                                  cluster: Any, tmp_path: Path,
                                                  capsys: Any) -> None:
    group = f"sim-{uuid.uuid4().hex[:6]}"
    full = await nodes.create(labels={"sim": group}, capacity={"cpu": "2", "memory": "4Gi",
                                                               "pods": "110"})
    free = await nodes.create(labels={"sim": group}, capacity={"cpu": "2", "memory": "4Gi",
                                                               "pods": "110"})
    tainted = await nodes.create(labels={"sim": group}, taints=[
        {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}])
    full_name = full["metadata"]["name"]
    running = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "running", "namespace": namespace},
               "spec": {"nodeName": full_name, "containers": [{
                   "name": "c", "image": "registry.example/app:1",
                   "resources": {"requests": {"cpu": "1500m"}}}]}}
    await kube.create(resource_path(CORE, "pods", namespace), running)

    async def running_phase() -> bool:
        pod = await kube.get(resource_path(CORE, "pods", namespace, "running"))
        return pod.get("status", {}).get("phase") == "Running"

    await wait_for(running_phase, timeout=60, what="pod running Running on its kwok node")

    dump = cluster.kubectl("get", "nodes,pods", "-A", "-o", "yaml")
    assert dump.returncode == 0, dump.stderr
    snapshot = tmp_path / "cluster.yaml"
    snapshot.write_text(dump.stdout)
    pods = tmp_path / "pods.yaml"
    pods.write_text(f"""
apiVersion: v1
kind: Pod
metadata: {{name: web, namespace: {namespace}}}
spec:
  nodeSelector: {{sim: {group}}}
  containers: [{{name: c, image: nginx, resources: {{requests: {{cpu: "1"}}}}}}]
""")
    parser = __import__("argparse").ArgumentParser()
    simulate.add_arguments(parser)
    args = parser.parse_args(["--cluster", str(snapshot), "--pods", str(pods), "-o", "json",
                              "--explain"])
    assert simulate.run(args) == 0
    # the dump holds every namespace: other tests' pending berthmaster pods are placed too
    (placement,) = [p for p in json.loads(capsys.readouterr().out)["placements"]
                    if p["pod"] == f"{namespace}/web"]
    # the full node lacks cpu, the tainted one is not tolerated: only the free node fits
    assert placement["node"] == free["metadata"]["name"]
    verdicts = placement["nodes"]
    assert verdicts[full_name]["predicates"]["NodeResourcesFit"] == "Insufficient cpu"
    assert verdicts[tainted["metadata"]["name"]]["predicates"]["TaintToleration"] == \
        "node(s) had untolerated taint {dedicated: gpu}"
