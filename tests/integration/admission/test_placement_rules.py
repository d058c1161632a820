"""Each placement rule on the real API server, with the webhook ``berthmaster admission``
registered.

kube-apiserver calls ``berthmaster admission --listen 127.0.0.1:<port>`` over TLS; the
requests are dry runs (admission runs in full, nothing is stored) unless a test needs the
stored object. Refusals are checked as the user sees them: the API server's ``admission webhook
"pod-placement.berthmaster.io" denied the request:`` followed by the plugin's own words
(plugin/pkg/admission/podnodeselector/admission.go, podtolerationrestriction/admission.go,
OpenShift's nodeenv and podnodeconstraints admission.go).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from berthmaster.foundation.kube import CORE, KubeClient, KubeError, group_path, resource_path
from berthmaster.scheduler.engine import Engine
from berthmaster.scheduler.simulate import Source, build_inputs, simulate
from tests.integration.admission.conftest import (
    REGISTRATION,
    AdmissionProcess,
    create_pod,
    delete_configurations,
    impersonate,
    pod_body,
    refusal,
    wait_webhook_active,
    write_config,
)
from tests.support.builders import toleration
from tests.support.waiting import wait_for

ADMISSION_ENV = {"BERTHMASTER_ADMISSION_CHECK_SECONDS": "1"}
DENIED = 'admission webhook "pod-placement.berthmaster.io" denied the request: '
NODE_SELECTOR = "scheduler.alpha.kubernetes.io/node-selector"
PROJECT_SELECTOR = "openshift.io/node-selector"
DEFAULTS = "scheduler.alpha.kubernetes.io/defaultTolerations"
WHITELIST = "scheduler.alpha.kubernetes.io/tolerationsWhitelist"
DEDICATED = toleration("dedicated", "groupName", "NoSchedule", "Equal")
RBAC = group_path("rbac.authorization.k8s.io", "v1")
Project = Callable[..., Awaitable[str]]


async def configure(kube: KubeClient, admission: AdmissionProcess, text: str,
                    probe: Callable[[], Awaitable[bool]]) -> None:
    """Write the ConfigMap and wait until the webhook behaves by it (it reloads every
    second)."""
    await write_config(kube, admission, text)
    await wait_for(probe, timeout=60, what="the webhook to reload its configuration")


async def test_namespace_node_selector_is_merged(admission: AdmissionProcess,
                                                 kube: KubeClient, project: Project) -> None:
    """The seed's 16.5.4 example: env=test,infra=fedora on the namespace, env/os on the pod."""
    namespace = await project({NODE_SELECTOR: "env=test,infra=fedora"})
    pod = await create_pod(kube, namespace, pod_body("hello-pod", nodeSelector={
        "env": "test", "os": "fedora"}), dry_run=False)
    assert pod["spec"]["nodeSelector"] == {"env": "test", "infra": "fedora", "os": "fedora"}
    stored = await kube.get(resource_path(CORE, "pods", namespace, "hello-pod"))
    assert stored["spec"]["nodeSelector"] == pod["spec"]["nodeSelector"]


async def test_a_conflicting_pod_is_refused(admission: AdmissionProcess, kube: KubeClient,
                                            project: Project) -> None:
    namespace = await project({NODE_SELECTOR: "env=test"})
    error = await refusal(kube, namespace, pod_body("prod", nodeSelector={"env": "production"}))
    assert error.status == 403
    assert error.message == DENIED + (
        'pods "prod" is forbidden: pod node label selector conflicts with its namespace node '
        "label selector")


async def test_a_malformed_annotation_is_named(admission: AdmissionProcess, kube: KubeClient,
                                               project: Project) -> None:
    namespace = await project({NODE_SELECTOR: "env"})
    error = await refusal(kube, namespace, pod_body("p"))
    assert error.status == 400
    assert error.message == DENIED + (
        f"namespace {namespace}: invalid selector: 'env' is not key=value; fix the "
        "namespace's annotation")


