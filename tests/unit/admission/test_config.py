"""The admission configuration: the seed's master-config snippets as they are, and every
problem of a bad one named with its path."""

from __future__ import annotations

import pytest

from berthmaster.operator.admission.config import AdmissionConfigError, parse_text

# Section 16.5's three snippets (callout numbers removed), under one admissionConfig.
SEED = """
admissionConfig:
  pluginConfig:
    PodNodeSelector:
      configuration:
        podNodeSelectorPluginConfig:
          clusterDefaultNodeSelector: "k3=v3"
          ns1: region=west,env=test,infra=fedora,os=fedora
    PodNodeConstraints:
      configuration:
        apiversion: v1
        kind: PodNodeConstraintsConfig
        nodeSelectorLabelBlacklist:
          - kubernetes.io/hostname
          - region
    PodTolerationRestriction:
      configuration:
        apiVersion: podtolerationrestriction.admission.k8s.io/v1alpha1
        kind: Configuration
        default:
          - {key: dedicated, operator: Equal, value: groupName, effect: NoSchedule}
        whitelist:
          - {key: dedicated, operator: Exists}
"""


def test_the_seed_snippets() -> None:
    config = parse_text(SEED, "test")
    assert config.node_selector.cluster_default == {"k3": "v3"}
    assert config.node_selector.whitelists == {
        "ns1": {"region": "west", "env": "test", "infra": "fedora", "os": "fedora"}}
    assert config.constraints.enabled
    assert list(config.constraints.blacklist) == ["kubernetes.io/hostname", "region"]
    assert config.tolerations.default == [
        {"key": "dedicated", "operator": "Equal", "value": "groupName", "effect": "NoSchedule"}]
    assert config.tolerations.whitelist == [{"key": "dedicated", "operator": "Exists"}]


def test_pod_node_constraints_without_a_blacklist_gets_openshifts_default() -> None:
    """16.5.2's snippet: only apiversion and kind; v1 SetDefaults_PodNodeConstraintsConfig."""
    config = parse_text("pluginConfig:\n  PodNodeConstraints:\n    configuration:\n"
                        "      apiversion: v1\n      kind: PodNodeConstraintsConfig\n", "test")
    assert config.constraints.enabled
    assert list(config.constraints.blacklist) == ["kubernetes.io/hostname"]


@pytest.mark.parametrize("text", ["", "pluginConfig: {}", "admissionConfig: {pluginConfig: {}}"])
def test_nothing_configured(text: str) -> None:
    config = parse_text(text, "test")
    assert not config.constraints.enabled
    assert config.node_selector.cluster_default == {}
    assert config.tolerations.default == []


def test_every_problem_is_named() -> None:
    text = """
pluginConfig:
  PodNodeSelctor: {}
  PodNodeSelector:
    configuration:
      podNodeSelectorPluginConfig:
        clusterDefaultNodeSelector: "k3"
        Bad_Namespace: "a=b"
        ns2: 5
  PodTolerationRestriction:
    location: /etc/origin/master/ptr.yaml
  PodNodeConstraints:
    configuration:
      kind: Something
      nodeSelectorLabelBlacklist: ["-nope", 3]
extra: true
"""
    with pytest.raises(AdmissionConfigError) as caught:
        parse_text(text, "ConfigMap b/c key config.yaml")
    message = str(caught.value)
    assert message.startswith("the admission configuration ConfigMap b/c key config.yaml has 9 "
                              "problem(s):")
    for expected in [
        "(top level): unknown key(s) extra; the plugins go under pluginConfig:",
        "pluginConfig.PodNodeSelctor: unknown plugin; berthmaster serves PodNodeSelector, "
        "PodTolerationRestriction, PodNodeConstraints",
        "pluginConfig.PodNodeSelector.configuration.podNodeSelectorPluginConfig."
        "clusterDefaultNodeSelector: invalid selector: 'k3' is not key=value",
        "pluginConfig.PodNodeSelector.configuration.podNodeSelectorPluginConfig.Bad_Namespace: "
        "not a namespace name",
        "pluginConfig.PodNodeSelector.configuration.podNodeSelectorPluginConfig.ns2: must be a "
        "string",
        "pluginConfig.PodTolerationRestriction.location: a file on a master is not read",
        "pluginConfig.PodNodeConstraints.configuration.kind: 'Something'; use "
        "PodNodeConstraintsConfig",
        "pluginConfig.PodNodeConstraints.configuration.nodeSelectorLabelBlacklist[0]: '-nope'",
    ]:
        assert expected in message, expected
    assert "nodeSelectorLabelBlacklist[1]: 3: is not a string" in message


def test_not_yaml() -> None:
    with pytest.raises(AdmissionConfigError, match="not valid YAML or JSON"):
        parse_text("pluginConfig: [", "test")
