"""PodNodeSelector and NodeEnv, as upstream.

plugin/pkg/admission/podnodeselector/admission.go (Admit, Validate, getNodeSelectorMap,
isSubset), k8s.io/apimachinery/pkg/labels/labels.go (ConvertSelectorToLabelsMap, Conflicts,
Merge), and OpenShift's openshift-kube-apiserver/admission/scheduler/nodeenv/admission.go
(admit) for the ``openshift.io/node-selector`` annotation.
"""

from __future__ import annotations

import pytest

from berthmaster.operator.admission import podnodeselector as pns
from berthmaster.operator.admission.selectors import (
    SelectorError,
    conflicts,
    is_subset,
    merge,
    selector_to_map,
)


@pytest.mark.parametrize("text,expected", [
    ("", {}),
    ("env=test", {"env": "test"}),
    ("env=test, infra=fedora ,os=fedora", {"env": "test", "infra": "fedora", "os": "fedora"}),
    ("node-role.kubernetes.io/infra=", {"node-role.kubernetes.io/infra": ""}),
])
def test_selector_to_map(text: str, expected: dict[str, str]) -> None:
    assert selector_to_map(text) == expected


@pytest.mark.parametrize("text,problem", [
    ("env", "'env' is not key=value"),
    ("a=b=c", "'a=b=c' is not key=value"),
    ("env=test,", "'' is not key=value"),
    ("-bad=x", "key '-bad'"),
    ("env=not valid", "value 'not valid' of 'env'"),
])
def test_malformed_selectors(text: str, problem: str) -> None:
    with pytest.raises(SelectorError, match="invalid selector") as caught:
        selector_to_map(text)
    assert problem in str(caught.value)


def test_set_operations() -> None:
    assert conflicts({"a": "1"}, {"a": "2"}) and not conflicts({"a": "1"}, {"b": "2"})
    assert merge({"a": "1", "b": "1"}, {"b": "2"}) == {"a": "1", "b": "2"}
    assert is_subset({"a": "1"}, {}) and is_subset({"a": "1"}, {"a": "1", "b": "2"})
    assert not is_subset({"a": "1", "c": "3"}, {"a": "1", "b": "2"})
    assert not is_subset({"a": "2"}, {"a": "1"})


SEED_WHITELIST = selector_to_map("region=west,env=test,infra=fedora,os=fedora")
SETTINGS = pns.Settings(cluster_default={"k3": "v3"}, whitelists={"ns1": SEED_WHITELIST})


@pytest.mark.parametrize("annotations,namespace,expected", [
    ({pns.NAMESPACE_ANNOTATION: "env=test,infra=fedora"}, "ns1",
     {"env": "test", "infra": "fedora"}),
    ({}, "ns1", {"k3": "v3"}),
    ({pns.NAMESPACE_ANNOTATION: ""}, "ns1", {}),  # an empty annotation: no default
    ({pns.PROJECT_ANNOTATION: "a=b"}, "ns1", {"k3": "v3"}),  # NodeEnv's, not this plugin's
])
def test_namespace_node_selector(annotations: dict[str, str], namespace: str,
                                 expected: dict[str, str]) -> None:
    assert pns.namespace_node_selector(annotations, namespace, SETTINGS) == expected


@pytest.mark.parametrize("case,pod,namespace,whitelist,selector,refusal", [
    ("the seed: merged into the pod", {"env": "test", "os": "fedora"},
     {"env": "test", "infra": "fedora"}, SEED_WHITELIST,
     {"env": "test", "infra": "fedora", "os": "fedora"}, None),
    ("nothing to add", {"env": "test"}, {"env": "test"}, {}, None, None),
    ("conflict", {"env": "production"}, {"env": "test"}, {}, None,
     "pod node label selector conflicts with its namespace node label selector"),
    ("the seed: a label not in the whitelist", {"env": "test", "zone": "a"},
     {"env": "test"}, SEED_WHITELIST, None,
     "pod node label selector labels conflict with its namespace whitelist"),
    ("a value not in the whitelist", {"os": "rhel"}, {}, SEED_WHITELIST, None,
     "pod node label selector labels conflict with its namespace whitelist"),
    ("the namespace selector itself must fit the whitelist", {}, {"region": "east"},
     SEED_WHITELIST, None,
     "pod node label selector labels conflict with its namespace whitelist"),
    ("no whitelist allows anything", {"zone": "a"}, {"k3": "v3"}, {},
     {"k3": "v3", "zone": "a"}, None),
])
def test_admit(case: str, pod: dict[str, str], namespace: dict[str, str],
               whitelist: dict[str, str], selector: dict[str, str] | None,
               refusal: str | None) -> None:
    outcome = pns.admit(pod, namespace, whitelist)
    assert (outcome.node_selector, outcome.refusal) == (selector, refusal), case


@pytest.mark.parametrize("annotations,expected", [
    ({}, None),
    ({pns.PROJECT_ANNOTATION: "type=user-node,region=east"},
     {"type": "user-node", "region": "east"}),
    ({pns.PROJECT_ANNOTATION: ""}, {}),
    # NodeEnv steps aside when the upstream annotation is set.
    ({pns.PROJECT_ANNOTATION: "a=b", pns.NAMESPACE_ANNOTATION: "c=d"}, None),
])
def test_project_node_selector(annotations: dict[str, str], expected: object) -> None:
    assert pns.project_node_selector(annotations) == expected


@pytest.mark.parametrize("case,pod,project,node_labels,node_name,mutating,selector,refusal", [
    ("merged", {"a": "1"}, {"region": "east"}, None, "", True,
     {"a": "1", "region": "east"}, None),
    ("conflict", {"region": "west"}, {"region": "east"}, None, "", True, None,
     "pod node label selector conflicts with its project node label selector"),
    ("validating: not extended", {"a": "1"}, {"region": "east"}, None, "", False, None,
     "pod node label selector does not extend project node label selector"),
    ("validating: extended", {"a": "1", "region": "east"}, {"region": "east"}, None, "",
     False, None, None),
    ("nodeName on a matching node", {}, {"region": "east"}, {"region": "east"}, "n1", True,
     {"region": "east"}, None),
    ("nodeName on another node", {}, {"region": "east"}, {"region": "west"}, "n1", True,
     None, "pod node name conflicts with project node label selector"),
])
def test_node_env(case: str, pod: dict[str, str], project: dict[str, str],
                  node_labels: dict[str, str] | None, node_name: str, mutating: bool,
                  selector: dict[str, str] | None, refusal: str | None) -> None:
    outcome = pns.node_env(pod, project, node_labels, node_name, mutation_allowed=mutating)
    assert (outcome.node_selector, outcome.refusal) == (selector, refusal), case
