"""``berthmaster policy convert``: a Policy -> the KubeSchedulerConfiguration v1.22 would have
run it as (kubernetes v1.22 pkg/scheduler/framework/plugins/legacy_registry.go: the producers
of predicateToConfigProducer / priorityToConfigProducer, predicateOrdering,
appendToPluginSet), loaded back with the scheduler's own configuration loader."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from berthmaster.cli import main
from berthmaster.foundation.errors import PolicyError
from berthmaster.scheduler.config import load_config
from berthmaster.scheduler.policy import load_policy
from berthmaster.scheduler.policy_convert import convert_policy_text

ROOT = Path(__file__).resolve().parents[3]


def policy(predicates: list[Any] | None = None, priorities: list[Any] | None = None,
           **top: Any) -> str:
    return json.dumps({"kind": "Policy", "apiVersion": "v1", "predicates": predicates or [],
                       "priorities": priorities or [], **top})


def profile_of(text: str) -> dict[str, Any]:
    profile: dict[str, Any] = convert_policy_text(text).config["profiles"][0]
    return profile


def enabled(profile: dict[str, Any], point: str) -> list[Any]:
    entries = profile["plugins"].get(point, {}).get("enabled", [])
    return [(e["name"], e["weight"]) if "weight" in e else e["name"] for e in entries]


def args(profile: dict[str, Any], name: str) -> Any:
    return next((c["args"] for c in profile.get("pluginConfig", []) if c["name"] == name), None)


MANDATORY = ["NodeUnschedulable", "TaintToleration"]  # legacy_registry.go mandatoryPredicates
_AFTER_VOLUME_BINDING = ("VolumeZone", "PodTopologySpread", "InterPodAffinity")


def with_volume_binding(filters: list[str]) -> list[str]:
    """Every Policy runs CheckVolumeBinding too (berthmaster is a non-default scheduler:
    scheduler/policy.py), placed by predicateOrdering: after the volume-count predicates,
    before NoVolumeZoneConflict."""
    if "VolumeBinding" in filters:
        return filters
    at = next((i for i, f in enumerate(filters) if f in _AFTER_VOLUME_BINDING), len(filters))
    return [*filters[:at], "VolumeBinding", *filters[at:]]

# (Policy predicates, the filter plugins in order) -- each predicate's producer, placed by
# predicateOrdering; the mandatory ones join every Policy.
FILTERS = [
    ([], MANDATORY),
    (["GeneralPredicates"],
     ["NodeUnschedulable", "NodeResourcesFit", "NodeName", "NodePorts", "NodeAffinity",
      "TaintToleration"]),
    (["HostName"], ["NodeUnschedulable", "NodeName", "TaintToleration"]),
    (["PodFitsPorts"], ["NodeUnschedulable", "NodePorts", "TaintToleration"]),
    (["MatchNodeSelector"], ["NodeUnschedulable", "NodeAffinity", "TaintToleration"]),
    (["PodFitsResources"], ["NodeUnschedulable", "NodeResourcesFit", "TaintToleration"]),
    (["NoDiskConflict"], ["NodeUnschedulable", "VolumeRestrictions", "TaintToleration"]),
    (["MaxCSIVolumeCountPred"], [*MANDATORY, "NodeVolumeLimits"]),
    (["CheckVolumeBinding"], [*MANDATORY, "VolumeBinding"]),
    (["NoVolumeZoneConflict"], [*MANDATORY, "VolumeZone"]),
    (["EvenPodsSpread"], [*MANDATORY, "PodTopologySpread"]),
    (["MatchInterPodAffinity"], [*MANDATORY, "InterPodAffinity"]),
    (["PodToleratesNodeNoExecuteTaints"], MANDATORY),
    # listed in any order, run in predicateOrdering's
    (["MatchInterPodAffinity", "NoVolumeZoneConflict", "HostName", "GeneralPredicates"],
     ["NodeUnschedulable", "NodeResourcesFit", "NodeName", "NodePorts", "NodeAffinity",
      "TaintToleration", "VolumeZone", "InterPodAffinity"]),
]


@pytest.mark.parametrize(("predicates", "filters"), FILTERS,
                         ids=["+".join(p) or "none" for p, _ in FILTERS])
def test_each_predicate_becomes_its_filter_plugins_in_v122_order(
        predicates: list[str], filters: list[str]) -> None:
    conversion = convert_policy_text(policy([{"name": n} for n in predicates]))
    assert conversion.exact, conversion.unexpressed
    profile = conversion.config["profiles"][0]
    filters = with_volume_binding(filters)
    assert enabled(profile, "filter") == filters
    # every filter plugin with a PreFilter gets it (1.35's Filter reads its state)
    assert enabled(profile, "preFilter") == [
        f for f in filters if f in ("NodeResourcesFit", "NodePorts", "NodeAffinity",
                                    "VolumeRestrictions", "NodeVolumeLimits", "VolumeBinding",
                                    "VolumeZone", "PodTopologySpread", "InterPodAffinity")]


# (Policy priorities, score plugins with weights, pluginConfig expected)
SCORES: list[tuple[list[tuple[str, int]], list[tuple[str, int]], dict[str, Any]]] = [
    ([("LeastRequestedPriority", 3)], [("NodeResourcesFit", 3)],
     {"NodeResourcesFit": {"scoringStrategy": {
         "type": "LeastAllocated",
         "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]}}}),
    ([("MostRequestedPriority", 2)], [("NodeResourcesFit", 2)],
     {"NodeResourcesFit": {"scoringStrategy": {
         "type": "MostAllocated",
         "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]}}}),
    ([("BalancedResourceAllocation", 1)], [("NodeResourcesBalancedAllocation", 1)], {}),
    ([("InterPodAffinityPriority", 4)], [("InterPodAffinity", 4)],
     {"InterPodAffinity": {"hardPodAffinityWeight": 1}}),
    ([("NodeAffinityPriority", 5)], [("NodeAffinity", 5)], {}),
    ([("TaintTolerationPriority", 6)], [("TaintToleration", 6)], {}),
    ([("ImageLocalityPriority", 7)], [("ImageLocality", 7)], {}),
    ([("EvenPodsSpreadPriority", 2)], [("PodTopologySpread", 2)],
     {"PodTopologySpread": {"defaultingType": "List"}}),
    # AppendPriorityConfigs walks the priorities sorted by name
    ([("TaintTolerationPriority", 1), ("ImageLocalityPriority", 2)],
     [("ImageLocality", 2), ("TaintToleration", 1)], {}),
]


@pytest.mark.parametrize(("priorities", "scores", "plugin_config"), SCORES,
                         ids=["+".join(n for n, _ in p) for p, _, _ in SCORES])
def test_each_priority_becomes_its_score_plugin_with_its_weight(
        priorities: list[tuple[str, int]], scores: list[tuple[str, int]],
        plugin_config: dict[str, Any]) -> None:
    conversion = convert_policy_text(policy(
        priorities=[{"name": n, "weight": w} for n, w in priorities]))
    assert conversion.exact, conversion.unexpressed
    profile = conversion.config["profiles"][0]
    assert enabled(profile, "score") == scores
    assert {c["name"]: c["args"] for c in profile.get("pluginConfig", [])} == plugin_config


def test_hard_pod_affinity_symmetric_weight_is_inter_pod_affinity_hard_pod_affinity_weight(
        ) -> None:
    profile = profile_of(policy(priorities=[{"name": "InterPodAffinityPriority", "weight": 1}],
                                hardPodAffinitySymmetricWeight=7))
    assert args(profile, "InterPodAffinity") == {"hardPodAffinityWeight": 7}
    loaded = load_config(yaml.safe_dump(convert_policy_text(policy(
        priorities=[{"name": "InterPodAffinityPriority", "weight": 1}],
        hardPodAffinitySymmetricWeight=7)).config)).profiles[0]
    assert loaded.hard_pod_affinity_weight == 7


def test_every_profile_has_the_queue_sort_preemption_bind_and_gates_and_nothing_by_default(
        ) -> None:
    profile = profile_of(policy())
    assert profile["schedulerName"] == "berthmaster"
    assert profile["plugins"]["multiPoint"] == {"disabled": [{"name": "*"}]}
    assert enabled(profile, "preEnqueue") == ["SchedulingGates"]
    assert enabled(profile, "queueSort") == ["PrioritySort"]
    assert enabled(profile, "postFilter") == ["DefaultPreemption"]
    assert enabled(profile, "bind") == ["DefaultBinder"]
    assert "score" not in profile["plugins"]
    loaded = load_config(yaml.safe_dump(convert_policy_text(policy()).config)).profiles[0]
    assert [p.name for p in loaded.predicates] == with_volume_binding(MANDATORY)
    assert loaded.priorities == () and loaded.preemption


def test_volume_binding_brings_its_reserve_and_prebind() -> None:
    profile = profile_of(policy([{"name": "CheckVolumeBinding"}]))
    assert enabled(profile, "reserve") == enabled(profile, "preBind") == ["VolumeBinding"]


# (Policy, the start of the one stderr line each unexpressed part gives)
UNEXPRESSED = [
    (policy([{"name": "Region", "argument": {"serviceAffinity": {"labels": ["region"]}}}]),
     ['predicate Region (serviceAffinity labels ["region"]): not converted: kube-scheduler 1.35 '
      "has no ServiceAffinity plugin"]),
    (policy([{"name": "R", "argument": {"labelsPresence": {"labels": ["r"], "presence": True}}}]),
     ['predicate R (labelsPresence labels ["r"] presence true): not converted: kube-scheduler '
      "1.35 has no NodeLabel plugin"]),
    (policy(priorities=[{"name": "Z", "weight": 2,
                         "argument": {"serviceAntiAffinity": {"label": "zone"}}}]),
     ['priority Z (serviceAntiAffinity label "zone"), weight 2: not converted']),
    (policy(priorities=[{"name": "P", "weight": 1,
                         "argument": {"labelPreference": {"label": "ssd", "presence": True}}}]),
     ['priority P (labelPreference label "ssd" presence true), weight 1: not converted']),
    (policy(priorities=[{"name": "SelectorSpreadPriority", "weight": 1}]),
     ["priority SelectorSpreadPriority, weight 1: written as PodTopologySpread's score with "
      "defaultingType System"]),
    (policy(priorities=[{"name": "NodePreferAvoidPodsPriority", "weight": 10000}]),
     ["priority NodePreferAvoidPodsPriority, weight 10000: not converted"]),
    (policy(priorities=[{"name": "EqualPriority", "weight": 1}]),
     ["priority EqualPriority, weight 1: not converted"]),
    (policy([{"name": "CheckNodeCondition"}, {"name": "CheckNodeMemoryPressure"},
             {"name": "CheckNodeDiskPressure"}, {"name": "CheckNodePIDPressure"}]),
     ["predicate CheckNodeCondition: not converted", "predicate CheckNodeDiskPressure: not "
      "converted", "predicate CheckNodeMemoryPressure: not converted",
      "predicate CheckNodePIDPressure: not converted"]),
    (policy([{"name": "MaxEBSVolumeCount"}, {"name": "MaxGCEPDVolumeCount"},
             {"name": "MaxAzureDiskVolumeCount"}, {"name": "MaxCinderVolumeCount"}]),
     [f"predicate {n}: written as NodeVolumeLimits" for n in
      ("MaxEBSVolumeCount", "MaxGCEPDVolumeCount", "MaxAzureDiskVolumeCount",
       "MaxCinderVolumeCount")]),
    (policy(alwaysCheckAllPredicates=True), ["alwaysCheckAllPredicates: not converted"]),
    (policy(extenders=[{"urlPrefix": "http://x", "filterVerb": "filter"}]),
     ["extenders: not converted"]),
    (policy(priorities=[{"name": "LeastRequestedPriority", "weight": 1},
                        {"name": "MostRequestedPriority", "weight": 2}]),
     ["priority MostRequestedPriority, weight 2: not converted: NodeResourcesFit scores with "
      "one strategy and LeastRequestedPriority already gives it LeastAllocated"]),
    (policy(priorities=[{"name": "NodeAffinityPriority", "weight": 1},
                        {"name": "NodeAffinity", "weight": 3}]),
     ["priority NodeAffinityPriority, weight 1: merged with NodeAffinity into the one "
      "NodeAffinity score plugin, weight 3"]),
]


@pytest.mark.parametrize(("text", "lines"), UNEXPRESSED, ids=range(len(UNEXPRESSED)))
def test_what_1_35_cannot_say_is_one_line_each(text: str, lines: list[str]) -> None:
    conversion = convert_policy_text(text)
    assert not conversion.exact
    assert len(conversion.unexpressed) == len(lines), conversion.unexpressed
    for got, start in zip(conversion.unexpressed, lines, strict=True):
        assert got.startswith(start), got
    load_config(yaml.safe_dump(conversion.config))  # still a profile the scheduler runs


def test_the_replacements_are_written() -> None:
    profile = profile_of(policy([{"name": "MaxEBSVolumeCount"}],
                                [{"name": "SelectorSpreadPriority", "weight": 2},
                                 {"name": "EvenPodsSpreadPriority", "weight": 1}]))
    assert "NodeVolumeLimits" in enabled(profile, "filter")
    # appendToPluginSet keeps the higher weight; SelectorSpreadPriority's producer sets System
    assert enabled(profile, "score") == [("PodTopologySpread", 2)]
    assert args(profile, "PodTopologySpread") == {"defaultingType": "System"}
    # weights are not bounded (framework.go, getScoreWeights: overflow alone is refused)
    profile = profile_of(policy(priorities=[{"name": "ImageLocalityPriority", "weight": 300}]))
    assert enabled(profile, "score") == [("ImageLocality", 300)]


def test_an_invalid_policy_is_refused_with_the_loaders_problems() -> None:
    bad = policy([{"name": "Nope"}], [{"name": "LeastRequestedPriority", "weight": 0}])
    with pytest.raises(PolicyError) as caught:
        convert_policy_text(bad)
    with pytest.raises(PolicyError) as direct:
        load_policy(bad)
    assert caught.value.problems == direct.value.problems


def _fenced_policies(path: Path) -> list[tuple[str, str]]:
    blocks = re.findall(r"```(?:ya?ml|json)\n(.*?)```", path.read_text(), re.S)
    out = []
    for i, block in enumerate(blocks):
        doc = yaml.safe_load(block)
        if not isinstance(doc, dict):
            continue
        while isinstance(doc, dict) and doc.get("kind") != "Policy" and len(doc) == 1:
            doc = next(iter(doc.values()))  # a values file: scheduler: {policy: {...}}
        if isinstance(doc, dict) and doc.get("kind") == "Policy":
            out.append((f"{path.relative_to(ROOT)} block {i}", json.dumps(doc)))
    return out


def _configmap_policies(path: Path) -> list[tuple[str, str]]:
    out = []
    for doc in yaml.safe_load_all(path.read_text()):
        if isinstance(doc, dict) and doc.get("kind") == "ConfigMap":
            for key, value in (doc.get("data") or {}).items():
                if re.search(r'"?kind"?:\s*"?Policy"?', str(value)):
                    out.append((f"{path.relative_to(ROOT)} {doc['metadata']['name']}/{key}",
                                str(value)))
    return out


def sample_policies() -> list[tuple[str, str]]:
    """Every Policy the repository ships or documents: files, ConfigMaps, docs' blocks."""
    found: list[tuple[str, str]] = []
    for path in sorted(ROOT.glob("**/*")):
        parts = path.relative_to(ROOT).parts
        if not path.is_file() or parts[0] not in ("deploy", "examples", "docs", "charts",
                                                  "scheduler", "tests") or ".venv" in parts:
            continue
        if path.suffix not in (".json", ".yaml", ".yml", ".md") or path.stat().st_size > 10**6:
            continue
        text = path.read_text(errors="replace")
        if not re.search(r'"?kind"?:\s*"?Policy"?\s*,?\s*$', text, re.M):
            continue
        if path.suffix == ".md":
            found.extend(_fenced_policies(path))
        elif re.search(r"^kind:\s*ConfigMap", text, re.M):
            found.extend(_configmap_policies(path))
        else:
            found.append((str(path.relative_to(ROOT)), text))
    return found


