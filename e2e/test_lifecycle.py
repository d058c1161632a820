"""The chart's lifecycle, last (conftest orders it so): `helm upgrade` with the user's values file
(what `helm get values` prints, never `--reuse-values`: docs/deployment.md; on the real-kubelet
cluster from the chart e2e/run.py installed from the registry to the checkout's) rolls the release
and it keeps scheduling; `helm uninstall` leaves none of the release's objects behind but the
CRDs (`crds.keep`)."""

from __future__ import annotations

from pathlib import Path

import yaml

from e2e.conftest import NAMESPACE, ROOT, SCHEDULER, Kind, wait_for

CHART = ROOT / "charts" / "berthmaster"
RELEASE = "berthmaster"
INSTANCE = f"app.kubernetes.io/instance={RELEASE}"
# What the chart renders, namespaced and cluster-wide.
NAMESPACED = ",".join(["deployments", "replicasets", "pods", "services", "serviceaccounts",
                       "configmaps", "roles", "rolebindings", "poddisruptionbudgets"])
CLUSTER_WIDE = ",".join(["clusterroles", "clusterrolebindings", "validatingadmissionpolicies",
                         "validatingadmissionpolicybindings"])


def test_upgrade_then_uninstall_leaves_nothing_behind(kind: Kind, namespace: str,
                                                     tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(kind.helm("get", "values", RELEASE, "--namespace", NAMESPACE,
                                "-o", "yaml").stdout)
    kind.helm("upgrade", RELEASE, str(CHART), "--namespace", NAMESPACE, "-f", str(values),
              "--set", "scheduler.replicas=1", "--set", "scheduler.extraArgs={--log-format=text}",
              "--wait", "--timeout", "5m")
    deployment = kind.get("deployment", f"{RELEASE}-scheduler", "-n", NAMESPACE)
    assert deployment["spec"]["replicas"] == 1
    assert deployment["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "after-upgrade"},
           "spec": {"schedulerName": SCHEDULER,
                    "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}
    kind.apply(yaml.safe_dump(pod), namespace)
    wait_for(lambda: kind.get("pod", "after-upgrade", "-n", namespace)["spec"].get("nodeName"),
             "the pod bound after the upgrade")

    kind.helm("uninstall", RELEASE, "--namespace", NAMESPACE, "--wait", "--timeout", "3m")

    def leftovers() -> list[str]:
        found = kind.run("get", NAMESPACED, "-n", NAMESPACE, "-l", INSTANCE, "-o", "name")
        wide = kind.run("get", CLUSTER_WIDE, "-l", INSTANCE, "-o", "name", check=False)
        return (found.stdout + wide.stdout).split()

    wait_for(lambda: not leftovers() or None, "no object of the release left", timeout=120)
    assert not kind.run("get", "secrets", "-n", NAMESPACE, "-l", f"owner=helm,name={RELEASE}",
                        "-o", "name").stdout.strip()
