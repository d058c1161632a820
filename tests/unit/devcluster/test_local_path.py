"""kind's default storage for the real-kubelet cluster (berthmaster.tooling.devcluster.local_path),
as
pure manifests: the shape of kind's (pkg/build/nodeimage/const_storage.go of sigs.k8s.io/kind
v0.30.0) and rancher's (deploy/local-path-storage.yaml of local-path-provisioner v0.0.30), with
local images and our folder. The provisioner itself runs in `make e2e` (e2e/test_storage.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from berthmaster.tooling.devcluster import build, images, local_path

FOLDER = Path("/state/e2e/node/local-path-provisioner")
SELECTOR = {"berthmaster.io/node": "kubelet"}


def objects() -> dict[str, dict[str, Any]]:
    found = local_path.manifests(images.LOCAL_PATH_IMAGE, images.LOCAL_PATH_HELPER_IMAGE,
                                 FOLDER, SELECTOR)
    return {f"{o['kind']}/{o['metadata']['name']}": o for o in found}


def test_the_default_class_is_kinds_standard() -> None:
    sc = objects()["StorageClass/standard"]
    assert sc["metadata"]["annotations"] == {"storageclass.kubernetes.io/is-default-class": "true"}
    assert (sc["provisioner"], sc["volumeBindingMode"], sc["reclaimPolicy"]) == (
        "rancher.io/local-path", "WaitForFirstConsumer", "Delete")


def test_the_provisioner_runs_the_local_image_on_the_real_node() -> None:
    deployment = objects()["Deployment/local-path-provisioner"]
    assert deployment["metadata"]["namespace"] == "local-path-storage"
    pod = deployment["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"kubernetes.io/os": "linux", **SELECTOR}
    assert pod["serviceAccountName"] == "local-path-provisioner-service-account"
    (container,) = pod["containers"]
    assert (container["image"], container["imagePullPolicy"]) == (
        "berthmaster.local/local-path-provisioner:v0.0.30", "Never")
    assert container["command"][:3] == ["/local-path-provisioner", "--debug", "start"]
    assert container["securityContext"]["runAsNonRoot"] is True


def test_volumes_go_to_the_clusters_folder_made_by_the_local_helper() -> None:
    data = objects()["ConfigMap/local-path-config"]["data"]
    assert json.loads(data["config.json"]) == {"nodePathMap": [
        {"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": [str(FOLDER)]}]}
    helper = yaml.safe_load(data["helperPod.yaml"])
    (container,) = helper["spec"]["containers"]
    assert (container["image"], container["imagePullPolicy"]) == (
        images.LOCAL_PATH_HELPER_IMAGE, "Never")
    assert "mkdir -m 0777 -p \"$VOL_DIR\"" in data["setup"]
    assert "rm -rf \"$VOL_DIR\"" in data["teardown"]


def test_the_rbac_is_what_the_provisioner_touches() -> None:
    found = objects()
    cluster = {r["resources"][0]: set(r["verbs"])
               for r in found["ClusterRole/local-path-provisioner-role"]["rules"]}
    assert cluster["nodes"] == {"get"}
    assert "configmaps" not in cluster and "pods" not in cluster
    assert cluster["persistentvolumes"] >= {"create", "delete"}
    namespaced = {r["resources"][0]: set(r["verbs"])
                  for r in found["Role/local-path-provisioner-role"]["rules"]}
    assert namespaced == {"pods": {"create", "get", "delete"}, "pods/log": {"get"}}
    for binding in ("ClusterRoleBinding/local-path-provisioner-bind",
                    "RoleBinding/local-path-provisioner-bind"):
        (subject,) = found[binding]["subjects"]
        assert subject["name"] == "local-path-provisioner-service-account"


def test_a_relative_folder_is_refused() -> None:
    with pytest.raises(ValueError, match="absolute"):
        local_path.manifests("p", "h", Path("volumes"), SELECTOR)


def test_the_provisioner_is_its_own_cached_family() -> None:
    family = build.LOCAL_PATH_FAMILY
    assert family.module_dir.name == "local-path-provisioner"
    assert (family.module_dir / "go.mod").read_text().count(
        "github.com/rancher/local-path-provisioner v0.0.30") == 1
    assert build.binary_path("local-path-provisioner").parent == build.family_dir(family)
    assert f"main.VERSION={build.LOCAL_PATH_VERSION}" in family.ldflags


def test_metrics_server_is_its_own_cached_family() -> None:
    """Pinned in hack/metrics-server/go.mod; version stamped as metrics-server's Makefile
    (VERSION_LDFLAGS, PKG k8s.io/client-go/pkg) does."""
    family = build.METRICS_SERVER_FAMILY
    assert family.module_dir.name == "metrics-server"
    assert (family.module_dir / "go.mod").read_text().count(
        f"sigs.k8s.io/metrics-server {build.METRICS_SERVER_VERSION}") == 1
    assert build.binary_path("metrics-server").parent == build.family_dir(family)
    assert f"version.gitVersion={build.METRICS_SERVER_VERSION}" in family.ldflags
    assert family not in build.FAMILIES  # built only when asked for