async def test_openshift_project_node_selector(admission: AdmissionProcess, kube: KubeClient,
                                               project: Project) -> None:
    """NodeEnv: ``openshift.io/node-selector`` (what ``oc adm new-project --node-selector``
    sets) is merged too, and refused in NodeEnv's words; the upstream annotation wins."""
    namespace = await project({PROJECT_SELECTOR: "type=user-node,region=east"})
    pod = await create_pod(kube, namespace, pod_body("p"))
    assert pod["spec"]["nodeSelector"] == {"type": "user-node", "region": "east"}
    error = await refusal(kube, namespace, pod_body("west", nodeSelector={"region": "west"}))
    assert error.message == DENIED + (
        'pods "west" is forbidden: pod node label selector conflicts with its project node '
        "label selector")
    both = await project({PROJECT_SELECTOR: "region=east", NODE_SELECTOR: "env=test"})
    pod = await create_pod(kube, both, pod_body("p"))
    assert pod["spec"]["nodeSelector"] == {"env": "test"}


async def test_project_selector_checks_a_named_node(admission: AdmissionProcess,
                                                    kube: KubeClient, project: Project,
                                                    nodes: Any) -> None:
    west = await nodes.create(labels={"region": "west"}, wait_ready=False)
    namespace = await project({PROJECT_SELECTOR: "region=east"})
    error = await refusal(kube, namespace, pod_body("pinned",
                                                    nodeName=west["metadata"]["name"]))
    assert error.message == DENIED + (
        'pods "pinned" is forbidden: pod node name conflicts with project node label selector')


async def test_default_tolerations_and_the_dedicated_node_recipe(
        admission: AdmissionProcess, kube: KubeClient, project: Project, nodes: Any) -> None:
    """The taints document's dedicated nodes: ``dedicated=groupName:NoSchedule`` on the node,
    the group's namespace annotated with the toleration and the node selector; the group's
    pods get both, and the placement engine (the one the berthmaster scheduler runs) puts the
    stored pod on the dedicated node, and another namespace's pod anywhere but there."""
    dedicated = await nodes.create(labels={"dedicated": "groupName"},
                                   taints=[{"key": "dedicated", "value": "groupName",
                                            "effect": "NoSchedule"}], wait_ready=False)
    plain = await nodes.create(wait_ready=False)
    namespace = await project({DEFAULTS: json.dumps([DEDICATED]),
                               NODE_SELECTOR: "dedicated=groupName"})
    other = await project()
    team = await create_pod(kube, namespace, pod_body("team-job", schedulerName="berthmaster"),
                            dry_run=False)
    assert team["spec"]["nodeSelector"] == {"dedicated": "groupName"}
    assert DEDICATED in team["spec"]["tolerations"]
    outsider = await create_pod(kube, other, pod_body("outsider", schedulerName="berthmaster"))
    names = {dedicated["metadata"]["name"], plain["metadata"]["name"]}
    fresh = [await kube.get(resource_path(CORE, "nodes", name=n)) for n in sorted(names)]
    for node in fresh:  # as Ready, whatever kwok has reported yet
        node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
        node["spec"]["taints"] = [t for t in node["spec"].get("taints") or []
                                  if t["key"] == "dedicated"]
    snapshot, queue = build_inputs([Source("cluster", [*fresh, team, outsider])])
    placed = {p["pod"].split("/")[-1]: p["node"]
              for p in simulate(snapshot, queue, Engine(seed=0))}
    assert placed == {"team-job": dedicated["metadata"]["name"],
                      "outsider": plain["metadata"]["name"]}


