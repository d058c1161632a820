"""The chart renders what the issue promises, for every value set; helm lint passes.

No cluster here: helm's own lint and template over the value sets users reach for, then checks
on the rendered objects (replicas, leader election wired to the RBAC Lease name, the documented
default Policy, restricted security contexts, labels, PDBs, ServiceMonitor). The container
arguments are parsed by berthmaster's real CLI parser, so a flag the program does not know fails
here rather than in a CrashLoopBackOff.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from typing import Any

import pytest
import yaml

from berthmaster.cli import build_parser
from tests.integration.chart import chartkit
from tests.integration.chart.chartkit import (
    CHART,
    VALUE_SETS,
    find,
    helm,
    one,
    pod_templates,
    render,
    render_values,
)


@pytest.mark.parametrize("value_set", sorted(VALUE_SETS))
def test_helm_lint_passes(value_set: str) -> None:
    args = ["lint", str(CHART), "--strict"]
    for value in VALUE_SETS[value_set]:
        args += ["--set", value]
    result = helm(*args)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout


def container(objects: list[dict[str, Any]], component: str) -> Mapping[str, Any]:
    deployment = one(objects, "Deployment", f"-{component}")
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]  # type: ignore[no-any-return]


def parsed_args(args: list[str]) -> argparse.Namespace:
    """Parse a container's args with the image's entrypoint parser (``berthmaster ...``)."""
    # $(POD_NAME) is expanded by the kubelet; any string parses the same way.
    expanded = [arg.replace("$(POD_NAME)", "pod-0") for arg in args]
    return build_parser(expanded[0]).parse_args(expanded)


@pytest.mark.parametrize("value_set", sorted(VALUE_SETS))
def test_container_args_parse_with_the_real_cli(value_set: str) -> None:
    objects = render(VALUE_SETS[value_set])
    components = [("scheduler", "scheduler"), ("operator", "operator")]
    if find(objects, "Deployment", "-admission"):
        components.append(("admission", "admission"))
    for component, command in components:
        args = list(container(objects, component)["args"])
        assert args[0] == command
        parsed_args(args)  # argparse exits (SystemExit) on an unknown flag or a bad value


def test_scheduler_defaults_two_replicas_with_leader_election_on_its_own_lease() -> None:
    objects = render()
    deployment = one(objects, "Deployment", "-scheduler")
    assert deployment["spec"]["replicas"] == 2
    args = parsed_args(list(container(objects, "scheduler")["args"]))
    assert args.scheduler_name == "berthmaster"
    assert args.leader_elect is True
    assert args.leader_elect_lease_name == "berthmaster"
    assert args.leader_elect_lease_namespace == "berthmaster"
    assert args.policy is None and args.config is None  # the built-in default profile
    # the metrics port is kube-scheduler's secure port: HTTPS, delegated authentication
    assert (args.secure_port, args.bind_address, args.metrics_bind_address) == (
        10260, "0.0.0.0", "")
    # the chart passes the periods in plain seconds; kube-scheduler's Go durations parse too
    assert (args.leader_elect_lease_duration, args.leader_elect_renew_deadline,
            args.leader_elect_retry_period) == (15.0, 10.0, 2.0)
    # The Role lets it touch exactly that Lease (create cannot be narrowed by name).
    role = one(objects, "Role", "-scheduler-leader-election")
    assert role["metadata"]["namespace"] == "berthmaster"
    named = [rule for rule in role["rules"] if rule.get("resourceNames")]
    assert named == [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                      "resourceNames": ["berthmaster"], "verbs": ["get", "update"]}]
    # Two replicas: a PDB keeps one, and anti-affinity spreads them.
    pdb = one(objects, "PodDisruptionBudget", "-scheduler")
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == (
        deployment["spec"]["selector"]["matchLabels"])
    assert "podAntiAffinity" in deployment["spec"]["template"]["spec"]["affinity"]


def test_scheduler_name_is_configurable_and_follows_into_the_lease() -> None:
    objects = render(VALUE_SETS["tuned"])
    args = parsed_args(list(container(objects, "scheduler")["args"]))
    assert args.scheduler_name == "zonal"
    assert args.leader_elect_lease_name == "zonal"
    role = one(objects, "Role", "-scheduler-leader-election")
    assert ["zonal"] in [rule.get("resourceNames") for rule in role["rules"]]
    assert args.log_format == "text"


def test_kube_scheduler_extra_args_parse_into_the_same_settings() -> None:
    """extraArgs in kube-scheduler's spellings (cmd/kube-scheduler/app/options) start the pod."""
    args = parsed_args(list(container(render(VALUE_SETS["kube-scheduler-flags"]),
                                      "scheduler")["args"]))
    assert args.leader_elect_lease_duration == 30.0
    assert (args.verbosity, args.kube_api_qps) == (4, 100.0)
    assert args.authentication_kubeconfig == "/etc/kubernetes/scheduler.conf"


