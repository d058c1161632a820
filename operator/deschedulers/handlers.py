"""kopf handlers for ``Descheduler`` (berthmaster.io/v1alpha1): check, validate, render, run,
report.

Design: what runs, in order
- create / spec update / resume: first the administrator's limits (:mod:`.runs`): a policy
  ConfigMap outside the operator's namespace, an image not in ``descheduler.allowedImages`` or
  a ``system-*`` PriorityClass without the opt-in stops here — ``SpecAllowed=False`` naming the
  field and what to set, a Warning event per problem, no Job, and a CronJob made before is
  deleted (a ``spec.namespace`` other than the operator's is only ignored, with a
  ``NamespaceIgnored`` Warning event). Then the policy (inline ``spec.policy`` or the ConfigMap
  ``spec.policyConfigMap`` names, read in the operator's namespace only) is validated with the
  descheduler's own parser. An invalid one stops too — ``PolicyValid=False`` with every problem
  in the condition message, a Warning event ``InvalidPolicy``, and no Job. A ConfigMap that is
  not YAML is reported by ConfigMap, key and position only: its text never reaches the status.
  A valid policy is rendered by the pure ``build.build_children`` (ConfigMap, Job or CronJob, in
  the operator's namespace) and applied: created, or on conflict brought up to date (a Job is
  immutable and kept: its name carries the spec generation, so a changed spec gets a new Job).
  A schedule removed deletes the CronJob. All children carry an owner reference, so deleting
  the Descheduler lets the garbage collector clean up.
- every ``REPORT_INTERVAL`` seconds while a Descheduler exists or a run of one is unfinished
  (one loop, :class:`.periodic.Periodic`; :mod:`.reporter` decides, from kopf's watch of
  Deschedulers, so an operator without one asks nothing): the Jobs labelled
  ``berthmaster.io/descheduler``, listed in the operator's namespace (the operator's Role
  covers that namespace only, so it cannot watch Jobs cluster-wide as kopf's watches would) —
  for each Descheduler, the newest run's start time and outcome (Pending, Running, Succeeded,
  Failed) go into its status with a ``LastRunSucceeded`` condition; a finished run's evictions
  are added to ``descheduler_pods_evicted_total`` (``evictions``).
The API client is the operator's shared one (operator/client.py).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from typing import Any

import kopf
import yaml

from berthmaster.foundation.errors import PolicyError
from berthmaster.foundation.kube import CORE, KubeClient, KubeError, group_path, resource_path
from berthmaster.operator.client import operator_client as kube
from berthmaster.operator.deschedulers.build import (
    GROUP,
    OWNER_LABEL,
    PLURAL,
    POLICY_KEY,
    VERSION,
    build_children,
    cron_job_name,
    job_name,
    policy_text,
)
from berthmaster.operator.deschedulers.evictions import count_finished_run
from berthmaster.operator.deschedulers.periodic import deliver, start_watched
from berthmaster.operator.deschedulers.reporter import RunReporter
from berthmaster.operator.deschedulers.run_metrics import descheduler_seen
from berthmaster.operator.deschedulers.runs import (
    NAMESPACE_IGNORED,
    Refusal,
    RunSettings,
    namespace_notice,
    refusals,
)
from berthmaster.operator.deschedulers.status import (
    LAST_RUN_SUCCEEDED,
    METRICS_AVAILABLE,
    POLICY_VALID,
    READY,
    SPEC_ALLOWED,
    condition,
    merge_conditions,
    newest_run,
    run_outcome,
)
from berthmaster.operator.retrying import transient_only
from berthmaster.scheduler.descheduler.policy import DeschedulerPolicy, parse_policy
from berthmaster.scheduler.descheduler.usage_metrics import (
    APISERVICE_PATH,
    REASON_UNAVAILABLE,
    apiservice_problem,
)

log = logging.getLogger("berthmaster.operator.deschedulers")

REPORT_INTERVAL = 5.0
PATHS = {
    "ConfigMap": (CORE, "configmaps"),
    "Job": (group_path("batch", "v1"), "jobs"),
    "CronJob": (group_path("batch", "v1"), "cronjobs"),
}


@functools.cache
def run_settings() -> RunSettings:
    """The administrator's limits, read once from the environment the chart sets."""
    return RunSettings.from_environment()


