"""What one autoscaler loop reads and what it keeps between loops: plain data, no I/O.

Design: :class:`ClusterState` is the snapshot a loop observes (one list per kind, from the
watch caches or LISTs: :mod:`.observe`); :class:`AutoscalerState` is the in-memory memory
upstream keeps too (unneeded-since times, cooldown stamps, provisioning requests, backoffs;
cluster-autoscaler/core/static_autoscaler.go and clusterstate/clusterstate.go). A restart
starts its clocks afresh, which only ever delays a scale-down. Its times are on the monotonic
clock, so a wall-clock step neither expires nor extends a cooldown or a backoff.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from berthmaster.operator.autoscaler.drainability import Controllers
from berthmaster.scheduler.volume_objects import NO_VOLUMES, VolumeObjects

JSON = dict[str, Any]


@dataclass
class ProvisionRequest:
    since: float
    target: int


@dataclass
class AutoscalerState:
    unneeded_since: dict[str, float] = field(default_factory=dict)
    last_scale_up: float | None = None
    last_scale_down: float | None = None
    last_failure: float | None = None
    provisioning: dict[str, ProvisionRequest] = field(default_factory=dict)
    backoff_until: dict[str, float] = field(default_factory=dict)
    backoff_length: dict[str, float] = field(default_factory=dict)
    backoff_last_failure: dict[str, float] = field(default_factory=dict)
    initialized: bool = False  # start-up clean-up done (taints.clean_up_at_start)
    last_scale_up_record: JSON | None = None
    last_scale_down_record: JSON | None = None
    rng: random.Random = field(default_factory=random.Random)


@dataclass(frozen=True)
class ClusterState:
    nodes: list[JSON]
    pods: list[JSON]
    pdbs: list[JSON]
    priority_classes: dict[str, JSON]
    machine_sets: list[JSON]
    machines: list[JSON]
    priority_configmap: JSON | None
    volumes: VolumeObjects = NO_VOLUMES
    # the workload controllers that exist (ControllerNotFound); None: not known, not checked
    controllers: Controllers | None = None
    pod_groups: Sequence[JSON] = ()

