"""Expanders: which scale-up option (MachineSet, node count, pods helped) wins.

Design: as upstream, each expander is a filter from options to the best options; the configured
expanders run in order, each narrowing the previous one's result, and a tie left at the end is
broken at random (upstream's fallback). ``LeastWaste`` keeps the options leaving the least idle
CPU plus memory (as fractions of what is added), ``MostPods`` those helping the most pods,
``Priority`` those whose node group id matches the highest priority in the
``cluster-autoscaler-priority-expander`` ConfigMap, ``Random`` one at random. As upstream's
priority expander (expander/priority ``groupIDMatchesList``), a pattern matches when it is found
anywhere in the id (an unanchored search), and the id is the Cluster API provider's
``MachineSet/<namespace>/<name>``.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from berthmaster.operator.autoscaler.groups import NodeGroup
from berthmaster.operator.autoscaler.resources import CPU, MEMORY, node_allocatable, pod_requests

JSON = dict[str, Any]
PRIORITY_CONFIGMAP = "cluster-autoscaler-priority-expander"
PRIORITY_KEY = "priorities"


@dataclass(frozen=True)
class Option:
    group: NodeGroup
    node_count: int
    pods: tuple[JSON, ...]
    template: JSON


Priorities = Mapping[int, Sequence[str]]
Expander = Callable[[list[Option], random.Random, Priorities], list[Option]]


def parse_priorities(data: Mapping[str, str] | None) -> dict[int, list[str]]:
    """The ``priorities`` key of the priority expander ConfigMap: ``{priority: [regex, ...]}``."""
    text = (data or {}).get(PRIORITY_KEY)
    if not text:
        return {}
    loaded = yaml.safe_load(text)
    if not isinstance(loaded, Mapping):
        raise ValueError(f"ConfigMap {PRIORITY_CONFIGMAP} key {PRIORITY_KEY}: expected a map of "
                         "priority -> list of node group id regexes")
    result: dict[int, list[str]] = {}
    for key, patterns in loaded.items():
        try:
            priority = int(key)
        except (TypeError, ValueError) as error:
            raise ValueError(f"ConfigMap {PRIORITY_CONFIGMAP}: priority {key!r} is not an "
                             "integer") from error
        items = patterns if isinstance(patterns, list) else [patterns]
        for pattern in items:
            re.compile(str(pattern))
        result[priority] = [str(p) for p in items]
    return result


def waste(option: Option) -> float:
    allocatable = node_allocatable(option.template)
    score = 0.0
    for resource in (CPU, MEMORY):
        available = allocatable.get(resource, 0) * option.node_count
        if available <= 0:
            continue
        used = sum(pod_requests(pod).get(resource, 0) for pod in option.pods)
        score += (available - used) / available
    return score


def least_waste(options: list[Option], rng: random.Random, _: Priorities) -> list[Option]:
    scores = [(waste(o), o) for o in options]
    best = min(score for score, _ in scores)
    return [o for score, o in scores if abs(score - best) < 1e-9]


def most_pods(options: list[Option], rng: random.Random, _: Priorities) -> list[Option]:
    best = max(len(o.pods) for o in options)
    return [o for o in options if len(o.pods) == best]


def by_priority(options: list[Option], rng: random.Random, priorities: Priorities) -> list[Option]:
    ranked: dict[int, list[Option]] = {}
    for option in options:
        for priority, patterns in priorities.items():
            if any(re.search(p, option.group.upstream_id) for p in patterns):
                ranked.setdefault(priority, []).append(option)
    if not ranked:
        return options  # no MachineSet is listed: the priority expander has no opinion
    return ranked[max(ranked)]


def pick_random(options: list[Option], rng: random.Random, _: Priorities) -> list[Option]:
    return [rng.choice(options)]


EXPANDERS: dict[str, Expander] = {
    "LeastWaste": least_waste,
    "MostPods": most_pods,
    "Priority": by_priority,
    "Random": pick_random,
}


def best_option(options: list[Option], names: Sequence[str], rng: random.Random,
                priorities: Priorities | None = None) -> Option | None:
    remaining = sorted(options, key=lambda o: o.group.id)
    if not remaining:
        return None
    for name in names:
        remaining = EXPANDERS[name](remaining, rng, priorities or {})
        if len(remaining) == 1:
            return remaining[0]
    return rng.choice(remaining)