class PolicyUnavailable(Exception):
    """The policy ConfigMap (or its key) does not exist yet."""


async def read_policy(client: KubeClient, body: Mapping[str, Any], namespace: str
                      ) -> tuple[str, str]:
    """The policy text and where it came from (for messages)."""
    spec = body.get("spec") or {}
    if spec.get("policy") is not None:
        return policy_text(spec["policy"]), "spec.policy"
    ref = spec.get("policyConfigMap") or {}
    key = ref.get("key") or POLICY_KEY
    where = f"ConfigMap {namespace}/{ref.get('name')} key {key!r}"
    try:
        config_map = await client.get(resource_path(CORE, "configmaps", namespace, ref.get("name")))
    except KubeError as error:
        if error.not_found:
            raise PolicyUnavailable(
                f"ConfigMap {namespace}/{ref.get('name')} not found; create it with the policy "
                f"under key {key!r}") from error
        raise
    text = (config_map.get("data") or {}).get(key)
    if text is None:
        raise PolicyUnavailable(f"ConfigMap {namespace}/{ref.get('name')} has no key {key!r}; "
                                "put the policy file there or set spec.policyConfigMap.key")
    return str(text), where


def check_policy(text: str, source: str) -> DeschedulerPolicy:
    """Validate a policy; PolicyError lists every problem. A YAML error is told by position
    alone (line and column), never with the text around it: the ConfigMap's content stays out of
    the Descheduler's status and events."""
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        position = ""
        if isinstance(error, yaml.MarkedYAMLError) and error.problem_mark is not None:
            mark = error.problem_mark
            position = f" at line {mark.line + 1}, column {mark.column + 1}"
        raise PolicyError(source, [f"not valid YAML or JSON{position}; fix the policy file "
                                   "there"]) from None
    return parse_policy(document, source)


def _path(obj: dict[str, Any], with_name: bool = True) -> str:
    api, plural = PATHS[obj["kind"]]
    meta = obj["metadata"]
    return resource_path(api, plural, meta["namespace"], meta["name"] if with_name else None)


async def apply(client: KubeClient, obj: dict[str, Any]) -> None:
    """Create, or bring an existing object up to date (Jobs are immutable: kept as they are)."""
    try:
        await client.create(_path(obj, with_name=False), obj)
    except KubeError as error:
        if not error.conflict:
            raise
        if obj["kind"] == "Job":
            return
        update = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
        await client.patch(_path(obj), update, kind="merge")


async def delete_cron_job(client: KubeClient, body: Mapping[str, Any], namespace: str) -> None:
    try:
        await client.delete(resource_path(group_path("batch", "v1"), "cronjobs", namespace,
                                          cron_job_name(body)))
    except KubeError as error:
        if not error.not_found:
            raise


async def refuse(client: KubeClient, body: kopf.Body, patch: kopf.Patch,
                 conditions: list[dict[str, Any]], generation: int | None,
                 found: list[Refusal], namespace: str) -> None:
    message = "; ".join(r.message for r in found)
    reason = found[0].reason
    patch.status["conditions"] = merge_conditions(
        conditions,
        condition(conditions, SPEC_ALLOWED, False, reason, message, generation),
        condition(conditions, READY, False, reason, "not allowed here; no Job was created",
                  generation))
    patch.status["message"] = message
    for refusal in found:
        kopf.warn(body, reason=refusal.reason, message=refusal.message)
    await delete_cron_job(client, body, namespace)


