"""metrics-server on the local cluster's real kubelet: its image and its manifests.

The image is the binary ``build_metrics_server`` compiles from hack/metrics-server (statically
linked), alone in a one-file image, like kwok's and local-path-provisioner's
(:mod:`.images`): no registry is reachable here, every image is built on this machine.

The manifests are our equivalent of kubernetes-sigs/metrics-server manifests/base (rbac.yaml,
service.yaml, apiservice.yaml, deployment.yaml; kustomization.yaml's common label
``k8s-app: metrics-server``): the same names, RBAC, Service and APIService
``v1beta1.metrics.k8s.io``. Two arguments differ, both for the local kubelets:
``--kubelet-insecure-tls``, because each local kubelet serves with a self-signed certificate
(no serving certificate is issued from the cluster's CA), and
``--kubelet-preferred-address-types=InternalIP``, because there is no DNS for node names and the
kubelets listen on the node's InternalIP. The pod is kept on the real kubelet (kwok nodes run
no containers). The API server reaches it through the aggregation layer (cluster.py
``aggregation_flags``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from berthmaster.tooling.devcluster import build, images
from berthmaster.tooling.devcluster.kubelet import NODE_LABEL, NODE_LABEL_VALUE

NAME = "metrics-server"
NAMESPACE = "kube-system"
APISERVICE = "v1beta1.metrics.k8s.io"
IMAGE = f"berthmaster.local/metrics-server:{build.METRICS_SERVER_VERSION}"
LABELS = {"k8s-app": NAME}
PORT = 10250

Say = Callable[[str], None]


def metrics_server_image(say: Say) -> str:
    """The image: metrics-server built (or reused from the cache) from hack/metrics-server."""
    images.require_docker()
    binary = build.build_metrics_server(say)
    images.one_file_image(IMAGE, {"metrics-server": (binary.read_bytes(), 0o755)},
                          ["/metrics-server"])
    say(f"  image: {IMAGE} (built from hack/metrics-server)")
    return IMAGE


def _meta(name: str, namespace: str | None = None, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": dict(LABELS), **extra}
    if namespace:
        meta["namespace"] = namespace
    return meta


def _account() -> list[dict[str, str]]:
    return [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}]


def arguments() -> list[str]:
    return [
        "--cert-dir=/tmp", f"--secure-port={PORT}",
        # The local kubelets serve with self-signed certificates and have no DNS names.
        "--kubelet-insecure-tls", "--kubelet-preferred-address-types=InternalIP",
        "--kubelet-use-node-status-port", "--metric-resolution=15s",
    ]


def manifests(image: str = IMAGE) -> list[dict[str, Any]]:
    """RBAC, Service, Deployment and APIService, as manifests/base has them."""
    rbac = "rbac.authorization.k8s.io"
    return [
        {"apiVersion": f"{rbac}/v1", "kind": "ClusterRole",
         "metadata": _meta("system:aggregated-metrics-reader") | {"labels": {
             **LABELS, f"{rbac}/aggregate-to-view": "true",
             f"{rbac}/aggregate-to-edit": "true", f"{rbac}/aggregate-to-admin": "true"}},
         "rules": [{"apiGroups": ["metrics.k8s.io"], "resources": ["pods", "nodes"],
                    "verbs": ["get", "list", "watch"]}]},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(NAME, NAMESPACE)},
        {"apiVersion": f"{rbac}/v1", "kind": "RoleBinding",
         "metadata": _meta("metrics-server-auth-reader", NAMESPACE),
         "roleRef": {"apiGroup": rbac, "kind": "Role",
                     "name": "extension-apiserver-authentication-reader"},
         "subjects": _account()},
        {"apiVersion": f"{rbac}/v1", "kind": "ClusterRoleBinding",
         "metadata": _meta("metrics-server:system:auth-delegator"),
         "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": "system:auth-delegator"},
         "subjects": _account()},
        {"apiVersion": f"{rbac}/v1", "kind": "ClusterRole",
         "metadata": _meta("system:metrics-server"),
         "rules": [{"apiGroups": [""], "resources": ["nodes/metrics"], "verbs": ["get"]},
                   {"apiGroups": [""], "resources": ["pods", "nodes"],
                    "verbs": ["get", "list", "watch"]}]},
        {"apiVersion": f"{rbac}/v1", "kind": "ClusterRoleBinding",
         "metadata": _meta("system:metrics-server"),
         "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": "system:metrics-server"},
         "subjects": _account()},
        {"apiVersion": "v1", "kind": "Service", "metadata": _meta(NAME, NAMESPACE),
         "spec": {"selector": dict(LABELS), "ports": [
             {"name": "https", "port": 443, "protocol": "TCP", "targetPort": "https",
              "appProtocol": "https"}]}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": _meta(NAME, NAMESPACE),
         "spec": {
             "selector": {"matchLabels": dict(LABELS)},
             "strategy": {"rollingUpdate": {"maxUnavailable": 0}},
             "template": {"metadata": {"labels": dict(LABELS)}, "spec": {
                 "serviceAccountName": NAME,
                 "volumes": [{"name": "tmp-dir", "emptyDir": {}}],
                 "priorityClassName": "system-cluster-critical",
                 "nodeSelector": {"kubernetes.io/os": "linux", NODE_LABEL: NODE_LABEL_VALUE},
                 "containers": [{
                     "name": NAME, "image": image, "imagePullPolicy": "Never",
                     "args": arguments(),
                     "resources": {"requests": {"cpu": "100m", "memory": "200Mi"}},
                     "ports": [{"name": "https", "containerPort": PORT, "protocol": "TCP"}],
                     "readinessProbe": {
                         "httpGet": {"path": "/readyz", "port": "https", "scheme": "HTTPS"},
                         "periodSeconds": 10, "failureThreshold": 3,
                         "initialDelaySeconds": 20},
                     "livenessProbe": {
                         "httpGet": {"path": "/livez", "port": "https", "scheme": "HTTPS"},
                         "periodSeconds": 10, "failureThreshold": 3},
                     "securityContext": {
                         "readOnlyRootFilesystem": True, "runAsNonRoot": True,
                         "runAsUser": 1000, "allowPrivilegeEscalation": False,
                         "seccompProfile": {"type": "RuntimeDefault"},
                         "capabilities": {"drop": ["ALL"]}},
                     "volumeMounts": [{"name": "tmp-dir", "mountPath": "/tmp"}],
                 }],
             }},
         }},
        {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
         "metadata": _meta(APISERVICE),
         "spec": {"service": {"name": NAME, "namespace": NAMESPACE},
                  "group": "metrics.k8s.io", "version": "v1beta1",
                  "insecureSkipTLSVerify": True,
                  "groupPriorityMinimum": 100, "versionPriority": 100}},
    ]
