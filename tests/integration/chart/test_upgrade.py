"""``helm upgrade`` from the previous chart version to this one, on the real API server.

The previous chart is tests/integration/chart/previous_chart/berthmaster-0.1.0.tgz (how it was
made: previous_chart/README.md), so the test needs no git history. That chart installed its
CRDs from crds/, which Helm never upgrades; this one renders them from templates/crds.yaml
(crds.install, crds.keep), so the one upgrade from it takes the CRDs over with
``--take-ownership`` (Helm 3.17+, helm.sh/helm/v3 pkg/action/upgrade.go; docs/deployment.md,
"CRDs"), and every later plain ``helm upgrade`` updates them.

The upgrade is done the documented way: the user's own values file, never ``--reuse-values``.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from berthmaster.tooling.devcluster.cluster import RunningCluster
from tests.integration.chart.chartkit import CHART, CRDS, SHARED_CRDS, helm

PREVIOUS = Path(__file__).resolve().parent / "previous_chart" / "berthmaster-0.1.0.tgz"
PROBED_CRD = "berthmaster.io_deschedulers.yaml"


@pytest.fixture
def release(cluster: RunningCluster) -> Iterator[dict[str, str]]:
    name = f"up{uuid.uuid4().hex[:5]}"
    namespace = f"{name}-system"
    try:
        yield {"name": name, "namespace": namespace}
    finally:
        helm("uninstall", name, "--namespace", namespace, "--kubeconfig",
             str(cluster.kubeconfig), "--wait=false")
        cluster.kubectl("delete", "namespace", namespace, "--wait=false")


def helm_ok(cluster: RunningCluster, *args: str) -> str:
    result = helm(*args, "--kubeconfig", str(cluster.kubeconfig))
    assert result.returncode == 0, f"helm {' '.join(args[:3])}:\n{result.stderr}"
    return result.stdout


def get(cluster: RunningCluster, *args: str) -> dict[str, Any]:
    result = cluster.kubectl("get", *args, "-o", "yaml")
    assert result.returncode == 0, result.stderr
    found: dict[str, Any] = yaml.safe_load(result.stdout)
    return found


def release_objects(cluster: RunningCluster, name: str, namespace: str) -> set[tuple[str, str]]:
    manifest = helm_ok(cluster, "get", "manifest", name, "--namespace", namespace)
    return {(doc["kind"], doc["metadata"]["name"])
            for doc in yaml.safe_load_all(manifest) if doc}


def crd_names() -> list[str]:
    return sorted(yaml.safe_load(path.read_text())["metadata"]["name"]
                  for path in CRDS.glob("*.yaml"))


def with_printer_column(chart: Path) -> Path:
    """A copy of this chart whose Descheduler CRD gains a printer column: a new chart version
    changing a CRD."""
    copy = chart.parent / "next" / "berthmaster"
    shutil.copytree(CHART, copy)
    path = copy / "files" / "crds" / PROBED_CRD
    crd = yaml.safe_load(path.read_text())
    for version in crd["spec"]["versions"]:
        version.setdefault("additionalPrinterColumns", []).append(
            {"name": "Upgrade-Probe", "type": "string", "jsonPath": ".metadata.uid",
             "priority": 1})
    path.write_text("---\n" + yaml.safe_dump(crd, sort_keys=False))
    return copy


def printer_columns(cluster: RunningCluster) -> list[str]:
    name = yaml.safe_load((CRDS / PROBED_CRD).read_text())["metadata"]["name"]
    crd = get(cluster, "crd", name)
    return [column["name"] for version in crd["spec"]["versions"]
            for column in version.get("additionalPrinterColumns", [])]


def test_upgrade_from_the_previous_chart_with_a_changed_value(
    cluster: RunningCluster, release: dict[str, str], tmp_path: Path
) -> None:
    name, namespace = release["name"], release["namespace"]
    values: dict[str, Any] = {"scheduler": {"name": f"{name}-sched",
                                            "podLabels": {"team": "platform"}},
                              "operator": {"watchNamespaces": ["kube-system"]}}
    first = tmp_path / "values.yaml"
    first.write_text(yaml.safe_dump(values))
    helm_ok(cluster, "install", name, str(PREVIOUS), "--namespace", namespace,
            "--create-namespace", "-f", str(first))
    before = release_objects(cluster, name, namespace)

    # The user's values file, one value changed. The CRDs are not the release's yet: refused
    # without --take-ownership (docs/deployment.md, "Upgrading from chart 0.1.0").
    values["scheduler"]["extraArgs"] = {"v": "4"}
    second = tmp_path / "values-2.yaml"
    second.write_text(yaml.safe_dump(values))
    upgrade = ["upgrade", name, str(CHART), "--namespace", namespace, "-f", str(second)]
    refused = helm(*upgrade, "--kubeconfig", str(cluster.kubeconfig))
    assert refused.returncode != 0, "Helm adopted CRDs the release did not create"
    assert "invalid ownership metadata" in refused.stderr, refused.stderr
    helm_ok(cluster, *upgrade, *SHARED_CRDS)

    after = release_objects(cluster, name, namespace)
    assert before <= after, f"lost by the upgrade: {sorted(before - after)}"
    assert sorted(n for kind, n in after - before if kind == "CustomResourceDefinition") == (
        crd_names())
    assert not [obj for obj in after - before if obj[0] != "CustomResourceDefinition"]
    prefix = f"{name}-berthmaster"
    scheduler = get(cluster, "deployment", f"{prefix}-scheduler", "-n", namespace)
    pod = scheduler["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    assert "--v=4" in container["args"], container["args"]
    assert pod["metadata"]["labels"]["team"] == "platform"
    assert any(f"{name}-sched" in arg for arg in container["args"]), container["args"]
    operator = get(cluster, "deployment", f"{prefix}-operator", "-n", namespace)
    assert any("kube-system" in arg
               for arg in operator["spec"]["template"]["spec"]["containers"][0]["args"])
    for crd_name in crd_names():
        crd = get(cluster, "crd", crd_name)
        assert crd["metadata"]["annotations"]["meta.helm.sh/release-name"] == name
        assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
        assert crd["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"

    # From now on a plain `helm upgrade` updates the CRDs: a new chart adds a printer column,
    # the next one (this chart again) removes it.
    assert "Upgrade-Probe" not in printer_columns(cluster)
    helm_ok(cluster, "upgrade", name, str(with_printer_column(tmp_path)), "--namespace",
            namespace, "-f", str(second))
    assert "Upgrade-Probe" in printer_columns(cluster)
    helm_ok(cluster, *upgrade)
    assert "Upgrade-Probe" not in printer_columns(cluster)

    # helm.sh/resource-policy: keep: uninstalling leaves the CRDs (and the cluster's Machines).
    helm_ok(cluster, "uninstall", name, "--namespace", namespace, "--wait=false")
    for crd_name in crd_names():
        assert get(cluster, "crd", crd_name)["metadata"]["name"] == crd_name
