"""Chart.yaml's metadata for Artifact Hub, checked against what the chart really ships.

The annotations are Artifact Hub's Helm annotations (artifacthub/hub
docs/topics/annotations/helm.md): ``artifacthub.io/images`` (name, image), ``crds`` (kind,
version, name, displayName, description), ``crdsExamples`` (full objects), ``changes`` (kind one
of added, changed, deprecated, removed, fixed, security), ``license`` (an SPDX identifier). Each
is a YAML document inside a string, so it is parsed here the way Artifact Hub does.
"""

from __future__ import annotations

import tomllib
from typing import Any

import yaml

from tests.integration.chart.chartkit import CHART, CRDS, ROOT, pod_templates, render

CHANGE_KINDS = {"added", "changed", "deprecated", "removed", "fixed", "security"}


def chart() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((CHART / "Chart.yaml").read_text())
    return loaded


def annotation(key: str) -> Any:
    return yaml.safe_load(chart()["annotations"][f"artifacthub.io/{key}"])


def shipped_crds() -> list[dict[str, Any]]:
    return [yaml.safe_load(path.read_text()) for path in sorted(CRDS.glob("*.yaml"))]


def test_images_name_the_image_the_chart_deploys_by_default() -> None:
    deployed = {container["image"] for _, template in pod_templates(render())
                for container in template["spec"]["containers"]
                + template["spec"].get("initContainers", [])}
    listed = {entry["image"] for entry in annotation("images")}
    assert listed == deployed
    assert listed == {f"berthmaster:{chart()['appVersion']}"}


def test_crds_list_every_crd_the_chart_ships() -> None:
    listed = {(entry["kind"], entry["version"], entry["name"]) for entry in annotation("crds")}
    shipped = {(crd["spec"]["names"]["kind"],
                next(v["name"] for v in crd["spec"]["versions"] if v["storage"]),
                crd["metadata"]["name"]) for crd in shipped_crds()}
    assert listed == shipped
    for entry in annotation("crds"):
        assert entry["displayName"] and entry["description"], entry["kind"]


def test_crds_examples_one_per_crd_in_a_served_version() -> None:
    served = {(f"{crd['spec']['group']}/{version['name']}", crd["spec"]["names"]["kind"])
              for crd in shipped_crds() for version in crd["spec"]["versions"]
              if version["served"]}
    examples = annotation("crdsExamples")
    assert sorted(example["kind"] for example in examples) == sorted(
        crd["spec"]["names"]["kind"] for crd in shipped_crds())
    for example in examples:
        assert (example["apiVersion"], example["kind"]) in served, example["kind"]
        assert example["metadata"]["name"]


def test_license_sources_home_icon_and_changes() -> None:
    metadata = chart()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert annotation("license") == project["license"]
    assert metadata["sources"] and metadata["home"]
    assert metadata["icon"].endswith("/docs/images/berthmaster.svg")
    assert (ROOT / "docs" / "images" / "berthmaster.svg").is_file()
    for change in annotation("changes"):
        assert change["kind"] in CHANGE_KINDS, change
        assert change["description"]
