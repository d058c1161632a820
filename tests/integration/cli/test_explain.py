"""`berthmaster explain pod` and `simulate --from-cluster` on the real API server.

The commands run as subprocesses, as an administrator (or kubectl, through the
``kubectl-berthmaster`` plugin) runs them, against the session's kube-apiserver with kwok nodes.
Nothing schedules the berthmaster pods here (no berthmaster scheduler runs in this session), so
they stay pending and are what ``explain`` is asked about.

Upstream: kube-scheduler's per-node reasons are the FitError of pkg/scheduler/schedule_one.go
``findNodesThatFitPod``; kubectl finds plugins as executables named ``kubectl-<name>`` on PATH
(k8s.io/kubectl pkg/cmd/plugin/plugin.go ``ValidPluginFilenamePrefixes``); kube-scheduler 1.22's
``--policy-configmap`` read the key ``policy.cfg`` (pkg/scheduler/apis/config/types.go
``SchedulerPolicyConfigMapKey``) from ``--policy-configmap-namespace``, default kube-system.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from berthmaster.foundation.kube import CORE, KubeClient, group_path, resource_path
from berthmaster.scheduler.live import labelled_policy_configmaps
from berthmaster.tooling.python import BERTHMASTER_CLI
from tests.integration.cli.test_cli_failures import closed_port, kubeconfig, one_line
from tests.support.accounts import account_kubeconfig, granted
from tests.support.waiting import wait_for

VENV_BIN = Path(sys.executable).parent
NOT_FOUND = "node(s) didn't match Pod's node affinity/selector"


async def berthmaster(*argv: str, env: dict[str, str] | None = None
                      ) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, **(env or {})}
    return await asyncio.to_thread(
        subprocess.run, [*BERTHMASTER_CLI, *argv], capture_output=True,
        text=True, timeout=120, env=environment, check=False)


def pod(name: str, namespace: str, group: str, cpu: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
            "spec": {"schedulerName": "berthmaster", "nodeSelector": {"sim": group},
                     "containers": [{"name": "c", "image": "registry.example/app:1",
                                     "resources": {"requests": {"cpu": cpu}}}], **spec}}


@pytest.fixture
async def scene(kube: KubeClient, namespace: str, nodes: Any) -> dict[str, str]:
    """Two nodes of one group (4 and 1 CPUs), a running pod on the big one, and two pending
    berthmaster pods: ``a-nowhere`` (8 CPUs: fits no node) then ``b-somewhere`` (1500m: only
    the big node has room).

    The session's cluster is shared: chart tests before this one install releases whose
    scheduler-policy ConfigMap lives on while their namespace terminates. The tests here assert
    what explain says with no such ConfigMap, so the scene starts once they are gone."""
    await wait_for(lambda: _no_chart_policy(kube), timeout=180,
                   what="no chart scheduler-policy ConfigMap left by earlier tests")
    group = f"explain-{uuid.uuid4().hex[:6]}"
    big = await nodes.create(labels={"sim": group},
                             capacity={"cpu": "4", "memory": "8Gi", "pods": "110"})
    small = await nodes.create(labels={"sim": group},
                               capacity={"cpu": "1", "memory": "8Gi", "pods": "110"})
    names = {"big": big["metadata"]["name"], "small": small["metadata"]["name"],
             "namespace": namespace}
    pods = resource_path(CORE, "pods", namespace)
    await kube.create(pods, pod("db", namespace, group, "500m", nodeName=names["big"]))
    await kube.create(pods, pod("a-nowhere", namespace, group, "8"))
    await kube.create(pods, pod("b-somewhere", namespace, group, "1500m"))

    async def db_running() -> bool:
        got = await kube.get(resource_path(CORE, "pods", namespace, "db"))
        return got.get("status", {}).get("phase") == "Running"

    await wait_for(db_running, timeout=60, what="pod db Running on its kwok node")
    return names


async def explain_json(cluster: Any, reference: str, *extra: str) -> dict[str, Any]:
    result = await berthmaster("explain", "pod", reference, "-o", "json",
                               "--kubeconfig", str(cluster.kubeconfig), *extra)
    assert result.returncode == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


async def test_explain_json_reasons(cluster: Any, scene: dict[str, str]) -> None:
    namespace, big, small = scene["namespace"], scene["big"], scene["small"]
    nowhere = await explain_json(cluster, f"{namespace}/a-nowhere")
    assert nowhere["pod"] == f"{namespace}/a-nowhere"
    assert nowhere["policy"] == "the default profile (kube-scheduler 1.35's)"
    assert nowhere["notes"][0].startswith("no berthmaster scheduler policy ConfigMap found")
    (placement,) = nowhere["placements"]
    assert placement["node"] is None and placement["nominatedNode"] is None
    assert "2 Insufficient cpu" in placement["message"]
    for node in (big, small):
        assert placement["nodes"][node]["fits"] is False
        assert placement["nodes"][node]["predicates"]["NodeResourcesFit"] == "Insufficient cpu"
    others = set(placement["nodes"]) - {big, small}
    assert all(placement["nodes"][n]["predicates"]["NodeAffinity"] == NOT_FOUND
               for n in others)

    somewhere = await explain_json(cluster, "b-somewhere", "-n", namespace)
    (placement,) = somewhere["placements"]
    assert placement["node"] == big
    assert placement["message"] == f"Successfully assigned {namespace}/b-somewhere to {big}"
    assert placement["nodes"][big]["fits"] is True
    # LeastAllocated (noderesources/least_allocated.go) on the big node: cpu (500m + 1500m) of 4
    # leaves 50 %; memory, the non-zero default 200Mi for each of db and b-somewhere
    # (pkg/scheduler/util/pod_resources.go), of 8Gi leaves 95.1 %: (50 + 95.1) / 2 = 72.
    assert placement["nodes"][big]["scores"]["NodeResourcesFit"] == 72
    assert placement["nodes"][small]["predicates"]["NodeResourcesFit"] == "Insufficient cpu"


async def test_explain_table(cluster: Any, scene: dict[str, str]) -> None:
    namespace, big, small = scene["namespace"], scene["big"], scene["small"]
    result = await berthmaster("explain", "pod", f"{namespace}/b-somewhere",
                               "--kubeconfig", str(cluster.kubeconfig))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "policy: the default profile (kube-scheduler 1.35's)"
    assert lines[1].startswith("note: no berthmaster scheduler policy ConfigMap found")
    assert lines[2].split() == ["POD", "NODE", "NOMINATED", "VICTIMS", "MESSAGE"]
    assert lines[3].split()[:2] == [f"{namespace}/b-somewhere", big]
    assert any(line.startswith(f"    {big}: fits, score ") for line in lines)
    assert f"    {small}: rejected: NodeResourcesFit: Insufficient cpu" in lines


async def test_explain_agrees_with_simulate_on_the_same_cluster(
        cluster: Any, scene: dict[str, str], tmp_path: Path) -> None:
    """simulate --from-cluster and a replay of its --save file give identical JSON; explain's
    entry for each pending pod is simulate --explain's entry for it (a-nowhere is queued first
    and fits nowhere, so it changes nothing for b-somewhere)."""
    namespace = scene["namespace"]
    saved = tmp_path / "snapshot.json"
    live = await berthmaster("simulate", "--from-cluster", "--kubeconfig",
                             str(cluster.kubeconfig), "--save", str(saved), "--explain",
                             "-o", "json")
    assert live.returncode == 0, live.stderr
    replay = await berthmaster("simulate", "--cluster", str(saved), "--explain", "-o", "json")
    assert replay.returncode == 0, replay.stderr
    assert json.loads(live.stdout) == json.loads(replay.stdout)
    simulated = {p["pod"]: p for p in json.loads(replay.stdout)["placements"]}
    for name in ("a-nowhere", "b-somewhere"):
        explained = await explain_json(cluster, f"{namespace}/{name}")
        assert explained["placements"] == [simulated[f"{namespace}/{name}"]]


async def test_a_bound_pod_is_explained_as_pending(cluster: Any, scene: dict[str, str]) -> None:
    namespace, big, small = scene["namespace"], scene["big"], scene["small"]
    document = await explain_json(cluster, f"{namespace}/db")
    assert f"pod {namespace}/db is bound to node {big}; explained as if it were pending " \
           "(its own placement is not counted)" in document["notes"]
    (placement,) = document["placements"]
    assert placement["nodes"][big]["fits"] is True
    assert placement["nodes"][small]["fits"] is True


async def test_kubectl_plugin(cluster: Any, scene: dict[str, str]) -> None:
    namespace = scene["namespace"]
    path = f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"
    result = await asyncio.to_thread(
        subprocess.run, [str(cluster.binary("kubectl")), "berthmaster", "explain", "pod",
                         f"{namespace}/b-somewhere", "-o", "json"],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "PATH": path, "KUBECONFIG": str(cluster.kubeconfig)})
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["placements"][0]["node"] == scene["big"]


async def test_pod_not_found(cluster: Any, namespace: str) -> None:
    result = await berthmaster("explain", "pod", f"{namespace}/missing",
                               "--kubeconfig", str(cluster.kubeconfig))
    assert result.returncode == 2
    assert one_line(result) == (
        f"berthmaster explain: pod {namespace}/missing not found; check the namespace and name "
        f"(kubectl get pods -n {namespace})")


@pytest.mark.parametrize("argv", [["explain", "pod", "default/web"],
                                  ["simulate", "--from-cluster"]])
async def test_unreachable_api_server(argv: list[str], tmp_path: Path) -> None:
    server = f"https://127.0.0.1:{closed_port()}"
    path = kubeconfig(tmp_path / "kubeconfig", server, {"token": "t"})
    result = await berthmaster(*argv, "--kubeconfig", str(path))
    assert result.returncode == 3
    assert one_line(result).startswith(
        f"berthmaster {argv[0]}: cannot reach the API server at {server} after 4 attempts (")


POLICY = ('{"kind": "Policy", "apiVersion": "v1", "predicates": [{"name": "PodFitsResources"}],'
          ' "priorities": [{"name": "MostRequestedPriority", "weight": 2}]}')


async def test_the_scheduler_policy_configmap(kube: KubeClient, cluster: Any,
                                              scene: dict[str, str]) -> None:
    """The chart's ConfigMap (found by its labels and name suffix) and a ConfigMap named with
    --policy-configmap (kube-scheduler's key policy.cfg) give the Policy explained with."""
    namespace, big = scene["namespace"], scene["big"]
    configmaps = resource_path(CORE, "configmaps", namespace)
    chart = {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": "release-berthmaster-scheduler-policy", "labels": {
                 "app.kubernetes.io/part-of": "berthmaster",
                 "app.kubernetes.io/component": "scheduler"}},
             "data": {"policy.json": POLICY}}
    named = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "legacy"},
             "data": {"policy.cfg": POLICY}}
    await kube.create(configmaps, chart)
    await kube.create(configmaps, named)
    try:
        found = await explain_json(cluster, f"{namespace}/b-somewhere")
        assert found["policy"] == \
            f"ConfigMap {namespace}/release-berthmaster-scheduler-policy key policy.json"
        assert found["notes"] == []
        (placement,) = found["placements"]
        # the Policy's predicate, beside the two every Policy gets (CheckNodeUnschedulable,
        # PodToleratesNodeTaints); the default policy's GeneralPredicates is gone
        assert "PodFitsResources" in placement["nodes"][big]["predicates"]
        assert "GeneralPredicates" not in placement["nodes"][big]["predicates"]
        assert set(placement["nodes"][big]["scores"]) == {"MostRequestedPriority"}

        legacy = await explain_json(cluster, f"{namespace}/b-somewhere", "--policy-configmap",
                                    "legacy", "--policy-configmap-namespace", namespace)
        assert legacy["policy"] == f"ConfigMap {namespace}/legacy key policy.cfg"

        missing = await berthmaster("explain", "pod", f"{namespace}/b-somewhere",
                                    "--kubeconfig", str(cluster.kubeconfig),
                                    "--policy-configmap", "absent")
        assert missing.returncode == 2
        assert one_line(missing) == (
            "berthmaster explain: ConfigMap kube-system/absent not found; check "
            "--policy-configmap and --policy-configmap-namespace (kubectl get configmaps -n "
            "kube-system)")
    finally:
        # deleted now, not with the namespace: a later test must not find it
        for name in ("release-berthmaster-scheduler-policy", "legacy"):
            await kube.delete(resource_path(CORE, "configmaps", namespace, name))


