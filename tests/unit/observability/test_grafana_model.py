"""tests/support/grafana_model.py: what Grafana's dashboard model (grafana-foundation-sdk,
models/dashboard.py) accepts and what it reports."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from tests.support.grafana_model import problems

DASHBOARD = (Path(__file__).resolve().parents[3] / "charts" / "berthmaster" / "files"
             / "dashboards" / "berthmaster.json")


def shipped() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return document


def test_the_shipped_dashboard_has_no_problem() -> None:
    assert problems(shipped()) == []


def test_wrong_types_unknown_fields_and_enum_values_are_named() -> None:
    document = copy.deepcopy(shipped())
    panel = next(i for i, p in enumerate(document["panels"]) if p.get("targets"))
    document["graphTooltip"] = 7
    document["panels"][panel]["gridPos"]["w"] = "wide"
    document["panels"][panel]["targets"][0]["expr"] = 5
    document["panels"][panel]["titel"] = "typo"
    assert sorted(problems(document)) == sorted([
        "dashboard.graph_tooltip: 7 is not one of [0, 1, 2]",
        f"dashboard.panels[{panel}].grid_pos.w: 'wide' is not a int",
        f"dashboard.panels[{panel}].targets[0].expr: 5 is not a string",
        f"dashboard.panels[{panel}].titel: not a field of Grafana's dashboard model",
    ])


def test_a_query_variables_definition_is_accepted() -> None:
    document = {"title": "t", "templating": {"list": [
        {"name": "job", "type": "query", "query": "label_values(up, job)",
         "definition": "label_values(up, job)"}]}}
    assert problems(document) == []
