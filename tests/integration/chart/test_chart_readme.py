"""charts/berthmaster/README.md's values table is generated from values.yaml
(hack/chart_readme.py) and must be current: a values.yaml change without a re-run fails here."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import yaml

from tests.integration.chart.chartkit import CHART, ROOT

SCRIPT = ROOT / "hack" / "chart_readme.py"


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("chart_readme", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_values_table_is_current() -> None:
    result = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True,
                            text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_value_has_a_row() -> None:
    module = generator()
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    readme = (CHART / "README.md").read_text()
    for path, _ in module.leaves(values):
        assert f"| `{path}` |" in readme, f"{path} has no row in the README"


def test_helm_docs_comments_and_schema_descriptions() -> None:
    module = generator()
    text = ("# not a description\n"
            "a:\n"
            "  # -- First line,\n"
            "  # second line.\n"
            "  b: 1\n"
            "  c: [x]\n"
            "  # -- A|pipe <name>.\n"
            "  d: {}\n"
            "list:\n"
            "  - e: 1\n")
    schema = {"properties": {"a": {"properties": {"c": {"description": "From the schema."}}}}}
    rows = module.table(text, schema).splitlines()[2:]
    assert rows == [
        "| `a.b` | int | `1` | First line, second line. |",
        '| `a.c` | list | `["x"]` | From the schema. |',
        "| `a.d` | object | `{}` | A\\|pipe &lt;name>. |",
        '| `list` | list | `[{"e": 1}]` |  |',
    ]


def test_check_fails_on_a_stale_table(tmp_path: Path) -> None:
    copy = tmp_path / "repo"
    shutil.copytree(CHART, copy / "charts" / "berthmaster")
    (copy / "hack").mkdir()
    shutil.copy(SCRIPT, copy / "hack" / "chart_readme.py")
    values = copy / "charts" / "berthmaster" / "values.yaml"
    values.write_text(values.read_text() + "# -- A new knob.\nnewKnob: 3\n")
    script = [sys.executable, str(copy / "hack" / "chart_readme.py")]
    stale = subprocess.run([*script, "--check"], capture_output=True, text=True, check=False)
    assert stale.returncode == 1
    assert "values table is stale" in stale.stdout
    subprocess.run(script, check=True)
    assert "| `newKnob` | int | `3` | A new knob. |" in (
        copy / "charts" / "berthmaster" / "README.md").read_text()