async def test_memory_pressure_toleration_for_pods_that_are_not_best_effort(
        admission: AdmissionProcess, kube: KubeClient, project: Project) -> None:
    namespace = await project()
    body = pod_body("burstable")
    body["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "100m"}}
    pod = await create_pod(kube, namespace, body)
    assert {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists",
            "effect": "NoSchedule"} in pod["spec"]["tolerations"]
    best_effort = await create_pod(kube, namespace, pod_body("best-effort"))
    assert all(t.get("key") != "node.kubernetes.io/memory-pressure"
               for t in best_effort["spec"].get("tolerations") or [])


async def test_tolerations_whitelist(admission: AdmissionProcess, kube: KubeClient,
                                     project: Project) -> None:
    """A namespace whitelist must cover every toleration the pod ends with, including the
    API server's own not-ready/unreachable ones (DefaultTolerationSeconds runs first)."""
    namespace = await project({WHITELIST: json.dumps([
        toleration("dedicated", operator="Exists"),
        toleration("node.kubernetes.io", operator="Exists"),
        {"operator": "Exists", "effect": "NoExecute"}])})
    allowed = await create_pod(kube, namespace, pod_body("ok", tolerations=[DEDICATED]))
    assert DEDICATED in allowed["spec"]["tolerations"]
    error = await refusal(kube, namespace, pod_body("gpu", tolerations=[
        toleration("gpu", operator="Exists", effect="NoSchedule")]))
    assert error.message == DENIED + (
        "pod tolerations (possibly merged with namespace default tolerations) conflict with "
        "its namespace whitelist")


async def test_cluster_configuration(admission: AdmissionProcess, kube: KubeClient,
                                     project: Project) -> None:
    """The seed's PodNodeSelector snippet with this test's namespace as ``ns1``, and a cluster
    whitelist and default for tolerations, through the ConfigMap."""
    ns1 = await project()
    plain = await project()
    text = f"""
admissionConfig:
  pluginConfig:
    PodNodeSelector:
      configuration:
        podNodeSelectorPluginConfig:
          clusterDefaultNodeSelector: "k3=v3"
          {ns1}: region=west,env=test,infra=fedora,os=fedora
    PodTolerationRestriction:
      configuration:
        apiVersion: podtolerationrestriction.admission.k8s.io/v1alpha1
        kind: Configuration
        default:
          - {{key: team, operator: Equal, value: blue, effect: NoSchedule}}
        whitelist:
          - {{key: team, operator: Exists}}
          - {{operator: Exists, effect: NoExecute}}
"""

    async def default_applied() -> bool:
        pod = await create_pod(kube, plain, pod_body("probe"))
        return (pod["spec"].get("nodeSelector") or {}).get("k3") == "v3"

    await configure(kube, admission, text, default_applied)
    pod = await create_pod(kube, plain, pod_body("p"))
    assert toleration("team", "blue", "NoSchedule", "Equal") in pod["spec"]["tolerations"]
    error = await refusal(kube, plain, pod_body("gpu", tolerations=[
        toleration("gpu", operator="Exists", effect="NoSchedule")]))
    assert error.message == DENIED + (
        "pod tolerations (possibly merged with namespace default tolerations) conflict with "
        "its cluster whitelist")
    # ns1's whitelist: the cluster default k3=v3 is not on it, so ns1 annotates its own.
    await kube.patch(resource_path(CORE, "namespaces", name=ns1), {"metadata": {"annotations": {
        NODE_SELECTOR: "env=test,infra=fedora"}}})
    inside = await create_pod(kube, ns1, pod_body("in", nodeSelector={"os": "fedora"}))
    assert inside["spec"]["nodeSelector"] == {"env": "test", "infra": "fedora", "os": "fedora"}
    error = await refusal(kube, ns1, pod_body("out", nodeSelector={"env": "test",
                                                                  "zone": "a"}))
    assert error.message == DENIED + (
        'pods "out" is forbidden: pod node label selector labels conflict with its namespace '
        "whitelist")
    await write_config(kube, admission, "")


async def grant(kube: KubeClient, namespace: str, user: str, bind: bool) -> None:
    resources = ["pods", "pods/binding"] if bind else ["pods"]
    name = f"{user}-placement"
    await kube.create(resource_path(RBAC, "roles", namespace), {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": name},
        "rules": [{"apiGroups": [""], "resources": resources, "verbs": ["create", "get"]},
                  {"apiGroups": ["apps"], "resources": ["deployments"],
                   "verbs": ["create", "get"]}]})
    await kube.create(resource_path(RBAC, "rolebindings", namespace), {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]})


