"""The autoscaler's node taints: add and remove them without losing anyone else's change,
and clean what a previous run left behind.

Design, after upstream cluster-autoscaler's ``utils/taints/taints.go``:

- ``ToBeDeletedByClusterAutoscaler`` (NoSchedule, value: the Unix time it was set) marks a node
  being removed; ``DeletionCandidateOfClusterAutoscaler`` (PreferNoSchedule) is upstream's soft
  taint on unneeded nodes. berthmaster sets only the first; it removes both.
- A write replaces the node's whole ``spec.taints`` list, so it is made on the node as just
  read and carries that read's ``resourceVersion``: a taint another controller added meanwhile
  makes the write fail with 409 and the node is read again and the change re-applied (as
  upstream's ``AddTaints`` / ``CleanTaints`` retry conflicts for at most 5 s, 750 ms apart). A
  node that already has (or no longer has) the taint is not written at all.
- At start (upstream's ``StaticAutoscaler.cleanUpIfRequired``, core/static_autoscaler.go, on
  its first ``RunOnce``): a process that died between tainting a node and giving its Machine
  back would leave the node unschedulable for ever, so every node's ``ToBeDeleted`` taint (and
  the cordon ``cordonNodeBeforeTerminating`` added with it) and ``DeletionCandidate`` taint are
  removed (``CleanAllToBeDeleted``, ``CleanAllDeletionCandidates``: berthmaster sets no soft
  taints, upstream's ``MaxBulkSoftTaintCount == 0`` case), each with upstream's
  ``ClusterAutoscalerCleanup`` event on the node.

The pure parts (:func:`with_taint`, :func:`without_taints`) decide; :func:`update_taints` does
the read-modify-write.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from berthmaster.foundation.kube import CORE, KubeClient, KubeError, resource_path

JSON = dict[str, Any]
log = logging.getLogger("berthmaster.operator.autoscaler")

TO_BE_DELETED_TAINT = "ToBeDeletedByClusterAutoscaler"
DELETION_CANDIDATE_TAINT = "DeletionCandidateOfClusterAutoscaler"
CLEANUP_REASON = "ClusterAutoscalerCleanup"  # upstream's event reason (CleanAllTaints)
CONFLICT_RETRY_DEADLINE = 5.0  # upstream's maxRetryDeadline
CONFLICT_RETRY_INTERVAL = 0.75  # upstream's conflictRetryInterval

# (new spec fields or None when nothing is to change) from the node as read
Change = Callable[[Mapping[str, Any]], JSON | None]
PostEvent = Callable[[Mapping[str, Any], str, str, str], Awaitable[None]]


def _taints(node: Mapping[str, Any]) -> list[JSON]:
    return list((node.get("spec") or {}).get("taints") or [])


def has_taint(node: Mapping[str, Any], key: str) -> bool:
    return any(t.get("key") == key for t in _taints(node))


def with_taint(node: Mapping[str, Any], taint: JSON, cordon: bool) -> JSON | None:
    """The spec fields that add ``taint`` (and cordon), or None when it is there already."""
    if has_taint(node, str(taint["key"])):
        return None
    spec: JSON = {"taints": [*_taints(node), taint]}
    if cordon:
        spec["unschedulable"] = True
    return spec


def without_taints(node: Mapping[str, Any], keys: Sequence[str], uncordon: bool
                   ) -> JSON | None:
    """The spec fields that remove the ``keys`` taints (and the cordon), or None when the
    node has none of them."""
    kept = [t for t in _taints(node) if t.get("key") not in keys]
    if len(kept) == len(_taints(node)):
        return None
    spec: JSON = {"taints": kept}
    if uncordon:
        spec["unschedulable"] = False
    return spec


async def update_taints(kube: KubeClient, node: Mapping[str, Any], change: Change,
                        clock: Callable[[], float] = time.monotonic) -> JSON | None:
    """Apply ``change`` to the node, guarded by its resourceVersion; on 409 read it again and
    retry until :data:`CONFLICT_RETRY_DEADLINE`. Returns the node as written (None: nothing
    to change). A node read from a cache is read again before deciding there is nothing to do,
    as upstream's ``refresh``."""
    name = node["metadata"]["name"]
    path = resource_path(CORE, "nodes", name=name)
    deadline = clock() + CONFLICT_RETRY_DEADLINE
    fresh: Mapping[str, Any] = node
    refreshed = False
    while True:
        spec = change(fresh)
        if spec is None:
            if refreshed:
                return None
            fresh, refreshed = await kube.get(path), True
            continue
        body = {"metadata": {"resourceVersion": fresh["metadata"].get("resourceVersion")},
                "spec": spec}
        try:
            written: JSON = await kube.patch(path, body)
            return written
        except KubeError as error:
            if not error.conflict or clock() >= deadline:
                raise
        await asyncio.sleep(CONFLICT_RETRY_INTERVAL)
        fresh, refreshed = await kube.get(path), True


async def clean_all(kube: KubeClient, nodes: Sequence[Mapping[str, Any]], keys: Sequence[str],
                    uncordon: bool, post_event: PostEvent) -> list[str]:
    """Upstream's ``CleanAllTaints``: remove the ``keys`` taints from every node that has one;
    a ``ClusterAutoscalerCleanup`` event says what was done (Normal) or failed (Warning).
    Returns the names of the nodes cleaned."""
    cleaned = []
    listed = ",".join(keys)
    for node in nodes:
        if not any(has_taint(node, key) for key in keys):
            continue
        name = node["metadata"]["name"]
        try:
            written = await update_taints(
                kube, node, lambda fresh: without_taints(fresh, keys, uncordon))
        except KubeError as error:
            if error.not_found:
                continue
            log.warning("could not clean %s from node %s: %s", listed, name, error)
            await post_event(node, CLEANUP_REASON,
                             f"failed to clean {listed} on node {name}: {error.message}",
                             "Warning")
            continue
        if written is not None:
            cleaned.append(name)
            log.info("removed %s taints from node %s", listed, name)
            await post_event(node, CLEANUP_REASON, f"removed {listed} taints from node {name}",
                             "Normal")
    return cleaned


async def clean_up_at_start(kube: KubeClient, nodes: Sequence[Mapping[str, Any]],
                            uncordon: bool, post_event: PostEvent) -> list[str]:
    """``cleanUpIfRequired``: the ToBeDeleted taints (with the cordon when
    ``cordonNodeBeforeTerminating``), then the DeletionCandidate ones."""
    cleaned = await clean_all(kube, nodes, [TO_BE_DELETED_TAINT], uncordon, post_event)
    soft = await clean_all(kube, nodes, [DELETION_CANDIDATE_TAINT], False, post_event)
    return sorted({*cleaned, *soft})