SAMPLES = sample_policies()


def test_the_samples_were_found() -> None:
    names = {name.split(" ")[0] for name, _ in SAMPLES}
    assert {"scheduler/data/default-policy.json", "docs/engine.md", "docs/deployment.md",
            "tests/integration/chart/seed_policies/scheduler-sample-policy-1.yaml"} <= names


@pytest.mark.parametrize(("name", "text"), SAMPLES, ids=[n for n, _ in SAMPLES])
def test_every_sample_policy_converts_to_a_configuration_the_scheduler_loads(
        name: str, text: str) -> None:
    try:
        load_policy(text, name)
    except PolicyError:
        with pytest.raises(PolicyError):  # an example of a refused Policy: refused here too
            convert_policy_text(text, name)
        return
    conversion = convert_policy_text(text, name)
    for output in (yaml.safe_dump(conversion.config), json.dumps(conversion.config)):
        config = load_config(output, name)
        assert config.scheduler_names == ("berthmaster",)


def test_the_cli_prints_yaml_or_json_and_exits_by_how_exact(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    exact = tmp_path / "exact.json"
    exact.write_text(policy([{"name": "GeneralPredicates"}],
                            [{"name": "LeastRequestedPriority", "weight": 1}]))
    assert main(["policy", "convert", str(exact)]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert load_config(out).profiles[0].scheduler_name == "berthmaster"
    assert main(["policy", "convert", str(exact), "-o", "json",
                 "--scheduler-name", "other"]) == 0
    out, _ = capsys.readouterr()
    assert json.loads(out)["profiles"][0]["schedulerName"] == "other"

    default = ROOT / "scheduler" / "data" / "default-policy.json"
    assert main(["policy", "convert", str(default)]) == 1
    out, err = capsys.readouterr()
    load_config(out)
    lines = err.splitlines()
    assert len(lines) == 7 and all(line.startswith("berthmaster policy convert: ")
                                   for line in lines)
    assert any("Region (serviceAffinity" in line for line in lines)

    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: Policy\npredicates: [{name: Nope}]\n")
    assert main(["policy", "convert", str(bad)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "predicates[0].name: unknown predicate 'Nope'" in err
    assert main(["policy", "convert", str(tmp_path / "missing.yaml")]) == 2
