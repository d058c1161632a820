"""The webhook configurations: the choices docs/admission.md explains, and both targets."""

from __future__ import annotations

import base64

from berthmaster.operator.admission import registration


def test_configurations_by_url() -> None:
    mutating, validating = registration.build_configurations(
        "placement", registration.Target(url="https://127.0.0.1:9443"), "CA", "berthmaster")
    webhook = mutating["webhooks"][0]
    assert mutating["kind"] == "MutatingWebhookConfiguration"
    assert webhook["clientConfig"] == {"url": "https://127.0.0.1:9443/mutate",
                                       "caBundle": base64.b64encode(b"CA").decode()}
    assert webhook["sideEffects"] == "None"
    assert webhook["failurePolicy"] == "Fail"
    assert webhook["timeoutSeconds"] == 5
    assert webhook["reinvocationPolicy"] == "IfNeeded"
    assert webhook["admissionReviewVersions"] == ["v1"]
    assert webhook["namespaceSelector"]["matchExpressions"] == [{
        "key": "kubernetes.io/metadata.name", "operator": "NotIn",
        "values": ["kube-system", "kube-public", "kube-node-lease", "berthmaster"]}]
    assert webhook["rules"] == [registration.pod_rule()]
    check = validating["webhooks"][0]
    assert "reinvocationPolicy" not in check
    assert check["clientConfig"]["url"] == "https://127.0.0.1:9443/validate"
    resources = {(g, r) for rule in check["rules"] for g in rule["apiGroups"]
                 for r in rule["resources"]}
    assert resources == {("", "pods"), ("", "podtemplates"), ("", "replicationcontrollers"),
                         ("apps", "deployments"), ("apps", "replicasets"),
                         ("apps", "statefulsets"), ("batch", "jobs"), ("batch", "cronjobs"),
                         ("apps.openshift.io", "deploymentconfigs")}


def test_configurations_by_service_with_ignore() -> None:
    mutating, _ = registration.build_configurations(
        "placement", registration.Target(service=("bm", "bm-admission", 443)), "CA", "bm",
        failure_policy="Ignore", timeout=10)
    webhook = mutating["webhooks"][0]
    assert webhook["clientConfig"]["service"] == {"namespace": "bm", "name": "bm-admission",
                                                  "path": "/mutate", "port": 443}
    assert (webhook["failurePolicy"], webhook["timeoutSeconds"]) == ("Ignore", 10)
