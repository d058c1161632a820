"""The values platform teams ask for, rendered: per-component priorityClassName, probe
overrides, update strategies, revisionHistoryLimit, extraObjects, the ServiceMonitor's and the
PrometheusRule's namespace, relabelings and extra rules, SELinux/AppArmor/supplementalGroups
within the restricted profile, and the scheduler's optional FlowSchema. The "platform-knobs"
value set (chartkit.VALUE_SETS) also goes through helm lint, the API server's dry run and Pod
Security admission (test_chart_render.py, test_on_the_api_server.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.chart.chartkit import (
    CHART,
    VALUE_SETS,
    find,
    helm,
    one,
    render,
    render_values,
)

KNOBS = VALUE_SETS["platform-knobs"]


def pod_spec(objects: list[dict[str, Any]], component: str) -> Any:
    return one(objects, "Deployment", f"-{component}")["spec"]["template"]["spec"]


def test_priority_class_per_component_falls_back_to_the_top_level_one() -> None:
    objects = render(KNOBS)
    assert pod_spec(objects, "scheduler")["priorityClassName"] == "system-node-critical"
    assert pod_spec(objects, "operator")["priorityClassName"] == "system-cluster-critical"
    assert pod_spec(objects, "admission")["priorityClassName"] == "system-cluster-critical"
    cleared = render(["priorityClassName=", "operator.priorityClassName=team-critical"])
    assert "priorityClassName" not in pod_spec(cleared, "scheduler")
    assert pod_spec(cleared, "operator")["priorityClassName"] == "team-critical"


def test_probe_overrides_merge_over_the_charts_probes() -> None:
    objects = render(KNOBS)
    (scheduler,) = pod_spec(objects, "scheduler")["containers"]
    assert scheduler["livenessProbe"] == {
        "httpGet": {"path": "/healthz", "port": "metrics", "scheme": "HTTPS"},
        "initialDelaySeconds": 10, "periodSeconds": 30, "failureThreshold": 3}
    (admission,) = pod_spec(objects, "admission")["containers"]
    assert admission["readinessProbe"] == {
        "httpGet": {"path": "/readyz", "port": "metrics", "scheme": "HTTPS"},
        "periodSeconds": 5, "failureThreshold": 6}
    plain = render(["metrics.serving=plain"])
    (operator,) = pod_spec(plain, "operator")["containers"]
    assert operator["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert operator["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}


def test_update_strategy_and_revision_history() -> None:
    objects = render(KNOBS)
    scheduler = one(objects, "Deployment", "-scheduler")["spec"]
    assert scheduler["strategy"] == {"type": "RollingUpdate",
                                     "rollingUpdate": {"maxUnavailable": 1}}
    for deployment in find(objects, "Deployment"):
        assert deployment["spec"]["revisionHistoryLimit"] == 2
    defaults = render(["admission.enabled=true"])
    assert "strategy" not in one(defaults, "Deployment", "-scheduler")["spec"]
    assert one(defaults, "Deployment", "-operator")["spec"]["strategy"] == {"type": "Recreate"}
    assert one(defaults, "Deployment", "-admission")["spec"]["strategy"] == {
        "type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}
    recreate = render(["admission.enabled=true", "admission.updateStrategy.type=Recreate"])
    assert one(recreate, "Deployment", "-admission")["spec"]["strategy"] == {"type": "Recreate"}


def test_operator_strategy_is_not_a_value() -> None:
    result = helm("template", "x", str(CHART), "--set",
                  "operator.updateStrategy.type=RollingUpdate")
    assert result.returncode != 0
    assert "updateStrategy" in result.stderr


def test_extra_objects_maps_and_templated_strings() -> None:
    objects = render_values({"extraObjects": [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}},
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n"
        "  namespace: {{ .Release.Namespace }}\n"]})
    assert one(objects, "ConfigMap", "a")["metadata"] == {"name": "a"}
    assert one(objects, "ConfigMap", "b")["metadata"]["namespace"] == "berthmaster"


def test_service_monitor_namespace_and_relabelings() -> None:
    relabel = {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node"}
    drop = {"sourceLabels": ["__name__"], "regex": "go_.*", "action": "drop"}
    objects = render_values({"metrics": {"serviceMonitor": {
        "enabled": True, "namespace": "monitoring", "relabelings": [relabel],
        "metricRelabelings": [drop]}}})
    for monitor in find(objects, "ServiceMonitor"):
        assert monitor["metadata"]["namespace"] == "monitoring"
        assert monitor["spec"]["namespaceSelector"] == {"matchNames": ["berthmaster"]}
        (endpoint,) = monitor["spec"]["endpoints"]
        assert endpoint["relabelings"] == [relabel]
        assert endpoint["metricRelabelings"] == [drop]
    assert len(find(objects, "ServiceMonitor")) == 2


def test_prometheus_rule_namespace_and_extra_rules() -> None:
    extra = {"alert": "SiteBerthmasterSlow", "expr": "vector(1) > 2", "for": "10m",
             "labels": {"severity": "info"}}
    objects = render_values({"prometheusRule": {"enabled": True, "namespace": "monitoring",
                                                "extraRules": [extra]}})
    rule = one(objects, "PrometheusRule")
    assert rule["metadata"]["namespace"] == "monitoring"
    (group,) = rule["spec"]["groups"]
    assert group["rules"][-1] == extra
    assert len(group["rules"]) > 1


def test_flow_schema_is_kube_schedulers_for_the_schedulers_account() -> None:
    """As kube-apiserver's suggested FlowSchema "kube-scheduler" (k8s.io/apiserver
    pkg/apis/flowcontrol/bootstrap/default.go, SuggestedFlowSchemaKubeScheduler):
    workload-high, precedence 800, ByNamespace, every verb/group/resource/URL."""
    assert not find(render(), "FlowSchema")
    schema = one(render(KNOBS), "FlowSchema")
    assert schema["apiVersion"] == "flowcontrol.apiserver.k8s.io/v1"
    spec = schema["spec"]
    assert spec["priorityLevelConfiguration"] == {"name": "workload-high"}
    assert spec["matchingPrecedence"] == 800
    assert spec["distinguisherMethod"] == {"type": "ByNamespace"}
    (rule,) = spec["rules"]
    assert rule["subjects"] == [{"kind": "ServiceAccount", "serviceAccount": {
        "name": "berthmaster-scheduler", "namespace": "berthmaster"}}]
    assert rule["resourceRules"] == [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                                      "clusterScope": True, "namespaces": ["*"]}]
    assert rule["nonResourceRules"] == [{"verbs": ["*"], "nonResourceURLs": ["*"]}]


def test_selinux_apparmor_and_supplemental_groups_reach_every_pod() -> None:
    for _, template in ((d["metadata"]["name"], d["spec"]["template"])
                        for d in find(render(KNOBS), "Deployment")):
        context = template["spec"]["securityContext"]
        assert context["seLinuxOptions"] == {"type": "container_t", "level": "s0:c1,c2"}
        assert context["appArmorProfile"] == {"type": "RuntimeDefault"}
        assert context["supplementalGroups"] == [1000]
        for container in template["spec"]["containers"]:
            assert container["securityContext"]["appArmorProfile"] == {"type": "RuntimeDefault"}


@pytest.mark.parametrize(("value", "field"), [
    ("podSecurityContext.seLinuxOptions.type=spc_t", "seLinuxOptions"),
    ("podSecurityContext.seLinuxOptions.user=system_u", "seLinuxOptions"),
    ("containerSecurityContext.appArmorProfile.type=Unconfined", "appArmorProfile"),
])
def test_what_the_restricted_profile_forbids_is_refused(value: str, field: str) -> None:
    """The baseline/restricted Pod Security checks (k8s.io/pod-security-admission
    policy/check_seLinuxOptions.go: types container_t, container_init_t, container_kvm_t,
    container_engine_t, no user or role; policy/check_appArmorProfile.go: no Unconfined)."""
    result = helm("template", "x", str(CHART), "--set", value)
    assert result.returncode != 0
    assert field in result.stderr
