"""Bind attribution from the API server's audit log (berthmaster/tooling/chaos/audit.py).

Entries are shaped as kube-apiserver writes them with ``--audit-log-format=json``
(staging/src/k8s.io/apiserver/pkg/apis/audit/v1/types.go: ``Event``, ``ObjectReference``).
The pod itself cannot say who bound it: ``BindingREST`` writes ``spec.nodeName`` straight
through storage (pkg/registry/core/pod/storage/storage.go), past the field managers.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, cast

import pytest

from berthmaster.foundation.kube import KubeClient
from berthmaster.tooling.chaos import invariants as rules
from berthmaster.tooling.chaos.audit import SCHEDULERS, Act, AuditTail, act_of, stamp_seconds
from berthmaster.tooling.chaos.checker import Checker


def entry(verb: str = "create", subresource: str | None = "binding", code: int = 201,
          user: str = "chaos-a-1", groups: tuple[str, ...] = ("system:masters", SCHEDULERS),
          stage: str = "ResponseComplete", resource: str = "pods") -> dict[str, Any]:
    ref: dict[str, Any] = {"resource": resource, "namespace": "chaos-work", "name": "p-1",
                           "apiVersion": "v1"}
    if subresource:
        ref["subresource"] = subresource
    return {"kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata",
            "auditID": "8d2e", "stage": stage, "verb": verb,
            "requestURI": "/api/v1/namespaces/chaos-work/pods/p-1/binding",
            "user": {"username": user, "groups": [*groups, "system:authenticated"]},
            "userAgent": "berthmaster-scheduler/0.1.0 (linux/amd64)", "objectRef": ref,
            "responseStatus": {"metadata": {}, "code": code},
            "requestReceivedTimestamp": "2026-11-26T12:00:00.250000Z",
            "stageTimestamp": "2026-11-26T12:00:00.260000Z"}


AT = 1795694400.25  # 2026-11-26T12:00:00.25Z


@pytest.mark.parametrize(("raw", "expected"), [
    (entry(), Act("chaos-a-1", "bind", "chaos-work/p-1", AT, 201)),
    (entry(code=409), Act("chaos-a-1", "bind", "chaos-work/p-1", AT, 409)),
    (entry(verb="delete", subresource=None, code=200, user="chaos-b-2"),
     Act("chaos-b-2", "delete", "chaos-work/p-1", AT, 200)),
    (entry(stage="ResponseStarted"), None),
    (entry(groups=("system:masters",)), None),  # not a scheduler life
    (entry(verb="patch", subresource="status"), None),
    (entry(verb="create", subresource="eviction"), None),
    (entry(resource="nodes", subresource=None), None),
])
def test_act_of(raw: dict[str, Any], expected: Act | None) -> None:
    assert act_of(raw) == expected


def test_the_tail_reads_complete_lines_once(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    tail = AuditTail(log)
    assert tail.read() == []  # not written yet
    first, second = json.dumps(entry()), json.dumps(entry(user="chaos-b-1"))
    log.write_text(first + "\n" + second[:40])
    assert [a.user for a in tail.read()] == ["chaos-a-1"]
    assert tail.read() == []
    with log.open("a") as sink:
        sink.write(second[40:] + "\nnot json\n")
    assert [a.user for a in tail.read()] == ["chaos-b-1"]
    assert tail.malformed == 1


def judge(acts: list[Act], takeovers: list[rules.Takeover]) -> Checker:
    async def run() -> Checker:
        checker = Checker(cast(KubeClient, object()), "chaos", ("ns", "lease"), "machines",
                          lambda what: None)
        checker.takeovers = takeovers
        for act in acts:
            checker._judge_act(act)
        await checker.stop()
        return checker
    return asyncio.run(run())


def test_a_deposed_leaders_bind_is_caught_without_any_event() -> None:
    """No Scheduled event reaches the checker here: the audit entry alone convicts."""
    lost = rules.Takeover(AT - 10, "chaos-a-1", "chaos-b-1")
    checker = judge([act_of(entry())], [lost])  # type: ignore[list-item]
    assert checker.breaches == ["chaos-work/p-1: chaos-a-1 bound a pod 10.0s after it lost the "
                                "Lease to another replica (audit log)"]
    assert checker.figures.binds_by_user == {"chaos-a-1": 1}
    assert checker.figures.binds_by_reporter == {}


@pytest.mark.parametrize(("act", "breach"), [
    # the new leader binds: fine
    (Act("chaos-b-1", "bind", "w/p", AT, 201), None),
    # in flight when the Lease passed (within the grace)
    (Act("chaos-a-1", "bind", "w/p", AT - 10 + 2, 201), None),
    # refused by the API server: nothing changed
    (Act("chaos-a-1", "bind", "w/p", AT, 409), None),
    # a preemption victim deleted by the deposed leader
    (Act("chaos-a-1", "delete", "w/v", AT, 200),
     "w/v: chaos-a-1 deleted a pod (a preemption) 10.0s after it lost the Lease to another "
     "replica (audit log)"),
])
def test_acts_judged_against_the_takeovers(act: Act, breach: str | None) -> None:
    checker = judge([act], [rules.Takeover(AT - 10, "chaos-a-1", "chaos-b-1")])
    assert checker.breaches == ([breach] if breach else [])


def test_binds_the_audit_log_did_not_record() -> None:
    async def run() -> Checker:
        checker = Checker(cast(KubeClient, object()), "chaos", ("ns", "lease"), "machines",
                          lambda what: None)
        checker.bound_at = {"u1": 10.0, "u2": 20.0, "u3": 95.0}
        checker.bound_keys = {"u1": "w/p-1", "u2": "w/p-2", "u3": "w/p-3"}
        checker._judge_act(Act("chaos-a-1", "bind", "w/p-1", 9.9, 201))
        checker._judge_act(Act("chaos-a-1", "bind", "w/p-2", 19.9, 409))  # refused: not bound
        await checker.stop()
        return checker
    checker = asyncio.run(run())
    assert checker.unaudited_binds(before=90.0) == ["w/p-2"]  # p-3: too recent to judge


def test_stamp_seconds_reads_metav1_time_and_microtime() -> None:
    """An audit entry's ``requestReceivedTimestamp`` is a MicroTime, an object's
    ``creationTimestamp`` a Time (apimachinery pkg/apis/meta/v1 micro_time.go, time.go); what
    is not a stamp is None, so the observers go on."""
    assert stamp_seconds("1970-01-01T00:00:10Z") == 10.0
    assert stamp_seconds("1970-01-01T00:00:10.250000Z") == 10.25
    assert stamp_seconds("1970-01-01T01:00:10+01:00") == 10.0
    assert stamp_seconds(None) is None
    assert stamp_seconds("") is None
    assert stamp_seconds("yesterday") is None
    assert stamp_seconds("1970-01-01T00:00:10") is None
