"""PodNodeConstraints, as OpenShift's plugin.

origin pkg/scheduler/admission/podnodeconstraints/admission.go: resourcesToCheck (the kinds and
their pod specs), kindsToIgnore (DaemonSet), Admit (pods on create only), admitPodSpec (the
three refusal sentences) and isNodeSelfTargetWithMirrorPod; the blacklist default from
apis/podnodeconstraints/v1 SetDefaults_PodNodeConstraintsConfig.
"""

from __future__ import annotations

from typing import Any

import pytest

from berthmaster.operator.admission import podnodeconstraints as pnc
from tests.support.builders import make_pod

SPEC = {"nodeName": "n1", "nodeSelector": {"region": "east"}}


def template(spec: dict[str, Any]) -> dict[str, Any]:
    return {"spec": {"template": {"spec": spec}}}


@pytest.mark.parametrize("group,resource,obj,expected", [
    ("", "pods", {"spec": SPEC}, SPEC),
    ("", "podtemplates", {"template": {"spec": SPEC}}, SPEC),
    ("", "replicationcontrollers", template(SPEC), SPEC),
    ("apps", "deployments", template(SPEC), SPEC),
    ("apps", "replicasets", template(SPEC), SPEC),
    ("apps", "statefulsets", template(SPEC), SPEC),
    ("batch", "jobs", template(SPEC), SPEC),
    ("batch", "cronjobs", {"spec": {"jobTemplate": template(SPEC)}}, SPEC),
    ("apps.openshift.io", "deploymentconfigs", template(SPEC), SPEC),
    ("apps", "daemonsets", template(SPEC), None),
    ("", "services", {}, None),
    ("apps", "deployments", {"spec": {}}, {}),
])
def test_pod_spec_of_each_kind(group: str, resource: str, obj: dict[str, Any],
                               expected: Any) -> None:
    assert pnc.pod_spec(obj, group, resource) == expected


@pytest.mark.parametrize("group,resource,subresource,operation,expected", [
    ("", "pods", "", "CREATE", True),
    ("", "pods", "", "UPDATE", False),
    ("", "pods", "binding", "CREATE", False),
    ("apps", "deployments", "", "UPDATE", True),
    ("apps", "deployments", "scale", "UPDATE", False),
    ("apps", "daemonsets", "", "CREATE", False),
    ("batch", "cronjobs", "", "DELETE", False),
])
def test_applies(group: str, resource: str, subresource: str, operation: str,
                 expected: bool) -> None:
    assert pnc.applies(group, resource, subresource, operation) is expected


@pytest.mark.parametrize("spec,blacklist,expected", [
    ({}, ["region"], None),
    ({"nodeSelector": {"zone": "a"}}, ["region"], None),
    ({"nodeName": "n1"}, ["region"],
     "node selection by nodeName is prohibited by policy for your role"),
    ({"nodeSelector": {"region": "us-east"}}, ["region"],
     "node selection by label(s) [region] is prohibited by policy for your role"),
    ({"nodeSelector": {"region": "us-east", "kubernetes.io/hostname": "n1"}},
     ["kubernetes.io/hostname", "region"],
     "node selection by label(s) [kubernetes.io/hostname region] is prohibited by policy for "
     "your role"),
    ({"nodeName": "n1", "nodeSelector": {"region": "us-east"}}, ["region"],
     "node selection by nodeName and label(s) [region] is prohibited by policy for your role"),
    ({"nodeSelector": {"kubernetes.io/hostname": "n1"}}, list(pnc.DEFAULT_BLACKLIST),
     "node selection by label(s) [kubernetes.io/hostname] is prohibited by policy for your "
     "role"),
])
def test_refusal(spec: dict[str, Any], blacklist: list[str], expected: str | None) -> None:
    assert pnc.refusal(spec, blacklist) == expected
    assert pnc.needs_access_check(spec, blacklist) is (expected is not None)


MIRROR = make_pod(node_name="n1")
MIRROR["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "hash"}


@pytest.mark.parametrize("obj,is_pod,user,groups,expected", [
    (MIRROR, True, "system:node:n1", ["system:nodes"], True),
    (MIRROR, True, "system:node:n2", ["system:nodes"], False),
    (MIRROR, True, "system:node:n1", [], False),
    (make_pod(node_name="n1"), True, "system:node:n1", ["system:nodes"], False),
    (MIRROR, False, "system:node:n1", ["system:nodes"], False),
])
def test_a_node_may_create_its_own_mirror_pods(obj: dict[str, Any], is_pod: bool, user: str,
                                               groups: list[str], expected: bool) -> None:
    assert pnc.is_node_self_target_with_mirror_pod(obj, is_pod, "n1", user, groups) is expected
