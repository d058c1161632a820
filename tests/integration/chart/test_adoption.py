"""What an administrator adopting the chart needs (docs/deployment.md), proven by rendering with
helm.

- As a dependency: Helm passes ``global:`` to every subchart, so the strict values schema must
  accept it (and stay strict everywhere else) — checked through a real umbrella chart.
- Only the tested version is claimed: ``kubeVersion`` in Chart.yaml says 1.35+ (the one version
  CI runs), and the Machine hooks ValidatingAdmissionPolicy is ``admissionregistration.k8s.io/v1``
  (GA since 1.30), with a switch.
- The conventions of the descheduler and cluster-autoscaler charts (kubernetes-sigs/descheduler
  ``charts/descheduler/values.yaml``, kubernetes/autoscaler
  ``charts/cluster-autoscaler/values.yaml``): ``rbac.create``, ``serviceAccount.create/name/
  annotations``, ``topologySpreadConstraints``, ``extraEnv``, ``extraVolumes``/
  ``extraVolumeMounts``, ``image.digest``, map-form ``extraArgs``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.chart.chartkit import (
    CHART,
    find,
    helm,
    one,
    render,
    render_values,
    template,
)

HOOKS_POLICY = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")


def umbrella(tmp_path: Path, values: dict[str, Any]) -> Path:
    """An umbrella chart depending on berthmaster the way adopters do (file:// dependency,
    packaged into charts/ by ``helm dependency update``)."""
    chart = tmp_path / "platform"
    chart.mkdir()
    (chart / "Chart.yaml").write_text(yaml.safe_dump({
        "apiVersion": "v2", "name": "platform", "version": "1.0.0",
        "dependencies": [{"name": "berthmaster", "version": "0.1.0",
                          "repository": f"file://{CHART}"}]}))
    (chart / "values.yaml").write_text(yaml.safe_dump(values))
    result = helm("dependency", "update", str(chart))
    assert result.returncode == 0, result.stderr
    assert (chart / "charts" / "berthmaster-0.1.0.tgz").is_file()
    return chart


@pytest.mark.parametrize("values", [
    {},
    {"global": {"imageRegistry": "registry.example.com", "imagePullSecrets": []}},
    {"global": {"anything": {"nested": True}}, "berthmaster": {"scheduler": {"name": "zonal"}}},
], ids=["empty", "global-values", "global-and-subchart-values"])
def test_the_chart_works_as_a_subchart(tmp_path: Path, values: dict[str, Any]) -> None:
    chart = umbrella(tmp_path, values)
    result = helm("template", "platform", str(chart), "--namespace", "platform")
    assert result.returncode == 0, result.stderr
    objects = [doc for doc in yaml.safe_load_all(result.stdout) if doc]
    assert len(find(objects, "Deployment")) == 2
    name = values.get("berthmaster", {}).get("scheduler", {}).get("name", "berthmaster")
    args = one(objects, "Deployment", "-scheduler")["spec"]["template"]["spec"][
        "containers"][0]["args"]
    assert f"--scheduler-name={name}" in args


def test_a_subchart_typo_is_still_refused(tmp_path: Path) -> None:
    chart = umbrella(tmp_path, {"global": {}, "berthmaster": {"schedular": {"replicas": 1}}})
    result = helm("template", "platform", str(chart))
    assert result.returncode != 0
    assert "additional properties 'schedular' not allowed" in result.stderr


def test_global_is_the_one_open_key() -> None:
    assert render(["global.foo=bar"])
    refused = template(["globals.foo=bar"])
    assert refused.returncode != 0
    assert "additional properties 'globals' not allowed" in refused.stderr


def test_chart_declares_the_kubernetes_versions_it_supports() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["kubeVersion"] == ">=1.35.0-0"
    assert "Kubernetes 1.35 or newer" in (CHART / "README.md").read_text()
    refused = helm("template", "berthmaster", str(CHART), "--kube-version", "1.34.4")
    assert refused.returncode != 0
    assert "chart requires kubeVersion: >=1.35.0-0" in refused.stderr


def hooks_policy(version: str, *extra: str) -> list[tuple[str, str]]:
    result = helm("template", "berthmaster", str(CHART), "--kube-version", version, *extra)
    assert result.returncode == 0, result.stderr
    return [(doc["apiVersion"], doc["kind"]) for doc in yaml.safe_load_all(result.stdout)
            if doc and doc["kind"] in HOOKS_POLICY]


@pytest.mark.parametrize(("version", "extra", "expected"), [
    ("1.35.0", (), "admissionregistration.k8s.io/v1"),
    ("1.35.4", (), "admissionregistration.k8s.io/v1"),
    ("1.35.4", ("--set", "machineHooksPolicy.enabled=false"), None),
    ("1.35.4", ("--set", "operator.capabilities={deschedulers}"), None),
    ("1.35.4", ("--set", "operator.enabled=false"), None),
    ("1.35.4", ("--set", "operator.capabilities={machines}"), "admissionregistration.k8s.io/v1"),
])
def test_the_hooks_policy_is_v1_and_follows_its_switches(
        version: str, extra: tuple[str, ...], expected: str | None) -> None:
    found = hooks_policy(version, *extra)
    if expected is None:
        assert found == []
    else:
        assert found == [(expected, kind) for kind in HOOKS_POLICY]


def test_rbac_create_false_renders_no_rbac() -> None:
    objects = render(["rbac.create=false"])
    for kind in ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"):
        assert find(objects, kind) == [], kind
    assert len(find(objects, "ServiceAccount")) == 3


@pytest.mark.parametrize("component", ["scheduler", "operator"])
def test_service_account_create_and_name(component: str) -> None:
    pod_spec = lambda objs: one(objs, "Deployment", f"-{component}")["spec"]["template"]["spec"]  # noqa: E731
    named = render([f"{component}.serviceAccount.name=bm-{component}"])
    assert one(named, "ServiceAccount", f"bm-{component}")
    assert pod_spec(named)["serviceAccountName"] == f"bm-{component}"
    binding = one(named, "ClusterRoleBinding", f"-{component}")
    assert binding["subjects"][0]["name"] == f"bm-{component}"

    existing = render([f"{component}.serviceAccount.create=false",
                       f"{component}.serviceAccount.name=platform-{component}"])
    assert find(existing, "ServiceAccount", f"-{component}") == []
    assert pod_spec(existing)["serviceAccountName"] == f"platform-{component}"
    binding = one(existing, "ClusterRoleBinding", f"-{component}")
    assert binding["subjects"][0]["name"] == f"platform-{component}"

    unnamed = template([f"{component}.serviceAccount.create=false"])
    assert unnamed.returncode != 0
    assert (f"{component}.serviceAccount.create is false but {component}.serviceAccount.name "
            "is empty") in unnamed.stderr


SPREAD = [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
           "whenUnsatisfiable": "ScheduleAnyway",
           "labelSelector": {"matchLabels": {"app.kubernetes.io/component": "scheduler"}}}]


@pytest.mark.parametrize("component", ["scheduler", "operator"])
def test_pod_conventions(component: str) -> None:
    values = {component: {
        "topologySpreadConstraints": SPREAD,
        "extraEnv": [{"name": "HTTPS_PROXY", "value": "http://proxy:3128"},
                     {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
        "extraVolumes": [{"name": "ca", "configMap": {"name": "corporate-ca"}}],
        "extraVolumeMounts": [{"name": "ca", "mountPath": "/etc/ssl/corporate",
                               "readOnly": True}],
        "extraArgs": {"v": 4, "log-format": "text", "profiling": ""}}}
    objects = render_values(values)
    spec = one(objects, "Deployment", f"-{component}")["spec"]["template"]["spec"]
    assert spec["topologySpreadConstraints"] == SPREAD
    container = spec["containers"][0]
    assert container["env"][-2:] == values[component]["extraEnv"]
    assert {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {
        "fieldPath": "metadata.namespace"}}} in container["env"]
    assert spec["volumes"][-1] == values[component]["extraVolumes"][0]
    assert container["volumeMounts"][-1] == values[component]["extraVolumeMounts"][0]
    assert container["args"][-3:] == ["--log-format=text", "--profiling", "--v=4"]


def test_extra_args_as_a_list_stay_verbatim() -> None:
    container = one(render(["scheduler.extraArgs={--v=2,--log-format=text}"]), "Deployment",
                    "-scheduler")["spec"]["template"]["spec"]["containers"][0]
    assert container["args"][-2:] == ["--v=2", "--log-format=text"]


def test_image_digest_pins_the_image() -> None:
    digest = "sha256:" + "a" * 64
    objects = render([f"image.digest={digest}", "image.tag=ignored"])
    images = {obj["metadata"]["name"]: obj["spec"]["template"]["spec"]["containers"][0]["image"]
              for obj in find(objects, "Deployment")}
    assert set(images.values()) == {f"berthmaster@{digest}"}
    env = one(objects, "Deployment", "-operator")["spec"]["template"]["spec"][
        "containers"][0]["env"]
    assert {"name": "BERTHMASTER_IMAGE", "value": f"berthmaster@{digest}"} in env


@pytest.mark.parametrize(("sets", "message"), [
    (["image.digest=latest"], "at '/image/digest'"),
    (["rbac.craete=false"], "at '/rbac': additional properties 'craete' not allowed"),
    (["scheduler.serviceAccount.nmae=x"],
     "at '/scheduler/serviceAccount': additional properties 'nmae' not allowed"),
    (["operator.extraEnv[0].nme=X"], "at '/operator/extraEnv/0'"),
    (["operator.extraVolumeMounts[0].name=x"], "at '/operator/extraVolumeMounts/0'"),
    (["scheduler.topologySpreadConstraints[0].maxSkew=1"],
     "at '/scheduler/topologySpreadConstraints/0'"),
    (["scheduler.extraArgs.V_4=1"], "at '/scheduler/extraArgs'"),
    (["machineHooksPolicy.enabled=maybe"], "at '/machineHooksPolicy/enabled'"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else "")
def test_new_values_are_strict(sets: list[str], message: str) -> None:
    result = template(sets)
    assert result.returncode != 0, f"{sets} was accepted"
    assert message in result.stderr, result.stderr



def test_the_deployment_docs_policy_example_installs_and_set_file_is_refused(tmp_path: Path
                                                                             ) -> None:
    """docs/deployment.md says how to change the policy; what it says must work, and what the
    schema refuses (a policy passed as a string by --set-file) must not be recommended."""
    text = (CHART.parents[1] / "docs" / "deployment.md").read_text()
    start = text.index("Change the policy with")
    block = text[text.index("```yaml\n", start) + len("```yaml\n"):]
    block = block[:block.index("```")]
    objects = render_values(yaml.safe_load(block))
    policy = one(objects, "ConfigMap", "-scheduler-policy")["data"]["policy.json"]
    assert "RequireRegion" in policy
    assert "`--set-file`" not in text[start:start + 60]
    policy_file = tmp_path / "policy.json"
    policy_file.write_text(policy)
    refused = helm("template", "berthmaster", str(CHART), "--set-file",
                   f"scheduler.policy={policy_file}")
    assert refused.returncode != 0
    assert "at '/scheduler/policy': got string, want object" in refused.stderr
