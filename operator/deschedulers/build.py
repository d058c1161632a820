"""Pure builders for what a Descheduler resource owns (docs/descheduler.md, "The `Descheduler`
resource").

Design: each ``build_*`` takes the Descheduler (a dict) and the administrator's
:class:`~.runs.RunSettings` and returns the child object as a dict, in the operator's namespace,
labelled with the owner's name and carrying an owner reference to it (with
``blockOwnerDeletion``), so deleting the Descheduler lets the garbage collector remove them.
Names follow OpenShift's documented ones (``descheduler-policy-configmap``, ``descheduler-job``)
prefixed with the resource's name. A ``KubeDescheduler`` (operator.openshift.io/v1, see
kubedescheduler.py) goes through the same builders: its runs are named
``kubedescheduler-<name>-...`` and labelled ``operator.openshift.io/kubedescheduler``, so they
never mix with a Descheduler's. A Descheduler owns only its policy ConfigMap and its Job or
CronJob: the Job runs as the chart's descheduler ServiceAccount, whose ClusterRole (the
documented ``descheduler-cluster-role`` rules plus what a pass reads, as
kubernetes-sigs/descheduler kubernetes/base/rbac.yaml grants) the chart renders once
(templates/descheduler-rbac.yaml), so the operator writes no RBAC. The pod's priority class is
the settings' choice (``system-cluster-critical``, with the ``scheduler.alpha.kubernetes.io/
critical-pod`` annotation, only when the administrator opted in). Placement (``nodeSelector``,
``tolerations``, ``affinity``), ``imagePullSecrets`` and the CronJob's ``suspend``,
``timeZone``, ``startingDeadlineSeconds`` and history limits come from the resource's spec, as
the descheduler chart's values do. No I/O here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from berthmaster.operator.deschedulers.runs import SYSTEM_PREFIX, RunSettings

Obj = dict[str, Any]
GROUP, VERSION, PLURAL, KIND = "berthmaster.io", "v1alpha1", "deschedulers", "Descheduler"
OWNER_LABEL = "berthmaster.io/descheduler"
KUBE_DESCHEDULER_KIND = "KubeDescheduler"
KUBE_DESCHEDULER_API_VERSION = "operator.openshift.io/v1"
KUBE_DESCHEDULER_LABEL = "operator.openshift.io/kubedescheduler"
POLICY_KEY = "policy.yaml"
POLICY_DIR = "/policy-dir"
CRITICAL_POD_ANNOTATION = "scheduler.alpha.kubernetes.io/critical-pod"
# History kept by the CronJob unless the spec says otherwise (berthmaster's defaults so far).
DEFAULT_SUCCESSFUL_JOBS_HISTORY = 3
DEFAULT_FAILED_JOBS_HISTORY = 3
# Pod fields copied from the Descheduler's spec as they are (the API server validates them).
POD_PASSTHROUGH = ("nodeSelector", "tolerations", "affinity", "imagePullSecrets")


def name_of(descheduler: Mapping[str, Any]) -> str:
    return str(descheduler["metadata"]["name"])


def is_kube_descheduler(owner: Mapping[str, Any]) -> bool:
    return owner.get("kind") == KUBE_DESCHEDULER_KIND


def run_prefix(owner: Mapping[str, Any]) -> str:
    """What the owner's children are named after."""
    return f"kubedescheduler-{name_of(owner)}" if is_kube_descheduler(owner) else name_of(owner)


def owner_label(owner: Mapping[str, Any]) -> dict[str, str]:
    return {KUBE_DESCHEDULER_LABEL if is_kube_descheduler(owner) else OWNER_LABEL:
            name_of(owner)}


def owner_reference(descheduler: Mapping[str, Any]) -> Obj:
    api_version = KUBE_DESCHEDULER_API_VERSION if is_kube_descheduler(descheduler) \
        else f"{GROUP}/{VERSION}"
    return {"apiVersion": api_version, "kind": str(descheduler.get("kind") or KIND),
            "name": name_of(descheduler), "uid": descheduler["metadata"]["uid"],
            "controller": True, "blockOwnerDeletion": True}


def _metadata(descheduler: Mapping[str, Any], name: str, settings: RunSettings) -> Obj:
    return {"name": name, "namespace": settings.namespace, "labels": owner_label(descheduler),
            "ownerReferences": [owner_reference(descheduler)]}


def config_map_name(descheduler: Mapping[str, Any]) -> str:
    return f"{run_prefix(descheduler)}-descheduler-policy-configmap"


def job_name(descheduler: Mapping[str, Any]) -> str:
    """One Job per spec generation: a changed policy runs again, a resumed operator does not."""
    generation = descheduler["metadata"].get("generation", 1)
    return f"{run_prefix(descheduler)}-descheduler-job-{generation}"