def test_ha_off_runs_one_scheduler_without_election_or_budget() -> None:
    objects = render(VALUE_SETS["ha-off"])
    assert one(objects, "Deployment", "-scheduler")["spec"]["replicas"] == 1
    args = parsed_args(list(container(objects, "scheduler")["args"]))
    assert args.leader_elect is False
    assert find(objects, "Role", "-scheduler-leader-election") == []
    assert find(objects, "PodDisruptionBudget") == []


def test_the_default_is_kube_scheduler_1_35s_default_profile_with_no_file() -> None:
    """No scheduler.policy and no scheduler.config: no ConfigMap, no --policy or --config,
    nothing mounted at /etc/berthmaster; the scheduler runs its built-in default profile
    (scheduler/config.py, default_profile)."""
    objects = render()
    assert find(objects, "ConfigMap", "-scheduler-policy") == []
    assert find(objects, "ConfigMap", "-scheduler-config") == []
    args = list(container(objects, "scheduler")["args"])
    assert not [a for a in args if a.startswith(("--policy", "--config"))]
    pod = one(objects, "Deployment", "-scheduler")["spec"]["template"]
    assert [v["name"] for v in pod["spec"]["volumes"]] == ["tmp"]
    assert not {"berthmaster.io/policy-checksum", "berthmaster.io/config-checksum"} & set(
        pod["metadata"]["annotations"] or {})


CONFIG = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
          "profiles": [{"plugins": {"score": {"disabled": [{"name": "ImageLocality"}]}}},
                       {"schedulerName": "berthmaster-packed", "pluginConfig": [
                           {"name": "NodeResourcesFit", "args": {"scoringStrategy": {
                               "type": "MostAllocated"}}}]}]}


def test_scheduler_config_is_rendered_mounted_and_passed_as_config() -> None:
    from berthmaster.scheduler.config import load_config

    objects = render_values({"scheduler": {"name": "bm", "config": CONFIG}})
    config_map = one(objects, "ConfigMap", "-scheduler-config")
    assert config_map["metadata"]["labels"]["app.kubernetes.io/component"] == "scheduler"
    assert find(objects, "ConfigMap", "-scheduler-policy") == []
    text = config_map["data"]["config.yaml"]
    # a profile without schedulerName gets scheduler.name
    assert [p["schedulerName"] for p in yaml.safe_load(text)["profiles"]] == [
        "bm", "berthmaster-packed"]
    assert load_config(text).scheduler_names == ("bm", "berthmaster-packed")
    raw = list(container(objects, "scheduler")["args"])
    args = parsed_args(raw)
    assert args.config == "/etc/berthmaster/config.yaml" and args.policy is None
    # beside --config, kube-scheduler's precedence ignores --scheduler-name: not passed
    assert not [a for a in raw if a.startswith("--scheduler-name")]
    assert args.leader_elect_lease_name == "bm"  # the leader-election flags still win
    pod = one(objects, "Deployment", "-scheduler")["spec"]["template"]["spec"]
    assert {"name": "config", "configMap": {"name": config_map["metadata"]["name"]}} in \
        pod["volumes"]
    mounts = pod["containers"][0]["volumeMounts"]
    assert {"name": "config", "mountPath": "/etc/berthmaster", "readOnly": True} in mounts

    def checksum(objs: list[dict[str, Any]]) -> str:
        pod = one(objs, "Deployment", "-scheduler")["spec"]["template"]
        return str(pod["metadata"]["annotations"]["berthmaster.io/config-checksum"])

    changed = {**CONFIG, "percentageOfNodesToScore": 50}
    assert checksum(objects) != checksum(render_values({"scheduler": {"name": "bm",
                                                                      "config": changed}}))


