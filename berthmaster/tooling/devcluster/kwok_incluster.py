"""kwok inside a cluster, from a locally built image: the objects to apply.

The e2e clusters (kind, or the local control plane with a real kubelet) run kwok as a pod, as
kwok's own kustomize deployment does, so the Nodes of kwok-provider Machines come alive there
exactly as on the local control plane. No download: the image is ``berthmaster.local/kwok:dev``
(berthmaster.tooling.devcluster.images.kwok_image, the kwok binary the control plane builds) and the
stages are the same files the host kwok reads, carried in a ConfigMap. kwok's Stage CRDs are
not needed: stages given with ``--config`` take their place.

The RBAC is what kwok touches: Nodes (read; status written), Pods (read, status written, deleted
when their deletion finishes), Leases (node heartbeats) and Events.

Its nodes also have resource metrics for metrics-server (data/kwok-metrics.yaml, given with the
stages): kwok serves each node's at ``/metrics/nodes/<node>/metrics/resource`` on its port,
which it writes into the node's ``status.daemonEndpoints`` (``nodePort``, read by
metrics-server's ``--kubelet-use-node-status-port``) beside its pod IP as the node's address;
a node names the path in :data:`RESOURCE_METRICS_ANNOTATION` (:func:`metrics_annotations`),
which metrics-server reads (pkg/scraper/client/resource/client.go). kwok answers HTTPS on that
port too (its server's test certificate), as metrics-server scrapes with
``--kubelet-insecure-tls``.
"""

from __future__ import annotations

from typing import Any

from berthmaster.tooling.devcluster import build

NAME = "kwok-controller"
NAMESPACE = "kube-system"
FAKE_NODE_SELECTOR = "kwok.x-k8s.io/node=fake"
POD_CIDR = "10.244.0.0/16"
PORT = 10247
RESOURCE_METRICS_ANNOTATION = "metrics.k8s.io/resource-metrics-path"

_RULES: list[dict[str, Any]] = [
    {"apiGroups": [""], "resources": ["events"],
     "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]},
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["nodes/status", "pods/status"],
     "verbs": ["patch", "update"]},
    {"apiGroups": [""], "resources": ["pods"],
     "verbs": ["delete", "get", "list", "patch", "update", "watch"]},
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
     "verbs": ["create", "get", "list", "patch", "update", "watch"]},
]


def kwok_configuration() -> str:
    return "\n".join([
        "apiVersion: config.kwok.x-k8s.io/v1alpha1",
        "kind: KwokConfiguration",
        "options:",
        f"  serverAddress: 0.0.0.0:{PORT}",
        # written into each node's status.daemonEndpoints.kubeletEndpoint.port
        f"  nodePort: {PORT}",
        "  nodeLeaseDurationSeconds: 40",
        # A configuration file leaves unset parallelism at 0.
        "  nodeLeaseParallelism: 16",
        "  podPlayStageParallelism: 16",
        "  nodePlayStageParallelism: 16",
        "  podsOnNodeSyncParallelism: 16",
    ])


def stage_documents() -> str:
    """What the in-cluster kwok reads besides its configuration: kwok's published stages
    (collected by the build), berthmaster's, and the resource metrics documents."""
    return "\n---\n".join(path.read_text().strip() for path in (
        build.kwok_stages_path(), build.berthmaster_stages_path(), build.kwok_metrics_path()))


def metrics_annotations(node: str) -> dict[str, str]:
    """The annotation sending metrics-server to kwok's resource metrics of ``node``."""
    return {RESOURCE_METRICS_ANNOTATION: f"/metrics/nodes/{node}/metrics/resource"}


def kwok_manifests(image: str, stages: str, namespace: str = NAMESPACE) -> list[dict[str, Any]]:
    """ServiceAccount, ClusterRole(Binding), ConfigMap and Deployment running kwok."""
    labels = {"app.kubernetes.io/name": "kwok", "app.kubernetes.io/managed-by": "berthmaster"}
    config = kwok_configuration() + "\n---\n" + stages.strip() + "\n"
    container = {
        "name": "kwok",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "args": ["--config=/etc/kwok/kwok.yaml", "--manage-all-nodes=false",
                 f"--manage-nodes-with-annotation-selector={FAKE_NODE_SELECTOR}",
                 f"--cidr={POD_CIDR}", "--node-ip=$(POD_IP)"],
        "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
        "ports": [{"name": "http", "containerPort": PORT}],
        "readinessProbe": {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 5},
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http"},
                          "initialDelaySeconds": 30, "periodSeconds": 30},
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532,
                            "capabilities": {"drop": ["ALL"]},
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "volumeMounts": [{"name": "config", "mountPath": "/etc/kwok", "readOnly": True}],
    }
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": NAME, "namespace": namespace, "labels": labels}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": NAME, "labels": labels}, "rules": _RULES},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": NAME, "labels": labels},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": NAME},
         "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": namespace}]},
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": NAME, "namespace": namespace, "labels": labels},
         "data": {"kwok.yaml": config}},
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": NAME, "namespace": namespace, "labels": labels},
         "spec": {
             "replicas": 1,
             "selector": {"matchLabels": {"app.kubernetes.io/name": "kwok"}},
             "template": {
                 "metadata": {"labels": labels},
                 "spec": {"serviceAccountName": NAME, "containers": [container],
                          "volumes": [{"name": "config", "configMap": {"name": NAME}}]},
             },
         }},
    ]