def cron_job_name(descheduler: Mapping[str, Any]) -> str:
    return f"{name_of(descheduler)}-descheduler-cronjob"


def policy_text(policy: Mapping[str, Any]) -> str:
    return yaml.safe_dump(dict(policy), sort_keys=False)


def build_config_map(descheduler: Mapping[str, Any], text: str, settings: RunSettings) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": _metadata(descheduler, config_map_name(descheduler), settings),
            "data": {POLICY_KEY: text}}


def _pod_template(descheduler: Mapping[str, Any], settings: RunSettings) -> Obj:
    spec = descheduler.get("spec") or {}
    command = ["berthmaster", "deschedule", "--policy-config-file", f"{POLICY_DIR}/{POLICY_KEY}"]
    if spec.get("dryRun"):
        command.append("--dry-run")
    gates = spec.get("featureGates") or {}
    if gates:  # only a KubeDescheduler's run owner sets them (kubedescheduler.run_owner)
        command.append("--feature-gates=" + ",".join(
            f"{name}={str(bool(on)).lower()}" for name, on in sorted(gates.items())))
    container: Obj = {"name": "descheduler", "image": spec.get("image") or settings.default_image,
                      "command": command,
                      "volumeMounts": [{"mountPath": POLICY_DIR, "name": "policy-volume"},
                                       {"mountPath": "/tmp", "name": "tmp"}],
                      # The restricted Pod Security profile, so enforcing namespaces admit it.
                      "securityContext": {"allowPrivilegeEscalation": False,
                                          "readOnlyRootFilesystem": True,
                                          "capabilities": {"drop": ["ALL"]}}}
    if spec.get("resources"):
        container["resources"] = spec["resources"]
    pod_spec: Obj = {"containers": [container], "restartPolicy": "Never",
                     "serviceAccountName": settings.service_account,
                     "securityContext": {"runAsNonRoot": True, "runAsUser": 65532,
                                         "seccompProfile": {"type": "RuntimeDefault"}},
                     "volumes": [{"name": "policy-volume",
                                  "configMap": {"name": config_map_name(descheduler)}},
                                 {"name": "tmp", "emptyDir": {}}]}
    priority = settings.priority_class(spec)
    if priority:
        pod_spec["priorityClassName"] = priority
    for key in POD_PASSTHROUGH:
        if spec.get(key):
            pod_spec[key] = spec[key]
    metadata: Obj = {"name": f"{run_prefix(descheduler)}-descheduler-pod",
                     "labels": owner_label(descheduler)}
    if priority.startswith(SYSTEM_PREFIX):
        metadata["annotations"] = {CRITICAL_POD_ANNOTATION: "true"}
    return {"metadata": metadata, "spec": pod_spec}


def _job_spec(descheduler: Mapping[str, Any], settings: RunSettings) -> Obj:
    return {"parallelism": 1, "completions": 1, "backoffLimit": 0,
            "template": _pod_template(descheduler, settings)}


def build_job(descheduler: Mapping[str, Any], settings: RunSettings) -> Obj:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": _metadata(descheduler, job_name(descheduler), settings),
            "spec": _job_spec(descheduler, settings)}


def build_cron_job(descheduler: Mapping[str, Any], settings: RunSettings) -> Obj:
    spec = descheduler.get("spec") or {}
    # suspend is always written, so resuming (suspend removed) reaches an existing CronJob.
    cron: Obj = {"schedule": spec["schedule"], "concurrencyPolicy": "Forbid",
                 "suspend": bool(spec.get("suspend", False)),
                 "successfulJobsHistoryLimit": spec.get("successfulJobsHistoryLimit",
                                                        DEFAULT_SUCCESSFUL_JOBS_HISTORY),
                 "failedJobsHistoryLimit": spec.get("failedJobsHistoryLimit",
                                                    DEFAULT_FAILED_JOBS_HISTORY)}
    for key in ("timeZone", "startingDeadlineSeconds"):
        if key in spec:
            cron[key] = spec[key]
    cron["jobTemplate"] = {"metadata": {"labels": {OWNER_LABEL: name_of(descheduler)}},
                           "spec": _job_spec(descheduler, settings)}
    return {"apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": _metadata(descheduler, cron_job_name(descheduler), settings),
            "spec": cron}


def build_children(descheduler: Mapping[str, Any], text: str, settings: RunSettings
                   ) -> list[Obj]:
    """Everything a valid Descheduler owns, in creation order (the policy before the run)."""
    run = build_cron_job(descheduler, settings) if (descheduler.get("spec") or {}).get(
        "schedule") else build_job(descheduler, settings)
    return [build_config_map(descheduler, text, settings), run]
