"""The placement admission webhook under faults: two ``berthmaster admission`` replicas behind
the campaign's round-robin proxy (:mod:`berthmaster.tooling.chaos.rrproxy`), and the
``admission-kill`` fault.

Set-up (docs/admission.md, "Turning it on", the chart's way): both replicas serve the local
control plane's serving certificate (``--webhook-cert-file``, valid for 127.0.0.1), so they
register nothing; the campaign writes the two webhook configurations itself
(:func:`configurations`, built by the webhook's own ``registration.build_configurations``),
pointing at the proxy, with ``failurePolicy: Ignore`` and a ``namespaceSelector`` narrowed to
the workload's namespace. That namespace carries PodTolerationRestriction's
``scheduler.alpha.kubernetes.io/defaultTolerations`` annotation with one toleration
(:data:`MARK`) no node taints: the mutation is observable on every admitted pod and changes no
placement.

Invariants: a pod create refused because of the webhook is a breach (under ``Ignore`` the API
server admits what it cannot send, k8s.io/apiserver/pkg/admission/plugin/webhook/mutating/
dispatcher.go); the pods the fault creates while one replica is dead and the other up must
carry :data:`MARK` (the proxy fails over to the live replica), a breach otherwise. The probes
start once the proxy has closed the dead replica's connections: the API server sends reviews
over long-lived HTTP/2 connections, and one in flight on the dead replica's fails and is
admitted unmutated under ``Ignore`` (seen in a run before this wait), which is what ``Ignore``
means, not a fault of the webhook. The fault is
fired when the replica died and its probe pods were created; the supervisor restarts it.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import signal
from collections.abc import Awaitable, Callable
from typing import Any

from berthmaster.foundation.kube import CORE, KubeError, resource_path
from berthmaster.operator.admission.podtolerationrestriction import DEFAULT_TOLERATIONS
from berthmaster.operator.admission.registration import Target, build_configurations
from berthmaster.tooling.chaos import faults
from berthmaster.tooling.chaos.faults import Launch, Outcome, Stage, fired, not_fired
from berthmaster.tooling.chaos.rrproxy import RoundRobinProxy
from berthmaster.tooling.chaos.workload import WORK, bare_pod
from berthmaster.tooling.python import BERTHMASTER_CLI

NAME = "chaos-placement"
REPLICAS = ("admission-a", "admission-b")
MARK = {"key": "chaos.berthmaster.io/admitted", "operator": "Exists", "effect": "NoSchedule"}
TIMEOUT_SECONDS = 10  # the configurations' timeoutSeconds: a loaded 2-core machine is slow
PROBES = 3  # pods the fault creates while a replica is dead
SETTLE = 1.0  # seconds the API server has to see the dead replica's connection closed

Obj = dict[str, Any]


def configurations(url: str, ca_bundle: str, own_namespace: str) -> tuple[Obj, Obj]:
    """The webhook's own configurations, ``Ignore``, for the workload's namespace only."""
    mutating, validating = build_configurations(
        NAME, Target(url=url), ca_bundle, own_namespace, failure_policy="Ignore",
        timeout=TIMEOUT_SECONDS)
    for configuration in (mutating, validating):
        for webhook in configuration["webhooks"]:
            webhook["namespaceSelector"] = {
                "matchLabels": {"kubernetes.io/metadata.name": WORK}}
    return mutating, validating


def namespace_patch() -> Obj:
    """The workload namespace's default toleration (PodTolerationRestriction)."""
    return {"metadata": {"annotations": {DEFAULT_TOLERATIONS: json.dumps([MARK])}}}


def marked(pod: Obj) -> bool:
    """Whether the webhook's mutation is on the pod."""
    return any(all(t.get(k) == v for k, v in MARK.items())
               for t in (pod.get("spec") or {}).get("tolerations") or ())


def created_after(pod: Obj, since: float) -> bool:
    """Whether the pod's creationTimestamp (whole seconds) is after ``since`` (epoch)."""
    stamp = (pod.get("metadata") or {}).get("creationTimestamp") or ""
    try:
        when = datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return False
    return when.timestamp() > since


