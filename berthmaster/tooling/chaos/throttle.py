"""The ``apf-throttle`` fault: API Priority and Fairness throttles the scheduler leader.

For ``2 * hold`` seconds a PriorityLevelConfiguration (flowcontrol.apiserver.k8s.io/v1,
``Limited``, ``nominalConcurrencyShares: 1``, nothing lent or borrowed, ``limitResponse:
Reject``) and a FlowSchema sending it every request of the leader's user (each scheduler life
has its own client certificate, campaign.py) exist; a few concurrent lists made with the
leader's own credentials share its seats, as a busy neighbour in the same flow would. Then both
objects are removed. The API server's own counters decide whether it throttled:
``apiserver_flowcontrol_rejected_requests_total`` for the priority level, read from /metrics
before and after (names and labels from
k8s.io/apiserver/pkg/util/flowcontrol/metrics/metrics.go, v0.35.4); not fired, with the counts, when
it did not. The invariants stay the campaign's (no double bind, leadership safety, every pod
that fits bound ``BIND_BOUND`` after the last fault).

The local control plane runs kube-apiserver with ``--enable-priority-and-fairness=false``
(devcluster/cluster.py); the campaign's restart of it (for the audit log) turns it on
(:func:`with_apf`), recorded, so the ``apiserver-restart`` fault keeps it.

A FlowSchema's ``matchingPrecedence`` 1 is the ``exempt`` schema's alone
(pkg/apis/flowcontrol/validation/validation.go), and ``exempt`` matches ``system:masters``:
the scheduler lives' certificates therefore are not in that group (the campaign binds their
group to ``cluster-admin`` instead).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from berthmaster.foundation.kube import (
    CORE,
    KubeClient,
    KubeError,
    group_path,
    resource_path,
    user_agent,
)
from berthmaster.tooling.chaos.faults import Outcome, Stage, fired, not_fired, wait_until

FLOWCONTROL = group_path("flowcontrol.apiserver.k8s.io", "v1")
NAME = "chaos-throttle"
REJECTED = "apiserver_flowcontrol_rejected_requests_total"
DISPATCHED = "apiserver_flowcontrol_dispatched_requests_total"
NEIGHBOURS = 40  # concurrent lists with the leader's credentials: above the level's seats

Obj = dict[str, Any]


APF_FLAG = "--enable-priority-and-fairness"


def with_apf(command: list[str]) -> list[str]:
    """kube-apiserver's command line with API Priority and Fairness on (its default,
    k8s.io/apiserver/pkg/server/options/recommended.go)."""
    return [*(a for a in command if not a.startswith(APF_FLAG + "=") and a != APF_FLAG),
            f"{APF_FLAG}=true"]


def priority_level() -> Obj:
    return {"apiVersion": "flowcontrol.apiserver.k8s.io/v1",
            "kind": "PriorityLevelConfiguration", "metadata": {"name": NAME},
            "spec": {"type": "Limited", "limited": {
                "nominalConcurrencyShares": 1, "lendablePercent": 0,
                "borrowingLimitPercent": 0, "limitResponse": {"type": "Reject"}}}}


def flow_schema(user: str) -> Obj:
    """Every request of ``user``, at the first precedence after ``exempt`` and ``probes``."""
    return {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
            "metadata": {"name": NAME},
            "spec": {"priorityLevelConfiguration": {"name": NAME}, "matchingPrecedence": 3,
                     "distinguisherMethod": {"type": "ByUser"},
                     "rules": [{"subjects": [{"kind": "User", "user": {"name": user}}],
                                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"],
                                                   "resources": ["*"], "namespaces": ["*"],
                                                   "clusterScope": True}],
                                "nonResourceRules": [{"verbs": ["*"],
                                                      "nonResourceURLs": ["*"]}]}]}}


def metric_sum(text: str, metric: str, level: str) -> float:
    """The sum of ``metric``'s samples labelled ``priority_level="<level>"`` in a Prometheus
    text exposition (0 when there is none)."""
    total = 0.0
    label = f'priority_level="{level}"'
    for line in text.splitlines():
        if not line.startswith(metric + "{") or label not in line:
            continue
        with contextlib.suppress(ValueError, IndexError):
            total += float(line.rsplit("}", 1)[1].split()[0])
    return total


def judge(before: str, after: str, level: str, refused_seen: int) -> Outcome:
    """Fired when the API server's rejected counter for ``level`` rose between the two
    expositions; otherwise not fired, saying what was seen."""
    rejected = metric_sum(after, REJECTED, level) - metric_sum(before, REJECTED, level)
    dispatched = metric_sum(after, DISPATCHED, level) - metric_sum(before, DISPATCHED, level)
    if rejected > 0:
        return fired(f"{rejected:.0f} requests rejected, {dispatched:.0f} dispatched at "
                     f"priority level {level}; 429s answered to the lists sharing its seats "
                     f"{refused_seen}")
    if dispatched <= 0:
        return not_fired(f"no request dispatched at priority level {level} (API Priority and "
                         "Fairness off, or the FlowSchema not matched)")
    return not_fired(f"priority level {level} dispatched {dispatched:.0f} requests and "
                     "rejected none")


async def _metrics(kube: KubeClient) -> str:
    answer = await kube.request("GET", "/metrics")
    return str(answer.get("message") or "")


async def _neighbour(client: KubeClient, until: float) -> int:
    """Lists with the leader's credentials until ``until``; how many were answered 429."""
    refused = 0
    while time.monotonic() < until:
        try:
            await client.request("GET", resource_path(CORE, "pods"), timeout=10)
        except KubeError as error:
            if error.too_many_requests:
                refused += 1
            await asyncio.sleep(0.1)
    return refused


def fault(kubeconfig_of: Callable[[str], Path]) -> Callable[[Stage], Awaitable[Outcome]]:
    """The fault, given where each scheduler life's kubeconfig is (by identity)."""

    async def apf_throttle(stage: Stage) -> Outcome:
        await wait_until(lambda: stage.checker.holder != "", 10)
        leader = stage.checker.holder
        if not leader:
            return not_fired("no scheduler leader")
        kube = stage.kube
        levels = resource_path(FLOWCONTROL, "prioritylevelconfigurations")
        schemas = resource_path(FLOWCONTROL, "flowschemas")
        before = await _metrics(kube)
        refused = 0
        await kube.create(levels, priority_level())
        try:
            await kube.create(schemas, flow_schema(leader))
            client = await KubeClient.from_kubeconfig(str(kubeconfig_of(leader)),
                                                      agent=user_agent("berthmaster-chaos"))
            try:
                await asyncio.sleep(1)  # the API server's APF controller takes the objects
                until = time.monotonic() + 2 * stage.hold
                counts = await asyncio.gather(*(_neighbour(client, until)
                                                for _ in range(NEIGHBOURS)))
                refused = sum(counts)
            finally:
                await client.close()
            after = await _metrics(kube)
        finally:
            for path in (resource_path(FLOWCONTROL, "flowschemas", name=NAME),
                         resource_path(FLOWCONTROL, "prioritylevelconfigurations", name=NAME)):
                with contextlib.suppress(KubeError):
                    await kube.delete(path)
        outcome = judge(before, after, NAME, refused)
        holder = stage.checker.holder
        after_fault = "kept the Lease" if holder == leader else f"Lease now {holder or 'free'}"
        return Outcome(outcome.fired, f"leader {leader} ({after_fault}): {outcome.what}")

    return apf_throttle
