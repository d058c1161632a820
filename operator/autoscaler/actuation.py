"""Removing a node once it is chosen: which DaemonSet pods go too, how long a refused eviction
is retried, and how long the node waits for ``delay-deletion`` annotations.

Design (upstream cluster-autoscaler core/scaledown/actuation, with the defaults of its flags in
config/flags/flags.go; OpenShift's ClusterAutoscaler has no field for any of them):

- :func:`daemonset_pods_to_evict`: a node with pods to move ("occupied") has its DaemonSet pods
  evicted too (``--daemonset-eviction-for-occupied-nodes``, true), an empty one does not
  (``--daemonset-eviction-for-empty-nodes``, false); a DaemonSet pod's own
  ``cluster-autoscaler.kubernetes.io/enable-ds-eviction: "true"``/``"false"`` overrides that
  (utils/daemonset ``PodsToEvict``). Those evictions are best effort: a refusal never stops the
  removal (drain.go ``DrainNode``, bestEffortEvictionPods).
- :func:`retry_until`: an eviction that fails (a PodDisruptionBudget's 429, or any other error
  but NotFound) is tried again every ``EVICTION_RETRY_TIME`` (10 s) until
  ``MAX_POD_EVICTION_TIME`` (``--max-pod-eviction-time``, 2 min) after the node's drain began;
  only then does the removal fail (drain.go ``evictPod``, ``initiateEviction``).
- :func:`has_delay_deletion`: after the drain, a node carrying an annotation whose key starts
  with ``delay-deletion.cluster-autoscaler.kubernetes.io/`` is given back only once every such
  annotation is gone, checked every 5 s, or after ``NODE_DELETION_DELAY_TIMEOUT``
  (``--node-deletion-delay-timeout``, 2 min), whichever comes first
  (actuation/delay.go ``WaitForDelayDeletion``).

The waits run inside the loop (upstream drains in a goroutine and keeps looping): a node whose
pods keep refusing holds that loop for at most ``MAX_POD_EVICTION_TIME`` plus
``NODE_DELETION_DELAY_TIMEOUT``; clocks and sleeps are passed in, so the decisions are tested
without waiting.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

from berthmaster.scheduler.pods import is_daemonset_pod, is_mirror_pod

JSON = dict[str, Any]
E = TypeVar("E")

DAEMONSET_EVICTION_FOR_EMPTY_NODES = False
DAEMONSET_EVICTION_FOR_OCCUPIED_NODES = True
ENABLE_DS_EVICTION_KEY = "cluster-autoscaler.kubernetes.io/enable-ds-eviction"
MAX_POD_EVICTION_TIME = 120.0  # --max-pod-eviction-time
EVICTION_RETRY_TIME = 10.0  # actuation/drain.go DefaultEvictionRetryTime
DELAY_DELETION_PREFIX = "delay-deletion.cluster-autoscaler.kubernetes.io/"
NODE_DELETION_DELAY_TIMEOUT = 120.0  # --node-deletion-delay-timeout
DELAY_DELETION_POLL = 5.0  # actuation/delay.go's poll interval


def daemonset_pods_to_evict(pods: Sequence[JSON], occupied: bool) -> list[JSON]:
    """The node's DaemonSet pods (mirror pods never) that its removal evicts, best effort."""
    default = DAEMONSET_EVICTION_FOR_OCCUPIED_NODES if occupied \
        else DAEMONSET_EVICTION_FOR_EMPTY_NODES
    chosen = []
    for pod in pods:
        if is_mirror_pod(pod) or not is_daemonset_pod(pod):
            continue
        own = ((pod.get("metadata") or {}).get("annotations") or {}).get(ENABLE_DS_EVICTION_KEY)
        if (own == "true") or (own != "false" and default):
            chosen.append(pod)
    return chosen


def has_delay_deletion(node: Mapping[str, Any]) -> bool:
    """Some annotation of the node asks its deletion to wait."""
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    return any(str(key).startswith(DELAY_DELETION_PREFIX) for key in annotations)


async def retry_until(attempt: Callable[[], Awaitable[E | None]], deadline: float,
                      interval: float, clock: Callable[[], float],
                      sleep: Callable[[float], Awaitable[None]]) -> E | None:
    """Run ``attempt`` until it returns None (done): at once, then after each ``interval`` for
    as long as ``clock()`` is before ``deadline`` after that sleep (upstream's
    ``for first := true; first || time.Now().Before(retryUntil); time.Sleep(...)``); the last
    problem it returned when it never got done."""
    while True:
        problem = await attempt()
        if problem is None:
            return None
        await sleep(interval)
        if clock() >= deadline:
            return problem