def webhook_refusal(error: KubeError) -> bool:
    """A create the API server refused because of an admission webhook (a denial, or a call
    that failed under ``Fail``)."""
    return "webhook" in error.message


def launch(kubeconfig: str, namespace: str, listen: int, health: int, cert: str,
           key: str) -> Launch:
    """One replica: serves the given certificate on ``listen``, /readyz on ``health``."""
    readyz = f"http://127.0.0.1:{health}/readyz"
    return Launch(
        lambda life: [*BERTHMASTER_CLI, "admission", "--kubeconfig",
                      kubeconfig, "--listen", f"127.0.0.1:{listen}", "--namespace", namespace,
                      "--name", NAME, "--webhook-cert-file", cert, "--webhook-key-file", key,
                      "--failure-policy", "Ignore", "--timeout-seconds", str(TIMEOUT_SECONDS),
                      "--metrics-bind-address", f"127.0.0.1:{health}"],
        f"https://127.0.0.1:{listen}", lambda: faults.http_ok(readyz))


def fault(proxy: Callable[[], RoundRobinProxy | None]) -> Callable[[Stage], Awaitable[Outcome]]:
    """The fault, given the proxy in front of the replicas."""

    async def admission_kill(stage: Stage) -> Outcome:
        return await _kill(stage, proxy())

    return admission_kill


async def _kill(stage: Stage, proxy: RoundRobinProxy | None) -> Outcome:
    """kill -9 of one replica while pods are created (the churn's and :data:`PROBES` of the
    fault's own); the supervisor restarts it. The probes wait until the proxy has closed the
    dead replica's connections (a review in flight on one when it died is admitted unmutated
    under ``Ignore``; that is no breach) and the API server had
    :data:`SETTLE` seconds to notice."""
    if proxy is None:
        return not_fired("no proxy in front of the webhook")
    name = stage.rng.choice(REPLICAS)
    other = REPLICAS[1 - REPLICAS.index(name)]
    if not stage.component(other).alive():
        return not_fired(f"{other} was not running")
    async with stage.holding(name):
        pid = stage.component(name).pid
        killed = faults.signal_pid(pid, signal.SIGKILL)
        faults.reap(pid)
        killed = killed and await faults.wait_until(
            lambda: not stage.component(name).alive(), 5)
        if not killed:
            return not_fired(f"{name} was not running")
        index = REPLICAS.index(name)
        closed = await faults.wait_until(lambda: proxy.open.get(index, 0) == 0, 10)
        await asyncio.sleep(SETTLE)
        if not closed:
            return not_fired(f"the proxy still held {name}'s connections 10s after it died")
        created = await _probe(stage, name)
    back = await faults.wait_until(lambda: stage.component(name).alive()
                                   and stage.launches[name].ready(), 60)
    if not back:
        stage.note(f"{name} not restarted by the supervisor within 60s")
    if not created:
        return not_fired(f"no probe pod could be created while {name} was dead")
    return fired(f"{name} killed; {created} pods admitted by {other} meanwhile, "
                 f"{'restarted' if back else 'NOT restarted'} by the supervisor")


async def _probe(stage: Stage, dead: str) -> int:
    """Create the probe pods; each must be admitted and carry the mark. Returns how many were
    created."""
    pods = resource_path(CORE, "pods", WORK)
    created = 0
    for _ in range(PROBES):
        stage.serial += 1
        name = f"admitted-{stage.serial}"
        try:
            pod = await stage.kube.create(pods, bare_pod(name, "plain",
                                                         stage.checker.scheduler_name,
                                                         stage.rng))
        except KubeError as error:
            if webhook_refusal(error):
                stage.checker.breach(f"{WORK}/{name}: refused because of the webhook under "
                                     f"failurePolicy Ignore while {dead} was dead: "
                                     f"{error.message[:160]}")
            continue
        created += 1
        if not marked(pod):
            stage.checker.breach(f"{WORK}/{name}: admitted while {dead} was dead and the other "
                                 "replica up, but without the webhook's default toleration")
        with contextlib.suppress(KubeError):
            await stage.kube.delete(resource_path(CORE, "pods", WORK, name))
    return created