COSCHEDULING = CHART.parents[1] / "examples" / "coscheduling"


def test_the_coscheduling_values_turn_gangs_on_in_the_charts_scheduler() -> None:
    """examples/coscheduling/values.yaml (docs/coscheduling.md's chart value, and what
    e2e/run.py installs): the chart's one profile, named scheduler.name, runs Coscheduling as
    examples/coscheduling/scheduler-config.yaml does; the scheduler may read PodGroups and the
    chart ships their CRD (scheduler-plugins' scheduling.x-k8s.io/v1alpha1)."""
    from berthmaster.scheduler.config import load_config

    values = yaml.safe_load((COSCHEDULING / "values.yaml").read_text())
    objects = render_values(values)
    text = one(objects, "ConfigMap", "-scheduler-config")["data"]["config.yaml"]
    (profile,) = yaml.safe_load(text)["profiles"]
    assert profile["schedulerName"] == "berthmaster"
    example = yaml.safe_load((COSCHEDULING / "scheduler-config.yaml").read_text())
    (documented,) = example["profiles"]
    assert {k: v for k, v in documented.items() if k != "schedulerName"} == \
        {k: v for k, v in profile.items() if k != "schedulerName"}
    config = load_config(text)
    assert config.scheduler_names == ("berthmaster",)
    role = one(objects, "ClusterRole", "-scheduler")
    assert any("scheduling.x-k8s.io" in rule.get("apiGroups", ()) and "podgroups" in
               rule.get("resources", ()) and "watch" in rule.get("verbs", ())
               for rule in role["rules"])
    assert (CHART / "files" / "crds" / "scheduling.x-k8s.io_podgroups.yaml").is_file()


def test_a_config_without_profiles_gets_one_under_the_scheduler_name() -> None:
    bare = {"apiVersion": CONFIG["apiVersion"], "kind": CONFIG["kind"]}
    objects = render_values({"scheduler": {"config": bare}})
    text = one(objects, "ConfigMap", "-scheduler-config")["data"]["config.yaml"]
    assert yaml.safe_load(text)["profiles"] == [{"schedulerName": "berthmaster"}]


def test_setting_both_policy_and_config_fails_at_template_time() -> None:
    result = chartkit.template(["scheduler.policy.kind=Policy",
                       "scheduler.config.apiVersion=kubescheduler.config.k8s.io/v1",
                       "scheduler.config.kind=KubeSchedulerConfiguration"])
    assert result.returncode != 0
    assert ("scheduler.policy and scheduler.config are both set, but the scheduler runs one "
            "of them: unset one (berthmaster policy convert FILE writes a Policy as a "
            "KubeSchedulerConfiguration)") in result.stderr


def test_a_policy_is_rendered_passed_as_policy_and_rolls_the_pods() -> None:
    custom = ["scheduler.policy.kind=Policy", "scheduler.policy.apiVersion=v1",
              "scheduler.policy.predicates[0].name=PodToleratesNodeTaints",
              "scheduler.policy.priorities[0].name=LeastRequestedPriority",
              "scheduler.policy.priorities[0].weight=1"]
    objects = render(custom)
    policy = json.loads(one(objects, "ConfigMap", "-scheduler-policy")["data"]["policy.json"])
    assert policy == {"kind": "Policy", "apiVersion": "v1",
                      "predicates": [{"name": "PodToleratesNodeTaints"}],
                      "priorities": [{"name": "LeastRequestedPriority", "weight": 1}]}
    args = parsed_args(list(container(objects, "scheduler")["args"]))
    assert args.policy == "/etc/berthmaster/policy.json" and args.config is None
    assert args.scheduler_name == "berthmaster"

    def checksum(objs: list[dict[str, Any]]) -> str:
        template = one(objs, "Deployment", "-scheduler")["spec"]["template"]
        return str(template["metadata"]["annotations"]["berthmaster.io/policy-checksum"])

    other = [*custom[:-1], "scheduler.policy.priorities[0].weight=2"]
    assert checksum(objects) != checksum(render(other))


