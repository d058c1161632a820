"""A real Prometheus for tests: its configuration, its rules file, the process and its HTTP API.

Design: the pure parts build what Prometheus reads — :func:`rules_file` turns a
PrometheusRule object (the chart's, as rendered by helm) into a rule file (the object's
``spec`` is the rule file's format: Prometheus Operator
pkg/prometheus/resource_selector.go writes ``spec`` as is), and :func:`scrape_config` gives
one static target the ``job`` and ``namespace`` labels a ServiceMonitor's target would carry
(the Prometheus Operator names the job after the Service and copies its namespace,
pkg/prometheus/promcfg.go). :func:`running` starts the binary built from the pinned module
(hack/prometheus) on loopback with a temporary TSDB; :class:`PrometheusAPI` reads
``/api/v1/query``, ``/api/v1/alerts``, ``/api/v1/rules`` and ``/api/v1/targets``
(web/api/v1/api.go), and can wait until the rule groups were evaluated a number of times after
a moment, so a test proves that nothing fires by letting the rules run rather than by sleeping.
"""

from __future__ import annotations

import contextlib
import datetime
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from berthmaster.tooling.devcluster.ports import free_port
from tests.support.processes import child
from tests.support.waiting import wait_for

JSON = dict[str, Any]


def rules_file(prometheus_rule: Mapping[str, Any]) -> str:
    """The rule file Prometheus loads for a PrometheusRule: its ``spec`` (``groups``)."""
    spec = prometheus_rule.get("spec") or {}
    if not spec.get("groups"):
        name = prometheus_rule.get("metadata", {}).get("name", "?")
        raise ValueError(f"PrometheusRule {name!r} has no spec.groups: render the chart with "
                         "prometheusRule.enabled=true")
    return yaml.safe_dump({"groups": spec["groups"]}, sort_keys=False)


def scrape_config(job: str, namespace: str, target: str, *, https: bool = False,
                  cert: tuple[Path, Path] | None = None) -> JSON:
    """One static target scraped as a ServiceMonitor's would be: ``job`` and ``namespace``
    labels, honor_labels (the chart's ServiceMonitors set honorLabels)."""
    config: JSON = {
        "job_name": job,
        "honor_labels": True,
        "metrics_path": "/metrics",
        "static_configs": [{"targets": [target], "labels": {"namespace": namespace}}],
    }
    if https:
        config["scheme"] = "https"
        tls: JSON = {"insecure_skip_verify": True}  # the components' self-signed certificates
        if cert is not None:
            tls["cert_file"], tls["key_file"] = str(cert[0]), str(cert[1])
        config["tls_config"] = tls
    return config


def configuration(scrapes: Sequence[JSON], rule_files: Sequence[Path],
                  interval: str = "1s") -> str:
    """prometheus.yml: every target scraped and every rule evaluated each ``interval``."""
    return yaml.safe_dump({
        "global": {"scrape_interval": interval, "scrape_timeout": interval,
                   "evaluation_interval": interval},
        "rule_files": [str(path) for path in rule_files],
        "scrape_configs": list(scrapes),
    }, sort_keys=False)


def parse_time(text: str) -> datetime.datetime:
    """A time of Prometheus' API: RFC 3339 in UTC with up to nanoseconds
    ("2026-11-26T21:45:01.123456789Z"), cut to microseconds."""
    if not text.endswith("Z"):
        raise ValueError(f"not a UTC time of Prometheus' API: {text!r}")
    head, _, fraction = text[:-1].partition(".")
    return datetime.datetime.fromisoformat(f"{head}.{(fraction + '000000')[:6]}+00:00")


class PrometheusAPI:
    """Prometheus' HTTP API at ``base`` (web/api/v1/api.go)."""

    def __init__(self, base: str):
        self.base = base

    async def _get(self, path: str, **params: str) -> tuple[int, JSON]:
        async with aiohttp.ClientSession() as session, \
                session.get(f"{self.base}{path}", params=params) as response:
            return response.status, await response.json(content_type=None)

    async def query(self, expression: str) -> list[JSON]:
        """An instant query's vector; AssertionError with Prometheus' error if it fails."""
        status, body = await self._get("/api/v1/query", query=expression)
        assert status == 200 and body.get("status") == "success", (
            f"Prometheus refused {expression!r}: {body.get('errorType')}: {body.get('error')}")
        result: list[JSON] = body["data"]["result"]
        return result

    async def query_error(self, expression: str) -> str | None:
        """Prometheus' error for ``expression`` (a parse or evaluation error), or None."""
        status, body = await self._get("/api/v1/query", query=expression)
        if status == 200 and body.get("status") == "success":
            return None
        return f"{body.get('errorType')}: {body.get('error')}"

    async def alerts(self) -> list[JSON]:
        """Every active alert, pending or firing."""
        _, body = await self._get("/api/v1/alerts")
        alerts: list[JSON] = body["data"]["alerts"]
        return alerts

    async def groups(self) -> list[JSON]:
        _, body = await self._get("/api/v1/rules")
        groups: list[JSON] = body["data"]["groups"]
        return groups

    async def targets(self) -> list[JSON]:
        _, body = await self._get("/api/v1/targets")
        targets: list[JSON] = body["data"]["activeTargets"]
        return targets

    async def firing(self, alert: str) -> list[JSON]:
        return [a for a in await self.alerts()
                if a["labels"].get("alertname") == alert and a["state"] == "firing"]

    async def wait_evaluations(self, after: datetime.datetime, times: int,
                               timeout: float = 60) -> None:
        """Wait until every rule group was evaluated ``times`` times after ``after``."""
        seen: dict[str, set[str]] = {}

        async def evaluated() -> bool:
            groups = await self.groups()
            for group in groups:
                stamp = group.get("lastEvaluation") or ""
                if stamp and not stamp.startswith("0001") and parse_time(stamp) > after:
                    seen.setdefault(group["name"], set()).add(stamp)
            return bool(groups) and all(len(seen.get(g["name"], ())) >= times for g in groups)

        await wait_for(evaluated, timeout=timeout, interval=0.3,
                       what=f"{times} rule evaluations after {after.isoformat()}")

    async def wait_scraped(self, jobs: Sequence[str], timeout: float = 60) -> None:
        """Wait until each job's targets were scraped successfully (health "up")."""
        async def up() -> bool:
            health = {t["labels"]["job"]: t["health"] for t in await self.targets()}
            return all(health.get(job) == "up" for job in jobs)

        await wait_for(up, timeout=timeout, what=f"Prometheus scraping {', '.join(jobs)}")


async def _ready(base: str) -> bool:
    try:
        async with aiohttp.ClientSession() as session, \
                session.get(f"{base}/-/ready") as response:
            return response.status == 200
    except aiohttp.ClientError:
        return False


@contextlib.asynccontextmanager
async def running(binary: Path, config: str, folder: Path) -> AsyncIterator[PrometheusAPI]:
    """Prometheus on 127.0.0.1 with ``config`` and a TSDB in ``folder``; yields its API."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "prometheus.yml").write_text(config)
    base = f"http://127.0.0.1:{free_port()}"
    log = folder / "prometheus.log"
    command = [str(binary), f"--config.file={folder / 'prometheus.yml'}",
               f"--storage.tsdb.path={folder / 'data'}",
               f"--web.listen-address={base.removeprefix('http://')}"]
    with child(command, log) as process:
        async def ready() -> bool:
            assert process.poll() is None, f"prometheus exited:\n{log.read_text()[-3000:]}"
            return await _ready(base)

        await wait_for(ready, timeout=60, what=f"Prometheus ready at {base}")
        yield PrometheusAPI(base)