@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL, field="spec")
@kopf.on.resume(GROUP, VERSION, PLURAL)
@transient_only
async def descheduler_reconcile(body: kopf.Body, status: kopf.Status, patch: kopf.Patch,
                                **_: Any) -> None:
    client = await kube()
    settings = run_settings()
    namespace = settings.namespace
    conditions = list(status.get("conditions") or [])
    generation = body["metadata"].get("generation")
    patch.status["observedGeneration"] = generation
    found = refusals(body, settings)
    if found:
        await refuse(client, body, patch, conditions, generation, found, namespace)
        return
    notice = namespace_notice(body, settings)
    if notice is not None:
        kopf.warn(body, reason=NAMESPACE_IGNORED, message=notice)
    allowed = condition(conditions, SPEC_ALLOWED, True,
                        "Allowed" if notice is None else NAMESPACE_IGNORED,
                        notice or "the spec is within the administrator's limits", generation)
    source = "spec.policy"
    try:
        text, source = await read_policy(client, body, namespace)
        policy = check_policy(text, source)
    except PolicyUnavailable as missing:
        patch.status["conditions"] = merge_conditions(
            conditions, allowed,
            condition(conditions, POLICY_VALID, False, "PolicyNotFound", str(missing), generation),
            condition(conditions, READY, False, "PolicyNotFound", str(missing), generation))
        patch.status["message"] = str(missing)
        kopf.warn(body, reason="PolicyNotFound", message=str(missing))
        raise kopf.TemporaryError(str(missing), delay=30) from missing
    except PolicyError as invalid:
        report_invalid_policy(body, patch, conditions, allowed, invalid, source)
        return
    if policy.uses_actual_usage:
        await require_metrics_api(client, body, patch, conditions, allowed)
    await run_policy(client, body, status, patch, conditions, allowed, text)


async def require_metrics_api(client: KubeClient, body: kopf.Body, patch: kopf.Patch,
                              conditions: list[Any], allowed: dict[str, Any]) -> None:
    """A policy that balances by actual usage needs ``metrics.k8s.io``: without it, no Job (so
    nothing is evicted), MetricsAvailable and Ready False, a Warning event, and a retry in a
    minute (the metrics API may be installed later)."""
    problem = apiservice_problem(await client.get_if_exists(APISERVICE_PATH))
    generation = body["metadata"].get("generation")
    if problem is None:
        conditions[:] = merge_conditions(conditions, condition(
            conditions, METRICS_AVAILABLE, True, "Available",
            "the metrics API (metrics.k8s.io) is available", generation))
        return
    patch.status["conditions"] = merge_conditions(
        conditions, allowed,
        condition(conditions, POLICY_VALID, True, "Valid", "the policy is valid", generation),
        condition(conditions, METRICS_AVAILABLE, False, REASON_UNAVAILABLE, problem, generation),
        condition(conditions, READY, False, REASON_UNAVAILABLE,
                  "the policy balances by actual usage and the metrics API is missing; no Job "
                  "was created", generation))
    patch.status["message"] = problem
    kopf.warn(body, reason=REASON_UNAVAILABLE, message=problem)
    raise kopf.TemporaryError(problem, delay=60)


def report_invalid_policy(body: kopf.Body, patch: kopf.Patch, conditions: list[Any],
                          allowed: dict[str, Any], invalid: PolicyError, source: str) -> None:
    """PolicyValid and Ready False with every problem, and an InvalidPolicy event."""
    generation = body["metadata"].get("generation")
    message = "; ".join(invalid.problems)
    if source != "spec.policy":
        message = f"{source}: {message}"
    patch.status["conditions"] = merge_conditions(
        conditions, allowed,
        condition(conditions, POLICY_VALID, False, "InvalidPolicy", message, generation),
        condition(conditions, READY, False, "InvalidPolicy",
                  "the policy is invalid; no Job was created", generation))
    patch.status["message"] = f"invalid policy: {message}"
    kopf.warn(body, reason="InvalidPolicy", message=message)