def test_operator_is_one_standalone_replica_with_a_kopf_liveness_probe() -> None:
    objects = render()
    deployment = one(objects, "Deployment", "-operator")
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    operator = container(objects, "operator")
    args = parsed_args(list(operator["args"]))
    assert args.standalone is True
    assert args.liveness == "http://0.0.0.0:8080/healthz"
    assert operator["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert {"name": "health", "containerPort": 8080, "protocol": "TCP"} in operator["ports"]
    env = {item["name"]: item.get("value") for item in operator["env"]}
    assert env["BERTHMASTER_IMAGE"] == "berthmaster:0.1.0"


def test_operator_scope_values_become_flags() -> None:
    args = parsed_args(list(container(render(VALUE_SETS["tuned"]), "operator")["args"]))
    assert args.namespace == ["openshift-machine-api", "kube-system"]
    assert args.only == ["machines", "deschedulers"]


@pytest.mark.parametrize("value_set", sorted(VALUE_SETS))
def test_every_pod_meets_the_restricted_profile(value_set: str) -> None:
    for name, template in pod_templates(render(VALUE_SETS[value_set])):
        spec = template["spec"]
        assert spec["securityContext"]["runAsNonRoot"] is True, name
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, name
        mounts_tmp = False
        for c in spec["containers"]:
            security = c["securityContext"]
            assert security["allowPrivilegeEscalation"] is False, name
            assert security["capabilities"]["drop"] == ["ALL"], name
            assert security["readOnlyRootFilesystem"] is True, name
            assert security["runAsNonRoot"] is True, name
            assert security["seccompProfile"] == {"type": "RuntimeDefault"}, name
            mounts_tmp = any(m["mountPath"] == "/tmp" for m in c["volumeMounts"])
        assert mounts_tmp, f"{name}: a read-only root needs the /tmp emptyDir"
        assert {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}} in spec["volumes"], name


def test_priority_class_is_set_and_can_be_cleared() -> None:
    for _, template in pod_templates(render()):
        assert template["spec"]["priorityClassName"] == "system-cluster-critical"
    for _, template in pod_templates(render(VALUE_SETS["tuned"])):
        assert "priorityClassName" not in template["spec"]


@pytest.mark.parametrize("value_set", sorted(VALUE_SETS))
def test_every_object_carries_the_standard_labels(value_set: str) -> None:
    for obj in render(VALUE_SETS[value_set]):
        if obj["metadata"]["name"] == "site-settings":
            continue  # platform-knobs' extraObjects: the user's own, labelled as they write them
        labels = obj["metadata"]["labels"]
        where = f"{obj['kind']} {obj['metadata']['name']}"
        for key in ("app.kubernetes.io/name", "app.kubernetes.io/instance",
                    "app.kubernetes.io/version", "app.kubernetes.io/managed-by",
                    "app.kubernetes.io/component", "app.kubernetes.io/part-of",
                    "helm.sh/chart"):
            assert key in labels, f"{where} lacks label {key}"


def test_one_service_account_per_component_each_bound_to_its_own_role() -> None:
    objects = render()
    accounts = {sa["metadata"]["name"] for sa in find(objects, "ServiceAccount")}
    assert accounts == {"berthmaster-scheduler", "berthmaster-operator",
                        "berthmaster-descheduler"}
    for deployment in find(objects, "Deployment"):
        component = deployment["metadata"]["labels"]["app.kubernetes.io/component"]
        assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == (
            f"berthmaster-{component}")
    for binding in find(objects, "ClusterRoleBinding"):
        if binding["roleRef"]["name"] == "system:auth-delegator":
            continue  # the metrics endpoint's (test_metrics_serving.py)
        assert binding["roleRef"]["name"] == binding["metadata"]["name"]
        assert binding["subjects"] == [{"kind": "ServiceAccount",
                                        "name": binding["metadata"]["name"],
                                        "namespace": "berthmaster"}]


