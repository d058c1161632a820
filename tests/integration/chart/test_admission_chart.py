"""The chart's placement admission webhook: its own Deployment, PDB, ServiceAccount and RBAC,
certificate, configurations and NetworkPolicy, rendered by helm itself (docs/admission.md).

- The Deployment runs ``berthmaster admission`` (args parsed by the real CLI), two replicas
  preferably on different nodes, rolling with no replica down, the restricted security context
  of the other components, probes on its HTTP metrics port, the certificate Secret mounted; the
  operator Deployment carries none of it.
- The configurations make the choices of operator/admission/registration.py, pointing at the
  Service, with the values' failurePolicy, timeoutSeconds, namespaceSelector, objectSelector and
  matchConditions; their caBundle is the CA that signed the Secret's serving certificate for the
  Service's names (helm's genCA/genSignedCert), or cert-manager's cainjector annotation.
- RBAC: reads only (namespaces, nodes, SubjectAccessReviews, its ConfigMap by name).
"""

from __future__ import annotations

import argparse
import base64
from collections.abc import Mapping
from typing import Any

import pytest
from cryptography import x509

from berthmaster.cli import build_parser
from berthmaster.operator.admission import registration
from tests.integration.chart.chartkit import find, one, render, render_values, template

ON = ["admission.enabled=true"]
PREFIX = "berthmaster-berthmaster"  # release "berthmaster": fullname is the release name
NAME = "berthmaster-placement"


def admission_container(objects: list[dict[str, Any]]) -> Mapping[str, Any]:
    deployment = one(objects, "Deployment", "-admission")
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]  # type: ignore[no-any-return]


def admission_args(objects: list[dict[str, Any]]) -> argparse.Namespace:
    args = list(admission_container(objects)["args"])
    assert args[0] == "admission"
    return build_parser("admission").parse_args(args)


def test_its_own_deployment_two_replicas_spread_and_restricted() -> None:
    objects = render(ON)
    deployment = one(objects, "Deployment", "-admission")
    spec = deployment["spec"]
    assert spec["replicas"] == 2
    assert spec["strategy"] == {"type": "RollingUpdate",
                                "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}
    pod = spec["template"]["spec"]
    term = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term == [{"weight": 100, "podAffinityTerm": {
        "topologyKey": "kubernetes.io/hostname",
        "labelSelector": {"matchLabels": spec["selector"]["matchLabels"]}}}]
    operator_pod = one(objects, "Deployment", "-operator")["spec"]["template"]["spec"]
    assert pod["securityContext"] == operator_pod["securityContext"]
    container = admission_container(objects)
    assert container["securityContext"] == operator_pod["containers"][0]["securityContext"]
    assert container["resources"] == {"requests": {"cpu": "50m", "memory": "96Mi"},
                                      "limits": {"memory": "256Mi"}}
    # The metrics port serves as metrics.serving says: HTTPS with delegated authentication.
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics",
                                                      "scheme": "HTTPS"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics",
                                                     "scheme": "HTTPS"}
    assert {"name": "admission", "containerPort": 9443, "protocol": "TCP"} in container["ports"]
    assert pod["serviceAccountName"] == "berthmaster-admission"
    assert {"name": "tls", "secret": {"secretName": "berthmaster-admission-tls"}} in pod[
        "volumes"]

    args = admission_args(objects)
    assert (args.listen, args.name, args.config_map) == (
        "0.0.0.0:9443", NAME, "berthmaster-admission")
    assert (args.webhook_cert_file, args.webhook_key_file) == (
        "/etc/berthmaster/admission-tls/tls.crt", "/etc/berthmaster/admission-tls/tls.key")
    assert (args.failure_policy, args.timeout_seconds, args.max_request_bytes,
            args.max_tolerations, args.max_in_flight, args.client_ca_file) == (
        "Fail", 5, 7 * 1024 * 1024, 1000, 32, "")
    assert args.shutdown_delay_seconds == 5  # serves on while endpoints drop the replica
    assert (args.secure_port, args.metrics_bind_address) == (8082, "")
    plain = admission_args(render([*ON, "metrics.serving=plain"]))
    assert (plain.secure_port, plain.metrics_bind_address) == (0, "$(POD_IP):8082")
    # The secure port's certificate flags are not the webhook's.
    tls = admission_args(render([*ON, "metrics.tls.secretName=berthmaster-metrics-tls"]))
    assert (tls.tls_cert_file, tls.webhook_cert_file) == (
        "/etc/berthmaster-tls/tls.crt", "/etc/berthmaster/admission-tls/tls.crt")
    service = one(objects, "Service", "-admission")
    assert service["spec"]["selector"] == spec["selector"]["matchLabels"]

    operator = one(objects, "Deployment", "-operator")["spec"]["template"]["spec"][
        "containers"][0]
    assert not [arg for arg in operator["args"] if "admission" in arg]
    assert not [port for port in operator["ports"] if port["name"] == "admission"]


