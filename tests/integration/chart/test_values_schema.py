"""values.schema.json rejects unknown and mistyped values, and agrees with the scheduler.

Bad values fail ``helm template`` (the same check ``helm install`` and ``helm upgrade`` run)
with the JSON path of the offending key. The scheduler Policy in values is checked twice: by the
schema at install time, and by the scheduler's own loader (``load_policy``) at start. The two
must agree on the documentation's sample policies, and the schema's list of predicate and
priority names must be the scheduler's registry, so a typo fails at install, not as a
CrashLoopBackOff.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from berthmaster.scheduler.plugins.registry import CONFIGURABLE_BY_NAME, PREDICATES, PRIORITIES
from berthmaster.scheduler.policy import load_policy
from tests.integration.chart.chartkit import (
    CHART,
    SEED_POLICIES,
    helm,
    render,
    template,
)

BAD_VALUES = [
    (["schedular.replicas=2"], "at '': additional properties 'schedular' not allowed"),
    (["scheduler.replicas=two"], "at '/scheduler/replicas': got string, want integer"),
    (["scheduler.polcy.kind=Policy"], "at '/scheduler': additional properties 'polcy' not allowed"),
    (["operator.replicas=2"], "at '/operator/replicas': maximum: got 2, want 1"),
    (["operator.capabilities={machines,drains}"], "at '/operator/capabilities/1'"),
    (["operator.watchNamespaces={Kube_System}"], "at '/operator/watchNamespaces/0'"),
    (["scheduler.name=Berth_Master"], "at '/scheduler/name'"),
    (["image.pullPolicy=Sometimes"], "at '/image/pullPolicy'"),
    (["podSecurityContext.runAsNonRoot=false"], "at '/podSecurityContext/runAsNonRoot'"),
    (["containerSecurityContext.allowPrivilegeEscalation=true"],
     "at '/containerSecurityContext/allowPrivilegeEscalation'"),
    (["containerSecurityContext.capabilities.drop={NET_RAW}"],
     "at '/containerSecurityContext/capabilities/drop'"),
    (["scheduler.tolerations[0].effect=NoScheduled"], "at '/scheduler/tolerations/0/effect'"),
    (["scheduler.resources.request.cpu=1"],
     "at '/scheduler/resources': additional properties 'request' not allowed"),
    (["metrics.serviceMonitor.interval=30 seconds"], "at '/metrics/serviceMonitor/interval'"),
    (["metrics.serviceMonitor.enabled=yes"],
     "at '/metrics/serviceMonitor/enabled': got string, want boolean"),
    (["scheduler.metrics.port=70000"], "at '/scheduler/metrics/port'"),
    (["scheduler.policy.kind=Policy", "scheduler.policy.predicates[0].name=PodFitsResourcez"],
     "at '/scheduler/policy/predicates/0/name'"),
    (["scheduler.policy.kind=Policy", "scheduler.policy.priorities[0].name=LeastRequestedPriority",
      "scheduler.policy.priorities[0].weight=0"], "at '/scheduler/policy/priorities/0/weight'"),
    (["scheduler.policy.kind=Policy", "scheduler.policy.predicates[0].name=Region",
      "scheduler.policy.predicates[0].argument.serviceAffinity.label=region"],
     "at '/scheduler/policy/predicates/0/argument/serviceAffinity'"),
    (["scheduler.policy.predicates[0].name=GeneralPredicates"],
     "at '/scheduler/policy': missing property 'kind'"),
    (["scheduler.config.apiVersion=kubescheduler.config.k8s.io/v1beta3",
      "scheduler.config.kind=KubeSchedulerConfiguration"],
     "at '/scheduler/config/apiVersion': value must be 'kubescheduler.config.k8s.io/v1'"),
    (["scheduler.config.apiVersion=kubescheduler.config.k8s.io/v1", "scheduler.config.kind=Policy"],
     "at '/scheduler/config/kind': value must be 'KubeSchedulerConfiguration'"),
    (["scheduler.config.profiles[0].schedulerName=x"],
     "at '/scheduler/config': missing properties 'apiVersion', 'kind'"),
    (["scheduler.config.apiVersion=kubescheduler.config.k8s.io/v1",
      "scheduler.config.kind=KubeSchedulerConfiguration",
      "scheduler.config.profiles[0].plugins.scor.enabled[0].name=ImageLocality"],
     "at '/scheduler/config/profiles/0/plugins': additional properties 'scor' not allowed"),
    (["scheduler.config.apiVersion=kubescheduler.config.k8s.io/v1",
      "scheduler.config.kind=KubeSchedulerConfiguration",
      "scheduler.config.profiles[0].plugins.score.enabled[0].name=ImageLocality",
      "scheduler.config.profiles[0].plugins.score.enabled[0].weight=-1"],
     "at '/scheduler/config/profiles/0/plugins/score/enabled/0/weight'"),
    (["scheduler.config.apiVersion=kubescheduler.config.k8s.io/v1",
      "scheduler.config.kind=KubeSchedulerConfiguration",
      "scheduler.config.profiles[0].schedulerName=1"],
     "at '/scheduler/config/profiles/0/schedulerName'"),
    # Template checks: combinations a schema cannot express readably.
    (["scheduler.replicas=3", "scheduler.leaderElection.enabled=false"],
     "scheduler.replicas is 3 but scheduler.leaderElection.enabled is false"),
    (["scheduler.leaderElection.renewDeadlineSeconds=20"],
     "need leaseDurationSeconds > renewDeadlineSeconds > retryPeriodSeconds"),
]


@pytest.mark.parametrize(("sets", "message"), BAD_VALUES, ids=lambda v: " ".join(v)
                         if isinstance(v, list) else "")
def test_bad_values_are_rejected_with_their_path(sets: list[str], message: str) -> None:
    result = template(sets)
    assert result.returncode != 0, f"{sets} was accepted"
    assert message in result.stderr, result.stderr


def test_helm_lint_reports_schema_errors_too() -> None:
    result = helm("lint", str(CHART), "--set", "scheduler.replicas=two")
    assert result.returncode != 0
    assert "at '/scheduler/replicas': got string, want integer" in result.stdout + result.stderr


def test_every_key_of_the_defaults_is_in_the_schema_and_closed() -> None:
    """additionalProperties: false on every object with fixed keys, so typos never pass."""
    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())

    def walk(node: dict[str, Any], where: str) -> None:
        if node.get("type") == "object" and "properties" in node:
            assert node.get("additionalProperties") is False, f"{where or '/'} is open"
        for key, child in node.get("properties", {}).items():
            walk(child, f"{where}/{key}")
        if isinstance(node.get("items"), dict):
            walk(node["items"], f"{where}/items")

    walk(schema, "")

    def covered(value: Any, node: dict[str, Any], where: str) -> None:
        if isinstance(value, dict) and "properties" in node:
            for key, child in value.items():
                assert key in node["properties"], f"values.yaml {where}/{key} not in the schema"
                covered(child, node["properties"][key], f"{where}/{key}")

    covered(values, schema, "")


def static_names(registry: dict[str, Any]) -> list[str]:
    return sorted(name for name in registry if name not in CONFIGURABLE_BY_NAME)


def test_schema_names_are_the_scheduler_registry() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    policy = schema["properties"]["scheduler"]["properties"]["policy"]["properties"]
    for key, registry in (("predicates", PREDICATES), ("priorities", PRIORITIES)):
        enum = policy[key]["items"]["then"]["properties"]["name"]["enum"]
        assert enum == static_names(registry), (
            f"values.schema.json {key} names differ from berthmaster.scheduler.plugins.registry;"
            " update the enum in the schema")


def seed_sample_policies() -> list[str]:
    """The documented sample Policy files, as our test data keeps them (seed_policies/README.md)."""
    return [path.read_text() for path in
            sorted(SEED_POLICIES.glob("scheduler-sample-policy-*.yaml"))]


def test_the_seed_has_the_sample_policies() -> None:
    assert len(seed_sample_policies()) == 4


@pytest.mark.parametrize("index", range(4))
def test_seed_sample_policies_pass_the_schema_and_the_scheduler(index: int, tmp_path: Path
                                                               ) -> None:
    text = seed_sample_policies()[index]
    load_policy(text, f"seed sample {index}")  # the scheduler accepts it...
    document = yaml.safe_load(re.sub(r"^\.\.\.$", "", text, flags=re.MULTILINE))
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"scheduler": {"policy": document}}))
    objects = render_with_file(values)  # ...and so does the chart, unchanged
    config_map = next(o for o in objects if o["metadata"]["name"].endswith("-scheduler-policy"))
    rendered = config_map["data"]["policy.json"]
    assert json.loads(rendered) == document
    load_policy(rendered, "rendered")


def render_with_file(values: Path) -> list[dict[str, Any]]:
    result = helm("template", "berthmaster", str(CHART), "-f", str(values))
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def test_the_chart_default_is_the_scheduler_default_with_no_file() -> None:
    """Neither a Policy nor a configuration by default: the scheduler runs its built-in
    default (kube-scheduler 1.35's default profile), and the chart ships no policy file."""
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["scheduler"]["policy"] == {} and values["scheduler"]["config"] == {}
    assert not (CHART / "files" / "policy.json").exists()
    assert [o for o in render() if o["kind"] == "ConfigMap"
            and o["metadata"]["name"].endswith(("-scheduler-policy", "-scheduler-config"))] == []
