"""OpenShift 4's ``KubeDescheduler`` (operator.openshift.io/v1): its profiles, run every
``deschedulingIntervalSeconds`` through the Descheduler resource's pipeline.

Design: one function, :func:`sync`, does what openshift/cluster-kube-descheduler-operator's
``TargetConfigReconciler.sync`` (pkg/operator/target_config_reconciler.go) does for the object
named ``cluster`` in the operator's namespace, with a Job per run in place of the descheduler
Deployment's ``--descheduling-interval`` loop:

1. the spec becomes a DeschedulerPolicy (:func:`.profiles.expand`, pure) and is checked by the
   descheduler's own parser; a spec that cannot (conflicting, unknown or unsupported profiles,
   bad customizations, no interval) sets ``TargetConfigControllerDegraded=True`` with every
   problem in the message, posts one Warning event per problem, starts no run and stops an
   unfinished one — upstream scales its Deployment to 0 then;
2. the policy goes in the ConfigMap ``kubedescheduler-cluster-descheduler-policy-configmap``
   (build.build_config_map, as for a Descheduler);
3. the runs are the Descheduler's Job (build.build_job, ``--dry-run`` in ``Predictive`` mode,
   upstream's default), named ``...-job-<generation>-<start>``: a new one starts when the last
   one has finished and ``deschedulingIntervalSeconds`` have passed since it started (upstream's
   ``wait.NonSlidingUntil``), or at once when the spec changed, stopping an unfinished run of
   the old spec (upstream's rollout replaces its descheduler pod).
   The three newest finished runs are kept, as a CronJob keeps its history;
4. each finished run's counts (its termination message) go to ``descheduler_pods_evicted_total``
   (evictions.count_finished_run: a Predictive run counts what it would evict, as upstream's dry
   run does) and into one event on the KubeDescheduler: ``WouldEvict`` for a Predictive run,
   ``Evicted`` for an Automatic one;
5. the status: ``observedGeneration``, ``TargetConfigControllerDegraded=False``, and the newest
   run as a Descheduler reports it (``lastRunTime``, ``lastRunOutcome``, ``lastJobName``,
   ``LastRunSucceeded``). ``readyReplicas`` and ``generations`` describe upstream's Deployment
   and are not written.

:func:`sync` runs from the kopf handlers (create, spec update, resume) at once and from one loop
every :data:`TICK` seconds (a :class:`.periodic.Periodic`, started with the operator) over the
newest body kopf's watch delivered (:class:`Runner`), never two at a time (:data:`_LOCK`). No
finalizer: deleting the KubeDescheduler lets the garbage collector remove its ConfigMap and
Jobs.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import kopf

from berthmaster.foundation.errors import PolicyError
from berthmaster.foundation.kube import CORE, KubeClient, KubeError, group_path, resource_path
from berthmaster.foundation.times import parse_rfc3339
from berthmaster.operator import events
from berthmaster.operator.client import operator_client as kube
from berthmaster.operator.deschedulers.build import (
    KUBE_DESCHEDULER_API_VERSION,
    KUBE_DESCHEDULER_KIND,
    KUBE_DESCHEDULER_LABEL,
    build_config_map,
    build_job,
    job_name,
    policy_text,
)
from berthmaster.operator.deschedulers.evictions import count_finished_run
from berthmaster.operator.deschedulers.handlers import apply, run_report, run_settings
from berthmaster.operator.deschedulers.periodic import deliver, start_watched
from berthmaster.operator.deschedulers.profiles import (
    KubeDeschedulerInvalid,
    Problem,
    expand,
    protected_namespaces,
)
from berthmaster.operator.deschedulers.runs import RunSettings
from berthmaster.operator.deschedulers.status import (
    condition,
    merge_conditions,
    newest_run,
    run_outcome,
)
from berthmaster.operator.retrying import transient_only
from berthmaster.scheduler.descheduler.features import EVICTIONS_IN_BACKGROUND
from berthmaster.scheduler.descheduler.metrics import SUCCESS
from berthmaster.scheduler.descheduler.policy import parse_policy

log = logging.getLogger("berthmaster.operator.deschedulers")

GROUP, VERSION, PLURAL = "operator.openshift.io", "v1", "kubedeschedulers"
SINGLETON = "cluster"
DEGRADED = "TargetConfigControllerDegraded"
AUTOMATIC, PREDICTIVE = "Automatic", "Predictive"
GENERATION_LABEL = "operator.openshift.io/kubedescheduler-generation"
COMPONENT = "kube-descheduler-operator"
WOULD_EVICT, EVICTED = "WouldEvict", "Evicted"
RUN_STARTED = "DeschedulerRunStarted"
NOT_THE_SINGLETON = "NotTheSingleton"
KEEP_FINISHED = 3
TICK = 5.0
_LOCK = asyncio.Lock()

Obj = dict[str, Any]


def predictive(kd: Mapping[str, Any]) -> bool:
    """Upstream's CRD defaults ``mode`` to Predictive; only Automatic evicts."""
    return (kd.get("spec") or {}).get("mode") != AUTOMATIC


