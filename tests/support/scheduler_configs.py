"""Random, seeded KubeSchedulerConfigurations for comparing berthmaster with kube-scheduler.

:func:`random_config` draws one profile from what berthmaster's loader
(``berthmaster.scheduler.config``) and kube-scheduler 1.35 both accept, the same file for both:

- score weights 1..10 for some or all of the default score plugins, given either at
  ``plugins.score.enabled`` or at ``plugins.multiPoint.enabled`` (a re-configured default keeps
  its place: pkg/scheduler/apis/config/v1/default_plugins.go, mergePluginSet), and up to three
  of the seven disabled at ``plugins.score.disabled`` (never all: with no score plugin
  kube-scheduler scores nothing, pkg/scheduler/schedule_one.go, prioritizeNodes);
- sometimes a filter disabled at ``plugins.filter.disabled`` (NodePorts, InterPodAffinity,
  PodTopologySpread or TaintToleration: plugins whose PreFilter narrows no node, so the
  filter alone is gone);
- NodeResourcesFit's scoringStrategy: LeastAllocated, MostAllocated or
  RequestedToCapacityRatio (a shape of one to four points, utilization increasing, scores
  rising or falling), with cpu / memory (and sometimes the scenarios' extended resource)
  weights 1..5, a weight sometimes left out and the list sometimes empty (both defaulted:
  pkg/scheduler/apis/config/v1/defaults.go, SetDefaults_NodeResourcesFitArgs);
- NodeResourcesBalancedAllocation's resources (weight 1, as validation_pluginargs.go asks);
- PodTopologySpread's defaultingType List with zero to two defaultConstraints (hostname or
  zone, maxSkew 1..5, DoNotSchedule or ScheduleAnyway, sometimes nodeTaintsPolicy), or
  System;
- InterPodAffinity's hardPodAffinityWeight 0..100 and ignorePreferredTermsOfExistingPods;
- percentageOfNodesToScore, on the profile or at the top level.

- sometimes DefaultPreemption disabled at ``plugins.postFilter.disabled`` (the
  FailedScheduling text then ends with DynamicResources' PostFilter reason alone:
  pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go, PostFilter).

Never what berthmaster refuses (NodeResourcesFit ignoredResources, extenders), nor NodeAffinity
addedAffinity (its required terms would narrow the nodes the harness pins pods to).

:func:`random_config` is pure: a seed and an index give the same document.
"""

from __future__ import annotations

import random
from typing import Any

from tests.support.scenarios import GPU, HOSTNAME, ZONE

JSON = dict[str, Any]

API_VERSION = "kubescheduler.config.k8s.io/v1"
# apis/config/v1/default_plugins.go: the default profile's score plugins
SCORE_PLUGINS = ("TaintToleration", "NodeAffinity", "NodeResourcesFit", "PodTopologySpread",
                 "InterPodAffinity", "NodeResourcesBalancedAllocation", "ImageLocality")
# filters whose PreFilter neither rejects a pod nor narrows the nodes: disabling the filter
# alone removes the plugin's say in fit
DISABLEABLE_FILTERS = ("NodePorts", "InterPodAffinity", "PodTopologySpread", "TaintToleration")
STRATEGIES = ("LeastAllocated", "MostAllocated", "RequestedToCapacityRatio")


def _resources(rng: random.Random, weighted: bool) -> list[JSON]:
    names = ["cpu", "memory"]
    if rng.random() < 0.25:
        names.append(GPU)
    if not weighted:
        names = rng.sample(names, rng.randint(1, len(names)))
    out: list[JSON] = []
    for name in names:
        entry: JSON = {"name": name}
        if weighted and rng.random() < 0.9:
            entry["weight"] = rng.randint(1, 5)
        elif not weighted and rng.random() < 0.5:
            entry["weight"] = 1
        out.append(entry)
    return out


def _shape(rng: random.Random) -> list[JSON]:
    points = rng.randint(1, 4)
    utilization = sorted(rng.sample(range(101), points))
    scores = sorted(rng.randint(0, 10) for _ in range(points))
    if rng.random() < 0.4:
        scores.reverse()
    return [{"utilization": u, "score": s} for u, s in zip(utilization, scores, strict=True)]


