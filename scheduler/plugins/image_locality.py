"""ImageLocalityPriority (kube-scheduler: ImageLocality), as 1.35's imagelocality plugin.

Nodes that already hold the pod's container images score higher. Every container's image
(init containers included, a repeated image counted each time), looked up by its normalised
name (``:latest`` added when untagged), adds the image's size scaled by the share of nodes
holding it, truncated (scaledImageScore); the sum, clamped between 23 MiB and 1000 MiB per
container, maps linearly onto 0..100 with integer division (calculatePriority). Upstream:
pkg/scheduler/framework/plugins/imagelocality/image_locality.go.
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


def image_score(total: int, containers: int) -> int:
    """calculatePriority: the summed image scores mapped onto 0..100."""
    top = MAX_CONTAINER_THRESHOLD * containers
    total = min(max(total, MIN_THRESHOLD), top)
    return MAX_PRIORITY * (total - MIN_THRESHOLD) // (top - MIN_THRESHOLD)


@dataclass
class ImageLocality(Priority):
    NAME = NAME
    ALIASES = ALIASES

    def scores(self, pod: PodView, snapshot: Snapshot,
               nodes: Sequence[NodeInfo]) -> list[int] | int:
        wanted = [normalized_image_name(image) for image in pod.images]
        present = [name for name in wanted if name in snapshot.image_index]
        if not present:
            return 0
        total_nodes = len(snapshot)
        spread = {name: len(snapshot.image_index[name]) / total_nodes for name in present}
        out = []
        for n in nodes:
            held = n.view.images
            total = sum(int(held[name] * spread[name]) for name in present if name in held)
            out.append(image_score(total, len(wanted)))
        return out
