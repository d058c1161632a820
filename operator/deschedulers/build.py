"""Pure builders for what a Descheduler resource owns (docs/descheduler.md, "The `Descheduler`
resource").

Design: each ``build_*`` takes the Descheduler (a dict) and returns the child object as a dict,
labelled with the owner's name and carrying an owner reference to it (with ``blockOwnerDeletion``),
so deleting the Descheduler lets the garbage collector remove them. Names follow OpenShift's
documented ones (``descheduler-cluster-role``, ``descheduler-sa``, ``descheduler-policy-configmap``,
``descheduler-job``) prefixed with the resource's name. The ClusterRole grants what a pass uses:
reading nodes, reading and deleting pods and creating evictions (the three rules of the documented
ClusterRole), reading namespaces, PriorityClasses and PodDisruptionBudgets, and writing events (as
kubernetes-sigs/descheduler kubernetes/base/rbac.yaml also grants), and reading the volume objects
nodeFit's placement engine judges claims with (PersistentVolumes, PersistentVolumeClaims,
StorageClasses, CSINodes: ``berthmaster.scheduler.volume_objects``). The Job's pod is critical twice
over: the ``scheduler.alpha.kubernetes.io/critical-pod`` annotation and ``priorityClassName:
system-cluster-critical`` (``spec.priorityClassName`` names another class, ``""`` none). Placement
(``nodeSelector``, ``tolerations``, ``affinity``), ``imagePullSecrets`` and the CronJob's
``suspend``, ``timeZone``, ``startingDeadlineSeconds`` and history limits come from the resource's
spec, as the descheduler chart's values do. No I/O here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import yaml

Obj = dict[str, Any]
GROUP, VERSION, PLURAL, KIND = "berthmaster.io", "v1alpha1", "deschedulers", "Descheduler"
OWNER_LABEL = "berthmaster.io/descheduler"
POLICY_KEY = "policy.yaml"
POLICY_DIR = "/policy-dir"
CRITICAL_POD_ANNOTATION = "scheduler.alpha.kubernetes.io/critical-pod"
DEFAULT_IMAGE = "berthmaster:latest"
DEFAULT_PRIORITY_CLASS = "system-cluster-critical"
# History kept by the CronJob unless the spec says otherwise (berthmaster's defaults so far).
DEFAULT_SUCCESSFUL_JOBS_HISTORY = 3
DEFAULT_FAILED_JOBS_HISTORY = 3
# Pod fields copied from the Descheduler's spec as they are (the API server validates them).
POD_PASSTHROUGH = ("nodeSelector", "tolerations", "affinity", "imagePullSecrets")


def image_default() -> str:
    return os.environ.get("BERTHMASTER_IMAGE") or DEFAULT_IMAGE


def name_of(descheduler: Mapping[str, Any]) -> str:
    return str(descheduler["metadata"]["name"])


def namespace_of(descheduler: Mapping[str, Any]) -> str:
    return str((descheduler.get("spec") or {}).get("namespace") or "kube-system")


def owner_reference(descheduler: Mapping[str, Any]) -> Obj:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "name": name_of(descheduler),
            "uid": descheduler["metadata"]["uid"], "controller": True,
            "blockOwnerDeletion": True}


def _metadata(descheduler: Mapping[str, Any], name: str, namespaced: bool = True) -> Obj:
    meta: Obj = {"name": name, "labels": {OWNER_LABEL: name_of(descheduler)},
                 "ownerReferences": [owner_reference(descheduler)]}
    if namespaced:
        meta["namespace"] = namespace_of(descheduler)
    return meta


def config_map_name(descheduler: Mapping[str, Any]) -> str:
    return f"{name_of(descheduler)}-descheduler-policy-configmap"


def service_account_name(descheduler: Mapping[str, Any]) -> str:
    return f"{name_of(descheduler)}-descheduler-sa"


def cluster_role_name(descheduler: Mapping[str, Any]) -> str:
    return f"{name_of(descheduler)}-descheduler-cluster-role"


def job_name(descheduler: Mapping[str, Any]) -> str:
    """One Job per spec generation: a changed policy runs again, a resumed operator does not."""
    generation = descheduler["metadata"].get("generation", 1)
    return f"{name_of(descheduler)}-descheduler-job-{generation}"


def cron_job_name(descheduler: Mapping[str, Any]) -> str:
    return f"{name_of(descheduler)}-descheduler-cronjob"


def policy_text(policy: Mapping[str, Any]) -> str:
    return yaml.safe_dump(dict(policy), sort_keys=False)


def build_config_map(descheduler: Mapping[str, Any], text: str) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": _metadata(descheduler, config_map_name(descheduler)),
            "data": {POLICY_KEY: text}}


def build_service_account(descheduler: Mapping[str, Any]) -> Obj:
    return {"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": _metadata(descheduler, service_account_name(descheduler))}


def build_cluster_role(descheduler: Mapping[str, Any]) -> Obj:
    rules = [
        # the documented ClusterRole's three rules
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "watch", "list"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "watch", "list", "delete"]},
        {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
        # what a pass also reads (one LIST each) and the events it records on evicted pods
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "watch", "list"]},
        {"apiGroups": ["scheduling.k8s.io"], "resources": ["priorityclasses"],
         "verbs": ["get", "watch", "list"]},
        {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"],
         "verbs": ["get", "watch", "list"]},
        # nodeFit's placement engine judges claims with them (scheduler/volume_objects.py)
        {"apiGroups": [""], "resources": ["persistentvolumes", "persistentvolumeclaims"],
         "verbs": ["get", "watch", "list"]},
        {"apiGroups": ["storage.k8s.io"], "resources": ["storageclasses", "csinodes"],
         "verbs": ["get", "watch", "list"]},
        {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
    ]
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": _metadata(descheduler, cluster_role_name(descheduler), namespaced=False),
            "rules": rules}


def build_cluster_role_binding(descheduler: Mapping[str, Any]) -> Obj:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": _metadata(descheduler, f"{cluster_role_name(descheduler)}-binding",
                                  namespaced=False),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": cluster_role_name(descheduler)},
            "subjects": [{"kind": "ServiceAccount", "name": service_account_name(descheduler),
                          "namespace": namespace_of(descheduler)}]}


def _pod_template(descheduler: Mapping[str, Any]) -> Obj:
    spec = descheduler.get("spec") or {}
    command = ["berthmaster", "deschedule", "--policy-config-file", f"{POLICY_DIR}/{POLICY_KEY}"]
    if spec.get("dryRun"):
        command.append("--dry-run")
    container: Obj = {"name": "descheduler", "image": spec.get("image") or image_default(),
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
                     "serviceAccountName": service_account_name(descheduler),
                     "securityContext": {"runAsNonRoot": True, "runAsUser": 65532,
                                         "seccompProfile": {"type": "RuntimeDefault"}},
                     "volumes": [{"name": "policy-volume",
                                  "configMap": {"name": config_map_name(descheduler)}},
                                 {"name": "tmp", "emptyDir": {}}]}
    priority = spec.get("priorityClassName", DEFAULT_PRIORITY_CLASS)
    if priority:
        pod_spec["priorityClassName"] = priority
    for key in POD_PASSTHROUGH:
        if spec.get(key):
            pod_spec[key] = spec[key]
    return {
        "metadata": {"name": f"{name_of(descheduler)}-descheduler-pod",
                     "labels": {OWNER_LABEL: name_of(descheduler)},
                     "annotations": {CRITICAL_POD_ANNOTATION: "true"}},
        "spec": pod_spec,
    }


def _job_spec(descheduler: Mapping[str, Any]) -> Obj:
    return {"parallelism": 1, "completions": 1, "backoffLimit": 0,
            "template": _pod_template(descheduler)}


def build_job(descheduler: Mapping[str, Any]) -> Obj:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": _metadata(descheduler, job_name(descheduler)),
            "spec": _job_spec(descheduler)}


def build_cron_job(descheduler: Mapping[str, Any]) -> Obj:
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
                           "spec": _job_spec(descheduler)}
    return {"apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": _metadata(descheduler, cron_job_name(descheduler)), "spec": cron}


def build_children(descheduler: Mapping[str, Any], text: str) -> list[Obj]:
    """Everything a valid Descheduler owns, in creation order (RBAC before the Job)."""
    run = build_cron_job(descheduler) if (descheduler.get("spec") or {}).get("schedule") \
        else build_job(descheduler)
    return [build_config_map(descheduler, text), build_service_account(descheduler),
            build_cluster_role(descheduler), build_cluster_role_binding(descheduler), run]