# What the chart's scheduler ClusterRole lets it read (charts/berthmaster/templates/
# scheduler-rbac.yaml): every kind placement reads, and no ConfigMaps.
SCHEDULER_READS = [
    {"apiGroups": [""], "resources": ["nodes", "pods", "namespaces", "services",
                                      "replicationcontrollers", "persistentvolumes",
                                      "persistentvolumeclaims"], "verbs": ["get", "list"]},
    {"apiGroups": ["apps"], "resources": ["replicasets", "statefulsets"], "verbs": ["get", "list"]},
    {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": ["get", "list"]},
    {"apiGroups": ["scheduling.k8s.io"], "resources": ["priorityclasses"],
     "verbs": ["get", "list"]},
    {"apiGroups": ["storage.k8s.io"], "resources": ["storageclasses", "csinodes", "csidrivers",
                                                "csistoragecapacities"],
     "verbs": ["get", "list"]},
]


async def test_rbac(kube: KubeClient, cluster: Any, scene: dict[str, str],
                    tmp_path: Path) -> None:
    """With the scheduler's read rules (no ConfigMaps) the pod is explained with the default
    policy and a note naming the refusal; with no rules, one line naming the refused request
    and the kubectl auth can-i check, exit 2."""
    namespace = scene["namespace"]
    reader = await account_kubeconfig(kube, cluster, namespace, tmp_path, name="reader")
    nobody = await account_kubeconfig(kube, cluster, namespace, tmp_path, name="nobody")
    async with granted(kube, namespace, "reader", SCHEDULER_READS):
        async def in_effect() -> bool:
            review = await kube.create(
                resource_path(group_path("authorization.k8s.io", "v1"), "subjectaccessreviews"),
                {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                 "spec": {"user": f"system:serviceaccount:{namespace}:reader",
                          "groups": ["system:serviceaccounts"],
                          "resourceAttributes": {"verb": "list", "group": "storage.k8s.io",
                                                 "resource": "csinodes"}}})
            return bool(review.get("status", {}).get("allowed"))

        await wait_for(in_effect, timeout=60, what="the reader's ClusterRoleBinding in effect")
        result = await berthmaster("explain", "pod", f"{namespace}/b-somewhere", "-o", "json",
                                   "--kubeconfig", str(reader))
        assert result.returncode == 0, result.stderr
        document = json.loads(result.stdout)
        assert document["policy"] == "the default profile (kube-scheduler 1.35's)"
        (note,) = document["notes"]
        assert note.startswith(
            "explained with the default profile: the API server refused to get configmaps "
            "berthmaster/berthmaster-scheduler-policy (403 Forbidden: ")
        assert note.endswith("(kubectl auth can-i get configmaps -n berthmaster); or pass "
                             "--policy FILE (in the scheduler's Pod: --policy "
                             "/etc/berthmaster/policy.json)")
        assert document["placements"][0]["node"] == scene["big"]

    refused = await berthmaster("explain", "pod", f"{namespace}/b-somewhere",
                                "--kubeconfig", str(nobody))
    assert refused.returncode == 2
    line = one_line(refused)
    assert line.startswith(f"berthmaster explain: the API server refused to get pods "
                           f"{namespace}/b-somewhere (403 Forbidden: ")
    assert line.endswith(f"use a kubeconfig whose user may (kubectl auth can-i get pods "
                         f"-n {namespace})")


async def test_contexts_and_yaml(cluster: Any, scene: dict[str, str]) -> None:
    """--context picks the kubeconfig's context (kubectl passes a plugin its flags as they
    are); -o yaml is the JSON answer in YAML."""
    import yaml

    namespace = scene["namespace"]
    admin = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    reference = f"{namespace}/b-somewhere"
    as_json = await explain_json(cluster, reference, "--context", admin["current-context"])
    as_yaml = await berthmaster("explain", "pod", reference, "-o", "yaml",
                                "--kubeconfig", str(cluster.kubeconfig))
    assert as_yaml.returncode == 0, as_yaml.stderr
    assert yaml.safe_load(as_yaml.stdout) == as_json

    unknown = await berthmaster("explain", "pod", reference, "--context", "nowhere",
                                "--kubeconfig", str(cluster.kubeconfig))
    assert unknown.returncode == 2
    assert one_line(unknown) == (
        f"berthmaster explain: the kubeconfig {cluster.kubeconfig} has no context nowhere; pass "
        "--context with one of its contexts (kubectl config get-contexts)")


async def test_no_kubeconfig_outside_a_pod(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "KUBECONFIG": "", "KUBERNETES_SERVICE_HOST": "",
           "KUBERNETES_SERVICE_PORT": ""}
    for argv in (["explain", "pod", "default/web"], ["simulate", "--from-cluster"]):
        result = await berthmaster(*argv, env=env)
        assert result.returncode == 2
        assert one_line(result) == (
            f"berthmaster {argv[0]}: no kubeconfig and not running in a Pod "
            "(KUBERNETES_SERVICE_HOST is not set); pass --kubeconfig FILE or set KUBECONFIG")


async def _no_chart_policy(kube: KubeClient) -> bool:
    """True when no ConfigMap exists that explain would take for the chart's policy (the
    leftovers are named in the timeout message)."""
    left = [f"{c['metadata']['namespace']}/{c['metadata']['name']}"
            for c in await labelled_policy_configmaps(kube)]
    assert not left, f"still there: {left}"
    return True