def granted(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    """The (group, resource, verb) a role grants on every object of a resource; rules naming
    objects (resourceNames) or non-resource URLs (the metrics reader's) grant none."""
    return {(group, resource, verb) for rule in rules
            if not rule.get("resourceNames") and "resources" in rule
            for group in rule["apiGroups"] for resource in rule["resources"]
            for verb in rule["verbs"]}


RBAC_WRITES = {"create", "update", "patch", "delete", "bind", "escalate", "*"}


@pytest.mark.parametrize("value_set", sorted(VALUE_SETS))
def test_no_component_may_write_rbac(value_set: str) -> None:
    """The descheduler Jobs' ClusterRole and binding are the chart's; nothing writes roles or
    bindings at run time (docs/security.md)."""
    for role in find(render(VALUE_SETS[value_set]), "ClusterRole") + find(
            render(VALUE_SETS[value_set]), "Role"):
        for group, resource, verb in granted(role["rules"]):
            assert not (group == "rbac.authorization.k8s.io" and verb in RBAC_WRITES), (
                f"{role['metadata']['name']} may {verb} {resource}")


def test_the_descheduler_role_is_the_documented_one_and_bound_to_its_account() -> None:
    """The documentation's descheduler-cluster-role (OpenShift scheduling 16.3.2) plus what a
    pass reads (the volume objects for nodeFit's placement engine too; the metrics API and its
    APIService for policies that balance by real usage) and the events it records
    (kubernetes-sigs/descheduler kubernetes/base/rbac.yaml), bound to the Jobs'
    ServiceAccount in the release namespace."""
    objects = render()
    rules = one(objects, "ClusterRole", "-descheduler")["rules"]
    assert rules[:3] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "watch", "list"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "watch", "list", "delete"]},
        {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
    ]
    assert granted(rules[3:]) == {
        ("", "namespaces", v) for v in ("get", "watch", "list")} | {
        ("scheduling.k8s.io", "priorityclasses", v) for v in ("get", "watch", "list")} | {
        ("policy", "poddisruptionbudgets", v) for v in ("get", "watch", "list")} | {
        (group, resource, v) for group, resource in (
            ("", "persistentvolumes"), ("", "persistentvolumeclaims"),
            ("storage.k8s.io", "storageclasses"), ("storage.k8s.io", "csinodes"),
            ("storage.k8s.io", "csidrivers"), ("storage.k8s.io", "csistoragecapacities"))
        for v in ("get", "watch", "list")} | {
        ("events.k8s.io", "events", "create"), ("events.k8s.io", "events", "patch")} | {
        ("metrics.k8s.io", resource, v) for resource in ("nodes", "pods")
        for v in ("get", "list")} | {("apiregistration.k8s.io", "apiservices", "get")}
    binding = one(objects, "ClusterRoleBinding", "-descheduler")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "berthmaster-descheduler",
                                    "namespace": "berthmaster"}]
    env = {e["name"]: e.get("value") for e in container(objects, "operator")["env"]}
    assert env["BERTHMASTER_DESCHEDULER_SERVICE_ACCOUNT"] == "berthmaster-descheduler"
    assert env["BERTHMASTER_DESCHEDULER_IMAGES"] == ""
    assert env["BERTHMASTER_DESCHEDULER_SYSTEM_CRITICAL"] == "false"
    assert env["BERTHMASTER_MACHINE_PROVIDERS"] == "kwok"
    assert find(render(["operator.capabilities={machines}"]), "ClusterRole", "-descheduler") == []


