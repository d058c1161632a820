"""The differential test's generated KubeSchedulerConfigurations
(tests.support.scheduler_configs): pure, loadable by berthmaster, and covering what they are
meant to cover. (That kube-scheduler 1.35 loads them is checked where it runs: the
differential test waits for it to sync its informers, and it exits on a file it refuses.)"""

from __future__ import annotations

from collections import Counter

import yaml

from berthmaster.scheduler.config import load_config
from tests.support.scheduler_configs import SCORE_PLUGINS, random_config, renamed

DRAWS = 300


def test_a_seed_and_an_index_give_the_same_document() -> None:
    assert random_config(5, 3, "a") == random_config(5, 3, "a")
    assert renamed(random_config(5, 3, "a"), "b") == random_config(5, 3, "b")
    assert len({yaml.safe_dump(random_config(5, i, "a")) for i in range(50)}) == 50
    assert random_config(5, 3, "a") != random_config(6, 3, "a")


def test_every_draw_loads_and_keeps_a_score_plugin() -> None:
    seen: Counter[str] = Counter()
    for index in range(DRAWS):
        doc = random_config(20261123, index, "gen")
        config = load_config(yaml.safe_dump(doc), f"draw {index}")
        (profile,) = config.profiles
        assert profile.scheduler_name == "gen"
        assert profile.priorities, "no score plugin: kube-scheduler would score nothing"
        assert {p.name for p in profile.priorities} <= set(SCORE_PLUGINS)
        seen.update(p.strategy for p in profile.priorities if p.name == "NodeResourcesFit")
        seen["weights other than the defaults"] += any(
            p.weight not in (1, 2, 3) for p in profile.priorities)
        seen["score plugins disabled"] += len(profile.priorities) < len(SCORE_PLUGINS)
        seen["a filter disabled"] += len(profile.predicates) < 12
        seen["DefaultPreemption disabled"] += not profile.preemption
        seen["percentageOfNodesToScore"] += (profile.percentage_of_nodes_to_score is not None
                                             or config.percentage_of_nodes_to_score != 0)
        args = [c["args"] for c in doc["profiles"][0].get("pluginConfig", [])]
        seen["default constraints listed"] += any(a.get("defaultingType") == "List"
                                                  for a in args)
        seen["hardPodAffinityWeight"] += any("hardPodAffinityWeight" in a for a in args)
        seen["balanced resources"] += any("resources" in a for a in args)
    for wanted in ("LeastAllocated", "MostAllocated", "RequestedToCapacityRatio",
                   "weights other than the defaults", "score plugins disabled",
                   "a filter disabled", "percentageOfNodesToScore",
                   "default constraints listed", "hardPodAffinityWeight",
                   "balanced resources"):
        assert seen[wanted] >= DRAWS // 20, (wanted, seen)
