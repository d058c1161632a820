"""kopf handlers for ``Descheduler`` (berthmaster.io/v1alpha1): validate, render, run, report.

Design: what runs, in order
- create / spec update / resume: read the policy (inline ``spec.policy`` or the ConfigMap named
  by ``spec.policyConfigMap``), validate it with the descheduler's own parser. An invalid policy
  stops here — ``PolicyValid=False`` with every problem in the condition message, a Warning
  event ``InvalidPolicy``, and no Job — so nothing ever runs a broken policy. A valid one is
  rendered by the pure ``build.build_children`` (ConfigMap, ServiceAccount, ClusterRole and
  binding, Job or CronJob) and applied: created, or on conflict brought up to date (a Job is
  immutable and kept: its name carries the spec generation, so a changed spec gets a new Job).
  A schedule removed deletes the CronJob. All children carry an owner reference, so deleting
  the Descheduler lets the garbage collector clean up.
- Job events (Jobs labelled ``berthmaster.io/descheduler``, selected on the server: other Jobs
  never reach the operator): the newest run's start time and
  outcome (Pending/Running/Succeeded/Failed) go into the owner's status with a
  ``LastRunSucceeded`` condition; a finished run's evictions are added to
  ``descheduler_pods_evicted_total`` (``evictions``).
The API client is the operator's shared one (operator/client.py).
"""

from __future__ import annotations

import logging
from typing import Any

import kopf

from berthmaster.errors import PolicyError
from berthmaster.kube import CORE, KubeClient, KubeError, group_path, resource_path
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
    namespace_of,
    policy_text,
)
from berthmaster.operator.deschedulers.evictions import count_finished_run
from berthmaster.operator.deschedulers.status import (
    LAST_RUN_SUCCEEDED,
    POLICY_VALID,
    READY,
    condition,
    merge_conditions,
    run_outcome,
)
from berthmaster.operator.retrying import transient_only
from berthmaster.scheduler.descheduler.policy import parse_policy_text

log = logging.getLogger("berthmaster.operator.deschedulers")

PATHS = {
    "ConfigMap": (CORE, "configmaps", True),
    "ServiceAccount": (CORE, "serviceaccounts", True),
    "ClusterRole": (group_path("rbac.authorization.k8s.io", "v1"), "clusterroles", False),
    "ClusterRoleBinding": (group_path("rbac.authorization.k8s.io", "v1"), "clusterrolebindings",
                           False),
    "Job": (group_path("batch", "v1"), "jobs", True),
    "CronJob": (group_path("batch", "v1"), "cronjobs", True),
}


class PolicyUnavailable(Exception):
    """The policy ConfigMap (or its key) does not exist yet."""


async def read_policy(client: KubeClient, body: kopf.Body) -> str:
    spec = body.get("spec") or {}
    if spec.get("policy") is not None:
        return policy_text(spec["policy"])
    ref = spec.get("policyConfigMap") or {}
    namespace = ref.get("namespace") or namespace_of(body)
    key = ref.get("key") or POLICY_KEY
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
    return str(text)


def _path(obj: dict[str, Any], with_name: bool = True) -> str:
    api, plural, namespaced = PATHS[obj["kind"]]
    meta = obj["metadata"]
    return resource_path(api, plural, meta.get("namespace") if namespaced else None,
                         meta["name"] if with_name else None)


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


