"""kind's default storage on the local control plane's real node: the objects to apply.

A kind cluster comes with a default StorageClass ``standard`` served by rancher's
local-path-provisioner (kind's manifest: ``pkg/build/nodeimage/const_storage.go`` of
sigs.k8s.io/kind v0.30.0, which ``pkg/cluster/internal/create/actions/installstorage/storage.go``
applies; rancher's own: ``deploy/local-path-storage.yaml`` of
github.com/rancher/local-path-provisioner v0.0.30). The cluster with a real kubelet
(``berthmaster dev up --kubelets 1``, ``make e2e MODE=kubelet``) gets the same, so a
StatefulSet's ``volumeClaimTemplates`` are provisioned there as on kind: the scheduler writes
``volume.kubernetes.io/selected-node`` on a WaitForFirstConsumer claim, the provisioner runs a
helper pod on that node to make the volume's directory and creates a hostPath PersistentVolume
whose node affinity names the node, and the PV controller binds the two.

The shape is theirs: namespace ``local-path-storage``, the ServiceAccount, ConfigMap
``local-path-config`` (``config.json``, the ``setup`` and ``teardown`` scripts, ``helperPod.yaml``)
and the Deployment; StorageClass ``standard``, the default class, ``rancher.io/local-path``,
``WaitForFirstConsumer``, ``Delete``. What differs, and why:

- the images are local (berthmaster.tooling.devcluster.images: the provisioner binary alone, and
  Debian's static busybox for the helper pods) and never pulled (``imagePullPolicy: Never``);
- the volumes live under the cluster's state folder (``<cluster>/node/local-path-provisioner``),
  removed with the cluster by ``dev down``, instead of ``/var/local-path-provisioner``;
- the provisioner runs on the real node (a nodeSelector on ``berthmaster.io/node=kubelet``);
  its helper pods are placed by the provisioner itself (``spec.nodeName`` = the claim's selected
  node), so claims of this class are for pods on the real node only — a kwok node has no disk;
- it reads its configuration and helper pod from the mounted ConfigMap (``--config``,
  ``--helper-pod-file``), so the RBAC is what the code touches (main.go and provisioner.go of the
  provisioner, controller/controller.go of sig-storage-lib-external-provisioner v10): claims
  read and updated (a provisioning that must be retried elsewhere drops the selected node),
  volumes read, created, patched and deleted, classes read, the selected Node read, events
  written; in its own namespace the helper pods created, read and deleted, and their logs read.
  It does not read ConfigMaps or list Pods through the API, as kind's RBAC allows;
- the provisioner itself runs as a non-root user with a read-only root; the helper pods run as
  root, as kind's do (they make and remove directories in a root-owned host folder).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

NAMESPACE = "local-path-storage"
NAME = "local-path-provisioner"
SERVICE_ACCOUNT = "local-path-provisioner-service-account"
CONFIG_MAP = "local-path-config"
STORAGE_CLASS = "standard"
PROVISIONER = "rancher.io/local-path"
CONFIG_DIR = "/etc/config/"
DEFAULT_NODES = "DEFAULT_PATH_FOR_NON_LISTED_NODES"

_CLUSTER_RULES: list[dict[str, Any]] = [
    {"apiGroups": [""], "resources": ["persistentvolumeclaims"],
     "verbs": ["get", "list", "watch", "update"]},
    {"apiGroups": [""], "resources": ["persistentvolumes"],
     "verbs": ["get", "list", "watch", "create", "patch", "delete"]},
    {"apiGroups": ["storage.k8s.io"], "resources": ["storageclasses"],
     "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
]
_NAMESPACE_RULES: list[dict[str, Any]] = [
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "get", "delete"]},
    {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
]


def helper_pod(helper_image: str) -> dict[str, Any]:
    """The helper pod template (``helperPod.yaml``): kind's, with the local image."""
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "helper-pod"},
        "spec": {
            "priorityClassName": "system-node-critical",
            "tolerations": [{"key": "node.kubernetes.io/disk-pressure", "operator": "Exists",
                             "effect": "NoSchedule"}],
            "containers": [{"name": "helper-pod", "image": helper_image,
                            "imagePullPolicy": "Never"}],
        },
    }


def manifests(provisioner_image: str, helper_image: str, volumes_dir: Path,
              node_selector: dict[str, str]) -> list[dict[str, Any]]:
    """Namespace, RBAC, ConfigMap, Deployment and the default StorageClass ``standard``."""
    if not volumes_dir.is_absolute():
        raise ValueError(f"local-path volumes folder {volumes_dir}: give an absolute path (the "
                         "provisioner refuses relative ones)")
    labels = {"app": NAME, "app.kubernetes.io/managed-by": "berthmaster"}
    config = {"nodePathMap": [{"node": DEFAULT_NODES, "paths": [str(volumes_dir)]}]}
    container = {
        "name": NAME,
        "image": provisioner_image,
        "imagePullPolicy": "Never",
        "command": ["/local-path-provisioner", "--debug", "start",
                    "--helper-image", helper_image,
                    "--config", f"{CONFIG_DIR}config.json",
                    "--helper-pod-file", f"{CONFIG_DIR}helperPod.yaml"],
        "env": [{"name": "POD_NAMESPACE",
                 "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                {"name": "CONFIG_MOUNT_PATH", "value": CONFIG_DIR}],
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532,
                            "capabilities": {"drop": ["ALL"]},
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "volumeMounts": [{"name": "config-volume", "mountPath": CONFIG_DIR}],
    }
    binding_subjects = [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT,
                         "namespace": NAMESPACE}]
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": SERVICE_ACCOUNT, "namespace": NAMESPACE, "labels": labels}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": f"{NAME}-role", "namespace": NAMESPACE, "labels": labels},
         "rules": _NAMESPACE_RULES},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": f"{NAME}-role", "labels": labels}, "rules": _CLUSTER_RULES},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": f"{NAME}-bind", "namespace": NAMESPACE, "labels": labels},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                     "name": f"{NAME}-role"},
         "subjects": binding_subjects},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": f"{NAME}-bind", "labels": labels},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": f"{NAME}-role"},
         "subjects": binding_subjects},
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": CONFIG_MAP, "namespace": NAMESPACE, "labels": labels},
         "data": {
             "config.json": json.dumps(config, indent=2),
             "setup": "#!/bin/sh\nset -eu\nmkdir -m 0777 -p \"$VOL_DIR\"\n",
             "teardown": "#!/bin/sh\nset -eu\nrm -rf \"$VOL_DIR\"\n",
             "helperPod.yaml": yaml.safe_dump(helper_pod(helper_image), sort_keys=False),
         }},
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": labels},
         "spec": {
             "replicas": 1,
             "selector": {"matchLabels": {"app": NAME}},
             "template": {
                 "metadata": {"labels": labels},
                 "spec": {
                     "nodeSelector": {"kubernetes.io/os": "linux", **node_selector},
                     "serviceAccountName": SERVICE_ACCOUNT,
                     "containers": [container],
                     "volumes": [{"name": "config-volume",
                                  "configMap": {"name": CONFIG_MAP}}],
                 },
             },
         }},
        {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
         "metadata": {"name": STORAGE_CLASS, "labels": labels,
                      "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
         "provisioner": PROVISIONER,
         "volumeBindingMode": "WaitForFirstConsumer",
         "reclaimPolicy": "Delete"},
    ]