async def run_policy(client: KubeClient, body: kopf.Body, status: kopf.Status,
                     patch: kopf.Patch, conditions: list[Any], allowed: dict[str, Any],
                     text: str) -> None:
    """Apply the Job or CronJob that runs the valid policy ``text``, and report it Ready."""
    settings = run_settings()
    namespace = settings.namespace
    generation = body["metadata"].get("generation")
    children = build_children(body, text, settings)
    for child in children:
        await apply(client, child)
    scheduled = bool((body.get("spec") or {}).get("schedule"))
    if not scheduled:
        await delete_cron_job(client, body, namespace)
    run = children[-1]["metadata"]["name"]
    ready_message = (f"CronJob {namespace}/{run} scheduled" if scheduled
                     else f"Job {namespace}/{run} created")
    patch.status["conditions"] = merge_conditions(
        conditions, allowed,
        condition(conditions, POLICY_VALID, True, "Valid", "the policy is valid", generation),
        condition(conditions, READY, True, "CronJobScheduled" if scheduled else "JobCreated",
                  ready_message, generation))
    patch.status["message"] = ready_message
    if not scheduled:
        patch.status["lastJobName"] = job_name(body)
        if status.get("lastJobName") != job_name(body):
            patch.status["lastRunOutcome"] = "Pending"
    kopf.info(body, reason="Reconciled", message=ready_message)


def run_report(job: Mapping[str, Any], status: Mapping[str, Any]) -> dict[str, Any] | None:
    """The status fields the newest run changes; None when the status already says it (pure)."""
    meta = job.get("metadata") or {}
    started = (job.get("status") or {}).get("startTime") or meta.get("creationTimestamp")
    if status.get("lastRunTime") and started and started < status["lastRunTime"]:
        return None  # an older run reporting late
    outcome = run_outcome(job)
    conditions = list(status.get("conditions") or [])
    update: dict[str, Any] = {"lastJobName": meta.get("name"), "lastRunOutcome": outcome}
    if started:
        update["lastRunTime"] = started
    if outcome in ("Succeeded", "Failed"):
        update["conditions"] = merge_conditions(conditions, condition(
            conditions, LAST_RUN_SUCCEEDED, outcome == "Succeeded",
            "JobSucceeded" if outcome == "Succeeded" else "JobFailed",
            f"Job {meta.get('namespace')}/{meta.get('name')} {outcome.lower()}"))
    if all(status.get(k) == v for k, v in update.items()):
        return None
    return update


async def report_runs(client: KubeClient, namespace: str) -> bool:
    """One look at every Descheduler's Jobs: count finished runs, report each owner's newest.
    True when a run is still unfinished (the reporter keeps looking for it)."""
    jobs, _version = await client.list_all(
        resource_path(group_path("batch", "v1"), "jobs", namespace), labelSelector=OWNER_LABEL)
    by_owner: dict[str, list[dict[str, Any]]] = {}
    unfinished = False
    for job in jobs:
        await count_finished_run(client, job)
        unfinished = unfinished or run_outcome(job) not in ("Succeeded", "Failed")
        by_owner.setdefault(job["metadata"]["labels"][OWNER_LABEL], []).append(job)
    for owner, owned in by_owner.items():
        newest = newest_run(owned)
        path = resource_path(group_path(GROUP, VERSION), PLURAL, None, owner)
        descheduler = await client.get_if_exists(path)
        if newest is None or descheduler is None:
            continue
        update = run_report(newest, descheduler.get("status") or {})
        if update is not None:
            await client.patch(path + "/status", {"status": update}, kind="merge")
    return unfinished


REPORTER = "descheduler-run-reporter"


@kopf.on.startup()
async def start_run_reporter(memo: kopf.Memo, **_: Any) -> None:
    client, namespace = await kube(), run_settings().namespace
    start_watched(memo, REPORTER, RunReporter(lambda: report_runs(client, namespace)),
                  REPORT_INTERVAL, f"cannot report descheduler runs in namespace {namespace}")


@kopf.on.event(GROUP, VERSION, PLURAL)
async def descheduler_event(type: str | None, body: kopf.Body, memo: kopf.Memo,
                            **_: Any) -> None:
    if type != "DELETED":
        descheduler_seen(str(body["metadata"]["name"]))
    deliver(memo, REPORTER, type, body)
