"""ImageLocalityPriority (kube-scheduler: ImageLocality).

Nodes that already hold the pod's container images score higher: the sum of those images'
sizes, each scaled by the share of nodes holding it (so an image everywhere does not skew the
choice), mapped linearly from 23 MiB (0) to 1000 MiB per container (10).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from berthmaster.scheduler.model import PodView, normalized_image_name
from berthmaster.scheduler.plugins.base import MAX_PRIORITY, Priority
from berthmaster.scheduler.snapshot import NodeInfo, Snapshot

NAME = "ImageLocalityPriority"
ALIASES = ("ImageLocality",)
MB = 1024 * 1024
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB


def image_score(total: float, containers: int) -> int:
    top = MAX_CONTAINER_THRESHOLD * max(containers, 1)
    total = min(max(total, MIN_THRESHOLD), top)
    return int(MAX_PRIORITY * (total - MIN_THRESHOLD) / (top - MIN_THRESHOLD))


@dataclass
class ImageLocality(Priority):
    NAME = NAME
    ALIASES = ALIASES

    def scores(self, pod: PodView, snapshot: Snapshot,
               nodes: Sequence[NodeInfo]) -> list[int] | int:
        images = []
        for image in pod.images:
            for name in (image, normalized_image_name(image)):
                if name in snapshot.image_index:
                    images.append(name)
                    break
        if not images:
            return 0
        total_nodes = max(len(snapshot), 1)
        spread = {i: len(snapshot.image_index[i]) / total_nodes for i in images}
        out = []
        for n in nodes:
            held = n.view.images
            total = sum(held[i] * spread[i] for i in images if i in held)
            out.append(image_score(total, len(pod.images)))
        return out
