"""The helm the local control plane builds behaves like a helm release build.

helm's Makefile (helm.sh/helm/v3@v3.22.0/Makefile, ``LDFLAGS``) stamps the version into
``internal/version`` and the Kubernetes version ``helm template`` assumes into
``pkg/chartutil`` and ``pkg/lint/rules`` (major and minor of the client-go module it is built
with, v0.37 -> 1.37). berthmaster.tooling.devcluster.build sets the same flags; without them helm
calls
itself "v3.22" and assumes Kubernetes v1.20.0, which the chart's kubeVersion (>=1.27.0-0)
refuses. These run the binary directly, not chartkit.helm, which names a --kube-version.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from berthmaster.tooling.devcluster.build import HELM_CLIENT_GO_VERSION, HELM_VERSION
from tests.integration.chart.chartkit import CHART, helm_binary


def run_helm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(helm_binary()), *args], capture_output=True, text=True,
                          timeout=120, check=False)


def test_helm_version_is_the_release_version() -> None:
    result = run_helm("version", "--short")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == HELM_VERSION
    full = run_helm("version")
    assert f'Version:"{HELM_VERSION}"' in full.stdout
    assert 'GitTreeState:"clean"' in full.stdout


def test_helm_template_renders_the_chart_as_a_user_types_it() -> None:
    """``helm template x charts/berthmaster``: no --kube-version, nothing on stderr (in
    particular no "found symbolic link" note: the chart holds real files)."""
    result = run_helm("template", "x", str(CHART))
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert "kind: Deployment" in result.stdout


def test_helm_assumes_the_kubernetes_minor_of_its_client_go(tmp_path: Path) -> None:
    chart = tmp_path / "probe"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: probe\nversion: 0.1.0\n")
    (chart / "templates" / "version.yaml").write_text(
        "# {{ .Capabilities.KubeVersion.Version }}\n")
    result = run_helm("template", "x", str(chart))
    assert result.returncode == 0, result.stderr
    minor = HELM_CLIENT_GO_VERSION.split(".")[1]
    assert f"# v1.{minor}.0" in result.stdout
