"""What the autoscaler keeps of each Pod its watch cache holds: a bounded record per pod.

Design: the autoscaler watches every active pod of the cluster (:mod:`.watches`), as upstream's
cluster-autoscaler does through its pod listers; a decoded pod keeps everything the API server
sent (managedFields, every annotation, env, probes, the whole status), several kilobytes each.
:func:`trim_pod` reduces it, as it arrives, to what the loop reads, on top of the scheduler's
own trim (:func:`berthmaster.scheduler.daemon.trim.trim_pod`, what placement reads, shared with
the simulation that asks the placement engine):

- the annotations the autoscaler reads: ``safe-to-evict`` and ``safe-to-evict-local-volumes``
  (:mod:`.drainability`), ``pod-scale-up-delay`` (:mod:`.scaleup`) and the mirror-pod
  annotation (a static pod goes with its node);
- the local-storage volumes (emptyDir, hostPath: ``skipNodesWithLocalStorage``), reduced to
  their name and kind;
- the ``PodScheduled`` condition's type, status and reason (what marks a pod unschedulable).

Decisions made on the trimmed pod are those the whole pod gets
(tests/unit/autoscaler/test_pod_trim.py). What a write needs of a pod is read fresh: a node
being removed has its pods listed again from the API server before any eviction
(``loop.apply_scale_down``).
"""

from __future__ import annotations

from typing import Any

from berthmaster.operator.autoscaler.drainability import (
    SAFE_TO_EVICT_KEY,
    SAFE_TO_EVICT_LOCAL_VOLUMES_KEY,
)
from berthmaster.operator.autoscaler.scaleup import POD_SCALE_UP_DELAY_KEY
from berthmaster.scheduler.daemon import trim as placement_trim
from berthmaster.scheduler.pods import MIRROR_ANNOTATION

JSON = dict[str, Any]

ANNOTATIONS = (SAFE_TO_EVICT_KEY, SAFE_TO_EVICT_LOCAL_VOLUMES_KEY, POD_SCALE_UP_DELAY_KEY,
               MIRROR_ANNOTATION)
LOCAL_VOLUMES = ("emptyDir", "hostPath")


def _local_volume(volume: Any) -> JSON | None:
    if not isinstance(volume, dict):
        return None
    for kind in LOCAL_VOLUMES:
        if kind in volume:
            return {"name": volume.get("name"), kind: {}}
    return None


def trim_pod(pod: JSON) -> JSON:
    """Drop what the autoscaler never reads from ``pod`` (in place; see the module docstring)."""
    meta = pod.get("metadata")
    annotations = (meta.get("annotations") if isinstance(meta, dict) else None) or {}
    kept = {k: annotations[k] for k in ANNOTATIONS if k in annotations} \
        if isinstance(annotations, dict) else {}
    spec = pod.get("spec")
    volumes = spec.get("volumes") if isinstance(spec, dict) else None
    local = {str(v["name"]): v for v in map(_local_volume, volumes or ()) if v is not None} \
        if isinstance(volumes, list) else {}
    status = pod.get("status")
    conditions = status.get("conditions") if isinstance(status, dict) else None
    scheduled = [{k: c[k] for k in ("type", "status", "reason") if k in c}
                 for c in conditions or () if isinstance(c, dict)
                 and c.get("type") == "PodScheduled"] if isinstance(conditions, list) else []
    placement_trim.trim_pod(pod)
    if kept and isinstance(pod.get("metadata"), dict):
        pod["metadata"]["annotations"] = kept
    if local and isinstance(pod.get("spec"), dict):
        pod["spec"]["volumes"] = [local.get(str(v.get("name")), v) if isinstance(v, dict) else v
                                  for v in pod["spec"].get("volumes") or ()]
    if scheduled and isinstance(pod.get("status"), dict):
        pod["status"]["conditions"] = [*pod["status"].get("conditions", ()), *scheduled]
    return pod