def test_descheduler_values_reach_the_operator() -> None:
    objects = render_values({"descheduler": {
        "allowedImages": ["registry.local/descheduler:v2", "other@sha256:ab"],
        "systemCritical": True, "serviceAccount": {"create": False, "name": "platform-desched"}}})
    env = {e["name"]: e.get("value") for e in container(objects, "operator")["env"]}
    assert env["BERTHMASTER_DESCHEDULER_IMAGES"] == "registry.local/descheduler:v2,other@sha256:ab"
    assert env["BERTHMASTER_DESCHEDULER_SYSTEM_CRITICAL"] == "true"
    assert env["BERTHMASTER_DESCHEDULER_SERVICE_ACCOUNT"] == "platform-desched"
    assert find(objects, "ServiceAccount", "-descheduler") == []
    assert one(objects, "ClusterRoleBinding", "-descheduler")["subjects"][0]["name"] == (
        "platform-desched")


@pytest.mark.parametrize(("providers", "writes"), [(["kwok"], True), ([], False)])
def test_node_create_and_delete_follow_the_machine_providers(
        providers: list[str], writes: bool) -> None:
    objects = render_values({"operator": {"machineProviders": providers}})
    rules = granted(one(objects, "ClusterRole", "-operator")["rules"])
    assert (("", "nodes", "create") in rules) is writes
    assert (("", "nodes", "delete") in rules) is writes
    assert ("", "nodes", "patch") in rules  # cordon and node link, whatever the providers
    assert ("", "nodes", "update") not in rules
    env = {e["name"]: e.get("value") for e in container(objects, "operator")["env"]}
    assert env["BERTHMASTER_MACHINE_PROVIDERS"] == ",".join(providers)


def test_no_role_grants_wildcards_or_secrets() -> None:
    """No Secret access at all: the admission webhook's certificate is the chart's own,
    mounted into its pods (templates/admission.yaml)."""
    for value_set in VALUE_SETS.values():
        for role in find(render(value_set), "ClusterRole") + find(render(value_set), "Role"):
            for rule in role["rules"]:
                where = f"{role['metadata']['name']}: {rule}"
                resources = rule.get("resources", [])  # none in a nonResourceURLs rule
                assert "*" not in rule["verbs"] and "*" not in resources, where
                assert "*" not in rule.get("apiGroups", []), where
                assert "*" not in rule.get("nonResourceURLs", []), where
                assert "secrets" not in resources, where
                assert not {"escalate", "impersonate"} & set(rule["verbs"]), where


def test_admission_is_off_by_default() -> None:
    objects = render()
    assert not find(objects, "MutatingWebhookConfiguration")
    assert not find(objects, "ValidatingWebhookConfiguration")
    assert not find(objects, "Deployment", "-admission")


def test_metrics_service_selects_the_scheduler_and_names_its_port() -> None:
    objects = render()
    service = one(objects, "Service", "-scheduler-metrics")
    deployment = one(objects, "Deployment", "-scheduler")
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    assert service["spec"]["ports"] == [{"name": "metrics", "port": 10260,
                                         "targetPort": "metrics", "protocol": "TCP"}]


def test_operator_serves_its_metrics_behind_a_service() -> None:
    objects = render()
    service = one(objects, "Service", "-operator-metrics")
    deployment = one(objects, "Deployment", "-operator")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert "--secure-port=8081" in container["args"]
    assert {"name": "metrics", "containerPort": 8081, "protocol": "TCP"} in container["ports"]
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    assert service["spec"]["ports"] == [{"name": "metrics", "port": 8081,
                                         "targetPort": "metrics", "protocol": "TCP"}]


@pytest.mark.parametrize("component", ["scheduler", "operator"])
def test_service_monitor_only_when_asked(component: str) -> None:
    """One ServiceMonitor per component: the operator's cluster_autoscaler_* metrics are
    scraped too (docs/observability.md), not only the scheduler's."""
    assert find(render(), "ServiceMonitor") == []
    objects = render(VALUE_SETS["servicemonitor-on"])
    assert len(find(objects, "ServiceMonitor")) == 2
    monitor = one(objects, "ServiceMonitor", f"-{component}")
    service = one(objects, "Service", f"-{component}-metrics")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= (
        service["metadata"]["labels"].items())
    assert monitor["spec"]["endpoints"] == [{
        "port": "metrics", "path": "/metrics", "honorLabels": True, "interval": "30s",
        "scrapeTimeout": "10s", "scheme": "https",
        "bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token",
        "tlsConfig": {"insecureSkipVerify": True}}]
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": ["berthmaster"]}
    alone = render([*VALUE_SETS["servicemonitor-on"], f"{component}.enabled=false"])
    assert find(alone, "ServiceMonitor", f"-{component}") == []