def run_owner(kd: Mapping[str, Any]) -> Obj:
    """The KubeDescheduler as the Descheduler builders read their owner."""
    meta = kd.get("metadata") or {}
    return {"apiVersion": KUBE_DESCHEDULER_API_VERSION, "kind": KUBE_DESCHEDULER_KIND,
            "metadata": {"name": meta.get("name"), "uid": meta.get("uid"),
                         "generation": meta.get("generation", 1)},
            "spec": {"dryRun": predictive(kd), "featureGates": feature_gates(kd)}}


def feature_gates(kd: Mapping[str, Any]) -> dict[str, bool]:
    """target_config_reconciler.go: devEnableEvictionsInBackground adds
    ``--feature-gates=EvictionsInBackground=true`` to the descheduler's arguments."""
    customizations = (kd.get("spec") or {}).get("profileCustomizations") or {}
    return ({EVICTIONS_IN_BACKGROUND: True}
            if customizations.get("devEnableEvictionsInBackground") else {})


def build_run(kd: Mapping[str, Any], settings: RunSettings, now: float) -> Obj:
    owner = run_owner(kd)
    job = build_job(owner, settings)
    job["metadata"]["name"] = f"{job_name(owner)}-{int(now)}"
    job["metadata"]["labels"][GENERATION_LABEL] = str(owner["metadata"]["generation"])
    return job


def started_at(job: Mapping[str, Any]) -> float:
    stamp = (job.get("status") or {}).get("startTime") or (
        job.get("metadata") or {}).get("creationTimestamp")
    parsed = parse_rfc3339(str(stamp)) if stamp else None
    return parsed.timestamp() if parsed is not None else 0.0


def next_run_in(jobs: Sequence[Mapping[str, Any]], interval: int, generation: int,
                now: float) -> float | None:
    """Seconds until the next run is due (0: now), or None while a run is unfinished (pure)."""
    newest = newest_run(jobs)
    if newest is None or outdated(newest, generation):
        return 0.0
    if run_outcome(newest) not in ("Succeeded", "Failed"):
        return None
    return max(0.0, started_at(newest) + interval - now)


def outdated(job: Mapping[str, Any], generation: int) -> bool:
    """A run of an older spec."""
    labels = (job.get("metadata") or {}).get("labels") or {}
    return labels.get(GENERATION_LABEL) != str(generation)


def unfinished(jobs: Sequence[Mapping[str, Any]]) -> list[str]:
    return [str(j["metadata"]["name"]) for j in jobs
            if run_outcome(j) not in ("Succeeded", "Failed")]


def superseded(jobs: Sequence[Mapping[str, Any]], generation: int) -> list[str]:
    """Unfinished runs of an older spec: stopped when the spec changes, as upstream's rollout
    replaces the descheduler pod (pure)."""
    return unfinished([j for j in jobs if outdated(j, generation)])


def finished_to_prune(jobs: Sequence[Mapping[str, Any]], keep: int = KEEP_FINISHED
                      ) -> list[str]:
    """Names of the finished runs beyond the ``keep`` newest (pure)."""
    finished = [j for j in jobs if run_outcome(j) in ("Succeeded", "Failed")]
    finished.sort(key=started_at, reverse=True)
    return [str(j["metadata"]["name"]) for j in finished[keep:]]