@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL, field="spec")
@kopf.on.resume(GROUP, VERSION, PLURAL)
@transient_only
async def descheduler_reconcile(body: kopf.Body, status: kopf.Status, patch: kopf.Patch,
                                **_: Any) -> None:
    client = await kube()
    conditions = list(status.get("conditions") or [])
    generation = body["metadata"].get("generation")
    patch.status["observedGeneration"] = generation
    try:
        text = await read_policy(client, body)
        parse_policy_text(text, source="spec.policy")
    except PolicyUnavailable as missing:
        patch.status["conditions"] = merge_conditions(
            conditions,
            condition(conditions, POLICY_VALID, False, "PolicyNotFound", str(missing), generation),
            condition(conditions, READY, False, "PolicyNotFound", str(missing), generation))
        patch.status["message"] = str(missing)
        kopf.warn(body, reason="PolicyNotFound", message=str(missing))
        raise kopf.TemporaryError(str(missing), delay=30) from missing
    except PolicyError as invalid:
        message = "; ".join(invalid.problems)
        patch.status["conditions"] = merge_conditions(
            conditions,
            condition(conditions, POLICY_VALID, False, "InvalidPolicy", message, generation),
            condition(conditions, READY, False, "InvalidPolicy",
                      "the policy is invalid; no Job was created", generation))
        patch.status["message"] = f"invalid policy: {message}"
        kopf.warn(body, reason="InvalidPolicy", message=message)
        return
    children = build_children(body, text)
    for child in children:
        await apply(client, child)
    scheduled = bool((body.get("spec") or {}).get("schedule"))
    if not scheduled:
        try:
            await client.delete(resource_path(group_path("batch", "v1"), "cronjobs",
                                              namespace_of(body), cron_job_name(body)))
        except KubeError as error:
            if not error.not_found:
                raise
    run = children[-1]["metadata"]["name"]
    ready_message = (f"CronJob {namespace_of(body)}/{run} scheduled" if scheduled
                     else f"Job {namespace_of(body)}/{run} created")
    patch.status["conditions"] = merge_conditions(
        conditions,
        condition(conditions, POLICY_VALID, True, "Valid", "the policy is valid", generation),
        condition(conditions, READY, True, "CronJobScheduled" if scheduled else "JobCreated",
                  ready_message, generation))
    patch.status["message"] = ready_message
    if not scheduled:
        patch.status["lastJobName"] = job_name(body)
        if status.get("lastJobName") != job_name(body):
            patch.status["lastRunOutcome"] = "Pending"
    kopf.info(body, reason="Reconciled", message=ready_message)


@kopf.on.startup()
def watch_only_descheduler_jobs(settings: kopf.OperatorSettings, **_: Any) -> None:
    """Only the Jobs a Descheduler made (they and the CronJob's template carry OWNER_LABEL, see
    build.py) are asked of the API server: other Jobs never reach the operator."""
    settings.watching.label_selectors["batch", "v1", "jobs"] = OWNER_LABEL


@kopf.on.event("batch", "v1", "jobs", labels={OWNER_LABEL: kopf.PRESENT})
async def descheduler_job_event(body: kopf.Body, type: str | None, **_: Any) -> None:
    if type == "DELETED":
        return
    owner = body["metadata"]["labels"][OWNER_LABEL]
    client = await kube()
    await count_finished_run(client, body)
    path = resource_path(group_path(GROUP, VERSION), PLURAL, None, owner)
    try:
        descheduler = await client.get(path)
    except KubeError as error:
        if error.not_found:
            return
        raise
    status = descheduler.get("status") or {}
    started = (body.get("status") or {}).get("startTime") or body["metadata"].get(
        "creationTimestamp")
    if status.get("lastRunTime") and started and started < status["lastRunTime"]:
        return  # an older run reporting late
    outcome = run_outcome(body)
    conditions = list(status.get("conditions") or [])
    update: dict[str, Any] = {"lastJobName": body["metadata"]["name"], "lastRunOutcome": outcome}
    if started:
        update["lastRunTime"] = started
    if outcome in ("Succeeded", "Failed"):
        update["conditions"] = merge_conditions(conditions, condition(
            conditions, LAST_RUN_SUCCEEDED, outcome == "Succeeded",
            "JobSucceeded" if outcome == "Succeeded" else "JobFailed",
            f"Job {body['metadata'].get('namespace')}/{body['metadata']['name']} "
            f"{outcome.lower()}"))
    if all(status.get(k) == v for k, v in update.items()):
        return
    await client.patch(path + "/status", {"status": update}, kind="merge")