def test_dashboard_and_alerts_only_when_asked() -> None:
    """The Grafana dashboard ConfigMap (sidecar label, configurable) and the PrometheusRule are
    off by default and rendered with both values on (docs/observability.md)."""
    import json

    defaults = render()
    assert find(defaults, "PrometheusRule") == []
    assert find(defaults, "ConfigMap", "-dashboards") == []
    objects = render(VALUE_SETS["observability-on"])
    dashboards = one(objects, "ConfigMap", "-dashboards")
    assert dashboards["metadata"]["labels"]["grafana_dashboard"] == "1"
    dashboard = json.loads(dashboards["data"]["berthmaster.json"])
    assert dashboard["uid"] == "berthmaster"
    assert all(target["expr"] for panel in dashboard["panels"]
               for target in panel.get("targets", []))
    rule = one(objects, "PrometheusRule")
    assert rule["metadata"]["labels"]["release"] == "prometheus"
    alerts = {r["alert"]: r for group in rule["spec"]["groups"] for r in group["rules"]}
    assert set(alerts) == {"BerthmasterSchedulerNotLeading", "BerthmasterSchedulerAbsent",
                           "BerthmasterPendingPodsRising", "BerthmasterMachineDrainStuck",
                           "BerthmasterAutoscalerUnsafe", "BerthmasterOperatorAbsent",
                           "BerthmasterDeschedulerRunFailed",
                           "BerthmasterMachineHealthCheckShortCircuited",
                           "BerthmasterMachineNotRunning", "BerthmasterMachineNotYetDeleted"}
    assert alerts["BerthmasterSchedulerNotLeading"]["expr"] == (
        'sum(leader_election_master_status{name="berthmaster", '
        'job="berthmaster-scheduler-metrics", namespace="berthmaster"}) == 0')
    relabelled = render([*VALUE_SETS["observability-on"], "dashboards.label=dashboards",
                         "dashboards.labelValue=berthmaster", "dashboards.namespace=monitoring",
                         "scheduler.name=zonal", "operator.enabled=false"])
    moved = one(relabelled, "ConfigMap", "-dashboards")
    assert moved["metadata"]["labels"]["dashboards"] == "berthmaster"
    assert moved["metadata"]["namespace"] == "monitoring"
    alerts = {r["alert"]: r for group in one(relabelled, "PrometheusRule")["spec"]["groups"]
              for r in group["rules"]}
    assert alerts["BerthmasterSchedulerNotLeading"]["expr"] == (
        'sum(leader_election_master_status{name="zonal", '
        'job="berthmaster-scheduler-metrics", namespace="berthmaster"}) == 0')
    assert "BerthmasterMachineDrainStuck" not in alerts  # no operator, no operator alerts


# The families exporting their own ``namespace`` label (docs/observability.md's metrics table):
# under the ServiceMonitor's ``honorLabels`` it is the object's (a Machine's, an evicted pod's),
# not the scraped Service's, so only ``job`` can scope them to the release.
OWN_NAMESPACE = frozenset({"namespace"})
OBJECT_NAMESPACED = {
    name: OWN_NAMESPACE for name in (
        "mapi_machine_created_timestamp_seconds", "mapi_machineset_created_timestamp_seconds",
        "mapi_machine_set_status_replicas", "mapi_machine_set_status_replicas_available",
        "mapi_machine_set_status_replicas_ready", "mapi_instance_create_failed",
        "mapi_instance_delete_failed", "mapi_machinehealthcheck_nodes_covered",
        "mapi_machinehealthcheck_remediation_success_total",
        "mapi_machinehealthcheck_short_circuit",
        "berthmaster_machine_drain_started_timestamp_seconds", "descheduler_pods_evicted_total")}