def run_summary(job: Mapping[str, Any], counts: Mapping[tuple[str, str, str, str, str], int],
                dry_run: bool) -> tuple[str, str]:
    """The event reason and message for a finished run's counts (pure)."""
    by_strategy: dict[str, int] = {}
    for (result, strategy, _profile, _namespace, _node), n in counts.items():
        if result == SUCCESS:
            by_strategy[strategy] = by_strategy.get(strategy, 0) + n
    total = sum(by_strategy.values())
    detail = ", ".join(f"{s}: {n}" for s, n in sorted(by_strategy.items()))
    name = (job.get("metadata") or {}).get("name")
    if dry_run:
        return WOULD_EVICT, (f"Predictive run {name} would evict {total} pod(s)"
                             + (f" ({detail})" if detail else "")
                             + "; set spec.mode: Automatic to evict")
    return EVICTED, f"run {name} evicted {total} pod(s)" + (f" ({detail})" if detail else "")


def singleton_problem(kd: Mapping[str, Any], namespace: str) -> Problem | None:
    meta = kd.get("metadata") or {}
    if meta.get("name") == SINGLETON and meta.get("namespace") == namespace:
        return None
    return Problem(NOT_THE_SINGLETON, (
        f"KubeDescheduler {meta.get('namespace')}/{meta.get('name')} is ignored: the operator "
        f"runs only KubeDescheduler {namespace}/{SINGLETON} (its configured namespace); "
        "create it there"))


def degraded_status(kd: Mapping[str, Any], invalid: KubeDeschedulerInvalid) -> Obj:
    status = kd.get("status") or {}
    conditions = list(status.get("conditions") or [])
    generation = (kd.get("metadata") or {}).get("generation")
    return {"observedGeneration": generation,
            "conditions": merge_conditions(conditions, condition(
                conditions, DEGRADED, True, invalid.reason, str(invalid), generation)),
            "message": str(invalid)}


def healthy_status(kd: Mapping[str, Any], newest: Mapping[str, Any] | None) -> Obj:
    status = dict(kd.get("status") or {})
    conditions = list(status.get("conditions") or [])
    generation = (kd.get("metadata") or {}).get("generation")
    mode = PREDICTIVE if predictive(kd) else AUTOMATIC
    message = f"descheduling every {(kd.get('spec') or {}).get('deschedulingIntervalSeconds')}s " \
              f"in {mode} mode"
    update: Obj = {"observedGeneration": generation, "message": message}
    status["conditions"] = merge_conditions(conditions, condition(
        conditions, DEGRADED, False, "AsExpected", message, generation))
    if newest is not None:
        update.update(run_report(newest, status) or {})
    update.setdefault("conditions", status["conditions"])
    return update


async def _post(client: KubeClient, kd: Mapping[str, Any], reason: str, message: str,
                event_type: str = "Normal") -> None:
    body = {"apiVersion": KUBE_DESCHEDULER_API_VERSION, "kind": KUBE_DESCHEDULER_KIND,
            "metadata": kd.get("metadata") or {}}
    await events.post(client, body, reason, message, datetime.now(UTC), event_type, COMPONENT)


async def _patch_status(client: KubeClient, kd: Mapping[str, Any], update: Obj) -> None:
    meta = kd["metadata"]
    path = resource_path(group_path(GROUP, VERSION), PLURAL, meta["namespace"], meta["name"])
    await client.patch(path + "/status", {"status": update}, kind="merge")


async def _refuse(client: KubeClient, kd: Mapping[str, Any],
                  invalid: KubeDeschedulerInvalid) -> None:
    update = degraded_status(kd, invalid)
    if update["conditions"] == list((kd.get("status") or {}).get("conditions") or []):
        return  # already reported
    for problem in invalid.problems:
        await _post(client, kd, problem.reason, problem.message, "Warning")
    await _patch_status(client, kd, update)


async def _policy(client: KubeClient, kd: Mapping[str, Any], settings: RunSettings) -> Obj:
    namespaces, _ = await client.list_all(resource_path(CORE, "namespaces"))
    protected = protected_namespaces((n["metadata"]["name"] for n in namespaces),
                                     settings.namespace)
    policy = expand(kd.get("spec") or {}, protected, settings.prometheus_url)
    try:
        parse_policy(policy, "the policy expanded from spec.profiles")
    except PolicyError as error:  # a gap between the expansion and the descheduler: say so
        raise KubeDeschedulerInvalid([Problem("InvalidPolicy", str(error))]) from error
    return policy


async def _report_finished(client: KubeClient, kd: Mapping[str, Any],
                           jobs: Sequence[Mapping[str, Any]], settings: RunSettings) -> None:
    for job in jobs:
        counts = await count_finished_run(client, job)
        if counts is None:
            continue
        command = job["spec"]["template"]["spec"]["containers"][0].get("command") or []
        reason, message = run_summary(job, counts, "--dry-run" in command)
        await _post(client, kd, reason, message)
    for name in finished_to_prune(jobs):
        await _delete_job(client, settings.namespace, name)