def test_limits_from_a_values_file_are_whole_numbers() -> None:
    """Numbers in a values file reach the templates as floats (3.145728e+06 printed)."""
    objects = render_values({"admission": {"enabled": True, "maxRequestBytes": 4194304,
                                           "maxTolerations": 2000000, "maxInFlight": 64,
                                           "maxInFlightBytes": 67108864}})
    args = admission_args(objects)
    assert (args.max_request_bytes, args.max_tolerations, args.max_in_flight,
            args.max_in_flight_bytes) == (4194304, 2000000, 64, 67108864)
    assert admission_args(render(ON)).max_in_flight_bytes == 16 * 1024 * 1024


def test_a_budget_of_one_replica_down() -> None:
    budget = one(render(ON), "PodDisruptionBudget", "-admission")
    assert budget["spec"]["maxUnavailable"] == 1
    deployment = one(render(ON), "Deployment", "-admission")
    assert budget["spec"]["selector"] == deployment["spec"]["selector"]
    assert not find(render([*ON, "admission.replicas=1"]), "PodDisruptionBudget", "-admission")


def test_reads_only() -> None:
    objects = render(ON)
    cluster_rules = one(objects, "ClusterRole", "-admission")["rules"]
    assert cluster_rules == [
        {"apiGroups": [""], "resources": ["namespaces", "nodes"], "verbs": ["get"]},
        {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"],
         "verbs": ["create"]}]
    assert one(objects, "Role", "-admission")["rules"] == [
        {"apiGroups": [""], "resources": ["configmaps"],
         "resourceNames": ["berthmaster-admission"], "verbs": ["get"]}]
    for binding in (one(objects, "ClusterRoleBinding", "berthmaster-admission"),
                    one(objects, "RoleBinding", "-admission")):
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "berthmaster-admission",
                                        "namespace": "berthmaster"}]
    assert one(objects, "ServiceAccount", "-admission")
    # The authenticated metrics port reviews tokens and access, as kube-scheduler's.
    delegator = one(objects, "ClusterRoleBinding", "-admission-auth-delegator")
    assert delegator["roleRef"]["name"] == "system:auth-delegator"
    assert delegator["subjects"][0]["name"] == "berthmaster-admission"
    operator_rules = one(objects, "ClusterRole", "-operator")["rules"]
    assert not [rule for rule in operator_rules
                if "admissionregistration.k8s.io" in rule["apiGroups"]
                and "mutatingwebhookconfigurations" in rule["resources"]]


