"""`berthmaster simulate` end to end on YAML files, through the CLI entry point."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from berthmaster.cli import main

CLUSTER = """
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata: {name: node1, labels: {kubernetes.io/hostname: node1}}
  spec:
    taints:
    - {key: key1, value: value1, effect: NoSchedule}
    - {key: key1, value: value1, effect: NoExecute}
    - {key: key2, value: value2, effect: NoSchedule}
  status: {allocatable: {cpu: "2", memory: 4Gi, pods: "110"}}
- apiVersion: v1
  kind: Node
  metadata: {name: node2, labels: {kubernetes.io/hostname: node2}}
  status: {allocatable: {cpu: "2", memory: 4Gi, pods: "110"}}
- apiVersion: v1
  kind: Node
  metadata: {name: node3, labels: {kubernetes.io/hostname: node3}}
  status: {allocatable: {cpu: "2", memory: 4Gi, pods: "110"}}
- apiVersion: v1
  kind: Pod
  metadata: {name: low, namespace: default, labels: {security: s1}}
  spec:
    nodeName: node2
    containers: [{name: c, image: nginx, resources: {requests: {cpu: 1500m}}}]
- apiVersion: v1
  kind: Pod
  metadata: {name: other, namespace: default}
  spec:
    nodeName: node3
    priority: 2000
    containers: [{name: c, image: nginx, resources: {requests: {cpu: 1500m}}}]
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high-priority}
value: 1000000
---
apiVersion: v1
kind: Pod
metadata: {name: ignored, namespace: default}
spec:
  containers: [{name: c, image: nginx}]
---
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default, creationTimestamp: "2024-01-01T00:00:00Z"}
spec:
  schedulerName: berthmaster
  containers: [{name: c, image: nginx, resources: {requests: {cpu: 400m}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: big, namespace: default, creationTimestamp: "2024-02-01T00:00:00Z"}
spec:
  schedulerName: berthmaster
  priorityClassName: high-priority
  containers: [{name: c, image: nginx, resources: {requests: {cpu: "1"}}}]
"""

PODS = """
apiVersion: v1
kind: Pod
metadata: {name: pod-s2, namespace: default}
spec:
  affinity:
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - labelSelector:
          matchExpressions:
          - {key: security, operator: In, values: [s1]}
        topologyKey: kubernetes.io/hostname
  containers: [{name: c, image: nginx, resources: {requests: {cpu: 2}}}]
"""


def _files(tmp_path: Path) -> tuple[str, str]:
    cluster, pods = tmp_path / "cluster.yaml", tmp_path / "pods.yaml"
    cluster.write_text(CLUSTER)
    pods.write_text(PODS)
    return str(cluster), str(pods)


def test_simulate_json(tmp_path, capsys):
    cluster, pods = _files(tmp_path)
    assert main(["simulate", "--cluster", cluster, "--pods", pods, "-o", "json"]) == 0
    placements = json.loads(capsys.readouterr().out)["placements"]
    # queue order: priority first (big), then creation time (web), then file order (pod-s2)
    assert [p["pod"] for p in placements] == ["default/big", "default/web", "default/pod-s2"]
    big, web, s2 = placements
    assert big["node"] is None and big["nominatedNode"] == "node2"
    assert big["victims"] == ["default/low"]
    assert big["message"] == ("0/3 nodes are available: 1 node(s) had untolerated taint(s), "
                              "2 Insufficient cpu.")
    assert web["node"] == "node2" and web["victims"] == []
    assert s2["node"] is None and s2["message"] == (
        "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient cpu. "
        "no new claims to deallocate, preemption: 0/3 nodes are available: 1 Preemption is not "
        "helpful for scheduling, 2 No preemption victims found for incoming pod.")


def test_simulate_yaml_explain(tmp_path, capsys):
    cluster, _ = _files(tmp_path)
    assert main(["simulate", "--cluster", cluster, "-o", "yaml", "--explain"]) == 0
    out = yaml.safe_load(capsys.readouterr().out)["placements"]
    web = out[1]
    assert web["nodes"]["node1"]["fits"] is False
    assert web["nodes"]["node1"]["predicates"]["TaintToleration"] == \
        "node(s) had untolerated taint {key1: value1}"
    # LeastAllocated (noderesources/least_allocated.go): on node2 big (1 CPU, nominated there
    # after preempting low) and web (400m) leave 30 % of 2 CPUs; memory, the non-zero default
    # 200Mi each (pkg/scheduler/util/pod_resources.go), leaves 90.2 % of 4Gi: (30 + 90.2) / 2.
    assert web["nodes"]["node2"]["scores"]["NodeResourcesFit"] == 60


def test_simulate_table(tmp_path, capsys):
    cluster, pods = _files(tmp_path)
    assert main(["simulate", "--cluster", cluster, "--pods", pods, "--explain"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["POD", "NODE", "NOMINATED", "VICTIMS", "MESSAGE"]
    assert out[1].split()[:4] == ["default/big", "<none>", "node2", "default/low"]
    assert any("node1: rejected: TaintToleration" in line for line in out)


def test_simulate_with_policy_file(tmp_path, capsys):
    cluster, _ = _files(tmp_path)
    policy = tmp_path / "policy.json"
    policy.write_text('{"kind": "Policy", "apiVersion": "v1", "predicates": '
                      '[{"name": "PodFitsResources"}], "priorities": '
                      '[{"name": "MostRequestedPriority", "weight": 1}]}')
    assert main(["simulate", "--cluster", cluster, "--policy", str(policy), "-o", "json"]) == 0
    placements = json.loads(capsys.readouterr().out)["placements"]
    # the policy lists no taint predicate, yet taints are mandatory: the empty tainted node1
    # still refuses the big pod, which preempts on node2 as with the default policy
    assert placements[0]["node"] is None and placements[0]["nominatedNode"] == "node2"
    assert "1 node(s) had untolerated taint(s)" in placements[0]["message"]


def test_simulate_bad_input(tmp_path, capsys):
    cluster, _ = _files(tmp_path)
    bad_policy = tmp_path / "bad.yaml"
    bad_policy.write_text("kind: Policy\npredicates:\n  - name: Nope\n")
    assert main(["simulate", "--cluster", cluster, "--policy", str(bad_policy)]) == 2
    assert "predicates[0].name: unknown predicate 'Nope'" in capsys.readouterr().err
    assert main(["simulate", "--cluster", str(tmp_path / "missing.yaml")]) == 2
    assert "cannot read" in capsys.readouterr().err
    broken = tmp_path / "broken.yaml"
    broken.write_text("kind: Node\nmetadata: {name: n}\nstatus: {allocatable: {cpu: lots}}\n")
    assert main(["simulate", "--cluster", str(broken)]) == 2
    assert "node n: status.allocatable.cpu: invalid quantity 'lots'" in capsys.readouterr().err
