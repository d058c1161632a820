"""The CRDs install for real, and the documentation's YAML is accepted or refused as it should be.

- Each CRD file in deploy/crds/ (copied into the chart's files/crds/) is applied server-side on its
  own, so a broken one is named by file and does not hide the others; then each must become
  Established.
- tests/integration/chart/seed_samples/ holds YAML copied from OpenShift's documentation (its
  README.md names each source). Its first
  line is the verdict: ``# accept.`` or ``# reject: <text the API server's refusal contains>``.
  Custom resources are created for real (and read back); pods are created with a server-side
  dry run (nothing schedules them here).
- deploy/samples/pods-*.yaml, the samples users apply on kind, are all accepted.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from berthmaster.tooling.devcluster.cluster import RunningCluster
from tests.integration.chart.chartkit import CRDS, SAMPLES, SEED_SAMPLES

CRD_FILES = sorted(CRDS.glob("*.yaml"))
SEED_FILES = sorted(SEED_SAMPLES.glob("*.yaml"))


def crd_name(path: Path) -> str:
    document = yaml.safe_load(path.read_text())
    return str(document["metadata"]["name"])


@pytest.mark.parametrize("path", CRD_FILES, ids=lambda p: p.name)
def test_each_crd_installs_and_becomes_established(cluster: RunningCluster, path: Path) -> None:
    result = cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(path))
    assert result.returncode == 0, f"deploy/crds/{path.name} refused:\n{result.stderr}"
    established = cluster.kubectl("wait", "--for=condition=Established",
                                  f"crd/{crd_name(path)}", "--timeout=60s")
    assert established.returncode == 0, established.stderr


@pytest.fixture(scope="module")
def crds(cluster: RunningCluster) -> dict[str, str]:
    """Install every CRD that the API server accepts; map group kind -> CRD name."""
    installed = {}
    for path in CRD_FILES:
        applied = cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(path))
        if applied.returncode == 0:
            document = yaml.safe_load(path.read_text())
            name = crd_name(path)
            cluster.kubectl("wait", "--for=condition=Established", f"crd/{name}",
                            "--timeout=60s")
            installed[f"{document['spec']['group']}/{document['spec']['names']['kind']}"] = name
    return installed


@pytest.fixture
def sample_namespace(cluster: RunningCluster) -> Iterator[str]:
    name = f"samples-{uuid.uuid4().hex[:6]}"
    assert cluster.kubectl("create", "namespace", name).returncode == 0
    try:
        yield name
    finally:
        cluster.kubectl("delete", "namespace", name, "--wait=false")


def verdict(path: Path) -> tuple[bool, str]:
    first = path.read_text().splitlines()[0]
    if first.startswith("# accept."):
        return True, ""
    assert first.startswith("# reject: "), f"{path.name}: first line must give the verdict"
    return False, first.removeprefix("# reject: ").strip()


def group_kind(document: dict[str, Any]) -> str:
    group = document["apiVersion"].rpartition("/")[0]
    return f"{group}/{document['kind']}"


def contained(wanted: Any, stored: Any) -> bool:
    """Everything the user wrote survived (the server may add defaults, never drop or change)."""
    if isinstance(wanted, dict):
        return isinstance(stored, dict) and all(
            key in stored and contained(value, stored[key]) for key, value in wanted.items())
    if isinstance(wanted, list):
        return isinstance(stored, list) and all(
            any(contained(item, candidate) for candidate in stored) for item in wanted)
    return bool(wanted == stored)


@pytest.mark.parametrize("path", SEED_FILES, ids=lambda p: p.name)
def test_seed_yaml_is_accepted_or_refused_as_documented(
    cluster: RunningCluster, crds: dict[str, str], sample_namespace: str, path: Path
) -> None:
    document = yaml.safe_load(path.read_text())
    accept, refusal = verdict(path)
    custom = "/" in document["apiVersion"] and "." in document["apiVersion"].split("/")[0]
    if custom:
        assert group_kind(document) in crds, (
            f"{path.name} needs the {group_kind(document)} CRD, which deploy/crds/ does not "
            "install (see test_each_crd_installs_and_becomes_established)")
    # Custom resources for real (read back below); pods as a server-side dry run.
    args = ["create", "-n", sample_namespace, "-f", str(path), "-o", "yaml"]
    if not custom:
        args.insert(1, "--dry-run=server")
    result = cluster.kubectl(*args)
    try:
        if accept:
            assert result.returncode == 0, f"{path.name} refused:\n{result.stderr}"
            stored = yaml.safe_load(result.stdout)
            assert contained(document["spec"], stored["spec"]), (
                f"{path.name}: the API server changed or dropped fields: {stored['spec']}")
        else:
            assert result.returncode != 0, f"{path.name} was accepted; expected: {refusal}"
            assert refusal in result.stderr, result.stderr
    finally:
        if custom and result.returncode == 0:
            cluster.kubectl("delete", "-n", sample_namespace, "-f", str(path), "--wait=false")


def dry_run_sample(cluster: RunningCluster, path: Path, namespace: str | None = None) -> None:
    """Server-side dry run of a sample file; its PriorityClasses are created for real first
    (a pod naming one is refused at admission otherwise) and removed after."""
    documents = [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    classes = [doc for doc in documents if doc["kind"] == "PriorityClass"]
    scope = ["-n", namespace] if namespace else []
    try:
        if classes:
            created = cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(classes))
            assert created.returncode == 0, created.stderr
        result = cluster.kubectl("apply", "--dry-run=server", *scope, "-f", str(path))
        assert result.returncode == 0, f"deploy/samples/{path.name} refused:\n{result.stderr}"
        assert result.stdout.count("(server dry run)") == len(documents), result.stdout
    finally:
        for priority_class in classes:
            cluster.kubectl("delete", "priorityclass", priority_class["metadata"]["name"],
                            "--ignore-not-found")


@pytest.mark.parametrize("path", sorted(SAMPLES.glob("pods-*.yaml")), ids=lambda p: p.name)
def test_deploy_pod_samples_are_accepted(
    cluster: RunningCluster, sample_namespace: str, path: Path
) -> None:
    dry_run_sample(cluster, path, sample_namespace)
    for document in yaml.safe_load_all(path.read_text()):
        if document and document["kind"] == "Pod":
            assert document["spec"]["schedulerName"] == "berthmaster", path.name


OTHER_SAMPLES = sorted(p for p in SAMPLES.glob("*.yaml") if not p.name.startswith("pods-"))


@pytest.fixture(scope="module")
def sample_namespaces(cluster: RunningCluster) -> Iterator[None]:
    """The namespaces the samples name (openshift-machine-api, ...), for the module."""
    wanted = {doc["metadata"]["namespace"] for path in OTHER_SAMPLES
              for doc in yaml.safe_load_all(path.read_text())
              if doc and doc.get("metadata", {}).get("namespace")}
    created = []
    for name in sorted(wanted):
        if cluster.kubectl("get", "namespace", name).returncode != 0:
            assert cluster.kubectl("create", "namespace", name).returncode == 0
            created.append(name)
    yield
    for name in created:
        cluster.kubectl("delete", "namespace", name, "--wait=false")


@pytest.mark.parametrize("path", OTHER_SAMPLES, ids=lambda p: p.name)
def test_every_other_deploy_sample_is_accepted(
    cluster: RunningCluster, crds: dict[str, str], sample_namespaces: None, path: Path
) -> None:
    """Machines, MachineSets, autoscalers, Deschedulers: deploy/samples/ as users apply it."""
    dry_run_sample(cluster, path)


@pytest.mark.parametrize(("schedule", "accepted"), [
    ("*/10 * * * *", True), ("0-30/5 8-18 * * mon-fri", True), ("@hourly", True),
    ("99 99 * * *", False), ("0 24 * * *", False), ("0 3 * 13 *", False), ("*/0 * * * *", False),
])
def test_the_api_server_refuses_an_impossible_descheduler_schedule(
        cluster: RunningCluster, crds: dict[str, str], schedule: str, accepted: bool) -> None:
    """The CRD's CEL rule, evaluated by the API server, refuses what CronJob would
    (tests/unit/descheduler/test_desched_crd_schedule.py has the full table)."""
    assert "berthmaster.io/Descheduler" in crds
    descheduler = {"apiVersion": "berthmaster.io/v1alpha1", "kind": "Descheduler",
                   "metadata": {"name": "schedule-check"},
                   "spec": {"schedule": schedule, "policyConfigMap": {"name": "policy"}}}
    result = cluster.kubectl("create", "--dry-run=server", "-f", "-",
                             input=yaml.safe_dump(descheduler))
    assert (result.returncode == 0) is accepted, result.stderr
    if not accepted:
        assert "spec.schedule: Invalid value" in result.stderr
        assert "minute (0-59), hour (0-23)" in result.stderr
