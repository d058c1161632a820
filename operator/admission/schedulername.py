"""Scheduler routing: new pods of a namespace an administrator labels get berthmaster's
``schedulerName``, so workloads reach berthmaster without editing them (docs/admission.md,
"Routing a namespace's pods to berthmaster"); pure.

The namespace opts in with the label ``berthmaster.io/scheduler=<name>``, where ``<name>`` is
the scheduler name the webhook sets (``berthmaster admission --scheduler-name``; the chart
passes ``scheduler.name``). The label value must equal it, so two berthmaster releases with
different scheduler names never route each other's namespaces.

Which pods are routed: a new pod whose ``spec.schedulerName`` is empty or ``default-scheduler``.
kube-apiserver defaults the field before any mutating webhook sees the pod: the create handler
decodes the body with a defaulting codec (k8s.io/apiserver/pkg/endpoints/handlers/create.go,
``DecoderToVersion`` -> ``versioning.NewDefaultingCodecForScheme``), the pod defaults set an
empty schedulerName to ``default-scheduler`` (kubernetes pkg/apis/core/v1/defaults.go
``SetDefaults_PodSpec``), and mutating admission runs after; a webhook's patched pod is
defaulted again (k8s.io/apiserver/pkg/admission/plugin/webhook/mutating/dispatcher.go). So a pod
that wrote nothing and one that wrote ``default-scheduler`` look the same here; a pod that must
stay with kube-scheduler in a routed namespace carries the label
``berthmaster.io/scheduler=default-scheduler``. Any other schedulerName (a pod that chose a
scheduler) is never overridden. Only CREATE: a pod's schedulerName cannot change afterwards.

The same conditions are written three times on purpose, each a filter for the next: the
webhook's ``namespaceSelector`` and ``objectSelector`` (the API server does not even call us for
other namespaces), its ``matchConditions`` (CEL; on by default from Kubernetes 1.28, and a
server without them drops the field and calls us anyway) and :func:`route`, which decides on
the namespace's labels as read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

LABEL = "berthmaster.io/scheduler"
WEBHOOK_NAME = "scheduler-name.berthmaster.io"
PATH = "/scheduler-name"
# v1.DefaultSchedulerName (k8s.io/api/core/v1/types.go).
DEFAULT_SCHEDULER = "default-scheduler"
# The names a pod that chose no scheduler arrives with (before and after defaulting).
UNCHOSEN = ("", DEFAULT_SCHEDULER)
MATCH_CONDITION_NAME = "pod-chose-no-scheduler"


def chose_no_scheduler(pod: Mapping[str, Any]) -> bool:
    spec = pod.get("spec")
    name = spec.get("schedulerName") if isinstance(spec, Mapping) else None
    return (name or "") in UNCHOSEN


def kept_on_default(pod: Mapping[str, Any]) -> bool:
    """The pod asks to stay with kube-scheduler in a routed namespace (its opt-out label)."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return labels.get(LABEL) == DEFAULT_SCHEDULER


def route(pod: Mapping[str, Any], operation: str, namespace_labels: Mapping[str, str],
          scheduler_name: str) -> list[dict[str, Any]]:
    """The JSON patch that sets ``scheduler_name`` on a new pod of a namespace labelled for
    it, or nothing."""
    if not scheduler_name or operation != "CREATE":
        return []
    if namespace_labels.get(LABEL) != scheduler_name:
        return []
    if not chose_no_scheduler(pod) or kept_on_default(pod):
        return []
    # "add" replaces an existing member (RFC 6902 4.1), and sets a missing one.
    return [{"op": "add", "path": "/spec/schedulerName", "value": scheduler_name}]


def namespace_selector(scheduler_name: str) -> dict[str, Any]:
    return {"matchLabels": {LABEL: scheduler_name}}


def object_selector() -> dict[str, Any]:
    # NotIn also matches pods without the label (k8s.io/apimachinery/pkg/labels selector.go).
    return {"matchExpressions": [{"key": LABEL, "operator": "NotIn",
                                  "values": [DEFAULT_SCHEDULER]}]}


def match_conditions() -> list[dict[str, str]]:
    unchosen = ", ".join(f"'{name}'" for name in UNCHOSEN)
    return [{"name": MATCH_CONDITION_NAME,
             "expression": f"!has(object.spec.schedulerName) || "
                           f"object.spec.schedulerName in [{unchosen}]"}]


def pod_create_rule() -> dict[str, Any]:
    return {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
            "resources": ["pods"], "scope": "Namespaced"}