def test_configurations_are_registrations_with_the_secrets_ca() -> None:
    objects = render([*ON, "admission.failurePolicy=Ignore", "admission.timeoutSeconds=3"])
    service = one(objects, "Service", "-admission")
    target = registration.Target(service=("berthmaster", service["metadata"]["name"], 443))
    expected = registration.build_configurations(NAME, target, "", "berthmaster",
                                                 failure_policy="Ignore", timeout=3)
    secret = one(objects, "Secret", "-admission-tls")
    bundle = secret["data"]["ca.crt"]
    for wanted in expected:
        rendered = one(objects, wanted["kind"], NAME)
        webhook = dict(rendered["webhooks"][0])
        want = dict(wanted["webhooks"][0])
        want["clientConfig"] = {**want["clientConfig"], "caBundle": bundle}
        assert webhook == want

    ca = x509.load_pem_x509_certificate(base64.b64decode(bundle))
    serving = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    serving.verify_directly_issued_by(ca)
    names = serving.extensions.get_extension_for_class(
        x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    assert "berthmaster-admission.berthmaster.svc" in names
    assert secret["type"] == "kubernetes.io/tls" and secret["data"]["tls.key"]


def test_selectors_and_match_conditions() -> None:
    conditions = [{"name": "not-kube-system-users",
                   "expression": "!request.userInfo.username.startsWith('system:')"}]
    namespaces = {"matchLabels": {"placement": "on"}}
    objects = {"matchExpressions": [{"key": "skip-placement", "operator": "DoesNotExist"}]}
    rendered = render_values({"admission": {"enabled": True, "matchConditions": conditions,
                                            "namespaceSelector": namespaces,
                                            "objectSelector": objects}})
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        webhook = one(rendered, kind, NAME)["webhooks"][0]
        assert webhook["matchConditions"] == conditions
        assert webhook["namespaceSelector"] == namespaces
        assert webhook["objectSelector"] == objects
    default = one(render(ON), "MutatingWebhookConfiguration", NAME)["webhooks"][0]
    assert "matchConditions" not in default and "objectSelector" not in default


def test_network_policy_admits_the_webhook_port_only() -> None:
    assert not find(render(ON), "NetworkPolicy")
    policy = one(render([*ON, "admission.networkPolicy.enabled=true"]), "NetworkPolicy",
                 "-admission")
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    assert policy["spec"]["ingress"] == [
        {"ports": [{"port": "admission", "protocol": "TCP"}],
         "from": [{"ipBlock": {"cidr": "0.0.0.0/0"}}, {"ipBlock": {"cidr": "::/0"}}]}]
    deployment = one(render(ON), "Deployment", "-admission")
    assert policy["spec"]["podSelector"] == deployment["spec"]["selector"]

    narrowed = one(render_values({"admission": {
        "enabled": True, "networkPolicy": {
            "enabled": True, "from": [{"ipBlock": {"cidr": "172.18.0.0/16"}}],
            "metricsFrom": [{"namespaceSelector": {"matchLabels": {"name": "monitoring"}}}]}}}),
        "NetworkPolicy", "-admission")
    assert narrowed["spec"]["ingress"] == [
        {"ports": [{"port": "admission", "protocol": "TCP"}],
         "from": [{"ipBlock": {"cidr": "172.18.0.0/16"}}]},
        {"ports": [{"port": "metrics", "protocol": "TCP"}],
         "from": [{"namespaceSelector": {"matchLabels": {"name": "monitoring"}}}]}]


def test_cert_manager_fills_the_secret_and_the_ca_bundle() -> None:
    objects = render([*ON, "admission.certificate.certManager.enabled=true"])
    assert not find(objects, "Secret", "-admission-tls")
    certificate = one(objects, "Certificate", "-admission")
    assert certificate["spec"]["secretName"] == "berthmaster-admission-tls"
    assert "berthmaster-admission.berthmaster.svc" in certificate["spec"]["dnsNames"]
    issuer = one(objects, "Issuer", "-admission")
    assert issuer["spec"] == {"selfSigned": {}}
    assert certificate["spec"]["issuerRef"] == {"name": "berthmaster-admission",
                                                "kind": "Issuer", "group": "cert-manager.io"}
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        configuration = one(objects, kind, NAME)
        assert configuration["metadata"]["annotations"] == {
            "cert-manager.io/inject-ca-from": "berthmaster/berthmaster-admission"}
        assert "caBundle" not in configuration["webhooks"][0]["clientConfig"]

    own = render([*ON, "admission.certificate.certManager.enabled=true",
                  "admission.certificate.certManager.issuerRef.name=corp-ca",
                  "admission.certificate.certManager.issuerRef.kind=ClusterIssuer"])
    assert not find(own, "Issuer")
    assert one(own, "Certificate", "-admission")["spec"]["issuerRef"] == {
        "name": "corp-ca", "kind": "ClusterIssuer"}


def test_client_certificates_required_with_their_ca() -> None:
    pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----"
    objects = render_values({"admission": {"enabled": True,
                                           "clientAuth": {"enabled": True, "caBundle": pem}}})
    assert one(objects, "ConfigMap", "-admission-client-ca")["data"]["ca.crt"].strip() == pem
    assert admission_args(objects).client_ca_file == (
        "/etc/berthmaster/admission-client-ca/ca.crt")
    missing = template([*ON, "admission.clientAuth.enabled=true"])
    assert missing.returncode != 0
    assert "admission.clientAuth.caBundle is empty" in missing.stderr


@pytest.mark.parametrize("sets,message", [
    (["admission.failurePolicy=Sometimes"], "/admission/failurePolicy"),
    (["admission.maxRequestBytes=3MB"], "/admission/maxRequestBytes"),
    (["admission.maxInFlight=0"], "/admission/maxInFlight"),
    (["admission.maxInFlightBytes=32MB"], "/admission/maxInFlightBytes"),
    (["admission.matchConditions[0].name=x"], "/admission/matchConditions/0"),
    (["admission.networkPolicy.open=true"], "/admission/networkPolicy"),
])
def test_bad_admission_values_are_refused(sets: list[str], message: str) -> None:
    result = template([*ON, *sets])
    assert result.returncode != 0
    assert message in result.stderr, result.stderr


def test_scheduler_routing_is_the_registrations_second_webhook() -> None:
    """admission.schedulerRouting.enabled: the mutating configuration's second webhook is
    registration.scheduler_name_webhook for scheduler.name, and the Deployment passes that
    name as --scheduler-name (operator/admission/schedulername.py)."""
    assert len(one(render(ON), "MutatingWebhookConfiguration", NAME)["webhooks"]) == 1
    assert admission_args(render(ON)).scheduler_name == ""
    objects = render([*ON, "admission.schedulerRouting.enabled=true", "scheduler.name=bm-a",
                      "admission.failurePolicy=Ignore"])
    service = one(objects, "Service", "-admission")
    target = registration.Target(service=("berthmaster", service["metadata"]["name"], 443))
    bundle = one(objects, "Secret", "-admission-tls")["data"]["ca.crt"]
    want = registration.scheduler_name_webhook(target, "", "bm-a", "berthmaster",
                                               failure_policy="Ignore")
    want["clientConfig"] = {**want["clientConfig"], "caBundle": bundle}
    mutating = one(objects, "MutatingWebhookConfiguration", NAME)
    assert mutating["webhooks"][1] == want
    assert len(one(objects, "ValidatingWebhookConfiguration", NAME)["webhooks"]) == 1
    assert admission_args(objects).scheduler_name == "bm-a"

    orphaned = template([*ON, "admission.schedulerRouting.enabled=true",
                         "scheduler.enabled=false"])
    assert orphaned.returncode != 0
    assert "admission.schedulerRouting.enabled is true but scheduler.enabled is false" in (
        orphaned.stderr)
