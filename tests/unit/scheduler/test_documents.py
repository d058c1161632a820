"""Users' YAML and JSON files: one reader (berthmaster.foundation.documents) for simulate and the
policies.

libyaml's safe loader when PyYAML has it, JSON through the JSON decoder, ``yaml.safe_load``
semantics only, and one line naming the file for what cannot be read.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from berthmaster.cli import main
from berthmaster.foundation import documents
from berthmaster.foundation.documents import DocumentError, load_documents, parse_documents
from tests.unit.scheduler.test_simulate import CLUSTER, PODS


def test_libyaml_safe_loader_when_present() -> None:
    expected = yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader
    assert documents.SAFE_LOADER is expected


@pytest.mark.parametrize(("text", "docs"), [
    ('{"kind": "Node", "metadata": {"name": "n"}}', [{"kind": "Node", "metadata": {"name": "n"}}]),
    ('[{"a": 1}]', [[{"a": 1}]]),
    ("kind: Node\n---\nkind: Pod\n", [{"kind": "Node"}, {"kind": "Pod"}]),
    ("---\n---\nkind: Pod\n", [None, {"kind": "Pod"}]),
    # flow-style YAML that starts like JSON falls back to YAML
    ("{kind: Node}\n", [{"kind": "Node"}]),
    ('{"kind": "Node"}\n---\n{"kind": "Pod"}\n', [{"kind": "Node"}, {"kind": "Pod"}]),
    ("", []),
    # safe_load semantics: YAML 1.1 scalars as PyYAML's safe loader reads them
    ("a: yes\nb: 010\nc: 1.5\nd: ~\n", [{"a": True, "b": 8, "c": 1.5, "d": None}]),
])
def test_parse_documents(text: str, docs: list[Any]) -> None:
    assert parse_documents(text, "f") == docs


@pytest.mark.parametrize("text", [
    "!!python/object/apply:os.system ['true']\n",
    "a: !!python/name:os.system\n",
])
def test_only_plain_data_is_constructed(text: str) -> None:
    with pytest.raises(DocumentError, match=r"^f: not valid YAML or JSON: "):
        parse_documents(text, "f")


@pytest.mark.parametrize(("content", "message"), [
    (b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR", "is a binary file, not YAML or JSON; give the text file"),
    (b"\x1f\x8b\x08\0\0\0\0\0", "is a binary file, not YAML or JSON"),
    (b"kind: Pod\nname: caf\xe9\n", "is not UTF-8 text (byte 19); give a YAML or JSON file"),
])
def test_files_that_are_not_text(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "input"
    path.write_bytes(content)
    with pytest.raises(DocumentError, match=f"^{re.escape(str(path))}") as error:
        load_documents(path)
    assert message in str(error.value)
    assert "\n" not in str(error.value)


def test_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DocumentError, match=r"^cannot read .*missing\.yaml: No such file"):
        load_documents(tmp_path / "missing.yaml")


def test_simulate_reads_a_json_snapshot_as_its_yaml_twin(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    """``kubectl get ... -o json`` prints one List; it places exactly as the same YAML."""
    items = [d for d in yaml.safe_load_all(CLUSTER) if d]
    flattened = [i for d in items for i in (d["items"] if d["kind"] == "List" else [d])]
    as_json = tmp_path / "cluster.json"
    as_json.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": flattened}))
    as_yaml = tmp_path / "cluster.yaml"
    as_yaml.write_text(CLUSTER)
    pods = tmp_path / "pods.yaml"
    pods.write_text(PODS)
    results = []
    for cluster in (as_yaml, as_json):
        assert main(["simulate", "--cluster", str(cluster), "--pods", str(pods),
                     "-o", "json"]) == 0
        results.append(json.loads(capsys.readouterr().out))
    assert results[0] == results[1]
    assert len(results[0]["placements"]) == 3


@pytest.mark.parametrize("flag", ["--cluster", "--pods", "--policy"])
def test_simulate_refuses_a_binary_file_in_one_line(tmp_path: Path, flag: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(CLUSTER)
    binary = tmp_path / "image.png"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR")
    argv = ["simulate", "--cluster", str(cluster), flag, str(binary)]
    if flag == "--cluster":
        argv = ["simulate", "--cluster", str(binary)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err == f"berthmaster simulate: {binary} is a binary file, not YAML or JSON; " \
                  "give the text file\n"
