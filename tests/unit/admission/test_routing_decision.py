"""Scheduler routing: which new pods of which namespaces get berthmaster's schedulerName.

A pod that chose no scheduler arrives at a mutating webhook with ``default-scheduler``: the
API server decodes the body with a defaulting codec (k8s.io/apiserver
pkg/endpoints/handlers/create.go) and ``SetDefaults_PodSpec`` (kubernetes
pkg/apis/core/v1/defaults.go) fills an empty schedulerName with ``v1.DefaultSchedulerName``;
so empty and ``default-scheduler`` are routed alike, and any other name is the pod's choice.
"""

from __future__ import annotations

from typing import Any

import pytest

from berthmaster.cli import build_parser
from berthmaster.foundation.errors import ConfigurationError
from berthmaster.operator.admission import decisions, registration, review, schedulername
from berthmaster.operator.admission.options import settings_from_args

NAME = "berthmaster"
LABELLED = {schedulername.LABEL: NAME, "kubernetes.io/metadata.name": "shop"}
SET = [{"op": "add", "path": "/spec/schedulerName", "value": NAME}]


def pod(scheduler: str | None = None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "app", "image": "app:1"}]}
    if scheduler is not None:
        spec["schedulerName"] = scheduler
    return {"metadata": {"name": "p", "labels": labels or {}}, "spec": spec}


@pytest.mark.parametrize(("body", "operation", "namespace_labels", "expected"), [
    # defaulted by the API server, or not (a dry-run through another path): routed alike
    (pod("default-scheduler"), "CREATE", LABELLED, SET),
    (pod(None), "CREATE", LABELLED, SET),
    (pod(""), "CREATE", LABELLED, SET),
    # the pod chose a scheduler: never overridden
    (pod("my-scheduler"), "CREATE", LABELLED, []),
    (pod(NAME), "CREATE", LABELLED, []),
    # the pod's opt-out label keeps kube-scheduler
    (pod("default-scheduler", {schedulername.LABEL: "default-scheduler"}), "CREATE", LABELLED,
     []),
    # another label value on the pod is no opt-out
    (pod("default-scheduler", {schedulername.LABEL: NAME}), "CREATE", LABELLED, SET),
    # unlabelled namespace, or labelled for another berthmaster release
    (pod("default-scheduler"), "CREATE", {"kubernetes.io/metadata.name": "shop"}, []),
    (pod("default-scheduler"), "CREATE", {schedulername.LABEL: "other"}, []),
    # schedulerName cannot change after creation
    (pod("default-scheduler"), "UPDATE", LABELLED, []),
])
def test_route(body: dict[str, Any], operation: str, namespace_labels: dict[str, str],
               expected: list[dict[str, Any]]) -> None:
    assert schedulername.route(body, operation, namespace_labels, NAME) == expected


def test_no_scheduler_name_routes_nothing() -> None:
    assert schedulername.route(pod("default-scheduler"), "CREATE", LABELLED, "") == []


def test_the_decision_routes_pods_only() -> None:
    def request(resource: str) -> review.Request:
        return review.read_request({"request": {
            "uid": "u", "resource": {"group": "", "version": "v1", "resource": resource},
            "operation": "CREATE", "namespace": "shop", "object": pod("default-scheduler")}})

    facts = decisions.Facts(namespace_labels=LABELLED)
    assert decisions.route_scheduler_name(request("pods"), facts, NAME).patch == SET
    assert decisions.route_scheduler_name(request("podtemplates"), facts, NAME).patch == []


def test_the_match_condition_is_the_same_rule() -> None:
    """The CEL condition names exactly the schedulerNames :func:`route` treats as unchosen."""
    (condition,) = schedulername.match_conditions()
    assert condition["expression"] == (
        "!has(object.spec.schedulerName) || "
        "object.spec.schedulerName in ['', 'default-scheduler']")


def test_registration_adds_the_routing_webhook_only_when_asked() -> None:
    target = registration.Target(url="https://127.0.0.1:9443")
    plain, _ = registration.build_configurations("placement", target, "CA", "bm")
    assert [w["name"] for w in plain["webhooks"]] == [registration.WEBHOOK_NAME]
    routed, validating = registration.build_configurations("placement", target, "CA", "bm",
                                                           scheduler_name=NAME)
    assert [w["name"] for w in validating["webhooks"]] == [registration.WEBHOOK_NAME]
    placement, routing = routed["webhooks"]
    assert placement == plain["webhooks"][0]
    assert routing["clientConfig"]["url"] == "https://127.0.0.1:9443/scheduler-name"
    assert routing["namespaceSelector"] == {
        "matchLabels": {"berthmaster.io/scheduler": NAME},
        "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                              "values": ["kube-system", "kube-public", "kube-node-lease",
                                         "bm"]}]}
    assert routing["objectSelector"] == {"matchExpressions": [{
        "key": "berthmaster.io/scheduler", "operator": "NotIn", "values": ["default-scheduler"]}]}
    assert routing["rules"] == [{"apiGroups": [""], "apiVersions": ["v1"],
                                 "operations": ["CREATE"], "resources": ["pods"],
                                 "scope": "Namespaced"}]
    assert (routing["reinvocationPolicy"], routing["failurePolicy"]) == ("Never", "Fail")


def test_the_flag() -> None:
    def settings(*flags: str) -> str:
        args = build_parser("admission").parse_args(["admission", *flags])
        return settings_from_args(args).scheduler_name

    assert settings() == ""
    assert settings("--scheduler-name", NAME) == NAME
    with pytest.raises(ConfigurationError, match="that is kube-scheduler"):
        settings("--scheduler-name", "default-scheduler")
    with pytest.raises(ConfigurationError, match=r"--scheduler-name .a b.*valid label"):
        settings("--scheduler-name", "a b")
