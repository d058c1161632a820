"""MachineHealthCheck decisions over recorded state, table-driven.

Upstream: openshift/machine-api-operator pkg/controller/machinehealthcheck/
machinehealthcheck_controller.go — ``needsRemediation`` (check_target), ``healthCheckTargets``
(what counts as healthy), ``isAllowedRemediation`` / ``getMaxUnhealthy`` (maxUnhealthy, a
percentage rounded down), ``internalRemediation`` (no controller owner: skipped; already being
deleted: nothing), the Reconcile's RemediationAllowed condition (TooManyUnhealthy) and
RemediationRestricted message; openshift/api machine/v1beta1 types_machinehealthcheck.go
(defaults maxUnhealthy 100%, nodeStartupTimeout 10m, "0" disables the startup check).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from berthmaster.foundation.times import format_rfc3339
from berthmaster.operator.machines import healthcheck as mhc
from berthmaster.operator.machines.healthcheck import (
    Health,
    RefusedSpec,
    Target,
    check_target,
    decide_health_check,
    parse_spec,
)
from tests.support.builders import make_node
from tests.unit.operator.machines.machine_builders import make_machine

NOW = datetime(2026, 1, 2, 12, 0, 0, tzinfo=UTC)
READY_FALSE_5M = {"type": "Ready", "status": "False", "timeout": "300s"}
READY_UNKNOWN_5M = {"type": "Ready", "status": "Unknown", "timeout": "300s"}


def check(**spec: Any) -> dict[str, Any]:
    body = {"selector": {}, "unhealthyConditions": [READY_FALSE_5M, READY_UNKNOWN_5M], **spec}
    return {"apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineHealthCheck",
            "metadata": {"name": "mhc", "namespace": "ns", "uid": "uid-mhc"}, "spec": body}


def node(ready: str = "True", since: timedelta = timedelta(hours=1)) -> dict[str, Any]:
    built = make_node("n")
    built["status"]["conditions"] = [{"type": "Ready", "status": ready,
                                      "lastTransitionTime": format_rfc3339(NOW - since)}]
    return built


def machine(name: str = "m", *, owned: bool = True, updated: timedelta | None = None,
            **kwargs: Any) -> dict[str, Any]:
    built = make_machine(name, owner_uid="ms-uid" if owned else None, **kwargs)
    if updated is not None:
        built["status"]["lastUpdated"] = format_rfc3339(NOW - updated)
    return built


SPEC = parse_spec(check())


@pytest.mark.parametrize(("target", "expected"), [
    # Failed Machines are unhealthy whatever their Node says.
    (Target(machine(phase="Failed", node="n"), node()),
     Health(True, why="machine phase is Failed")),
    # A Ready Node: healthy, nothing to re-check.
    (Target(machine(phase="Running", node="n"), node()), Health(False)),
    # Ready=False for 10 minutes with a 5-minute timeout: unhealthy.
    (Target(machine(phase="Running", node="n"), node("False", timedelta(minutes=10))),
     Health(True, why="condition Ready in state False longer than 5m0s")),
    # Ready=Unknown for 2 minutes: not yet; looked at again 1 s after the timeout expires.
    (Target(machine(phase="Running", node="n"), node("Unknown", timedelta(minutes=2))),
     Health(False, timedelta(minutes=3, seconds=1))),
    # A status the check does not list (Ready=True) never counts.
    (Target(machine(phase="Running", node="n"), node("True", timedelta(days=1))), Health(False)),
    # nodeRef names a Node that is gone.
    (Target(machine(phase="Running", node="n"), None, node_missing=True),
     Health(True, why="node n not found")),
    # No Node yet: unhealthy after nodeStartupTimeout (10m default) from status.lastUpdated.
    (Target(machine(phase="Provisioned", updated=timedelta(minutes=11))),
     Health(True, why="machine has no node after 10m0s")),
    (Target(machine(phase="Provisioned", updated=timedelta(minutes=4))),
     Health(False, timedelta(minutes=6, seconds=1))),
    # ... and no lastUpdated yet: wait the whole timeout.
    (Target(machine()), Health(False, timedelta(minutes=10))),
], ids=["failed", "ready", "not-ready-too-long", "unknown-not-yet", "unlisted-status",
        "node-gone", "no-node-too-long", "no-node-not-yet", "no-status-yet"])
def test_check_target(target: Target, expected: Health) -> None:
    assert check_target(target, SPEC, NOW) == expected


def test_node_startup_timeout_zero_disables_the_startup_check() -> None:
    spec = parse_spec(check(nodeStartupTimeout="0"))
    target = Target(machine(phase="Provisioned", updated=timedelta(days=3)))
    assert check_target(target, spec, NOW) == Health(False)


def healthy_target(name: str) -> Target:
    return Target(machine(name, phase="Running", node="n"), node())


def sick_target(name: str, **kwargs: Any) -> Target:
    return Target(machine(name, phase="Running", node="n", **kwargs),
                  node("False", timedelta(minutes=10)))


def names(targets: list[Target]) -> list[str]:
    return [t.name for t in targets]


@pytest.mark.parametrize(
    ("max_unhealthy", "targets", "expected", "healthy", "allowed", "deleted", "remaining"), [
        # Default 100%: everything unhealthy is remediated.
        (None, [healthy_target("a"), sick_target("b"), sick_target("c")], 3, 1, True,
         ["b", "c"], 1),
        # maxUnhealthy 1 with two unhealthy: short-circuited, nothing deleted.
        (1, [healthy_target("a"), sick_target("b"), sick_target("c")], 3, 1, False, [], 0),
        # exactly at the limit: allowed.
        (2, [healthy_target("a"), sick_target("b"), sick_target("c")], 3, 1, True,
         ["b", "c"], 0),
        # 40% of 3 rounds down to 1.
        ("40%", [healthy_target("a"), healthy_target("b"), sick_target("c")], 3, 2, True,
         ["c"], 0),
        ("40%", [healthy_target("a"), sick_target("b"), sick_target("c")], 3, 1, False, [], 0),
        # 0 blocks all remediation.
        ("0%", [healthy_target("a"), sick_target("b")], 2, 1, False, [], 0),
        # A Machine already being deleted counts as unhealthy and is not deleted again.
        (None, [healthy_target("a"), sick_target("b", deleting=True)], 2, 1, True, [], 1),
        (None, [healthy_target("a"), Target(machine("b", phase="Running", node="n",
                                                    deleting=True), node())], 2, 1, True, [], 1),
        # A Node not yet unhealthy for long enough is neither healthy nor remediated.
        (None, [Target(machine("a", phase="Running", node="n"),
                       node("False", timedelta(minutes=1)))], 1, 0, True, [], 0),
    ], ids=["default-100%", "over-limit", "at-limit", "percent-rounds-down", "percent-over",
            "zero-blocks", "deleting-unhealthy", "deleting-healthy", "not-yet-due"])
def test_decide_health_check(max_unhealthy: int | str | None, targets: list[Target],
                             expected: int, healthy: int, allowed: bool, deleted: list[str],
                             remaining: int) -> None:
    body = check() if max_unhealthy is None else check(maxUnhealthy=max_unhealthy)
    decision = decide_health_check(body, parse_spec(body), targets, NOW)
    assert (decision.expected, decision.healthy) == (expected, healthy)
    assert decision.condition["type"] == "RemediationAllowed"
    assert (decision.condition["status"] == "True") is allowed
    assert names(decision.delete) == deleted
    assert decision.remediations_allowed == remaining
    if not allowed:
        assert decision.condition["reason"] == "TooManyUnhealthy"
        assert decision.condition["severity"] == "Warning"
        assert decision.restricted_message.startswith(
            "Remediation restricted due to exceeded number of unhealthy machines (total: ")


def test_restricted_messages_are_upstreams() -> None:
    body = check(maxUnhealthy=1)
    targets = [healthy_target("a"), sick_target("b"), sick_target("c")]
    decision = decide_health_check(body, parse_spec(body), targets, NOW)
    assert decision.condition["message"] == (
        "Remediation is not allowed, the number of not started or unhealthy machines exceeds "
        "maxUnhealthy (total: 3, unhealthy: 2, maxUnhealthy: 1)")
    assert decision.restricted_message == (
        "Remediation restricted due to exceeded number of unhealthy machines "
        "(total: 3, unhealthy: 2, maxUnhealthy: 1)")


def test_machines_without_a_controller_owner_are_left_alone() -> None:
    targets = [sick_target("owned"), sick_target("loose", owned=False)]
    decision = decide_health_check(check(), SPEC, targets, NOW)
    assert names(decision.delete) == ["owned"]
    assert names(decision.no_controller) == ["loose"]


def test_next_check_is_the_soonest_due_target() -> None:
    targets = [Target(machine("a", phase="Running", node="n"),
                      node("False", timedelta(minutes=4))),
               Target(machine("b", phase="Running", node="n"),
                      node("Unknown", timedelta(minutes=1)))]
    decision = decide_health_check(check(), SPEC, targets, NOW)
    assert decision.next_check == timedelta(minutes=1, seconds=1)
    assert names(decision.detected) == ["a", "b"]


@pytest.mark.parametrize(("spec", "reason", "field"), [
    ({"remediationTemplate": {"kind": "Metal3RemediationTemplate", "name": "t"}},
     "InvalidConfiguration", "spec.remediationTemplate: apiVersion missing"),
    ({"nodeStartupTimeout": "0abc"}, "InvalidConfiguration", "spec.nodeStartupTimeout"),
    ({"unhealthyConditions": [{"type": "Ready", "status": "False", "timeout": "5 minutes"}]},
     "InvalidConfiguration", "spec.unhealthyConditions[0].timeout"),
    ({"unhealthyConditions": []}, "InvalidConfiguration", "spec.unhealthyConditions"),
    # below the minimums (the CRD's CEL rules refuse them first; these are checks stored
    # before the rules): a zero or sub-second condition timeout, a short node startup
    ({"unhealthyConditions": [{"type": "Ready", "status": "False", "timeout": "0s"}]},
     "InvalidConfiguration", "spec.unhealthyConditions[0].timeout: '0s' is below the minimum"),
    ({"unhealthyConditions": [READY_FALSE_5M, {"type": "Ready", "status": "Unknown",
                                               "timeout": "999ms"}]},
     "InvalidConfiguration", "spec.unhealthyConditions[1].timeout: '999ms' is below"),
    ({"nodeStartupTimeout": "29s"}, "InvalidConfiguration",
     "spec.nodeStartupTimeout: '29s' must be \"0\" (no startup check) or at least 30s"),
    ({"maxUnhealthy": "150%"}, "InvalidConfiguration", "spec.maxUnhealthy"),
    ({"selector": {"matchExpressions": [{"key": "a", "operator": "Maybe"}]}},
     "InvalidConfiguration", "spec.selector.matchExpressions"),
    # refused whatever comes before it (the selector is compiled, as LabelSelectorAsSelector
    # does, not matched against no labels: an In that fails first hid the operator)
    ({"selector": {"matchExpressions": [{"key": "a", "operator": "In", "values": ["x"]},
                                        {"key": "b", "operator": "Maybe"}]}},
     "InvalidConfiguration", "spec.selector.matchExpressions"),
])
def test_refused_specs_name_the_field(spec: dict[str, Any], reason: str, field: str) -> None:
    with pytest.raises(RefusedSpec) as raised:
        parse_spec(check(**spec))
    assert raised.value.reason == reason
    assert field in str(raised.value)
    decision = mhc.refused(raised.value)
    assert decision.condition["status"] == "False"
    assert decision.condition["reason"] == reason
    assert decision.delete == []


@pytest.mark.parametrize(("timeout", "startup", "wanted_startup"), [
    ("1s", "30s", timedelta(seconds=30)),  # both minimums are allowed
    ("1.5s", "0", timedelta(0)),  # "0" disables the startup check
    ("300s", "0s", timedelta(0)),  # so does any zero duration (upstream compares seconds)
    ("2h45m", "1h", timedelta(hours=1)),
])
def test_timeouts_at_or_above_the_minimums_are_accepted(timeout: str, startup: str,
                                                        wanted_startup: timedelta) -> None:
    spec = parse_spec(check(nodeStartupTimeout=startup, unhealthyConditions=[
        {"type": "Ready", "status": "False", "timeout": timeout}]))
    assert spec.node_startup_timeout == wanted_startup
    assert spec.unhealthy_conditions[0].timeout >= timedelta(seconds=1)


def test_without_max_unhealthy_every_unhealthy_machine_is_remediated_as_upstream() -> None:
    """openshift/api defaults maxUnhealthy to "100%" (+kubebuilder:default) and
    machine-api-operator's getMaxUnhealthy reads a missing one as every expected Machine: no
    short-circuit unless the check sets one (the docs say to)."""
    targets = [sick_target("a"), sick_target("b"), sick_target("c")]
    decision = decide_health_check(check(), SPEC, targets, NOW)
    assert decision.condition["status"] == "True"
    assert names(decision.delete) == ["a", "b", "c"]
    body = check(maxUnhealthy="34%")  # 34% of 3 rounds down to 1
    decision = decide_health_check(body, parse_spec(body), targets, NOW)
    assert decision.delete == [] and decision.condition["reason"] == "TooManyUnhealthy"
    assert decision.restricted_message.endswith("(total: 3, unhealthy: 3, maxUnhealthy: 34%)")


def test_defaults_are_upstreams() -> None:
    spec = parse_spec({"metadata": {"name": "x"}, "spec": {"unhealthyConditions": [
        READY_FALSE_5M]}})
    assert spec.max_unhealthy == "100%"
    assert spec.node_startup_timeout == timedelta(minutes=10)
    assert spec.unhealthy_conditions[0].timeout == timedelta(minutes=5)


def test_target_text_is_upstreams() -> None:
    body = check()
    assert mhc.target_text(body, sick_target("b")) == "ns/mhc/b/n"
    assert mhc.target_text(body, Target(machine("c"))) == "ns/mhc/c/"


@pytest.mark.parametrize(("kind", "labels", "selected"), [
    ("KwokMachineProviderSpec", {"pool": "a"}, True),
    ("AWSMachineProviderConfig", {"pool": "a"}, False),  # another controller's Machine
    ("AWSMachineProviderConfig", {"pool": "a", "berthmaster.io/machine-controller":
                                  "berthmaster"}, True),  # opted in
    ("KwokMachineProviderSpec", {"pool": "b"}, False),  # outside the selector
])
def test_a_check_remediates_only_the_machines_berthmaster_owns(kind: str, labels: dict[str, str],
                                                                selected: bool) -> None:
    """The Machine controller's ownership rule (operator/machines/providers.owned) holds for
    remediation too: beside another machine controller, its Machines are never deleted here."""
    spec = parse_spec(check(selector={"matchLabels": {"pool": "a"}}))
    target = machine(labels=labels)
    target["spec"]["providerSpec"] = {"value": {"kind": kind}}
    assert mhc.selects(spec, target, ("KwokMachineProviderSpec",)) is selected