def test_every_query_reads_only_this_releases_series() -> None:
    """Each selector of the dashboard and of the alerts carries the release's scope, so a
    kube-scheduler scraped by the same Prometheus (same ``scheduler_*`` names,
    kubernetes pkg/scheduler/metrics/metrics.go) or a second release adds no series. The
    Prometheus Operator names a ServiceMonitor's job after the Service unless ``jobLabel`` is
    set (prometheus-operator pkg/prometheus/promcfg.go); the dashboard selects by the
    template variables ``$job``/``$namespace`` (Grafana templating), the alerts by the values."""
    import json

    from tests.support.promql import unscoped

    objects = render(VALUE_SETS["observability-on"], release="rel", namespace="ns1")
    dashboard = json.loads(one(objects, "ConfigMap", "-dashboards")["data"]["berthmaster.json"])
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert {"datasource", "namespace", "job"} <= set(variables)
    assert variables["job"]["includeAll"] and variables["job"]["multi"]
    problems = []
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            problems += unscoped(target["expr"], {"job": "$job", "namespace": "$namespace"},
                                 OBJECT_NAMESPACED)
    jobs = {svc["metadata"]["labels"]["app.kubernetes.io/component"]: svc["metadata"]["name"]
            for svc in find(objects, "Service") if svc["metadata"]["name"].endswith("-metrics")}
    assert jobs == {"scheduler": "rel-berthmaster-scheduler-metrics",
                    "operator": "rel-berthmaster-operator-metrics"}
    for monitor in find(objects, "ServiceMonitor"):  # job = the Service's name
        assert "jobLabel" not in monitor["spec"]
    for alert in one(objects, "PrometheusRule")["spec"]["groups"][0]["rules"]:
        component = "scheduler" if alert["alert"] in (
            "BerthmasterSchedulerNotLeading", "BerthmasterSchedulerAbsent",
            "BerthmasterPendingPodsRising") else "operator"
        problems += unscoped(alert["expr"], {"job": jobs[component], "namespace": "ns1"},
                             OBJECT_NAMESPACED)
    # The webhook's alert reads the API server's series (its job, the webhook's name).
    with_webhook = render([*VALUE_SETS["observability-on"], "admission.enabled=true",
                           "prometheusRule.apiServerJob=kube-apiserver"],
                          release="rel", namespace="ns1")
    [failing] = [rule for rule in one(with_webhook, "PrometheusRule")["spec"]["groups"][0][
        "rules"] if rule["alert"] == "BerthmasterAdmissionWebhookFailing"]
    problems += unscoped(failing["expr"], {"job": "kube-apiserver",
                                           "name": "pod-placement.berthmaster.io"})
    assert problems == []


def github_anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives a document's headings: lower case, punctuation dropped,
    spaces as hyphens."""
    import re

    return {re.sub(r"[^a-z0-9 _-]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
            for line in markdown.splitlines() if line.startswith("#")}


def test_every_alert_waits_and_links_its_runbook_section() -> None:
    """Each alert has a ``for:`` duration (Prometheus' rulefmt duration, as kubernetes-mixin's
    alerts) and a ``runbook_url`` to its section of docs/runbooks.md, which exists."""
    import re

    anchors = github_anchors((CHART.parents[1] / "docs" / "runbooks.md").read_text())
    rules = one(render([*VALUE_SETS["observability-on"], "admission.enabled=true",
                        "prometheusRule.runbookURL=https://example.com/runbooks.md"]),
                "PrometheusRule")["spec"]["groups"][0]["rules"]
    assert len(rules) == 11
    for alert in rules:
        assert re.fullmatch(r"([0-9]+(ms|s|m|h))+", str(alert.get("for", ""))), alert
        url = alert["annotations"]["runbook_url"]
        assert url == f"https://example.com/runbooks.md#{alert['alert'].lower()}"
        assert url.partition("#")[2] in anchors, f"docs/runbooks.md has no section {url}"


def test_operator_readiness_probe() -> None:
    """The operator's /readyz (connected, startup handlers done) is its readinessProbe."""
    container = one(render(), "Deployment", "-operator")["spec"]["template"]["spec"][
        "containers"][0]
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics",
                                                      "scheme": "HTTPS"}
