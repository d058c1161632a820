"""Every query of the chart's Grafana dashboard and PrometheusRule reads metrics the running
components export, and both components log the one JSON format.

The scheduler and the operator run as processes against the session's real API server, as in
a cluster (the operator with every capability and every CRD installed); the scheduler binds a
pod so that its per-attempt families carry samples. Their ``/metrics`` are scraped and every
vector selector of every expression (tests/support/promql.py) is looked up: its metric name
among the exported families (a histogram's ``_bucket``/``_sum``/``_count`` included), and,
where the family has samples, each label a matcher names among its samples' labels. The
expressions come from the chart rendered with ``dashboards.enabled`` and
``prometheusRule.enabled``, so what is checked is what ships. Before this change the
dashboard and rules did not exist, ``leader_election_master_status``, ``process_*``,
``python_*``, ``mapi_*`` and ``descheduler_*`` were not exported, the cache gauge was
``scheduler_scheduler_cache_size`` and the operator logged kopf's text lines.

Upstream names: kube-scheduler pkg/scheduler/metrics/metrics.go (v1.35.4), component-base
metrics/prometheus/clientgo/leaderelection/metrics.go, cluster-autoscaler metrics/metrics.go,
machine-api-operator pkg/metrics/metrics.go, descheduler metrics/metrics.go.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from berthmaster.foundation.kube import KubeClient
from berthmaster.foundation.logs import KEYS
from berthmaster.tooling.devcluster.cluster import RunningCluster
from berthmaster.tooling.processes import terminate
from berthmaster.tooling.python import BERTHMASTER_CLI
from tests.integration.chart.chartkit import VALUE_SETS, find, one, render
from tests.integration.cli.test_cli_failures import closed_port
from tests.integration.conftest import NodeFactory
from tests.integration.scheduler.schedkit import create_pod, make_pod, node_of
from tests.support.promql import selectors
from tests.support.waiting import http_get, wait_for

ROOT = Path(__file__).resolve().parents[3]
SUFFIXES = {"histogram": ("_bucket", "_sum", "_count"), "summary": ("_sum", "_count")}
# What Prometheus adds to every series of a ServiceMonitor's target (the Prometheus Operator's
# relabelling): a query may select on them though no component exports them.
TARGET_LABELS = {"job", "instance", "namespace", "pod", "service", "container", "endpoint"}
# Series Prometheus itself writes for every target at each scrape, with the target's labels only
# (prometheus scrape/scrape.go: up, scrape_duration_seconds, scrape_samples_scraped, ...).
SCRAPE_SERIES = {"up", "scrape_duration_seconds", "scrape_samples_scraped",
                 "scrape_samples_post_metric_relabeling", "scrape_series_added"}


def expressions() -> list[tuple[str, str]]:
    """(where, PromQL) for every query the chart ships with both values on."""
    objects = render(VALUE_SETS["observability-on"])
    found = []
    dashboard = json.loads(one(objects, "ConfigMap", "-dashboards")["data"]["berthmaster.json"])
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            found.append((f"panel {panel['title']!r}", target["expr"]))
    for rule in find(objects, "PrometheusRule"):
        for group in rule["spec"]["groups"]:
            for alert in group["rules"]:
                found.append((f"alert {alert['alert']}", alert["expr"]))
    return found


@pytest.fixture(scope="module")
def crds(cluster: Any) -> None:
    applied = cluster.kubectl("apply", "--server-side", "-f", str(ROOT / "deploy" / "crds"))
    assert applied.returncode == 0, applied.stderr
    waited = cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "-l",
                             "app.kubernetes.io/part-of=berthmaster")
    if waited.returncode != 0:  # the CRDs may not carry that label: wait on each by name
        for path in sorted((ROOT / "deploy" / "crds").glob("*.yaml")):
            group, _, plural = path.stem.partition("_")
            ok = cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                                 f"crd/{plural.removesuffix('.yaml')}.{group}")
            assert ok.returncode == 0, ok.stderr


@contextlib.contextmanager
def process(args: list[str], log: Path, env: dict[str, str]) -> Iterator[Any]:
    import subprocess

    with log.open("wb") as err:
        child = subprocess.Popen([*BERTHMASTER_CLI, *args],
                                 stdout=subprocess.DEVNULL, stderr=err,
                                 env={**os.environ, **env})
    try:
        yield child
    finally:
        terminate(child, 20)


async def ready(base: str) -> bool:
    status, _ = await http_get(f"{base}/readyz")
    return status == 200


def exported(text: str) -> dict[str, set[str] | None]:
    """Exported series names -> the label names their samples carry (None: no samples)."""
    names: dict[str, set[str] | None] = {}
    for family in text_string_to_metric_families(text):
        declared = [family.name + s for s in SUFFIXES.get(family.type, ())] or [family.name]
        if family.type == "counter":
            declared = [family.name + "_total"]
        for name in declared:
            names.setdefault(name, None)
        for sample in family.samples:
            labels = names.get(sample.name) or set()
            names[sample.name] = labels | set(sample.labels)
    return names


@pytest.fixture(scope="module")
async def components(cluster: RunningCluster, kube: KubeClient, crds: None,
                     tmp_path_factory: pytest.TempPathFactory
                     ) -> AsyncIterator[dict[str, Any]]:
    folder = tmp_path_factory.mktemp("observability")
    name = f"obs-{uuid.uuid4().hex[:6]}"
    ports = {"scheduler": closed_port(), "operator": closed_port()}
    env = {"KUBECONFIG": str(cluster.kubeconfig)}
    scheduler_args = ["scheduler", "--kubeconfig", str(cluster.kubeconfig),
                      "--scheduler-name", name, "--leader-elect-lease-namespace", "default",
                      "--leader-elect-lease-name", name,
                      "--metrics-bind-address", f"127.0.0.1:{ports['scheduler']}"]
    operator_args = ["operator", "--kubeconfig", str(cluster.kubeconfig), "--standalone",
                     "--liveness=", "--namespace", name,
                     "--metrics-bind-address", f"127.0.0.1:{ports['operator']}"]
    logs = {"scheduler": folder / "scheduler.stderr", "operator": folder / "operator.stderr"}
    with process(scheduler_args, logs["scheduler"], env), \
            process(operator_args, logs["operator"], env):
        bases = {c: f"http://127.0.0.1:{p}" for c, p in ports.items()}
        for component, base in bases.items():
            await wait_for(lambda base=base: ready(base), timeout=120,
                           what=f"{component} /readyz")
        yield {"name": name, "bases": bases, "logs": logs}


async def test_every_query_reads_exported_metrics(
        components: dict[str, Any], kube: KubeClient, namespace: str,
        nodes: NodeFactory) -> None:
    await nodes.create()
    await create_pod(kube, namespace, make_pod("bound", components["name"]))
    await wait_for(lambda: node_of(kube, namespace, "bound"), timeout=60, what="pod bound")
    series: dict[str, set[str] | None] = {name: set() for name in SCRAPE_SERIES}
    for component, base in components["bases"].items():
        status, text = await http_get(f"{base}/metrics")
        assert status == 200, component
        series.update(exported(text))
    problems = []
    checked = 0
    for where, expression in expressions():
        for selector in selectors(expression):
            checked += 1
            if selector.name not in series:
                problems.append(f"{where}: {selector.name} is not exported")
                continue
            labels = series[selector.name]
            unknown = selector.labels - TARGET_LABELS - (labels or set())
            if labels is not None and unknown:
                problems.append(f"{where}: {selector.name} has no label(s) "
                                f"{sorted(unknown)} (it has {sorted(labels)})")
    assert checked > 30
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("family", [
    "scheduler_cache_size", "leader_election_master_status", "process_cpu_seconds_total",
    "python_gc_collections_total", "cluster_autoscaler_cluster_safe_to_autoscale",
    "mapi_machine_items", "mapi_machine_phase_transition_seconds_bucket",
    "descheduler_pods_evicted_total", "berthmaster_machine_drain_started_timestamp_seconds"])
async def test_the_dashboards_families_are_exported(components: dict[str, Any],
                                                    family: str) -> None:
    texts = [(await http_get(f"{base}/metrics"))[1] for base in components["bases"].values()]
    assert any(family in exported(text) for text in texts)


@pytest.mark.parametrize("component", ["scheduler", "operator"])
async def test_each_component_reports_its_build(components: dict[str, Any],
                                                component: str) -> None:
    """One ``berthmaster_build_info`` sample, value 1 (k8s.io/component-base
    metrics/prometheus/version/metrics.go's ``kubernetes_build_info``), from each process."""
    from berthmaster import __version__

    _, text = await http_get(f"{components['bases'][component]}/metrics")
    [family] = [f for f in text_string_to_metric_families(text)
                if f.name == "berthmaster_build_info"]
    [sample] = family.samples
    assert sample.value == 1
    assert sample.labels["git_version"] == f"v{__version__}"


async def test_the_scheduler_reports_the_lease_it_holds(components: dict[str, Any]) -> None:
    _, text = await http_get(f"{components['bases']['scheduler']}/metrics")
    assert f'leader_election_master_status{{name="{components["name"]}"}} 1.0' in text
    assert "scheduler_scheduler_cache_size" not in text


@pytest.mark.parametrize("component", ["scheduler", "operator"])
async def test_stderr_is_json_lines_with_the_keys(components: dict[str, Any],
                                                  component: str) -> None:
    await asyncio.sleep(0)  # the fixture started both and saw them ready: they have logged
    lines = [line for line in components["logs"][component].read_text().splitlines() if line]
    assert lines, f"{component} logged nothing"
    kopf_lines = 0
    for line in lines:
        record = json.loads(line)
        assert list(record)[:len(KEYS)] == list(KEYS), line
        assert record["component"] == component, line
        kopf_lines += record["logger"].startswith("kopf")
    if component == "operator":
        assert kopf_lines, "kopf's own records go through the same format"
