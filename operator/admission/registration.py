"""The MutatingWebhookConfiguration and ValidatingWebhookConfiguration, and their caBundle.

Choices (explained for users in docs/admission.md):

- ``failurePolicy: Fail`` by default: the whitelists and PodNodeConstraints are policy, and a
  policy that lapses whenever the webhook restarts is none; ``Ignore`` is offered for clusters
  that prefer availability. The excluded namespaces keep the cluster and berthmaster itself
  able to start pods while the webhook is down.
- ``timeoutSeconds: 5``: a decision costs a namespace read and at most a node read and a
  SubjectAccessReview (cached); five seconds is generous for that and short beside the API
  server's own 60-second request budget, as two webhooks may each wait.
- ``namespaceSelector``: every namespace except kube-system, kube-public, kube-node-lease and
  berthmaster's own (by the ``kubernetes.io/metadata.name`` label the API server sets).
- ``reinvocationPolicy: IfNeeded``: if a later mutating webhook changes the pod, ours runs again,
  so its merges apply to the final object; they are idempotent, so a second run changes
  nothing else. The validating configuration then checks what was finally stored.
- the scheduler-routing webhook (``--scheduler-name``), a second entry of the mutating
  configuration: only namespaces labelled ``berthmaster.io/scheduler=<name>``, only new pods
  that chose no scheduler (objectSelector and matchConditions, schedulername.py), and
  ``reinvocationPolicy: Never``: a later webhook that sets a schedulerName chose one.
- ``sideEffects: None``: a decision writes nothing (a SubjectAccessReview is a read), so dry-run
  requests are served too.

Two ways to point the API server at the webhook: a Service (the chart renders both
configurations with the CA of the certificate it generates, templates/admission.yaml), or a
URL (``berthmaster admission`` outside a cluster writes the whole configurations pointing at
``--listen``, :func:`apply_configurations`).
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from berthmaster.foundation.kube import KubeClient, group_path, resource_path
from berthmaster.operator.admission import schedulername
from berthmaster.operator.admission.podnodeconstraints import POD_SPEC_PATHS

ADMISSIONREGISTRATION = group_path("admissionregistration.k8s.io", "v1")
MUTATING, VALIDATING = "mutatingwebhookconfigurations", "validatingwebhookconfigurations"
WEBHOOK_NAME = "pod-placement.berthmaster.io"
SYSTEM_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease")
FIELD_MANAGER = "berthmaster-admission"
VERSIONS = {"": "v1", "apps": "v1", "batch": "v1", "apps.openshift.io": "v1"}


@dataclass(frozen=True)
class Target:
    """Where the API server sends reviews: a URL base, or a Service (namespace, name, port)."""

    url: str = ""
    service: tuple[str, str, int] | None = None

    def client_config(self, path: str, ca_bundle: str) -> dict[str, Any]:
        config: dict[str, Any] = {"caBundle": base64.b64encode(ca_bundle.encode()).decode()}
        if self.service is not None:
            namespace, name, port = self.service
            config["service"] = {"namespace": namespace, "name": name, "path": path,
                                 "port": port}
        else:
            config["url"] = self.url.rstrip("/") + path
        return config


def namespace_selector(own_namespace: str) -> dict[str, Any]:
    excluded = [*SYSTEM_NAMESPACES, *([own_namespace] if own_namespace else [])]
    return {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                                  "values": excluded}]}


def _common(failure_policy: str, timeout: int, own_namespace: str) -> dict[str, Any]:
    return {"name": WEBHOOK_NAME, "admissionReviewVersions": ["v1"], "sideEffects": "None",
            "failurePolicy": failure_policy, "timeoutSeconds": timeout,
            "matchPolicy": "Equivalent", "namespaceSelector": namespace_selector(own_namespace)}


def pod_rule() -> dict[str, Any]:
    return {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
            "resources": ["pods"], "scope": "Namespaced"}


def template_rules() -> list[dict[str, Any]]:
    """One rule per API group of the workload kinds PodNodeConstraints covers."""
    by_group: dict[str, list[str]] = {}
    for group, resource in POD_SPEC_PATHS:
        if (group, resource) != ("", "pods"):
            by_group.setdefault(group, []).append(resource)
    return [{"apiGroups": [group], "apiVersions": [VERSIONS[group]],
             "operations": ["CREATE", "UPDATE"], "resources": sorted(resources),
             "scope": "Namespaced"} for group, resources in sorted(by_group.items())]


def scheduler_name_webhook(target: Target, ca_bundle: str, scheduler_name: str,
                           own_namespace: str, failure_policy: str = "Fail", timeout: int = 5
                           ) -> dict[str, Any]:
    """The scheduler-routing webhook (schedulername.py): only new pods of namespaces labelled
    for ``scheduler_name`` that chose no scheduler are sent to it; never the system
    namespaces nor berthmaster's own, whose pods (the scheduler's among them) a label there
    must not route to a scheduler that may not be running yet."""
    return {"name": schedulername.WEBHOOK_NAME, "admissionReviewVersions": ["v1"],
            "sideEffects": "None", "failurePolicy": failure_policy, "timeoutSeconds": timeout,
            "matchPolicy": "Equivalent",
            "namespaceSelector": {**schedulername.namespace_selector(scheduler_name),
                                  **namespace_selector(own_namespace)},
            "objectSelector": schedulername.object_selector(),
            "matchConditions": schedulername.match_conditions(),
            "clientConfig": target.client_config(schedulername.PATH, ca_bundle),
            "rules": [schedulername.pod_create_rule()], "reinvocationPolicy": "Never"}


def build_configurations(name: str, target: Target, ca_bundle: str, own_namespace: str,
                         failure_policy: str = "Fail", timeout: int = 5,
                         labels: dict[str, str] | None = None, scheduler_name: str = ""
                         ) -> tuple[dict[str, Any], dict[str, Any]]:
    """(MutatingWebhookConfiguration, ValidatingWebhookConfiguration) named ``name``; with
    ``scheduler_name`` the mutating one also routes labelled namespaces' pods to it."""
    metadata = {"name": name, "labels": dict(labels or {"app.kubernetes.io/name": "berthmaster",
                                                        "app.kubernetes.io/component":
                                                        "admission"})}
    mutating = {**_common(failure_policy, timeout, own_namespace),
                "clientConfig": target.client_config("/mutate", ca_bundle),
                "rules": [pod_rule()], "reinvocationPolicy": "IfNeeded"}
    validating = {**_common(failure_policy, timeout, own_namespace),
                  "clientConfig": target.client_config("/validate", ca_bundle),
                  "rules": [pod_rule(), *template_rules()]}
    routing = ([scheduler_name_webhook(target, ca_bundle, scheduler_name, own_namespace,
                                       failure_policy, timeout)] if scheduler_name else [])
    return ({"apiVersion": "admissionregistration.k8s.io/v1",
             "kind": "MutatingWebhookConfiguration", "metadata": metadata,
             "webhooks": [mutating, *routing]},
            {"apiVersion": "admissionregistration.k8s.io/v1",
             "kind": "ValidatingWebhookConfiguration", "metadata": dict(metadata),
             "webhooks": [validating]})


async def apply_configurations(client: KubeClient, configurations: Sequence[dict[str, Any]]
                               ) -> None:
    """Create or update the configurations (server-side apply, this webhook's fields)."""
    for configuration in configurations:
        plural = MUTATING if configuration["kind"].startswith("Mutating") else VALIDATING
        await client.patch(resource_path(ADMISSIONREGISTRATION, plural,
                                         name=configuration["metadata"]["name"]),
                           configuration, kind="apply", fieldManager=FIELD_MANAGER,
                           force="true")