async def test_pod_node_constraints_by_role(admission: AdmissionProcess, kube: KubeClient,
                                            project: Project) -> None:
    """16.5.2/16.5.3: a user without pods/binding may not name a node nor select a
    blacklisted label, in a pod or a Deployment's template; a user with it may."""
    namespace = await project()
    await grant(kube, namespace, "alice", bind=False)
    await grant(kube, namespace, "bob", bind=True)
    text = """
pluginConfig:
  PodNodeConstraints:
    configuration:
      apiversion: v1
      kind: PodNodeConstraintsConfig
      nodeSelectorLabelBlacklist:
        - kubernetes.io/hostname
        - region
"""

    async def constrained() -> bool:
        try:
            await create_pod(kube, namespace, pod_body("probe", nodeName="n1"),
                             headers=impersonate("alice"))
        except KubeError as error:
            return "prohibited by policy" in error.message
        return False

    await configure(kube, admission, text, constrained)
    alice, bob = impersonate("alice"), impersonate("bob")
    error = await refusal(kube, namespace, pod_body("by-name", nodeName="n1"), headers=alice)
    assert error.message == DENIED + (
        'pods "by-name" is forbidden: node selection by nodeName is prohibited by policy for '
        "your role")
    error = await refusal(kube, namespace, pod_body("by-region", nodeSelector={
        "region": "us-east"}), headers=alice)
    assert error.message == DENIED + (
        'pods "by-region" is forbidden: node selection by label(s) [region] is prohibited by '
        "policy for your role")
    error = await refusal(kube, namespace, pod_body("both", nodeName="n1", nodeSelector={
        "region": "us-east"}), headers=alice)
    assert error.message == DENIED + (
        'pods "both" is forbidden: node selection by nodeName and label(s) [region] is '
        "prohibited by policy for your role")
    # Not blacklisted: allowed to anyone.
    await create_pod(kube, namespace, pod_body("zoned", nodeSelector={"superregion": "us"}),
                     headers=alice)
    # bob may bind pods: everything is allowed.
    await create_pod(kube, namespace, pod_body("by-name", nodeName="n1",
                                               nodeSelector={"region": "us-east"}),
                     headers=bob)
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                  "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {
                      "metadata": {"labels": {"app": "web"}},
                      "spec": {**pod_body("x")["spec"], "nodeSelector": {"region": "us-east"}}}}}
    path = resource_path(group_path("apps", "v1"), "deployments", namespace)
    error = await refusal(kube, namespace, deployment, path=path, headers=alice)
    assert error.message == DENIED + (
        'deployments.apps "web" is forbidden: node selection by label(s) [region] is '
        "prohibited by policy for your role")
    await kube.request("POST", path, body=deployment, params={"dryRun": "All"}, headers=bob)
    # bob's Deployment for real: the ReplicaSet controller (kube-system service account, no
    # pods/binding) still makes its pods from the template bob was allowed to write.
    await kube.request("POST", path, body={**deployment, "spec": {
        **deployment["spec"], "replicas": 1}}, headers=bob)

    async def pod_made() -> bool:
        listed = await kube.get(resource_path(CORE, "pods", namespace),
                                labelSelector="app=web")
        return bool(listed.get("items"))

    await wait_for(pod_made, timeout=60, what="the Deployment's pod")
    await write_config(kube, admission, "")


@pytest.mark.parametrize("annotation", [NODE_SELECTOR, PROJECT_SELECTOR])
async def test_system_and_own_namespaces_are_left_alone(
        admission: AdmissionProcess, kube: KubeClient, annotation: str) -> None:
    """The namespaceSelector: berthmaster's own namespace is never sent to the webhook."""
    await kube.patch(resource_path(CORE, "namespaces", name=admission.namespace),
                     {"metadata": {"annotations": {annotation: "env=test"}}})
    try:
        pod = await create_pod(kube, admission.namespace, pod_body("own"))
        assert not pod["spec"].get("nodeSelector")
    finally:
        await kube.patch(resource_path(CORE, "namespaces", name=admission.namespace),
                         {"metadata": {"annotations": {annotation: None}}})


async def test_deleted_configurations_come_back(admission: AdmissionProcess,
                                                kube: KubeClient) -> None:
    """The operator re-applies the configurations it writes at every check (every second
    here), so a deleted or edited one is restored."""
    await delete_configurations(kube, admission.name)

    async def restored() -> bool:
        try:
            for plural in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
                await kube.get(resource_path(REGISTRATION, plural, name=admission.name))
        except KubeError:
            return False
        return True

    await wait_for(restored, timeout=60, what="both configurations re-applied")
    await wait_webhook_active(kube)
