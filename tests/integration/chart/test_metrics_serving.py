"""The chart's metrics.serving: kube-scheduler's secure port by default, plain HTTP on the pod IP
behind a NetworkPolicy as the alternative (docs/observability.md).

Upstream: kube-scheduler's and kube-controller-manager's manifests (kubeadm's
``cmd/kubeadm/app/phases/controlplane/manifests.go``: HTTPS probes on the secure port) and the
``system:auth-delegator`` ClusterRole they are bound to for TokenReview and SubjectAccessReview
(k8s.io/kubernetes@v1.35.4 ``plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go``).
The container arguments are parsed by berthmaster's own parser.
"""

from __future__ import annotations

from typing import Any

import pytest

from berthmaster.cli import build_parser
from tests.integration.chart.chartkit import VALUE_SETS, find, one, render, template

COMPONENTS = {"scheduler": 10260, "operator": 8081}


def container(objects: list[dict[str, Any]], component: str) -> dict[str, Any]:
    deployment = one(objects, "Deployment", f"-{component}")
    result: dict[str, Any] = deployment["spec"]["template"]["spec"]["containers"][0]
    return result


def parsed(args: list[str]) -> Any:
    expanded = [arg.replace("$(POD_NAME)", "pod-0").replace("$(POD_IP)", "10.0.0.7")
                for arg in args]
    return build_parser(expanded[0]).parse_args(expanded)


@pytest.mark.parametrize(("component", "port"), sorted(COMPONENTS.items()))
def test_by_default_the_metrics_port_is_a_secure_port(component: str, port: int) -> None:
    objects = render()
    serving = container(objects, component)
    args = parsed(serving["args"])
    assert (args.secure_port, args.bind_address, args.metrics_bind_address) == (
        port, "0.0.0.0", "")
    assert args.authorization_always_allow_paths == ("/healthz", "/readyz", "/livez")
    assert (args.tls_cert_file, args.tls_private_key_file) == ("", "")  # self-signed
    probes = [serving[probe]["httpGet"] for probe in ("livenessProbe", "readinessProbe")
              if serving[probe]["httpGet"]["port"] == "metrics"]
    assert probes and all(probe["scheme"] == "HTTPS" for probe in probes)
    binding = one(objects, "ClusterRoleBinding", f"-{component}-auth-delegator")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io",
                                  "kind": "ClusterRole", "name": "system:auth-delegator"}
    assert binding["subjects"] == [{"kind": "ServiceAccount",
                                    "name": f"berthmaster-{component}",
                                    "namespace": "berthmaster"}]


def test_the_metrics_reader_role_and_its_readers() -> None:
    reader = one(render(), "ClusterRole", "-metrics-reader")
    assert reader["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    assert find(render(), "ClusterRoleBinding", "-metrics-reader") == []
    binding = one(render(VALUE_SETS["metrics-tls"]), "ClusterRoleBinding", "-metrics-reader")
    assert binding["roleRef"]["name"] == reader["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "prometheus-k8s",
                                    "namespace": "monitoring"}]
    # rbac.create=false: you grant them yourself
    unbound = render([*VALUE_SETS["metrics-tls"], "rbac.create=false"])
    assert find(unbound, "ClusterRoleBinding", "-auth-delegator") == []
    assert find(unbound, "ClusterRole", "-metrics-reader") == []
    assert find(unbound, "ClusterRoleBinding", "-metrics-reader") == []


@pytest.mark.parametrize("component", sorted(COMPONENTS))
def test_a_certificate_secret_is_mounted_and_passed(component: str) -> None:
    objects = render(VALUE_SETS["metrics-tls"])
    serving = container(objects, component)
    args = parsed(serving["args"])
    assert (args.tls_cert_file, args.tls_private_key_file) == (
        "/etc/berthmaster-tls/tls.crt", "/etc/berthmaster-tls/tls.key")
    assert {"name": "metrics-tls", "mountPath": "/etc/berthmaster-tls",
            "readOnly": True} in serving["volumeMounts"]
    volumes = one(objects, "Deployment", f"-{component}")["spec"]["template"]["spec"]["volumes"]
    assert {"name": "metrics-tls", "secret": {"secretName": "berthmaster-metrics-tls"}} in volumes


@pytest.mark.parametrize(("component", "port"), sorted(COMPONENTS.items()))
def test_plain_serving_binds_the_pod_ip_behind_a_network_policy(component: str,
                                                               port: int) -> None:
    objects = render(VALUE_SETS["metrics-plain"])
    serving = container(objects, component)
    args = parsed(serving["args"])
    assert (args.secure_port, args.metrics_bind_address) == (0, f"10.0.0.7:{port}")
    assert {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}} in (
        serving["env"])
    assert all("scheme" not in serving[probe]["httpGet"]
               for probe in ("livenessProbe", "readinessProbe"))
    assert find(objects, "ClusterRoleBinding", "-auth-delegator") == []
    policy = one(objects, "NetworkPolicy", f"-{component}-metrics")
    assert policy["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == (
        component)
    metrics_rule, others = policy["spec"]["ingress"]
    assert metrics_rule == {"from": [{"namespaceSelector": {"matchLabels": {
        "name": "monitoring"}}}], "ports": [{"port": port, "protocol": "TCP"}]}
    # every other port stays open: the ranges stop either side of the metrics port
    assert others == {"ports": [{"port": 1, "endPort": port - 1, "protocol": "TCP"},
                                {"port": port + 1, "endPort": 65535, "protocol": "TCP"}]}


def test_plain_service_monitor_scrapes_http() -> None:
    objects = render([*VALUE_SETS["metrics-plain"], "metrics.serviceMonitor.enabled=true"])
    for monitor in find(objects, "ServiceMonitor"):
        (endpoint,) = monitor["spec"]["endpoints"]
        assert not {"scheme", "bearerTokenFile", "tlsConfig"} & endpoint.keys()


def test_no_network_policy_unless_asked_or_when_authenticated() -> None:
    assert find(render(["metrics.serving=plain"]), "NetworkPolicy") == []
    assert find(render(["metrics.networkPolicy.enabled=true"]), "NetworkPolicy") == []


@pytest.mark.parametrize(("sets", "message"), [
    (["metrics.serving=open"], "at '/metrics/serving'"),
    (["metrics.alwaysAllowPaths={healthz}"], "at '/metrics/alwaysAllowPaths/0'"),
    (["metrics.alwaysAllowPaths={/a*b}"], "at '/metrics/alwaysAllowPaths/0'"),
    (["metrics.readers[0].name=prometheus"], "at '/metrics/readers/0'"),
])
def test_bad_values_are_refused_with_their_path(sets: list[str], message: str) -> None:
    result = template(sets, "berthmaster", "berthmaster")
    assert result.returncode != 0
    assert message in result.stderr
