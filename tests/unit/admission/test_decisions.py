"""The webhook's two passes over AdmissionReview requests, and the answers' shape.

The refusals read as the built-in plugins' (k8s.io/apimachinery/pkg/api/errors NewForbidden:
``pods "name" is forbidden: ...``; k8s.io/apiserver/pkg/admission NewForbidden for
PodNodeConstraints: name, else generateName, else ``Unknown``).
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from berthmaster.operator.admission import decisions, review
from berthmaster.operator.admission import podnodeconstraints as pnc
from berthmaster.operator.admission import podnodeselector as pns
from berthmaster.operator.admission import podtolerationrestriction as ptr
from berthmaster.operator.admission.config import AdmissionConfig
from tests.support.builders import make_pod, toleration

CONSTRAINED = AdmissionConfig(constraints=pnc.Settings(enabled=True, blacklist=["region"]))


def request(obj: dict[str, Any], operation: str = "CREATE", group: str = "",
            resource: str = "pods", user: str = "alice", groups: tuple[str, ...] = ()
            ) -> review.Request:
    return review.read_request({"request": {
        "uid": "u1", "resource": {"group": group, "version": "v1", "resource": resource},
        "operation": operation, "namespace": "ns1",
        "name": (obj.get("metadata") or {}).get("name", ""), "object": obj,
        "userInfo": {"username": user, "groups": list(groups)}}})


def test_mutate_patches_selector_and_tolerations() -> None:
    dedicated = toleration("dedicated", "groupName", "NoSchedule", "Equal")
    facts = decisions.Facts(namespace_annotations={
        pns.NAMESPACE_ANNOTATION: "dedicated=groupName",
        ptr.DEFAULT_TOLERATIONS: json.dumps([dedicated])})
    verdict = decisions.mutate(request(make_pod("p")), AdmissionConfig(), facts)
    assert verdict.refusal is None
    assert verdict.patch == [
        {"op": "add", "path": "/spec/nodeSelector", "value": {"dedicated": "groupName"}},
        {"op": "add", "path": "/spec/tolerations", "value": [dedicated]}]


def test_mutate_refuses_with_upstreams_words() -> None:
    facts = decisions.Facts(namespace_annotations={pns.NAMESPACE_ANNOTATION: "env=test"})
    pod = make_pod("web-1", node_selector={"env": "production"})
    assert decisions.mutate(request(pod), AdmissionConfig(), facts).refusal == (
        'pods "web-1" is forbidden: pod node label selector conflicts with its namespace node '
        "label selector")


def test_a_bad_namespace_annotation_names_the_namespace() -> None:
    facts = decisions.Facts(namespace_annotations={pns.NAMESPACE_ANNOTATION: "env"})
    verdict = decisions.mutate(request(make_pod("p")), AdmissionConfig(), facts)
    assert verdict.code == 400
    assert verdict.refusal == ("namespace ns1: invalid selector: 'env' is not key=value; fix "
                               "the namespace's annotation")


def test_updates_skip_the_node_selector() -> None:
    """PodNodeSelector handles Create only (NewHandler(admission.Create))."""
    facts = decisions.Facts(namespace_annotations={pns.NAMESPACE_ANNOTATION: "env=test"})
    pod = make_pod("p", node_selector={"env": "production"})
    assert decisions.mutate(request(pod, "UPDATE"), AdmissionConfig(), facts).refusal is None
    assert decisions.validate(request(pod, "UPDATE"), AdmissionConfig(), facts).refusal is None


def test_node_env_needs_the_node() -> None:
    pod = make_pod("p", node_name="n1")
    assert decisions.node_to_read(request(pod)) == "n1"
    facts = decisions.Facts(namespace_annotations={pns.PROJECT_ANNOTATION: "region=east"},
                            node_error='node "n1" not found')
    assert decisions.mutate(request(pod), AdmissionConfig(), facts).refusal == (
        'pods "p" is forbidden: cannot validate project node label selector: node "n1" not '
        "found")


def test_validate_sees_what_later_webhooks_removed() -> None:
    facts = decisions.Facts(namespace_annotations={pns.PROJECT_ANNOTATION: "region=east"})
    assert decisions.validate(request(make_pod("p")), AdmissionConfig(), facts).refusal == (
        'pods "p" is forbidden: pod node label selector does not extend project node label '
        "selector")


@pytest.mark.parametrize("obj,group,resource,expected", [
    (make_pod("p", node_name="n1"), "", "pods",
     'pods "p" is forbidden: node selection by nodeName is prohibited by policy for your '
     "role"),
    ({"metadata": {"generateName": "web-"}, "spec": {"template": {"spec": {
        "nodeSelector": {"region": "east"}}}}}, "apps", "deployments",
     'deployments.apps "web-" is forbidden: node selection by label(s) [region] is '
     "prohibited by policy for your role"),
    ({"metadata": {}, "spec": {"jobTemplate": {"spec": {"template": {"spec": {
        "nodeName": "n1"}}}}}}, "batch", "cronjobs",
     'cronjobs.batch "Unknown" is forbidden: node selection by nodeName is prohibited by '
     "policy for your role"),
])
def test_constraints_refuse_users_who_may_not_bind(obj: dict[str, Any], group: str,
                                                   resource: str, expected: str) -> None:
    req = request(obj, group=group, resource=resource)
    assert decisions.needs_binding_check(req, CONSTRAINED)
    denied = decisions.validate(req, CONSTRAINED, decisions.Facts(may_bind=False))
    assert denied.refusal == expected
    allowed = decisions.validate(req, CONSTRAINED, decisions.Facts(may_bind=True))
    assert allowed.refusal is None


def test_constraints_ask_nothing_when_nothing_is_asked_for() -> None:
    assert not decisions.needs_binding_check(request(make_pod("p")), CONSTRAINED)
    unconfigured = AdmissionConfig()
    assert not decisions.needs_binding_check(request(make_pod("p", node_name="n1")),
                                             unconfigured)
    # The ReplicaSet controller making the pods of a checked template.
    assert not decisions.needs_binding_check(request(
        make_pod("p", node_name="n1"),
        user="system:serviceaccount:kube-system:replicaset-controller"), CONSTRAINED)
    assert not decisions.needs_binding_check(request(
        make_pod("p", node_name="n1"), user="system:kube-controller-manager"), CONSTRAINED)
    assert decisions.needs_binding_check(request(
        make_pod("p", node_name="n1"), user="system:serviceaccount:team:default"), CONSTRAINED)
    mirror = make_pod("p", node_name="n1")
    mirror["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "x"}
    assert not decisions.needs_binding_check(
        request(mirror, user="system:node:n1", groups=("system:nodes",)), CONSTRAINED)


def test_answers() -> None:
    allowed = review.allow("u1", [{"op": "add", "path": "/x", "value": 1}])
    assert allowed["response"]["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(allowed["response"]["patch"])) == [
        {"op": "add", "path": "/x", "value": 1}]
    denied = review.deny("u1", "no")["response"]
    assert denied == {"uid": "u1", "allowed": False, "status": {
        "status": "Failure", "code": 403, "reason": "Forbidden", "message": "no"}}
    with pytest.raises(review.ReviewError):
        review.read_request({"kind": "AdmissionReview"})
