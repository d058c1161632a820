"""What a Descheduler may run, as the cluster administrator set it (docs/security.md).

Design: the administrator decides, in the Helm chart, where descheduler runs go and what they
may be; the operator reads that once from its environment (:meth:`RunSettings.from_environment`,
the chart's operator Deployment sets the variables) and :func:`refusals` checks a Descheduler's
spec against it, purely, before anything is read or created:

- every run lives in the operator's own namespace (``$POD_NAMESPACE``), where the chart's Role
  lets the operator write ConfigMaps, Jobs and CronJobs, and runs as the chart's descheduler
  ServiceAccount, bound to the chart's ClusterRole. A ``spec.namespace`` naming another
  namespace is ignored with a notice (:func:`namespace_notice`; the CRD used to default it to
  ``kube-system``, so existing resources carry it and keep running), while a
  ``spec.policyConfigMap.namespace`` naming another one is refused (the operator reads
  ConfigMaps only in its namespace, and the policy cannot be found elsewhere);
- ``spec.image`` must be the operator's own image or one of ``descheduler.allowedImages``: a
  Descheduler author otherwise chooses what runs with the power to evict every pod;
- the ``system-*`` PriorityClasses are the administrator's opt-in (``descheduler.systemCritical``):
  then the default is ``system-cluster-critical``, as the upstream descheduler chart's
  ``priorityClassName`` value is; otherwise no class unless the spec names a non-system one.

Each refusal names the field, the value and what to set; the handler turns them into a
``SpecAllowed=False`` condition and one Warning event each, and creates nothing.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from berthmaster.operator.autoscaler.config import operator_namespace

DEFAULT_IMAGE = "berthmaster:latest"
DEFAULT_SERVICE_ACCOUNT = "berthmaster-descheduler"  # the chart's, for release "berthmaster"
SYSTEM_CRITICAL = "system-cluster-critical"
SYSTEM_PREFIX = "system-"

IMAGE_NOT_ALLOWED = "ImageNotAllowed"
NAMESPACE_IGNORED = "NamespaceIgnored"
POLICY_CONFIG_MAP_NOT_ALLOWED = "PolicyConfigMapNotAllowed"
PRIORITY_CLASS_NOT_ALLOWED = "PriorityClassNotAllowed"


@dataclass(frozen=True)
class RunSettings:
    """Where runs go, as whom, and what they may be (the chart's ``descheduler`` values)."""

    namespace: str
    service_account: str
    default_image: str
    allowed_images: frozenset[str]
    system_critical: bool
    # KubeDescheduler's devActualUtilizationProfile queries it (the chart's
    # descheduler.prometheusURL); "" when none is configured
    prometheus_url: str = ""

    @classmethod
    def from_environment(cls, env: Mapping[str, str] | None = None) -> RunSettings:
        env = os.environ if env is None else env
        image = env.get("BERTHMASTER_IMAGE") or DEFAULT_IMAGE
        listed = {i.strip() for i in (env.get("BERTHMASTER_DESCHEDULER_IMAGES") or "").split(",")}
        return cls(
            namespace=env.get("POD_NAMESPACE") or operator_namespace(),
            service_account=env.get("BERTHMASTER_DESCHEDULER_SERVICE_ACCOUNT")
            or DEFAULT_SERVICE_ACCOUNT,
            default_image=image,
            allowed_images=frozenset({image, *(i for i in listed if i)}),
            system_critical=(env.get("BERTHMASTER_DESCHEDULER_SYSTEM_CRITICAL") or "").lower()
            == "true",
            prometheus_url=(env.get("BERTHMASTER_PROMETHEUS_URL") or "").strip())

    def priority_class(self, spec: Mapping[str, Any]) -> str:
        """The Job pod's priorityClassName ("" for none)."""
        if "priorityClassName" in spec:
            return str(spec.get("priorityClassName") or "")
        return SYSTEM_CRITICAL if self.system_critical else ""


@dataclass(frozen=True)
class Refusal:
    reason: str
    message: str


def refusals(descheduler: Mapping[str, Any], settings: RunSettings) -> list[Refusal]:
    """Every reason this Descheduler may not run here (empty: it may)."""
    name = (descheduler.get("metadata") or {}).get("name")
    spec = descheduler.get("spec") or {}
    found: list[Refusal] = []
    ref = spec.get("policyConfigMap") or {}
    if ref.get("namespace") and ref["namespace"] != settings.namespace:
        found.append(Refusal(POLICY_CONFIG_MAP_NOT_ALLOWED, (
            f"Descheduler {name}: spec.policyConfigMap.namespace {ref['namespace']!r} is not "
            "allowed: the operator reads policy ConfigMaps only in its namespace "
            f"{settings.namespace!r}; create ConfigMap {ref.get('name')} there and remove "
            f"spec.policyConfigMap.namespace (or set it to {settings.namespace!r})")))
    image = spec.get("image")
    if image and image not in settings.allowed_images:
        allowed = ", ".join(sorted(settings.allowed_images))
        found.append(Refusal(IMAGE_NOT_ALLOWED, (
            f"Descheduler {name}: spec.image {image!r} is not an allowed descheduler image "
            f"(allowed: {allowed}); remove spec.image to run {settings.default_image}, or have "
            f"the cluster administrator add {image!r} to the Helm value "
            "descheduler.allowedImages")))
    priority = settings.priority_class(spec)
    if priority.startswith(SYSTEM_PREFIX) and not settings.system_critical:
        found.append(Refusal(PRIORITY_CLASS_NOT_ALLOWED, (
            f"Descheduler {name}: spec.priorityClassName {priority!r} is not allowed: the "
            "system-* classes need the cluster administrator's opt-in (Helm value "
            "descheduler.systemCritical=true); remove spec.priorityClassName or name a "
            "non-system class")))
    return found


def namespace_notice(descheduler: Mapping[str, Any], settings: RunSettings) -> str | None:
    """Why ``spec.namespace`` is not where the run goes, or None when it is absent or agrees."""
    namespace = (descheduler.get("spec") or {}).get("namespace")
    if not namespace or namespace == settings.namespace:
        return None
    name = (descheduler.get("metadata") or {}).get("name")
    return (f"Descheduler {name}: spec.namespace {namespace!r} is ignored: descheduler runs go "
            f"in the operator's namespace {settings.namespace!r} (remove spec.namespace)")