def _fit_args(rng: random.Random) -> JSON:
    kind = rng.choice(STRATEGIES)
    strategy: JSON = {"type": kind}
    roll = rng.random()
    if roll < 0.85:
        strategy["resources"] = _resources(rng, weighted=True)
    elif roll < 0.92:
        strategy["resources"] = []
    if kind == "RequestedToCapacityRatio":
        strategy["requestedToCapacityRatio"] = {"shape": _shape(rng)}
    return {"scoringStrategy": strategy}


def _spread_args(rng: random.Random) -> JSON:
    if rng.random() < 0.25:
        return {"defaultingType": "System"}
    constraints: list[JSON] = []
    pairs = [(key, action) for key in (HOSTNAME, ZONE)
             for action in ("DoNotSchedule", "ScheduleAnyway")]
    for key, action in rng.sample(pairs, rng.choice((0, 1, 1, 2, 2))):
        constraint: JSON = {"maxSkew": rng.randint(1, 5), "topologyKey": key,
                            "whenUnsatisfiable": action}
        if rng.random() < 0.2:
            constraint["nodeTaintsPolicy"] = rng.choice(("Honor", "Ignore"))
        constraints.append(constraint)
    return {"defaultingType": "List", "defaultConstraints": constraints}


def _affinity_args(rng: random.Random) -> JSON:
    args: JSON = {"hardPodAffinityWeight": rng.choice((0, 1, rng.randint(0, 100)))}
    if rng.random() < 0.3:
        args["ignorePreferredTermsOfExistingPods"] = rng.random() < 0.5
    return args


def random_profile(rng: random.Random) -> JSON:
    """One profile's ``plugins``, ``pluginConfig`` and perhaps ``percentageOfNodesToScore``
    (no ``schedulerName``)."""
    plugins: JSON = {}
    disabled = rng.sample(SCORE_PLUGINS, rng.choice((0, 0, 1, 1, 2, 3)))
    weighted = [p for p in SCORE_PLUGINS if p not in disabled and rng.random() < 0.8]
    if weighted:
        point = rng.choice(("score", "multiPoint"))
        plugins[point] = {"enabled": [{"name": p, "weight": rng.randint(1, 10)}
                                      for p in weighted]}
    if disabled:
        plugins.setdefault("score", {})["disabled"] = [{"name": p} for p in disabled]
    if rng.random() < 0.3:
        plugins["filter"] = {"disabled": [{"name": rng.choice(DISABLEABLE_FILTERS)}]}
    plugin_config: list[JSON] = []
    for name, make, chance in (("NodeResourcesFit", _fit_args, 0.85),
                               ("NodeResourcesBalancedAllocation",
                                lambda r: {"resources": _resources(r, weighted=False)
                                           if r.random() < 0.9 else []}, 0.5),
                               ("PodTopologySpread", _spread_args, 0.6),
                               ("InterPodAffinity", _affinity_args, 0.5)):
        if rng.random() < chance:
            plugin_config.append({"name": name, "args": make(rng)})
    rng.shuffle(plugin_config)
    profile: JSON = {}
    if plugins:
        profile["plugins"] = plugins
    if plugin_config:
        profile["pluginConfig"] = plugin_config
    if rng.random() < 0.2:
        profile["percentageOfNodesToScore"] = rng.randint(0, 100)
    return profile


def random_config(seed: int, index: int, scheduler_name: str) -> JSON:
    """The ``index``-th configuration of ``seed``: one profile named ``scheduler_name`` (the
    same draw whatever the name), sometimes a top-level ``percentageOfNodesToScore``."""
    rng = random.Random(f"config:{seed}:{index}")
    doc: JSON = {"apiVersion": API_VERSION, "kind": "KubeSchedulerConfiguration"}
    profile = random_profile(rng)
    if rng.random() < 0.2:
        doc["percentageOfNodesToScore"] = rng.randint(0, 100)
    if rng.random() < 0.15:  # drawn last: the draws above stay what they were
        plugins = profile.setdefault("plugins", {})
        plugins["postFilter"] = {"disabled": [{"name": "DefaultPreemption"}]}
    doc["profiles"] = [{"schedulerName": scheduler_name, **profile}]
    return doc


def renamed(config: JSON, scheduler_name: str) -> JSON:
    """``config`` with its (single) profile under ``scheduler_name``."""
    profiles = [{**config["profiles"][0], "schedulerName": scheduler_name}]
    return {**config, "profiles": profiles}