async def _delete_job(client: KubeClient, namespace: str, name: str) -> None:
    try:
        await client.delete(resource_path(group_path("batch", "v1"), "jobs", namespace, name),
                            {"propagationPolicy": "Background"})
    except KubeError as error:
        if not error.not_found:
            raise


async def sync(client: KubeClient, kd: Mapping[str, Any], settings: RunSettings,
               now: float | None = None) -> None:
    """Bring the KubeDescheduler's policy, runs and status up to date (see the module doc)."""
    async with _LOCK:
        problem = singleton_problem(kd, settings.namespace)
        if problem is not None:
            await _refuse(client, kd, KubeDeschedulerInvalid([problem]))
            return
        jobs, _ = await client.list_all(
            resource_path(group_path("batch", "v1"), "jobs", settings.namespace),
            labelSelector=f"{KUBE_DESCHEDULER_LABEL}={kd['metadata']['name']}")
        try:
            policy = await _policy(client, kd, settings)
        except KubeDeschedulerInvalid as invalid:
            # upstream scales its descheduler to zero: no run of an older spec goes on either
            for name in unfinished(jobs):
                await _delete_job(client, settings.namespace, name)
            await _refuse(client, kd, invalid)
            return
        owner = run_owner(kd)
        config_map = build_config_map(owner, policy_text(policy), settings)
        existing = await client.get_if_exists(resource_path(
            CORE, "configmaps", settings.namespace, config_map["metadata"]["name"]))
        if existing is None or existing.get("data") != config_map["data"]:
            await apply(client, config_map)
        await _report_finished(client, kd, jobs, settings)
        now = time.time() if now is None else now
        due = next_run_in(jobs, int((kd.get("spec") or {})["deschedulingIntervalSeconds"]),
                          int(owner["metadata"]["generation"]), now)
        newest = newest_run(jobs)
        for name in superseded(jobs, int(owner["metadata"]["generation"])):
            await _delete_job(client, settings.namespace, name)
        if due == 0.0:
            job = build_run(kd, settings, now)
            await apply(client, job)
            newest = await client.get_if_exists(resource_path(
                group_path("batch", "v1"), "jobs", settings.namespace, job["metadata"]["name"]))
            mode = "Predictive (dry run)" if predictive(kd) else "Automatic"
            await _post(client, kd, RUN_STARTED,
                        f"Job {settings.namespace}/{job['metadata']['name']} started ({mode})")
        update = healthy_status(kd, newest)
        status = kd.get("status") or {}
        if any(status.get(k) != v for k, v in update.items()):
            await _patch_status(client, kd, update)


@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL, field="spec")
@kopf.on.resume(GROUP, VERSION, PLURAL)
@transient_only
async def kube_descheduler_reconcile(body: kopf.Body, **_: Any) -> None:
    await sync(await kube(), dict(body), run_settings())


class Runner:
    """What the loop syncs: the newest body kopf's watch delivered of the KubeDescheduler this
    operator runs (none: the loop asks the API server nothing, so an operator without a
    KubeDescheduler costs no request)."""

    def __init__(self, client: KubeClient, settings: RunSettings):
        self.client = client
        self.settings = settings
        self.latest: Obj | None = None

    def seen(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        meta = body.get("metadata") or {}
        if (meta.get("namespace"), meta.get("name")) != (self.settings.namespace, SINGLETON):
            return
        self.latest = None if event_type == "DELETED" else dict(body)

    async def step(self) -> None:
        if self.latest is not None:
            await sync(self.client, self.latest, self.settings)


RUNNER = "kubedescheduler-runner"


@kopf.on.startup()
async def start_kube_descheduler_runner(memo: kopf.Memo, **_: Any) -> None:
    settings = run_settings()
    start_watched(memo, RUNNER, Runner(await kube(), settings), TICK,
                  f"cannot sync KubeDescheduler {settings.namespace}/{SINGLETON}")


@kopf.on.event(GROUP, VERSION, PLURAL)
async def kube_descheduler_event(type: str | None, body: kopf.Body, memo: kopf.Memo,
                                 **_: Any) -> None:
    deliver(memo, RUNNER, type, body)
